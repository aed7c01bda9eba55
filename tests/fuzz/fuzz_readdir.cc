// Fuzz target: the reply to PUTFH + READDIR (NFSv4.0), the one result that
// is a list of unbounded length with attributes per entry. Input: one byte
// (bit 0: filehandles asked per entry), then the reply's XDR.
#include <cstddef>
#include <cstdint>

#include "compound_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace nache;
  if (size < 1) return 0;
  fuzz::Shape s;
  s.c.Putfh("dir").Readdir(0, upstream::Verifier(8, '\0'), 8192, 32768,
                           upstream::kAttrsObject, (data[0] & 1) != 0);
  upstream::CompoundReply reply;
  if (s.c.DecodeWire(reinterpret_cast<const char *>(data + 1), size - 1, &reply,
                     nullptr)) {
    fuzz::CheckReply(s.c, reply, false, false);
    const upstream::OpResult *r = reply.Find(upstream::Op::kReaddir);
    // 28 bytes at least per entry: no more entries than the reply can hold.
    if (r != nullptr && r->entries.size() > size / 28)
      fuzz::Broken("more entries than bytes");
  }
  return 0;
}
