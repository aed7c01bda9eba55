#include "util/lock_stats.h"

#include <cstring>
#include <deque>
#include <mutex>

namespace nache {

namespace {

// The registry: a deque so that the LockStats never move. Leaked on
// purpose: mutexes of objects destroyed at exit may still count into it.
struct Registry {
  std::mutex mu;
  std::deque<LockStats> all;
};

Registry &TheRegistry() {
  static Registry *r = new Registry;
  return *r;
}

}  // namespace

LockStats *LockStats::For(const char *name) {
  Registry &r = TheRegistry();
  std::lock_guard<std::mutex> g(r.mu);
  for (LockStats &s : r.all)
    if (std::strcmp(s.name(), name) == 0) return &s;
  r.all.emplace_back(name);
  return &r.all.back();
}

void LockStats::ForEach(const std::function<void(const LockStats &)> &fn) {
  Registry &r = TheRegistry();
  std::lock_guard<std::mutex> g(r.mu);
  for (const LockStats &s : r.all) fn(s);
}

}  // namespace nache
