// Fuzz target: NFSv4.1's session operations decoded by hand
// (upstream/nfs41.cc): EXCHANGE_ID, CREATE_SESSION, SEQUENCE,
// BIND_CONN_TO_SESSION and status-only results, a COMPOUND reply header,
// and CB_SEQUENCE's arguments from the back channel. Input: one byte
// choosing the decoder, then its bytes.
#include <cstddef>
#include <cstdint>

#include "rpc/xdr.h"
#include "upstream/nfs41.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace nache::upstream::nfs41;
  if (size < 1) return 0;
  nache::rpc::XdrIn in(reinterpret_cast<const char *>(data + 1), size - 1);
  switch (data[0] % 8) {
    case 0: {
      ExchangeIdRes r;
      (void)DecodeExchangeId(&in, &r);
      break;
    }
    case 1: {
      CreateSessionRes r;
      (void)DecodeCreateSession(&in, &r);
      break;
    }
    case 2: {
      SequenceRes r;
      (void)DecodeSequence(&in, &r);
      break;
    }
    case 3: {
      BindConnRes r;
      (void)DecodeBindConnToSession(&in, &r);
      break;
    }
    case 4: {
      uint32_t status;
      (void)DecodeStatusOnly(&in, kOpDestroySession, &status);
      break;
    }
    case 5: {
      uint32_t status, nres;
      (void)DecodeCompoundReplyHeader(&in, &status, &nres);
      break;
    }
    case 6: {
      CbSequenceArgs a;
      if (DecodeCbSequenceArgs(&in, &a)) {
        std::string out;
        nache::rpc::XdrOut x(&out);
        EncodeCbSequenceRes(&x, 0, a);
      }
      break;
    }
    default: {
      uint32_t status;
      (void)DecodeStatusOnly(&in, kOpReclaimComplete, &status);
      break;
    }
  }
  return 0;
}
