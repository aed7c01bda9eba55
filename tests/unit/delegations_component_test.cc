// Delegations through its narrow Host, with a fake core behind it: grants
// and what they cover, local delegations under ours, returns (the core's
// part called in order, the local ones recalled first, the attributes
// expired after), a recall queued with the grant served by the recall
// thread, and everything dropped at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "delegations/delegations.h"

namespace nache {
namespace {

using Clock = std::chrono::steady_clock;
using upstream::DelegationType;

constexpr uint32_t kRead = upstream::kShareAccessRead;
constexpr uint32_t kWrite = upstream::kShareAccessWrite;

// The core as Delegations sees it; records what it is asked to do.
class FakeCore : public Delegations::Host {
 public:
  uint64_t Epoch() const override { return epoch; }
  Clock::time_point LeaseValidUntil() const override { return lease_end; }
  uint32_t LeaseTime() const override { return 2; }
  Key KeyOf(const upstream::Fh &fh) override {
    return fh.empty() ? kNoKey : Key(fh[0]);
  }
  bool KnownAttrs(Key, upstream::Attrs *) override { return false; }
  void SetDelegated(Key key, bool d) override {
    Note((d ? "delegated " : "undelegated ") + std::to_string(key));
  }
  void ExpireAttrs(Key key) override { Note("expire " + std::to_string(key)); }
  void BeforeReturn(Key key, const HeldDelegation &) override {
    Note("before " + std::to_string(key));
  }
  uint32_t SendReturn(Key key, const HeldDelegation &) override {
    Note("delegreturn " + std::to_string(key));
    returns++;
    return upstream::kNfs4Ok;
  }

  std::vector<std::string> Calls() {
    MutexLock g(&mu);
    return calls;
  }

  std::atomic<uint64_t> epoch{1};
  Clock::time_point lease_end = Clock::now() + std::chrono::hours(1);
  std::atomic<int> returns{0};

