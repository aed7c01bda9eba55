// SharedAttempt: one attempt at a time at something every caller needs
// done once (learn the remote's root, its I/O limits), and callers that
// arrive while it runs take its outcome instead of trying again.
//
// Without it, N threads that find the thing not done each try in turn
// under one mutex: against a remote that does not answer, the last waits
// N call timeouts (32 write-behind workers made a daemon's stop take 32
// of them). With it, every caller waits at most one attempt, and a failed
// attempt is tried again only by a caller that comes after it ended.
//
// Thread safety: Run is thread-safe. fn runs with no lock held (it may
// wait for the remote); it must not call Run of the same SharedAttempt.
#pragma once

#include <cstdint>
#include <functional>

#include "util/mutex.h"

namespace nache {

class SharedAttempt {
 public:
  SharedAttempt() = default;
  SharedAttempt(const SharedAttempt &) = delete;
  SharedAttempt &operator=(const SharedAttempt &) = delete;

  // fn's status, or, when another caller's fn was running at the call,
  // that fn's status once it ends (fn is not run then).
  uint32_t Run(const std::function<uint32_t()> &fn) EXCLUDES(mu_) {
    MutexLock g(&mu_);
    if (running_) {
      const uint64_t ended = ended_;
      waiting_++;
      while (ended_ == ended) cv_.Wait();
      waiting_--;
      return last_;
    }
    running_ = true;
    g.Unlock();
    const uint32_t st = fn();
    g.Lock();
    last_ = st;
    ended_++;
    running_ = false;
    cv_.SignalAll();
    return st;
  }

  // Callers waiting for another's attempt now (for tests).
  int waiting() const EXCLUDES(mu_) {
    MutexLock g(&mu_);
    return waiting_;
  }

 private:
  mutable Mutex mu_{"shared_attempt"};
  CondVar cv_{&mu_};
  bool running_ GUARDED_BY(mu_) = false;  // an attempt is under way
  uint64_t ended_ GUARDED_BY(mu_) = 0;    // attempts ended so far
  uint32_t last_ GUARDED_BY(mu_) = 0;     // the last one's status
  int waiting_ GUARDED_BY(mu_) = 0;
};

}  // namespace nache
