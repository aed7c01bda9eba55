// After a remote restart: opens, locks and delegations reclaimed in its
// grace period, or taken anew without one.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

// The remote restarts while a local client holds the file open with two
// lock ranges and nache holds a read delegation on it: the open is
// reclaimed with CLAIM_PREVIOUS asking the read delegation back, each
// range with a reclaiming LOCK, and the local client's later unlock
// reaches the remote under the new lock stateid.
TEST_F(CoreDelegationsTest, ServerRestartReclaimsOpenLocksAndDelegation) {
  Start(DelegationType::kRead);
  NacheOpen *open = OpenF(kRead);
  ASSERT_NE(open, nullptr);
  ASSERT_EQ(LockF(open, "owner-1", NACHE_LOCK, false, 0, 100), 0u);
  ASSERT_EQ(LockF(open, "owner-1", NACHE_LOCK, false, 200, 0), 0u);
  ASSERT_TRUE(up_->Locked(0, 100));
  up_->Restart(true);
  ASSERT_TRUE(up_->WaitCount("LOCK(reclaim)", 2)) << "locks not reclaimed";
  EXPECT_EQ(up_->Count("OPEN(previous)"), 1);
  EXPECT_EQ(up_->Reclaimed(), DelegationType::kRead);
  EXPECT_TRUE(up_->Locked(0, 100));
  EXPECT_TRUE(up_->Locked(1000, 1001)) << "the range to the end of the file";
  // The delegation came back: attributes need no GETATTR (the attribute
  // window is 0), and a local client may be delegated the file again.
  int getattrs = up_->Count("GETATTR");
  Attrs a;
  EXPECT_EQ(core_->Getattr(cr_, file_, &a), 0u);
  EXPECT_EQ(up_->Count("GETATTR"), getattrs);
  // (The last reclaim's reply may still be on its way to the core: local
  // delegations wait until it is in.)
  EXPECT_TRUE(cb_client::WaitFor([&] {
    if (core_->AcquireLocalDelegation(file_, false) != 0) return false;
    core_->ReleaseLocalDelegation(file_);
    return true;
  }));
  ASSERT_EQ(LockF(open, "owner-1", NACHE_UNLOCK, false, 0, 100), 0u);
  EXPECT_FALSE(up_->Locked(0, 100));
  EXPECT_TRUE(up_->Locked(1000, 1001));
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// A file open here only under our read delegation (its upstream open
// closed, its local open granted under the delegation) still gets the
// delegation back after a server restart: an open is reclaimed for it,
// asking for the delegation.
TEST_F(CoreDelegationsTest, ADelegationOfALocallyOpenFileIsReclaimed) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);  // upstream open closed
  int opens = up_->Count("OPEN");
  NacheOpen *open = OpenF(kRead);  // under the delegation
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(up_->Count("OPEN"), opens) << "granted here";
  up_->Restart(true);
  ASSERT_TRUE(up_->WaitCount("OPEN(previous)", 1)) << "not reclaimed";
  EXPECT_EQ(up_->Reclaimed(), DelegationType::kRead);
  // The server logs the reclaim before its reply reaches the core; until
  // the core has taken it in, local delegations wait (DELAY).
  EXPECT_TRUE(cb_client::WaitFor([&] {
    if (core_->AcquireLocalDelegation(file_, false) != 0) return false;
    core_->ReleaseLocalDelegation(file_);
    return true;
  })) << "the delegation is ours again";
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// A reclaimed delegation the server wants back at once (RFC 7530
// 16.16.5, "recall": knfsd sets it while its callback path is not up yet)
// is returned, not trusted.
TEST_F(CoreDelegationsTest, AReclaimedDelegationMarkedRecallIsReturned) {
  Start(DelegationType::kRead);
  NacheOpen *open = OpenF(kRead);
  ASSERT_NE(open, nullptr);
  up_->recall_reclaimed = true;
  up_->Restart(true);
  ASSERT_TRUE(up_->WaitCount("OPEN(previous)", 1));
  ASSERT_TRUE(up_->WaitCount("DELEGRETURN", 1)) << "not returned";
  int getattrs = up_->Count("GETATTR");
  Attrs a;
  EXPECT_EQ(core_->Getattr(cr_, file_, &a), 0u);
  EXPECT_EQ(up_->Count("GETATTR"), getattrs + 1) << "still trusted";
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// Without a grace period (the server answers NO_GRACE to reclaims) the
// open and its locks are taken anew; a range someone else took meanwhile
// is lost, and only that one.
TEST_F(CoreDelegationsTest, WithoutAGracePeriodOpensAndLocksAreTakenAnew) {
  Start(DelegationType::kNone);
  NacheOpen *open = OpenF(kBoth);
  ASSERT_NE(open, nullptr);
  ASSERT_EQ(LockF(open, "owner-1", NACHE_LOCK, true, 0, 100), 0u);
  ASSERT_EQ(LockF(open, "owner-2", NACHE_LOCK, true, 500, 10), 0u);
  int opens = up_->Count("OPEN");
  up_->ForeignLock(500, 510);  // taken while our state was gone
  up_->Restart(false);
  ASSERT_TRUE(up_->WaitCount("OPEN", opens + 1)) << "not opened again";
  ASSERT_TRUE(up_->WaitCount("LOCK", 3)) << "lock not taken again";
  ASSERT_TRUE(up_->WaitCount("LOCK!", 1)) << "the taken range not tried";
  EXPECT_EQ(up_->Count("OPEN(previous)"), 0);
  EXPECT_TRUE(up_->Locked(0, 100));
  EXPECT_FALSE(up_->Locked(500, 510));
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

}  // namespace
}  // namespace coretest
}  // namespace nache
