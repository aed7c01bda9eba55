// The fore channel's slot table of an NFSv4.1 session (RFC 8881 section
// 2.10.6): each request goes out on a free slot with that slot's next
// sequence id in its SEQUENCE, and the server executes a slot's requests
// exactly once, in order. The number of slots is what CREATE_SESSION gave
// (ca_maxrequests); the server may ask for fewer later
// (sr_target_highest_slotid), and then higher slots are left alone.
//
// A request whose reply never came (timeout, lost connection) leaves its
// slot uncertain: the server may have executed it, may never have seen it,
// or may still be executing it. No request of ours may then go out on a
// sequence id the server could hold in its reply cache for another
// request: it would take ours for a retransmission and answer it with the
// other's reply (a false retry, RFC 8881 section 2.10.6.2). So an
// uncertain slot is settled by probes before it carries a request again:
// Acquire hands it out marked probe, and the caller sends a COMPOUND of
// SEQUENCE alone on it, which is harmless whether the server executes it
// or answers it from its cache. The first probe takes the id after the
// highest one sent; SEQ_MISORDERED steps it down by one (Release says to
// send it again at once), NFS4ERR_DELAY (the lost request is still
// executing) keeps it; any SEQUENCE that succeeds says which id the slot
// is at, and the next request takes the one after.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "util/mutex.h"

namespace nache {
namespace upstream {

class SlotTable {
 public:
  struct Slot {
    uint32_t slotid = 0;
    uint32_t sequenceid = 0;
    uint32_t highest_slotid = 0;  // the highest slot in use now, for SEQUENCE
    // The slot is uncertain: send a COMPOUND of SEQUENCE alone on it (a
    // probe), never a request of the caller's.
    bool probe = false;
  };
  // How a request on a slot ended.
  enum class Outcome {
    kDone,        // its SEQUENCE succeeded: executed once (or, for a
                  // probe, answered from the reply cache: the same)
    kNotDone,     // its SEQUENCE failed (DELAY, BADSLOT, ...) or it was
                  // never sent: not executed
    kMisordered,  // SEQ_MISORDERED: not executed
    kLost,        // no reply: executed or not, unknown
  };

  explicit SlotTable(uint32_t slots);

  // Takes the lowest free slot at or below the target; false when all are
  // busy (or retired).
  bool Acquire(Slot *slot) EXCLUDES(mu_);
  // Gives slot back after outcome. True when the caller must send the same
  // probe again at once under *retry (SEQ_MISORDERED on a probe: the slot
  // stays taken, one sequence id lower). Never true for a request that is
  // not a probe.
  bool Release(const Slot &slot, Outcome outcome, Slot *retry) EXCLUDES(mu_);
  // The server's sr_target_highest_slotid (bounded by the table's size).
  void SetTarget(uint32_t target_highest_slotid) EXCLUDES(mu_);
  uint32_t size() const EXCLUDES(mu_);
  uint32_t busy() const EXCLUDES(mu_);
  // Slots given up on (the server disagreed with every sequence id they
  // could be at): never handed out again in this session.
  uint32_t retired() const EXCLUDES(mu_);

 private:
  struct State {
    uint32_t next_seqid = 1;  // RFC 8881: a new slot's first request is 1
    // The last sequence id the server is known to have executed (0: none).
    uint32_t acked = 0;
    bool busy = false;
    bool uncertain = false;    // a reply was lost: probe before reuse
    uint32_t probe_seqid = 0;  // while uncertain: the next probe's id
    bool tried_one = false;    // while uncertain: a probe went out as 1
    bool retired = false;      // given up on
  };
  uint32_t HighestBusyLocked() const REQUIRES(mu_);

  mutable Mutex mu_{"session_slots"};
  std::vector<State> slots_ GUARDED_BY(mu_);
  uint32_t target_ GUARDED_BY(mu_);  // highest slot id to hand out
};

}  // namespace upstream
}  // namespace nache
