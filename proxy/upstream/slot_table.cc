// See slot_table.h.
#include "upstream/slot_table.h"

#include <algorithm>

namespace nache {
namespace upstream {

SlotTable::SlotTable(uint32_t slots)
    : slots_(std::max<uint32_t>(slots, 1)), target_(uint32_t(slots_.size()) - 1) {}

uint32_t SlotTable::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return uint32_t(slots_.size());
}

uint32_t SlotTable::busy() const {
  std::lock_guard<std::mutex> g(mu_);
  return uint32_t(std::count_if(slots_.begin(), slots_.end(),
                                [](const State &s) { return s.busy; }));
}

uint32_t SlotTable::HighestBusyLocked() const {
  for (uint32_t i = uint32_t(slots_.size()); i-- > 0;)
    if (slots_[i].busy) return i;
  return 0;
}

bool SlotTable::Acquire(Slot *slot) {
  std::lock_guard<std::mutex> g(mu_);
  for (uint32_t i = 0; i <= target_ && i < slots_.size(); i++) {
    State &s = slots_[i];
    if (s.busy) continue;
    s.busy = true;
    slot->slotid = i;
    slot->sequenceid = s.next_seqid;
    slot->highest_slotid = HighestBusyLocked();
    return true;
  }
  return false;
}

bool SlotTable::Release(const Slot &slot, Outcome outcome, Slot *retry) {
  std::lock_guard<std::mutex> g(mu_);
  if (slot.slotid >= slots_.size()) return false;
  State &s = slots_[slot.slotid];
  switch (outcome) {
    case Outcome::kDone:
      s.next_seqid = slot.sequenceid + 1;
      s.uncertain = false;
      break;
    case Outcome::kNotDone:
      break;  // the same id again next time
    case Outcome::kLost:
      s.next_seqid = slot.sequenceid + 1;
      s.uncertain = true;
      break;
    case Outcome::kMisordered:
      if (s.uncertain && slot.sequenceid == s.next_seqid) {
        // The lost request never arrived: its id is the one expected.
        s.uncertain = false;
        s.next_seqid = slot.sequenceid - 1;
        retry->slotid = slot.slotid;
        retry->sequenceid = s.next_seqid;
        retry->highest_slotid = HighestBusyLocked();
        return true;  // still busy
      }
      break;  // nothing to learn: the caller fails the request
  }
  s.busy = false;
  return false;
}

void SlotTable::SetTarget(uint32_t target_highest_slotid) {
  std::lock_guard<std::mutex> g(mu_);
  target_ = std::min<uint32_t>(target_highest_slotid,
                               uint32_t(slots_.size()) - 1);
}

}  // namespace upstream
}  // namespace nache
