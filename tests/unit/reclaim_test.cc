// Reclaim through its narrow Host, with a fake core behind it: which
// delegations a new client id leaves to reclaim, an open reclaimed with
// its delegation and locks, an open and locks acquired anew when the
// server has no grace period, an open lost, and the reclaim thread walking
// the open table.
#include "delegations/reclaim.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace nache {
namespace {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Creds;
using upstream::DelegationType;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;

// The core as Reclaim sees it: OPENs answered with open_status, and every
// call counted.
class FakeCore : public Reclaim::Host {
 public:
  uint64_t Epoch() const override { return epoch; }
  void ReclaimDone() override { reclaim_done++; }
  std::vector<std::shared_ptr<FileOpen>> OpenFiles() override { return files; }
  void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu) override {
    // As the core does it.
    if (f->owner->epoch != epoch) {
      f->owner->seqid = 0;
      f->owner->epoch = epoch;
    }
    if (f->open() && f->epoch() != epoch) reclaim->ReclaimFile(f, epoch);
  }
  uint32_t FhOf(Key key, Fh *fh) override {
    *fh = "fh" + std::to_string(key);
    return upstream::kNfs4Ok;
  }
  uint32_t Run(Compound &c, const Creds &, CompoundReply *rep) override {
    EXPECT_EQ(c.tag(), "open_reclaim");
    runs++;
    OpResult o;
    o.op = Op::kOpen;
    o.status = open_status;
    o.stateid.seqid = 1;
    o.stateid.other[0] = 9;
    o.delegation.type = grant;
    rep->results.push_back(o);
    rep->status = open_status;
    return open_status;
  }
  uint32_t ConfirmIfAsked(const Creds &, const OpResult &open, const Fh &,
                          OwnerSlot *owner, upstream::StateId *,
                          upstream::Delegation *deleg)
      REQUIRES(owner->mu) override {
    *deleg = open.delegation;
    return upstream::kNfs4Ok;
  }
  uint32_t OpenByHandle(const Creds &, FileOpen *f, uint32_t, uint32_t)
      REQUIRES(f->owner->mu) override {
    opens_anew++;
    upstream::StateId sid;
    f->SetOpen(sid, epoch);
    return upstream::kNfs4Ok;
  }
  uint32_t SendHeldLock(FileOpen *f, const Fh &, LockOwnerState *lo,
                        const HeldLock &h, bool reclaim_lock)
      REQUIRES(f->owner->mu) override {
    (reclaim_lock ? locks_reclaimed : locks_anew)++;
    lo->held.push_back(h);
    return upstream::kNfs4Ok;
  }
  void NoteGrant(Key key, const upstream::Delegation &d) override {
    if (d.type != DelegationType::kNone) granted.push_back(key);
  }

  std::atomic<uint64_t> epoch{2};
  Reclaim *reclaim = nullptr;
  std::vector<std::shared_ptr<FileOpen>> files;
  uint32_t open_status = upstream::kNfs4Ok;
  DelegationType grant = DelegationType::kNone;
  std::atomic<int> reclaim_done{0}, runs{0};
  int opens_anew = 0, locks_reclaimed = 0, locks_anew = 0;
  std::vector<Key> granted;
};

class ReclaimTest : public ::testing::Test {
 protected:
  ReclaimTest() { core_.reclaim = &reclaim_; }

  // A file open upstream under client id epoch 1, holding one lock range.
  std::shared_ptr<FileOpen> OpenFile(Key key) {
    auto f = std::make_shared<FileOpen>();
    f->key = key;
    f->owner = &owner_;
    MutexLock g(&f->owner->mu);
    f->owner->epoch = 1;
    upstream::StateId sid;
    f->SetOpen(sid, 1);
    f->up_access = upstream::kShareAccessRead;
    f->Count(upstream::kShareAccessRead, 0, 1);
    HeldLock h;
    h.offset = 0;
    h.end = 10;
    f->lock_owners["lo"].held.push_back(h);
    return f;
  }

