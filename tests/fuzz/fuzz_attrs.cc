// Fuzz target: fattr4 decoding (upstream/attrs.cc), as GETATTR, READDIR and
// OPEN results reach it. Input: one byte, the number of bitmap words (mod
// 9) and whether a filehandle is wanted (bit 7); the words (big-endian);
// then the attrlist. Also the owner parser on the attrlist's bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "upstream/attrs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace nache::upstream;
  if (size < 1) return 0;
  const size_t nwords = (data[0] & 0x7f) % 9;
  const bool want_fh = (data[0] & 0x80) != 0;
  if (size < 1 + 4 * nwords) return 0;
  uint32_t words[8];
  for (size_t i = 0; i < nwords; i++) {
    const uint8_t *w = data + 1 + 4 * i;
    words[i] = uint32_t(w[0]) << 24 | uint32_t(w[1]) << 16 |
               uint32_t(w[2]) << 8 | w[3];
  }
  const char *list = reinterpret_cast<const char *>(data + 1 + 4 * nwords);
  const size_t len = size - 1 - 4 * nwords;
  Attrs a;
  Fh fh;
  if (DecodeAttrs(words, nwords, list, len, &a, want_fh ? &fh : nullptr)) {
    if (fh.size() > kMaxFhSize) abort();
    if ((a.mask & kAttrMode) && a.mode > 07777) abort();
  }
  (void)BitmapToAttrMask(words, nwords);
  (void)ParseNumericOwner(std::string(list, len));
  return 0;
}
