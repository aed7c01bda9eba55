// Fuzz target: an NFSv4.0 COMPOUND reply, decoded as Connection decodes it
// (Compound::DecodeWire without SEQUENCE). Input: one byte choosing the
// compound it answers (compound_shapes.h), then the reply's XDR (what
// follows the RPC reply header).
#include <cstddef>
#include <cstdint>

#include "compound_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace nache;
  if (size < 1) return 0;
  fuzz::Shape s;
  fuzz::MakeShape(data[0], &s);
  upstream::CompoundReply reply;
  if (s.c.DecodeWire(reinterpret_cast<const char *>(data + 1), size - 1, &reply,
                     nullptr)) {
    fuzz::CheckReply(s.c, reply, false, false);
  } else if (!reply.results.empty()) {
    fuzz::Broken("a refused reply left results");
  }
  return 0;
}
