// OwnerCodec (see owners.h).
#include "upstream/owners.h"

#include <cstring>

#include "upstream/attrs.h"

namespace nache {
namespace upstream {
namespace {

// What comes before any '@' ("alice" of "alice@example.org").
std::string LocalPart(const std::string &owner) {
  return owner.substr(0, owner.find('@'));
}

bool AllDigits(const std::string &s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Decimal digits as a 32-bit id; false when they do not fit.
bool ParseId(const std::string &digits, uint32_t *id) {
  if (digits.size() > 10) return false;
  uint64_t v = std::stoull(digits);
  if (v > 0xffffffffull) return false;
  *id = uint32_t(v);
  return true;
}

}  // namespace

bool ParseOwnerFormat(const char *s, OwnerFormat *out) {
  if (s == nullptr) return false;
  if (strcmp(s, "auto") == 0) {
    *out = OwnerFormat::kAuto;
  } else if (strcmp(s, "numeric") == 0) {
    *out = OwnerFormat::kNumeric;
  } else if (strcmp(s, "names") == 0) {
    *out = OwnerFormat::kNames;
  } else {
    return false;
  }
  return true;
}

OwnerCodec::OwnerCodec(OwnerFormat format, IdMapper *mapper)
    : format_(format), mapper_(mapper) {}

bool OwnerCodec::Decode(IdKind kind, const std::string &owner, uint32_t *id) {
  const std::string local = LocalPart(owner);
  // "1000" and "1000@domain" are the id itself.
  if (AllDigits(local)) {
    if (ParseId(local, id)) return true;
    *id = kNobodyId;
    return false;
  }
  *id = kNobodyId;
  if (local.empty()) return false;  // "" or "@domain": no one
  remote_wants_names_.store(true, std::memory_order_relaxed);
  return mapper_ != nullptr && mapper_->NameToId(kind, owner, id);
}

std::string OwnerCodec::Encode(IdKind kind, uint32_t id) {
  std::string name;
  if (SendsNames() && mapper_ != nullptr && mapper_->IdToName(kind, id, &name))
    return name;
  return FormatNumericOwner(id);
}

void OwnerCodec::NoteOwnerRefused() {
  remote_wants_names_.store(true, std::memory_order_relaxed);
}

bool OwnerCodec::SendsNames() const {
  switch (format_) {
    case OwnerFormat::kNumeric: return false;
    case OwnerFormat::kNames: return true;
    case OwnerFormat::kAuto: break;
  }
  return remote_wants_names_.load(std::memory_order_relaxed);
}

}  // namespace upstream
}  // namespace nache
