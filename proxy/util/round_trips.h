// Whether the calling thread waited for the upstream: a per-thread count
// of the round trips it sent or waited for, so that the C API wrappers can
// tell an operation answered here (nache_local_ops_without_upstream_total)
// from one that cost a round trip. Core::Run counts the COMPOUNDs a thread
// sends; BlockReader counts a wait for a block another thread is fetching.
// Work other threads do for it later (readahead, write-behind, the
// flusher) is not the operation's round trip.
//
// Thread safety: each thread has its own count; no lock.
#pragma once

#include <cstdint>

namespace nache {

inline thread_local uint64_t tls_upstream_waits = 0;

inline void NoteUpstreamWait() { tls_upstream_waits++; }
inline uint64_t UpstreamWaitsOnThisThread() { return tls_upstream_waits; }

}  // namespace nache
