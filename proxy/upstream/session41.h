// An NFSv4.1 (or 4.2) session of the upstream client: its id, the minor
// version every COMPOUND on it carries, and its fore channel's slot table. Made
// by the state thread after CREATE_SESSION and shared with every connection
// (each request goes out on one of its slots); replaced as a whole when the
// session is lost.
#pragma once

#include <cstdint>

#include "upstream/nfs41.h"
#include "upstream/slot_table.h"

namespace nache {
namespace upstream {

struct Session41 {
  Session41(const nfs41::SessionId &sid, uint32_t nslots, uint32_t minor = 1,
            uint32_t max_ops = 0)
      : id(sid), minor(minor), max_ops(max_ops), slots(nslots) {}
  const nfs41::SessionId id;
  // 1, or 2 when EXCHANGE_ID was accepted as NFSv4.2: the version of every
  // COMPOUND on this session (RFC 8881 2.7: one client does not mix them).
  const uint32_t minor;
  // The fore channel's ca_maxoperations the server granted: operations a
  // COMPOUND may carry, its SEQUENCE included (RFC 8881 18.36.3; a longer
  // one is refused whole with NFS4ERR_TOO_MANY_OPS). 0: not known.
  const uint32_t max_ops;
  SlotTable slots;  // thread-safe
};

}  // namespace upstream
}  // namespace nache
