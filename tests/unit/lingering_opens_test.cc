// LingeringOpens through its narrow Host (a real open table, a fake core
// that records the CLOSEs it is asked for): an open lingers after its last
// local close, a reopen within the linger keeps it, its CLOSE goes once
// the linger is over (the latest linger, when it was closed again), and
// what still lingers is closed at shutdown; with no linger, nothing
// lingers.
#include "opens/lingering_opens.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class FakeCore : public LingeringOpens::Host {
 public:
  void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu) override {}
  void CloseUpstream(FileOpen *f) REQUIRES(f->owner->mu) override {
    f->SetClosed();
    MutexLock g(&mu_);
    closed_.push_back(f->key);
  }
  std::vector<Key> Closed() const {
    MutexLock g(&mu_);
    return closed_;
  }

 private:
  mutable Mutex mu_;
  std::vector<Key> closed_ GUARDED_BY(mu_);  // CLOSEs sent, in order
};

class LingeringOpensTest : public testing::Test {
 protected:
  void Make(milliseconds linger) {
    lingering_.reset(new LingeringOpens(linger, &table_, &core_));
    lingering_->Start();
  }

  // A local open of key, opened upstream on its first use.
  std::shared_ptr<FileOpen> OpenLocally(Key key) {
    std::shared_ptr<FileOpen> f = table_.Get(key);
    MutexLock g(&f->owner->mu);
    f->Count(upstream::kShareAccessRead, 0, +1);
    if (!f->open()) f->SetOpen(upstream::StateId(), 1);
    return f;
  }
  // Its local close, as the core's: the last one lingers (the return of
  // Linger then; true otherwise).
  bool CloseLocally(const std::shared_ptr<FileOpen> &f) {
    bool lingers = true;
    {
      MutexLock g(&f->owner->mu);
      f->Count(upstream::kShareAccessRead, 0, -1);
      if (f->n_local == 0) lingers = lingering_->Linger(f);
    }
    table_.Unpin(f);
    return lingers;
  }
  bool OpenUpstream(const std::shared_ptr<FileOpen> &f) {
    MutexLock g(&f->owner->mu);
    return f->open();
  }
  // Waits (up to 10 s) for n CLOSEs.
  bool WaitForCloses(size_t n) {
    auto until = Clock::now() + std::chrono::seconds(10);
    while (core_.Closed().size() < n && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(5));
    return core_.Closed().size() >= n;
  }
  // Waits (up to 10 s) until the queue is empty: every entry was due and
  // was looked at.
  bool WaitForEmptyQueue() {
    auto until = Clock::now() + std::chrono::seconds(10);
    while (lingering_->Queued() > 0 && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(5));
    return lingering_->Queued() == 0;
  }

  OpenTable table_{4, "test", [] { return uint64_t(1); }};
  FakeCore core_;
  std::unique_ptr<LingeringOpens> lingering_;  // after what it uses
};

TEST_F(LingeringOpensTest, AnOpenLingersAfterItsLastLocalClose) {
  Make(std::chrono::minutes(1));
  auto f = OpenLocally(7);
  auto g = OpenLocally(7);
  EXPECT_TRUE(CloseLocally(g));  // not the last: nothing to linger
  EXPECT_EQ(lingering_->Queued(), 0u);
  EXPECT_TRUE(CloseLocally(f));
  EXPECT_EQ(lingering_->Queued(), 1u);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(core_.Closed().empty()) << "no CLOSE within the linger";
  EXPECT_TRUE(OpenUpstream(f));
  EXPECT_TRUE(table_.Contains(7)) << "the table keeps the lingering open";
}

TEST_F(LingeringOpensTest, ItsCloseGoesUpstreamOnceTheLingerIsOver) {
  Make(milliseconds(50));
  auto f = OpenLocally(7);
  ASSERT_TRUE(CloseLocally(f));
  ASSERT_TRUE(WaitForCloses(1));
  EXPECT_EQ(core_.Closed(), std::vector<Key>{7});
  EXPECT_FALSE(OpenUpstream(f));
  EXPECT_TRUE(WaitForEmptyQueue());
  EXPECT_FALSE(table_.Contains(7)) << "dropped from the table once closed";
}

