// See slot_table.h.
#include "upstream/slot_table.h"

#include <algorithm>

namespace nache {
namespace upstream {

SlotTable::SlotTable(uint32_t slots)
    : slots_(std::max<uint32_t>(slots, 1)),
      target_(uint32_t(slots_.size()) - 1) {}

uint32_t SlotTable::size() const {
  MutexLock g(&mu_);
  return uint32_t(slots_.size());
}

uint32_t SlotTable::busy() const {
  MutexLock g(&mu_);
  return uint32_t(std::count_if(slots_.begin(), slots_.end(),
                                [](const State &s) { return s.busy; }));
}

uint32_t SlotTable::retired() const {
  MutexLock g(&mu_);
  return uint32_t(std::count_if(slots_.begin(), slots_.end(),
                                [](const State &s) { return s.retired; }));
}

uint32_t SlotTable::HighestBusyLocked() const {
  for (uint32_t i = uint32_t(slots_.size()); i-- > 0;)
    if (slots_[i].busy) return i;
  return 0;
}

bool SlotTable::Acquire(Slot *slot) {
  MutexLock g(&mu_);
  for (uint32_t i = 0; i <= target_ && i < slots_.size(); i++) {
    State &s = slots_[i];
    if (s.busy || s.retired) continue;
    s.busy = true;
    slot->slotid = i;
    slot->probe = s.uncertain;
    slot->sequenceid = s.uncertain ? s.probe_seqid : s.next_seqid;
    slot->highest_slotid = HighestBusyLocked();
    return true;
  }
  return false;
}

namespace {

// After SEQ_MISORDERED at id p on an uncertain slot: the next id worth a
// probe. The server's slot is at acked or above (it executed acked), so
// the ids down to acked + 1 are tried; then 1, in case the server started
// the slot afresh (a slot it had retired after a lower target); then none.
bool StepDown(uint32_t p, uint32_t acked, bool *tried_one, uint32_t *next) {
  if (p > acked + 1) {
    *next = p - 1;
    return true;
  }
  if (!*tried_one && p != 1) {
    *tried_one = true;
    *next = 1;
    return true;
  }
  return false;
}

}  // namespace

bool SlotTable::Release(const Slot &slot, Outcome outcome, Slot *retry) {
  MutexLock g(&mu_);
  if (slot.slotid >= slots_.size()) return false;
  State &s = slots_[slot.slotid];
  switch (outcome) {
    case Outcome::kDone:
      // A probe answered from the reply cache says the same as one
      // executed: the slot is at its id.
      s.next_seqid = slot.sequenceid + 1;
      s.acked = slot.sequenceid;
      s.uncertain = false;
      s.tried_one = false;
      break;
    case Outcome::kNotDone:
      break;  // the same id again next time (the same probe when uncertain)
    case Outcome::kLost:
      // One request at a time per slot: this id is the highest sent, and
      // the server is at it or below.
      if (!s.uncertain) s.tried_one = false;
      s.uncertain = true;
      s.probe_seqid = slot.sequenceid + 1;
      break;
    case Outcome::kMisordered: {
      uint32_t next = 0;
      // A request on a slot we thought certain: the server disagrees (it
      // may have started the slot afresh). Settled by probes like a lost
      // reply, below the id refused.
      if (!s.uncertain) s.tried_one = false;
      s.uncertain = true;
      if (!StepDown(slot.sequenceid, s.acked, &s.tried_one, &next)) {
        s.retired = true;  // no id left that the server could be at
        break;
      }
      s.probe_seqid = next;
      if (!slot.probe) break;  // the caller's request: not sent again here
      retry->slotid = slot.slotid;
      retry->sequenceid = next;
      retry->probe = true;
      retry->highest_slotid = HighestBusyLocked();
      return true;  // still busy
    }
  }
  s.busy = false;
  return false;
}

void SlotTable::SetTarget(uint32_t target_highest_slotid) {
  MutexLock g(&mu_);
  target_ =
      std::min<uint32_t>(target_highest_slotid, uint32_t(slots_.size()) - 1);
}

}  // namespace upstream
}  // namespace nache
