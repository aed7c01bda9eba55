// Exclusive-create verifiers in a file's times (create_verifier.h).
#include "core/create_verifier.h"

#include <cstring>

namespace nache {

namespace {

// The verifier's two halves, as the seconds of atime and mtime. Bytes are
// taken in host order: only equality matters, and the same nache writes
// and compares them. 31 bits of each: a file system with 32-bit signed
// times (ext4 with small inodes) keeps them exactly.
void Halves(const uint8_t verf[kCreateVerifierSize], uint32_t *hi,
            uint32_t *lo) {
  std::memcpy(hi, verf, sizeof(*hi));
  std::memcpy(lo, verf + sizeof(*hi), sizeof(*lo));
  *hi &= 0x7fffffffu;
  *lo &= 0x7fffffffu;
}

}  // namespace

void StampCreateVerifier(const uint8_t verf[kCreateVerifierSize],
                         upstream::Attrs *attrs) {
  uint32_t hi, lo;
  Halves(verf, &hi, &lo);
  attrs->mask |= upstream::kAttrAtime | upstream::kAttrMtime;
  attrs->atime_server = attrs->mtime_server = false;
  attrs->atime = upstream::Time{int64_t(hi), 0};
  attrs->mtime = upstream::Time{int64_t(lo), 0};
}

bool CarriesCreateVerifier(const upstream::Attrs &a,
                           const uint8_t verf[kCreateVerifierSize]) {
  const uint64_t both = upstream::kAttrAtime | upstream::kAttrMtime;
  if ((a.mask & both) != both) return false;
  uint32_t hi, lo;
  Halves(verf, &hi, &lo);
  return a.atime.sec == int64_t(hi) && a.mtime.sec == int64_t(lo);
}

}  // namespace nache
