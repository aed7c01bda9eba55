// Runs fn(i) for i in [0, n) on up to `threads` threads (the caller's
// included) and returns the first non-zero status; after one, no new item
// is started. Over a WAN such items cost round trips, not bandwidth, so a
// few in flight at once is what makes them fast.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace nache {

// How many requests of request_bytes each to keep in flight over a WAN
// so that about kWanInFlightBytes are on their way (a link's
// bandwidth-delay product, with room: 50 Mbit/s at 80 ms is 0.5 MB):
// at least lo, at most hi (session slots are shared with everything
// else). A server that takes small WRITEs (knfsd on a small machine:
// 32 or 64 KiB) needs many of them in flight to fill the link.
constexpr uint64_t kWanInFlightBytes = 2 << 20;
inline size_t RequestsInFlight(uint64_t request_bytes, size_t lo, size_t hi) {
  const uint64_t want =
      kWanInFlightBytes / std::max<uint64_t>(1, request_bytes);
  return size_t(std::max<uint64_t>(lo, std::min<uint64_t>(hi, want)));
}

template <typename Fn>
uint32_t ParallelFor(size_t n, size_t threads, Fn fn) {
  std::atomic<size_t> next{0};
  std::atomic<uint32_t> failed{0};
  auto worker = [&] {
    for (size_t i; failed.load() == 0 && (i = next.fetch_add(1)) < n;) {
      uint32_t st = fn(i);
      uint32_t none = 0;
      if (st) failed.compare_exchange_strong(none, st);
    }
  };
  size_t t = std::min(n, std::max<size_t>(threads, 1));
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < t; i++) helpers.emplace_back(worker);
  worker();
  for (auto &h : helpers) h.join();
  return failed.load();
}

}  // namespace nache
