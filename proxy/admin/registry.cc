// The registry of exports the admin socket serves. See registry.h.
#include "admin/registry.h"

#include <algorithm>
#include <utility>

namespace nache {
namespace admin {

Registry &Registry::Global() {
  static Registry *global = new Registry();
  return *global;
}

uint64_t Registry::Add(uint32_t export_id, ExportControl *control) {
  bool draining;
  uint64_t token;
  {
    MutexLock g(&mu_);
    token = next_token_++;
    entries_[token] = Entry{export_id, control};
    draining = draining_;
  }
  // (Outside the lock: the control may take locks of its own.)
  if (draining) control->SetDraining(true);
  return token;
}

void Registry::Remove(uint64_t token) {
  MutexLock g(&mu_);
  auto it = entries_.find(token);
  if (it == entries_.end()) return;
  it->second.removing = true;
  while (entries_[token].in_use > 0) cv_.Wait();
  entries_.erase(token);
}

void Registry::ForEach(
    const std::function<void(uint32_t, ExportControl *)> &fn) {
  // Export id order, whatever order the exports started in.
  std::vector<std::pair<uint32_t, uint64_t>> order;
  {
    MutexLock g(&mu_);
    for (auto &e : entries_)
      if (!e.second.removing) order.emplace_back(e.second.export_id, e.first);
  }
  std::sort(order.begin(), order.end());
  for (auto &o : order) {
    ExportControl *control;
    {
      MutexLock g(&mu_);
      auto it = entries_.find(o.second);
      if (it == entries_.end() || it->second.removing) continue;
      it->second.in_use++;
      control = it->second.control;
    }
    fn(o.first, control);
    {
      MutexLock g(&mu_);
      entries_[o.second].in_use--;
    }
    cv_.SignalAll();
  }
}

void Registry::SetDraining(bool draining) {
  {
    MutexLock g(&mu_);
    draining_ = draining;
  }
  ForEach([draining](uint32_t, ExportControl *c) { c->SetDraining(draining); });
}

bool Registry::draining() const {
  MutexLock g(&mu_);
  return draining_;
}

size_t Registry::size() const {
  MutexLock g(&mu_);
  return entries_.size();
}

}  // namespace admin
}  // namespace nache
