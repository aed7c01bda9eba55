// Write-behind: UNSTABLE writes are queued and sent in the background;
// COMMIT resends what the remote lost (changed verifier) or failed to take;
// overlapping writes keep their order; the bound refuses; shutdown sends
// everything queued.
#include "core/unstable_writes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace nache {
namespace {

// A scripted upstream: records sends, can hold them, fail them, and reboot
// (change its verifier).
struct FakeRemote {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  uint32_t fail_status = 0;
  std::string verf = "boot-one";
  struct Sent {
    uint64_t off;
    std::string data;
    upstream::StableHow stable;
  };
  std::vector<Sent> sent;
  int commits = 0;

  UnstableWrites::SendFn Send() {
    return [this](Key, const upstream::Creds &, const upstream::StateId &,
                  uint64_t off, const std::string &data,
                  upstream::StableHow stable, upstream::Verifier *v) {
      std::unique_lock<std::mutex> g(mu);
      cv.wait(g, [this] { return !hold; });
      if (fail_status) return fail_status;
      sent.push_back(Sent{off, data, stable});
      *v = verf;
      return uint32_t(0);
    };
  }
  UnstableWrites::CommitFn Commit() {
    return [this](Key, const upstream::Creds &, upstream::Verifier *v) {
      std::lock_guard<std::mutex> g(mu);
      commits++;
      *v = verf;
      return uint32_t(0);
    };
  }
  void Release() {
    {
      std::lock_guard<std::mutex> g(mu);
      hold = false;
    }
    cv.notify_all();
  }
};

upstream::Creds cr;
upstream::StateId sid;

TEST(UnstableWritesTest, QueuedThenCommittedOnce) {
  FakeRemote r;
  UnstableWrites wb(r.Send(), r.Commit(), 1 << 20, 2);
  ASSERT_TRUE(wb.Submit(1, cr, sid, 0, "hello", 5));
  ASSERT_TRUE(wb.Submit(1, cr, sid, 5, "world", 5));
  EXPECT_EQ(wb.bytes(), 10u);
  EXPECT_EQ(wb.Commit(1, cr), 0u);
  EXPECT_EQ(r.commits, 1);
  ASSERT_EQ(r.sent.size(), 2u);
  for (auto &s : r.sent) EXPECT_EQ(s.stable, upstream::StableHow::kUnstable);
  EXPECT_EQ(wb.bytes(), 0u);
  // Nothing uncommitted: COMMIT needs no round trip.
  EXPECT_EQ(wb.Commit(1, cr), 0u);
  EXPECT_EQ(r.commits, 1);
}

TEST(UnstableWritesTest, RemoteRebootBeforeCommitResendsFileSync) {
  FakeRemote r;
  UnstableWrites wb(r.Send(), r.Commit(), 1 << 20, 1);
  ASSERT_TRUE(wb.Submit(1, cr, sid, 0, "data", 4));
  wb.Drain(1);
  {
    std::lock_guard<std::mutex> g(r.mu);
    r.verf = "boot-two";  // the remote rebooted: unstable data lost
  }
  EXPECT_EQ(wb.Commit(1, cr), 0u);
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_EQ(r.sent[1].data, "data");
  EXPECT_EQ(r.sent[1].stable, upstream::StableHow::kFileSync);
}

TEST(UnstableWritesTest, FailedSendRetriedAtCommitAndErrorKeptUntilFixed) {
  FakeRemote r;
  r.fail_status = upstream::kNfs4ErrNospc;
  UnstableWrites wb(r.Send(), r.Commit(), 1 << 20, 1);
  ASSERT_TRUE(wb.Submit(1, cr, sid, 0, "data", 4));
  EXPECT_EQ(wb.Commit(1, cr), uint32_t(upstream::kNfs4ErrNospc));
  EXPECT_EQ(wb.bytes(), 4u);  // kept: the client will retry
  r.fail_status = 0;
  EXPECT_EQ(wb.Commit(1, cr), 0u);
  ASSERT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.sent[0].stable, upstream::StableHow::kFileSync);
  EXPECT_EQ(wb.bytes(), 0u);
}

TEST(UnstableWritesTest, BoundRefuses) {
  FakeRemote r;
  r.hold = true;
  UnstableWrites wb(r.Send(), r.Commit(), 8, 1);
  EXPECT_TRUE(wb.Submit(1, cr, sid, 0, "12345", 5));
  EXPECT_FALSE(wb.Submit(2, cr, sid, 0, "12345", 5));
  r.Release();
}

TEST(UnstableWritesTest, OverlappingWriteWaitsForTheEarlierOne) {
  FakeRemote r;
  r.hold = true;
  UnstableWrites wb(r.Send(), r.Commit(), 1 << 20, 4);
  ASSERT_TRUE(wb.Submit(1, cr, sid, 0, "aaaa", 4));
  std::atomic<bool> second_queued{false};
  std::thread t([&] {
    wb.Submit(1, cr, sid, 2, "bb", 2);  // overlaps [0,4)
    second_queued = true;
  });
  // The second may not be queued while the first is held.
  EXPECT_FALSE(second_queued.load());
  r.Release();
  t.join();
  EXPECT_TRUE(second_queued.load());
  EXPECT_EQ(wb.Commit(1, cr), 0u);
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_EQ(r.sent[0].data, "aaaa");
  EXPECT_EQ(r.sent[1].data, "bb");
}

TEST(UnstableWritesTest, ShutdownSendsWhatIsQueued) {
  FakeRemote r;
  {
    UnstableWrites wb(r.Send(), r.Commit(), 1 << 20, 1);
    for (int i = 0; i < 10; i++)
      ASSERT_TRUE(wb.Submit(1, cr, sid, uint64_t(i) * 10, "x", 1));
  }
  EXPECT_EQ(r.sent.size(), 10u);
}

}  // namespace
}  // namespace nache