  static std::pair<Key, HeldDelegation> Held(Key key, uint64_t epoch,
                                             bool returning = false) {
    HeldDelegation d;
    d.type = DelegationType::kRead;
    d.epoch = epoch;
    d.returning = returning;
    return {key, d};
  }

  metrics::Metrics registry_;
  FakeCore core_;
  Reclaim reclaim_{&core_, registry_.ForExport(1)};
  OwnerSlot owner_;
};

TEST_F(ReclaimTest, OnlyDelegationsOfThePreviousClientIdAreReclaimed) {
  reclaim_.OnNewClientId(3, {Held(7, 2), Held(8, 1), Held(9, 2, true)});
  EXPECT_TRUE(reclaim_.HasDelegationToReclaim(7));
  EXPECT_FALSE(reclaim_.HasDelegationToReclaim(8)) << "older client id";
  EXPECT_FALSE(reclaim_.HasDelegationToReclaim(9)) << "was being returned";
}

TEST_F(ReclaimTest, FirstClientIdHasNothingToReclaim) {
  reclaim_.OnNewClientId(0, {Held(7, 0)});
  EXPECT_FALSE(reclaim_.HasDelegationToReclaim(7));
}

TEST_F(ReclaimTest, OpenReclaimedWithItsDelegationAndLocks) {
  auto f = OpenFile(7);
  reclaim_.OnNewClientId(2, {Held(7, 1)});
  core_.grant = DelegationType::kRead;
  MutexLock g(&f->owner->mu);
  EXPECT_TRUE(reclaim_.ReclaimFile(f.get(), 2));
  EXPECT_TRUE(f->open());
  EXPECT_EQ(f->epoch(), 2u);
  EXPECT_EQ(core_.granted, std::vector<Key>{7});
  EXPECT_EQ(core_.locks_reclaimed, 1);
  EXPECT_EQ(core_.locks_anew, 0);
  EXPECT_EQ(f->lock_owners["lo"].held.size(), 1u);
  EXPECT_FALSE(reclaim_.HasDelegationToReclaim(7)) << "asked back once";
}

TEST_F(ReclaimTest, NoGracePeriodOpensAndLocksAnew) {
  auto f = OpenFile(7);
  core_.open_status = upstream::kNfs4ErrNoGrace;
  MutexLock g(&f->owner->mu);
  f->owner->epoch = 2;  // the owner already follows the new client id
  EXPECT_TRUE(reclaim_.ReclaimFile(f.get(), 2));
  EXPECT_EQ(core_.opens_anew, 1);
  EXPECT_EQ(core_.locks_anew, 1);
  EXPECT_EQ(core_.locks_reclaimed, 0);
}

TEST_F(ReclaimTest, RefusedReclaimLosesTheOpenAndItsLocks) {
  auto f = OpenFile(7);
  core_.open_status = upstream::kNfs4ErrReclaimBad;
  MutexLock g(&f->owner->mu);
  EXPECT_FALSE(reclaim_.ReclaimFile(f.get(), 2));
  EXPECT_FALSE(f->open());
  EXPECT_TRUE(f->lock_owners.empty());
  EXPECT_EQ(core_.opens_anew, 0);
}

TEST_F(ReclaimTest, ThreadReclaimsEveryStaleOpenThenEndsGrace) {
  core_.files = {OpenFile(7), OpenFile(8)};
  reclaim_.Start();
  reclaim_.OnNewClientId(2, {});
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (core_.reclaim_done == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  reclaim_.Stop();
  EXPECT_EQ(core_.reclaim_done, 1);
  EXPECT_EQ(core_.runs, 2);
  for (auto &f : core_.files) {
    MutexLock g(&f->owner->mu);
    EXPECT_EQ(f->epoch(), 2u);
  }
}

}  // namespace
}  // namespace nache
