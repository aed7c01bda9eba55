// Whether the calling thread waited for the upstream: a per-thread count
// of the round trips it sent or waited for, so that the C API wrappers can
// tell an operation answered here (nache_local_ops_without_upstream_total)
// from one that cost a round trip. Core::Run counts the COMPOUNDs a thread
// sends; BlockReader counts a wait for a block another thread is fetching.
// Work other threads do for it later (readahead, write-behind, the
// flusher) is not the operation's round trip.
//
// The nanoseconds a thread spent in those calls are summed beside them
// (Core::Run's upstream call; a wait for another thread's block fetch),
// so that a local operation's time splits into the upstream's part and
// nache's own (nache_local_op_upstream_seconds_total).
//
// Thread safety: each thread has its own counts; no lock.
#pragma once

#include <chrono>
#include <cstdint>

namespace nache {

inline thread_local uint64_t tls_upstream_waits = 0;
inline thread_local uint64_t tls_upstream_wait_ns = 0;

inline void NoteUpstreamWait() { tls_upstream_waits++; }
inline uint64_t UpstreamWaitsOnThisThread() { return tls_upstream_waits; }
inline void NoteUpstreamWaitTime(std::chrono::steady_clock::duration d) {
  tls_upstream_wait_ns +=
      uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}
inline uint64_t UpstreamWaitNsOnThisThread() { return tls_upstream_wait_ns; }

}  // namespace nache
