// How long threads waited for nache's mutexes, per kind of mutex: the
// evidence for or against "something serialises independent clients".
//
// A Mutex is given a name where it is declared (`Mutex mu_{"cache"};`);
// all mutexes of one name count into one LockStats (every open-owner's
// mutex into "open_owner", say). Only acquisitions that found the mutex
// held are timed, so an uncontended lock costs what it did. Served as
// nache_lock_waits_total and nache_lock_wait_seconds_total{lock}
// (metrics.h).
//
// Not counted: the re-acquisition inside CondVar::Wait (a waiter woken
// for its condition then queues for the mutex; that wait is the
// condition's, not contention on a critical section).
//
// Thread safety: LockStats' counters are atomic; For and ForEach take the
// registry's own std::mutex (never held while a nache Mutex is waited
// for), so any thread may call them. A LockStats lives as long as the
// process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace nache {

class LockStats {
 public:
  // The one LockStats of this name, made at first use. name: a string
  // that outlives the process's use of it (a literal).
  static LockStats *For(const char *name);
  // Each LockStats made so far, in the order made.
  static void ForEach(const std::function<void(const LockStats &)> &fn);

  const char *name() const { return name_; }
  // Acquisitions that had to wait, and the nanoseconds they waited.
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }
  uint64_t wait_ns() const { return wait_ns_.load(std::memory_order_relaxed); }

  void CountWait(uint64_t ns) {
    waits_.fetch_add(1, std::memory_order_relaxed);
    wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }

  explicit LockStats(const char *name) : name_(name) {}
  LockStats(const LockStats &) = delete;
  LockStats &operator=(const LockStats &) = delete;

 private:
  const char *const name_;
  std::atomic<uint64_t> waits_{0};
  std::atomic<uint64_t> wait_ns_{0};
};

}  // namespace nache
