// Upstream open bookkeeping. See opens.h.
#include "core/opens.h"

#include <functional>

namespace nache {

OpenTable::OpenTable(int owners, const std::string &prefix)
    : owners_(new OwnerSlot[owners]), n_owners_(owners) {
  for (int i = 0; i < owners; i++) {
    owners_[i].name = prefix + "-o" + std::to_string(i);
  }
}

OwnerSlot *OpenTable::OwnerForKey(Key key) {
  return &owners_[key % n_owners_];
}

OwnerSlot *OpenTable::OwnerFor(Key dir, const std::string &name) {
  size_t h = std::hash<std::string>()(name) ^ (dir * 0x9e3779b97f4a7c15ull);
  return &owners_[h % n_owners_];
}

std::shared_ptr<FileOpen> OpenTable::Get(Key key) {
  return GetOrAdopt(key, nullptr);
}

std::shared_ptr<FileOpen> OpenTable::GetOrAdopt(Key key, OwnerSlot *owner) {
  std::lock_guard<std::mutex> g(mu_);
  auto &slot = files_[key];
  if (!slot) {
    // New: nobody else can hold it yet, so its owner may be chosen freely.
    slot = std::make_shared<FileOpen>();
    slot->key = key;
    slot->owner = owner != nullptr ? owner : OwnerForKey(key);
  }
  slot->pins++;
  return slot;
}

void OpenTable::Unpin(const std::shared_ptr<FileOpen> &f) {
  std::lock_guard<std::mutex> g(mu_);
  // With no pin left nobody can be using f, so reading f->open is safe.
  if (--f->pins > 0 || f->open) return;
  auto it = files_.find(f->key);
  if (it != files_.end() && it->second == f) files_.erase(it);
}

void OpenTable::DropIfIdle(const std::shared_ptr<FileOpen> &f) {
  std::lock_guard<std::mutex> g(mu_);
  if (f->pins > 0 || f->open) return;
  auto it = files_.find(f->key);
  if (it != files_.end() && it->second == f) files_.erase(it);
}

size_t OpenTable::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return files_.size();
}

void OpenTable::AdvanceSeqid(uint32_t *seqid, uint32_t status) {
  switch (status) {
    case upstream::kNfs4ErrStaleClientid:
    case upstream::kNfs4ErrStaleStateid:
    case upstream::kNfs4ErrBadStateid:
    case upstream::kNfs4ErrBadSeqid:
    case upstream::kNfs4ErrBadxdr:
    case upstream::kNfs4ErrResource:
    case upstream::kNfs4ErrNofilehandle:
    case upstream::kNfs4ErrMoved:
      return;
    default:
      (*seqid)++;
  }
}

}  // namespace nache
