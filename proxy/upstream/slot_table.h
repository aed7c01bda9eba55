// The fore channel's slot table of an NFSv4.1 session (RFC 8881 section
// 2.10.6): each request goes out on a free slot with that slot's next
// sequence id in its SEQUENCE, and the server executes a slot's requests
// exactly once, in order. The number of slots is what CREATE_SESSION gave
// (ca_maxrequests); the server may ask for fewer later
// (sr_target_highest_slotid), and then higher slots are left alone.
//
// A request whose reply never came (timeout, lost connection) leaves its
// slot uncertain: the server may or may not have executed it. The next
// request on the slot takes the following sequence id; if the server
// answers SEQ_MISORDERED it never saw the lost one, and the request is sent
// again under the lost one's id (Release says so). Never the lost id first:
// a server that did execute it would answer the new request with the old
// one's cached reply.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace nache {
namespace upstream {

class SlotTable {
 public:
  struct Slot {
    uint32_t slotid = 0;
    uint32_t sequenceid = 0;
    uint32_t highest_slotid = 0;  // the highest slot in use now, for SEQUENCE
  };
  // How a request on a slot ended.
  enum class Outcome {
    kDone,         // its SEQUENCE succeeded: executed once
    kNotDone,      // its SEQUENCE failed (DELAY, BADSLOT, ...): not executed
    kMisordered,   // SEQ_MISORDERED
    kLost,         // no reply: executed or not, unknown
  };

  explicit SlotTable(uint32_t slots);

  // Takes the lowest free slot at or below the target; false when all are
  // busy.
  bool Acquire(Slot *slot);
  // Gives slot back after outcome. True when the request must be sent
  // again at once under *retry (kMisordered after a lost request: the
  // slot stays taken, with the lost request's sequence id).
  bool Release(const Slot &slot, Outcome outcome, Slot *retry);
  // The server's sr_target_highest_slotid (bounded by the table's size).
  void SetTarget(uint32_t target_highest_slotid);
  uint32_t size() const;
  uint32_t busy() const;

 private:
  struct State {
    uint32_t next_seqid = 1;  // RFC 8881: a new slot's first request is 1
    bool busy = false;
    bool uncertain = false;   // the last request's reply was lost
  };
  uint32_t HighestBusyLocked() const;

  mutable std::mutex mu_;  // guards everything below
  std::vector<State> slots_;
  uint32_t target_;  // highest slot id to hand out
};

}  // namespace upstream
}  // namespace nache