TEST_F(LingeringOpensTest, AReopenWithinTheLingerReusesTheOpen) {
  Make(milliseconds(100));
  auto f = OpenLocally(7);
  ASSERT_TRUE(CloseLocally(f));
  auto again = OpenLocally(7);  // within the linger
  EXPECT_EQ(again.get(), f.get()) << "the same upstream open";
  // The linger's entry comes due and finds the open in use: no CLOSE.
  ASSERT_TRUE(WaitForEmptyQueue());
  EXPECT_TRUE(core_.Closed().empty());
  EXPECT_TRUE(OpenUpstream(again));
  // Its next last close lingers afresh, then closes it, once.
  ASSERT_TRUE(CloseLocally(again));
  ASSERT_TRUE(WaitForCloses(1));
  ASSERT_TRUE(WaitForEmptyQueue());
  EXPECT_EQ(core_.Closed(), std::vector<Key>{7});
}

// Closed, reopened and closed again: the first linger's entry comes due
// before the second linger is over and leaves the open alone.
TEST_F(LingeringOpensTest, ALaterCloseLingersFromThen) {
  Make(milliseconds(1000));
  auto f = OpenLocally(7);
  ASSERT_TRUE(CloseLocally(f));
  std::this_thread::sleep_for(milliseconds(500));
  f = OpenLocally(7);
  ASSERT_TRUE(CloseLocally(f));
  const auto second_due = Clock::now() + milliseconds(1000);
  // Past the first linger: its entry was looked at (one entry left).
  auto until = Clock::now() + std::chrono::seconds(10);
  while (lingering_->Queued() > 1 && Clock::now() < until)
    std::this_thread::sleep_for(milliseconds(5));
  if (Clock::now() < second_due - milliseconds(50)) {  // not too slow a host
    EXPECT_TRUE(core_.Closed().empty()) << "closed by the first linger";
    EXPECT_TRUE(OpenUpstream(f));
  }
  ASSERT_TRUE(WaitForCloses(1));
  EXPECT_GE(Clock::now(), second_due - milliseconds(5));
  ASSERT_TRUE(WaitForEmptyQueue());
  EXPECT_EQ(core_.Closed().size(), 1u);
}

TEST_F(LingeringOpensTest, WhatLingersIsClosedAtShutdown) {
  Make(std::chrono::minutes(1));
  auto a = OpenLocally(1);
  auto b = OpenLocally(2);
  auto in_use = OpenLocally(3);
  ASSERT_TRUE(CloseLocally(a));
  ASSERT_TRUE(CloseLocally(b));
  // A file closed and reopened: its entry is there, its open in use.
  ASSERT_TRUE(CloseLocally(in_use));
  in_use = OpenLocally(3);
  lingering_->Stop();
  EXPECT_EQ(lingering_->CloseAll(), 2u);
  EXPECT_EQ(core_.Closed(), (std::vector<Key>{1, 2}));
  EXPECT_EQ(lingering_->Queued(), 0u);
  EXPECT_FALSE(table_.Contains(1));
  EXPECT_FALSE(table_.Contains(2));
  EXPECT_TRUE(OpenUpstream(in_use)) << "a local open still uses it";
  lingering_->Stop();  // again: nothing happens
}

TEST_F(LingeringOpensTest, NoLingerLeavesTheCloseToTheCaller) {
  Make(milliseconds(0));
  auto f = OpenLocally(7);
  EXPECT_FALSE(CloseLocally(f));
  EXPECT_EQ(lingering_->Queued(), 0u);
  EXPECT_TRUE(core_.Closed().empty());
}

}  // namespace
}  // namespace nache
