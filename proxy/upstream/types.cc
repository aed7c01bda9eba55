// Small helpers of the upstream value types.
#include "upstream/types.h"

#include <cstring>

namespace nache {
namespace upstream {

const char *CallStatusName(CallStatus s) {
  switch (s) {
    case CallStatus::kOk: return "ok";
    case CallStatus::kDisconnected: return "disconnected";
    case CallStatus::kTimeout: return "timeout";
    case CallStatus::kEncodeError: return "encode-error";
    case CallStatus::kDecodeError: return "decode-error";
    case CallStatus::kShutdown: return "shutdown";
  }
  return "unknown";
}

bool StateId::operator==(const StateId &o) const {
  return seqid == o.seqid && std::memcmp(other, o.other, sizeof(other)) == 0;
}

}  // namespace upstream
}  // namespace nache
