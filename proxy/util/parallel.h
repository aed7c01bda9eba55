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
