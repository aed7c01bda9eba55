#include "opens/name_turns.h"

namespace nache {

NameTurns::Turn &NameTurns::Turn::operator=(Turn &&o) noexcept {
  if (this != &o) {
    Release();
    turns_ = o.turns_;
    entry_ = std::move(o.entry_);
    found_ = o.found_;
    o.turns_ = nullptr;
  }
  return *this;
}

void NameTurns::Turn::Release() {
  if (!turns_) return;
  NameTurns *t = turns_;
  turns_ = nullptr;
  t->Give(entry_, found_);
}

NameTurns::Turn NameTurns::Take(Key dir, const std::string &name, Key *found) {
  *found = kNoKey;
  Turn turn;
  std::pair<Key, std::string> at(dir, name);
  MutexLock g(&mu_);
  std::unique_ptr<Entry> &slot = entries_[at];
  if (!slot) slot = std::make_unique<Entry>(&mu_);
  Entry *e = slot.get();
  if (e->held) {
    if (on_wait_) on_wait_();
    e->waiting++;
    for (uint64_t seen = e->ends;;) {
      while (e->ends == seen) e->cv.Wait();
      seen = e->ends;
      if (e->found != kNoKey) {
        // The turn before found the file: open it by handle, in no turn.
        *found = e->found;
        e->waiting--;
        if (!e->held && e->waiting == 0) entries_.erase(at);
        return turn;
      }
      if (!e->held) break;  // passed on with nothing found: ours
    }
    e->waiting--;
  }
  e->held = true;
  turn.turns_ = this;
  turn.entry_ = std::move(at);
  return turn;
}

void NameTurns::Give(const std::pair<Key, std::string> &at, Key found) {
  MutexLock g(&mu_);
  auto it = entries_.find(at);
  if (it == entries_.end()) return;  // (a held turn's entry stays)
  Entry *e = it->second.get();
  e->held = false;
  e->found = found;
  e->ends++;
  if (e->waiting == 0) {
    entries_.erase(it);
    return;
  }
  e->cv.SignalAll();
}

size_t NameTurns::waiting() const {
  MutexLock g(&mu_);
  size_t n = 0;
  for (const auto &kv : entries_) n += kv.second->waiting;
  return n;
}

size_t NameTurns::entries() const {
  MutexLock g(&mu_);
  return entries_.size();
}

}  // namespace nache
