// A mutex, its scoped lock and a condition variable that clang's
// thread-safety analysis understands, and the annotations that say which
// lock guards what.
//
// std::mutex carries no annotations, so the analysis cannot see it. With
// nache::Mutex, a field declared `int n_ GUARDED_BY(mu_);` is checked at
// compile time: touching it without holding mu_ is an error in the clang
// builds (-Wthread-safety, made an error there: `make check-locks`, and
// the sanitizer build `make test` runs). GCC ignores the annotations.
//
//   REQUIRES(mu)   the function expects mu held by its caller
//   EXCLUDES(mu)   the function takes mu itself: the caller must not hold it
//   ACQUIRED_AFTER(mu)  lock order: this one is taken after mu, never
//                       before (checked with -Wthread-safety-beta only;
//                       written for the reader in any case)
//
// A Mutex is named where it is declared (`Mutex mu_{"cache"};`): the time
// threads wait for it counts under that name (lock_stats.h). Unnamed ones
// count as "other".
//
// Thread safety: Mutex and CondVar are thread-safe, as the std types they
// wrap; a MutexLock belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "util/lock_stats.h"

#if defined(__clang__)
#define NACHE_TSA(x) __attribute__((x))
#else
#define NACHE_TSA(x)
#endif

#define CAPABILITY(x) NACHE_TSA(capability(x))
#define SCOPED_CAPABILITY NACHE_TSA(scoped_lockable)
#define GUARDED_BY(x) NACHE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) NACHE_TSA(pt_guarded_by(x))
#define ACQUIRED_AFTER(...) NACHE_TSA(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) NACHE_TSA(acquired_before(__VA_ARGS__))
#define REQUIRES(...) NACHE_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) NACHE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) NACHE_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) NACHE_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) NACHE_TSA(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) NACHE_TSA(assert_capability(x))
#define RETURN_CAPABILITY(x) NACHE_TSA(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS NACHE_TSA(no_thread_safety_analysis)

namespace nache {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() : Mutex("other") {}
  // name: a literal, shared by all mutexes of one role.
  explicit Mutex(const char *name) : stats_(LockStats::For(name)) {}
  Mutex(const Mutex &) = delete;
  Mutex &operator=(const Mutex &) = delete;

  void Lock() ACQUIRE() {
    if (!mu_.try_lock()) LockAfterWait();
  }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds this mutex (where it cannot
  // see it: a callback run under the lock).
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  void LockAfterWait() ACQUIRE() {
    const auto t0 = std::chrono::steady_clock::now();
    mu_.lock();
    stats_->CountWait(
        uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - t0)
                     .count()));
  }
  std::mutex mu_;
  LockStats *const stats_;
};

// Holds a Mutex for its scope; Unlock and Lock in between release and
// take it again (the analysis follows).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex *mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock &) = delete;
  MutexLock &operator=(const MutexLock &) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex *const mu_;
  bool held_ = true;
};

// A condition variable waited on under one Mutex, given at construction.
class CondVar {
 public:
  explicit CondVar(Mutex *mu) : mu_(mu) {}
  CondVar(const CondVar &) = delete;
  CondVar &operator=(const CondVar &) = delete;

  // Each wait releases the mutex while it sleeps and holds it again on
  // return; the caller holds it before (the analysis cannot name mu_
  // here: REQUIRES is on the callers' side, by the fields they touch).
  // Callers loop on their condition (`while (!cond) cv.Wait();`): in the
  // caller's own scope the analysis checks the fields the condition reads,
  // which it could not inside a predicate lambda.
  void Wait() NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> l(mu_->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // False when t passed without a wake-up.
  template <typename Clock, typename Duration>
  bool WaitUntil(const std::chrono::time_point<Clock, Duration> &t)
      NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> l(mu_->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(l, t) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex *const mu_;
  std::condition_variable cv_;
};

}  // namespace nache
