// Fuzz target: the NFSv4.1 back channel's CB_COMPOUND service
// (proxy/callback/back_channel.cc), called as our RPC transport calls it.
// Input: one byte choosing the procedure (bit 0: CB_COMPOUND, else
// CB_NULL; bit 1: serve the same arguments twice, as a retransmission
// would come), then the arguments.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "callback/back_channel.h"
#include "rpc/xdr.h"

namespace {

using namespace nache;

class CountingHandler : public callback::CallbackHandler {
 public:
  void OnContact() override {}
  uint32_t OnRecall(const upstream::StateId &, bool,
                    const upstream::Fh &fh) override {
    if (fh.size() > upstream::kMaxFhSize) abort();
    return 0;
  }
  uint32_t OnGetattr(const upstream::Fh &fh, uint64_t *change,
                     uint64_t *size) override {
    if (fh.size() > upstream::kMaxFhSize) abort();
    *change = 1;
    *size = 2;
    return 0;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  CountingHandler handler;
  callback::BackChannel back(&handler, 0x40000000);
  rpc::PeerCall call;
  call.prog = 0x40000000;
  call.vers = 1;
  call.proc = data[0] & 1;
  call.cred_flavor = 1;
  const int times = (data[0] & 2) ? 2 : 1;
  for (int i = 0; i < times; i++) {
    rpc::XdrIn args(reinterpret_cast<const char *>(data + 1), size - 1);
    std::string results;
    rpc::ReplyStatus st = back.Serve(call, &args, &results);
    if (st == rpc::ReplyStatus::kOk && call.proc == 1) {
      // A CB_COMPOUND reply: status, tag, count, then the results.
      rpc::XdrIn r(results.data(), results.size());
      uint32_t status, n;
      std::string tag;
      if (!r.U32(&status) || !r.Opaque(&tag, 1 << 20) || !r.U32(&n)) abort();
    }
  }
  return 0;
}
