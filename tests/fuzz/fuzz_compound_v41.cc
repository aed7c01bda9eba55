// Fuzz target: an NFSv4.1 COMPOUND reply, SEQUENCE first, decoded as
// Connection decodes it (Compound::DecodeWire with a SequenceRes). Input:
// one byte choosing the compound it answers (compound_shapes.h; 0xff: a
// RECLAIM_COMPLETE alone), then the reply's XDR.
#include <cstddef>
#include <cstdint>

#include "compound_shapes.h"
#include "upstream/nfs41.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace nache;
  if (size < 1) return 0;
  fuzz::Shape s;
  const bool reclaim = data[0] == 0xff;
  if (reclaim)
    s.c.ReclaimComplete();
  else
    fuzz::MakeShape(data[0], &s);
  upstream::CompoundReply reply;
  upstream::nfs41::SequenceRes seq;
  seq.status = UINT32_MAX;  // as Connection does: "not decoded"
  const bool ok = s.c.DecodeWire(reinterpret_cast<const char *>(data + 1),
                                 size - 1, &reply, &seq);
  if (!ok) {
    if (!reply.results.empty()) fuzz::Broken("a refused reply left results");
    return 0;
  }
  if (seq.status == UINT32_MAX) fuzz::Broken("accepted without SEQUENCE");
  if (reclaim) {
    if (!reply.results.empty()) fuzz::Broken("RECLAIM_COMPLETE results");
    return 0;
  }
  fuzz::CheckReply(s.c, reply, seq.status == 0, seq.status != 0);
  return 0;
}
