// Locks as NFSv3 clients take them through Ganesha's NLM, against the
// scripted upstream (scripted_upstream.h): the FSAL gives an NLM owner's
// lock state an upstream open of its own (by handle) for its locks, and
// may unlock with no open at all (the owner's state has none, or none any
// more): the core then finds the owner's locks on the file's upstream open.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

TEST_F(CoreDelegationsTest, AnUnlockWithoutAnOpenReachesTheOwnersUpstreamLock) {
  Start(DelegationType::kNone);
  NacheOpen *o = OpenF(upstream::kShareAccessWrite);  // the NLM state's
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(LockF(o, "nlm-owner", NACHE_LOCK, true, 0, 100), 0u);
  ASSERT_EQ(up_->Count("LOCK"), 1);
  EXPECT_TRUE(up_->Locked(0, 100));
  ASSERT_EQ(LockF(nullptr, "nlm-owner", NACHE_UNLOCK, true, 0, 100), 0u);
  EXPECT_EQ(up_->Count("LOCKU"), 1);
  EXPECT_FALSE(up_->Locked(0, 100));
  EXPECT_EQ(core_->CloseFile(o), 0u);
  EXPECT_EQ(up_->Count("CLOSE"), 1);
}

TEST_F(CoreDelegationsTest, AnUnlockWithoutAnOpenOfNothingHeldSendsNothing) {
  Start(DelegationType::kNone);
  // No upstream open of the file at all.
  EXPECT_EQ(LockF(nullptr, "nlm-owner", NACHE_UNLOCK, true, 0, 0), 0u);
  // An open whose locks are another owner's.
  NacheOpen *o = OpenF(upstream::kShareAccessWrite);
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(LockF(o, "other-owner", NACHE_LOCK, true, 0, 10), 0u);
  EXPECT_EQ(LockF(nullptr, "nlm-owner", NACHE_UNLOCK, true, 0, 0), 0u);
  EXPECT_EQ(up_->Count("LOCKU"), 0);
  EXPECT_TRUE(up_->Locked(0, 10)) << "the other owner's lock stays";
  ASSERT_EQ(LockF(o, "other-owner", NACHE_UNLOCK, true, 0, 10), 0u);
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

TEST_F(CoreDelegationsTest, ALockStillNeedsAnOpen) {
  Start(DelegationType::kNone);
  EXPECT_EQ(LockF(nullptr, "nlm-owner", NACHE_LOCK, true, 0, 10),
            upstream::kNfs4ErrOpenmode);
  EXPECT_EQ(up_->Count("LOCK"), 0);
}

}  // namespace
}  // namespace coretest
}  // namespace nache
