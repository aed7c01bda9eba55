// A core stops promptly when its remote does not answer: its own threads
// hold no call in flight that the stop must wait out. (A daemon stopped
// while the WAN was down took 32 call timeouts: every write-behind worker
// asked the remote for its I/O limits as it started, one after another.)
// And the attempts every caller needs once (the root, the I/O limits) are
// made by one caller at a time, the others taking its outcome.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/core.h"
#include "tcp_peer.h"
#include "temp_dir.h"
#include "upstream/types.h"
#include "util/shared_attempt.h"

namespace nache {
namespace {

TEST(CoreStopTest, ARemoteThatNeverAnswersDoesNotHoldUpTheStop) {
  SilentServer remote;
  ASSERT_NE(remote.port(), 0);
  testing_util::TempDir dir;
  CoreConfig cfg;
  cfg.upstream_server = "127.0.0.1";
  cfg.upstream_port = remote.port();
  cfg.upstream_path = "/";
  cfg.cache_dir = dir.path() + "/cache";
  cfg.call_timeout_ms = 5000;
  cfg.write_behind_max = 8 << 20;  // its workers start with the core
  metrics::Metrics metrics;
  cfg.metrics = &metrics;
  std::string err;
  std::unique_ptr<Core> core = Core::Open(cfg, &err);
  ASSERT_TRUE(core) << err;
  const auto t0 = std::chrono::steady_clock::now();
  core.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(cfg.call_timeout_ms))
      << "the stop waited "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms: a call of the core's own was in flight";
}

// Waits (polling, with a deadline) until cond holds.
template <typename Cond>
bool Eventually(Cond cond) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(SharedAttemptTest, CallersDuringAnAttemptTakeItsOutcome) {
  SharedAttempt attempt;
  std::atomic<bool> inside{false}, release{false};
  std::atomic<int> others_ran{0};
  uint32_t first = 0;
  std::thread a([&] {
    first = attempt.Run([&]() -> uint32_t {
      inside = true;
      while (!release) std::this_thread::yield();
      return upstream::kNfs4ErrDelay;  // the remote did not answer
    });
  });
  ASSERT_TRUE(Eventually([&] { return inside.load(); }));
  std::vector<uint32_t> got(3, 0);
  std::vector<std::thread> others;
  for (size_t i = 0; i < got.size(); i++)
    others.emplace_back([&, i] {
      got[i] = attempt.Run([&]() -> uint32_t {
        others_ran++;
        return upstream::kNfs4Ok;
      });
    });
  ASSERT_TRUE(Eventually([&] { return attempt.waiting() == 3; }));
  release = true;
  a.join();
  for (auto &t : others) t.join();
  EXPECT_EQ(first, uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(others_ran.load(), 0) << "a waiter tried again";
  for (uint32_t st : got) EXPECT_EQ(st, uint32_t(upstream::kNfs4ErrDelay));
  // A caller after the attempt ended tries anew.
  EXPECT_EQ(attempt.Run([&]() -> uint32_t {
    others_ran++;
    return upstream::kNfs4Ok;
  }),
            uint32_t(upstream::kNfs4Ok));
  EXPECT_EQ(others_ran.load(), 1);
}

}  // namespace
}  // namespace nache
