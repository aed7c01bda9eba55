// An NFSv4.1 session of the upstream client: its id and its fore channel's
// slot table. Made by the state thread after CREATE_SESSION and shared
// with every connection (each request goes out on one of its slots);
// replaced as a whole when the session is lost.
#pragma once

#include <cstdint>

#include "upstream/nfs41.h"
#include "upstream/slot_table.h"

namespace nache {
namespace upstream {

struct Session41 {
  Session41(const nfs41::SessionId &sid, uint32_t nslots)
      : id(sid), slots(nslots) {}
  const nfs41::SessionId id;
  SlotTable slots;  // thread-safe
};

}  // namespace upstream
}  // namespace nache