 private:
  void Note(const std::string &what) {
    MutexLock g(&mu);
    calls.push_back(what);
  }
  Mutex mu;
  std::vector<std::string> calls GUARDED_BY(mu);
};

upstream::Delegation Grant(DelegationType type, uint8_t tag) {
  upstream::Delegation d;
  d.type = type;
  d.stateid.seqid = 1;
  d.stateid.other[0] = tag;
  return d;
}

class DelegationsTest : public ::testing::Test {
 protected:
  metrics::Metrics registry_;
  FakeCore core_;
  Delegations delegs_{&core_, registry_.ForExport(1)};
};

TEST_F(DelegationsTest, GrantCoversOpensWhileEpochAndLeaseHold) {
  EXPECT_FALSE(delegs_.Delegated(7));
  delegs_.NoteGrant(7, Grant(DelegationType::kRead, 1));
  EXPECT_EQ(core_.Calls(), std::vector<std::string>{"delegated 7"});
  EXPECT_TRUE(delegs_.Delegated(7));
  upstream::StateId sid;
  EXPECT_TRUE(delegs_.Covers(7, kRead, 0, &sid));
  EXPECT_EQ(sid.other[0], 1);
  EXPECT_FALSE(delegs_.Covers(7, kRead | kWrite, 0, nullptr)) << "read only";
  EXPECT_EQ(delegs_.Count(DelegationType::kRead), 1u);

  core_.lease_end = Clock::now() - std::chrono::seconds(1);
  EXPECT_FALSE(delegs_.Delegated(7)) << "the lease is not known to hold";
  EXPECT_FALSE(delegs_.Covers(7, kRead, 0, nullptr));
  core_.lease_end = Clock::now() + std::chrono::hours(1);
  core_.epoch = 2;
  EXPECT_FALSE(delegs_.Delegated(7)) << "granted under an older client id";
}

TEST_F(DelegationsTest, NoGrantInTheReplyRecordsNothing) {
  delegs_.NoteGrant(7, upstream::Delegation());
  EXPECT_FALSE(delegs_.Delegated(7));
  EXPECT_TRUE(core_.Calls().empty());
}

TEST_F(DelegationsTest, LocalDelegationsOnlyUnderOurs) {
  EXPECT_EQ(delegs_.AcquireLocal(7, false), upstream::kNfs4ErrDelay);
  delegs_.NoteGrant(7, Grant(DelegationType::kRead, 1));
  EXPECT_EQ(delegs_.AcquireLocal(7, true), upstream::kNfs4ErrDelay)
      << "a read delegation grants no local write one";
  EXPECT_EQ(delegs_.AcquireLocal(7, false), upstream::kNfs4Ok);
  EXPECT_EQ(delegs_.AcquireLocal(7, false), upstream::kNfs4Ok);
  EXPECT_TRUE(delegs_.HasLocal(7));
  EXPECT_FALSE(delegs_.HasLocal(8));
  EXPECT_EQ(delegs_.LocalCount(), 2u);
  delegs_.ReleaseLocal(7);
  delegs_.ReleaseLocal(7);
  delegs_.ReleaseLocal(7);  // one too many: ignored
  EXPECT_FALSE(delegs_.HasLocal(7));
  EXPECT_EQ(delegs_.LocalCount(), 0u);
}

TEST_F(DelegationsTest, ReadDelegationReturnedBeforeOurConflict) {
  std::vector<Key> stale;
  delegs_.SetAttrsStale([&stale](Key k) { stale.push_back(k); });
  delegs_.NoteGrant(7, Grant(DelegationType::kRead, 1));
  delegs_.ReturnIfReadDelegated(7);
  EXPECT_EQ(core_.Calls(), (std::vector<std::string>{
                               "delegated 7", "undelegated 7", "before 7",
                               "delegreturn 7", "expire 7"}));
  EXPECT_EQ(stale, std::vector<Key>{7});
  EXPECT_FALSE(delegs_.Delegated(7));
  EXPECT_EQ(delegs_.Count(DelegationType::kRead), 0u);
}

TEST_F(DelegationsTest, WriteDelegationIsNotReturnedForOurOwnConflict) {
  delegs_.NoteGrant(7, Grant(DelegationType::kWrite, 1));
  delegs_.ReturnIfReadDelegated(7);
  delegs_.ReturnIfReadDelegated(kNoKey);
  EXPECT_EQ(core_.returns, 0);
  EXPECT_TRUE(delegs_.Delegated(7));
}

TEST_F(DelegationsTest, ReturnRecallsLocalDelegationsFirst) {
  delegs_.NoteGrant(7, Grant(DelegationType::kWrite, 1));
  ASSERT_EQ(delegs_.AcquireLocal(7, true), upstream::kNfs4Ok);
  std::atomic<int> recalled{0};
  delegs_.SetLocalRecall([&recalled](Key k) {
    EXPECT_EQ(k, 7u);
    recalled++;
  });
  // The local client gives its delegation back a little later.
  std::thread client([this, &recalled] {
    while (recalled == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(core_.returns, 0) << "DELEGRETURN waits for the local return";
    delegs_.ReleaseLocal(7);
  });
  delegs_.Return(7, false);
  client.join();
  EXPECT_EQ(recalled, 1);
  EXPECT_EQ(core_.returns, 1);
  EXPECT_FALSE(delegs_.Delegated(7));
}

TEST_F(DelegationsTest, GrantWantedBackAtOnceIsReturnedByTheRecallThread) {
  delegs_.StartRecalls();
  upstream::Delegation d = Grant(DelegationType::kRead, 1);
  d.recall = true;
  delegs_.NoteGrant(7, d);
  EXPECT_FALSE(delegs_.Delegated(7)) << "being returned: not usable";
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (core_.returns == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  delegs_.StopCallbacks();
  EXPECT_EQ(core_.returns, 1);
  EXPECT_EQ(delegs_.Count(DelegationType::kRead), 0u);
}

TEST_F(DelegationsTest, DropAllForgetsEveryDelegationAndRecallsLocalOnes) {
  delegs_.NoteGrant(7, Grant(DelegationType::kRead, 1));
  delegs_.NoteGrant(8, Grant(DelegationType::kWrite, 2));
  ASSERT_EQ(delegs_.AcquireLocal(8, false), upstream::kNfs4Ok);
  std::vector<Key> recalled;
  delegs_.SetLocalRecall([&recalled](Key k) { recalled.push_back(k); });
  auto gone = delegs_.DropAll();
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_EQ(recalled, std::vector<Key>{8});
  EXPECT_FALSE(delegs_.Delegated(7));
  EXPECT_FALSE(delegs_.Delegated(8));
  EXPECT_EQ(core_.returns, 0) << "dropped, not returned";
  auto calls = core_.Calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "undelegated 7"), 1);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "undelegated 8"), 1);
}

TEST_F(DelegationsTest, NoCallbackAddressMeansNoCallbacks) {
  Delegations::CallbackConfig cc;  // NFSv4.0, no address
  std::string uaddr, err;
  EXPECT_TRUE(delegs_.StartCallbacks(cc, &uaddr, &err));
  EXPECT_FALSE(delegs_.CallbacksPossible());
  EXPECT_EQ(delegs_.back_channel(), nullptr);
  cc.minor_version = 1;
  EXPECT_TRUE(delegs_.StartCallbacks(cc, &uaddr, &err));
  EXPECT_TRUE(delegs_.CallbacksPossible()) << "NFSv4.1: the back channel";
  EXPECT_NE(delegs_.back_channel(), nullptr);
  EXPECT_FALSE(delegs_.Contacted());
}

}  // namespace
}  // namespace nache
