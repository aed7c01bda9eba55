// Open table: owners are sticky per file, entries live while pinned or
// open, and seqids advance exactly as RFC 7530 9.1.7 prescribes.
#include "opens/opens.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

namespace nache {
namespace {

TEST(OpenTableTest, OneEntryPerFileWithStickyOwner) {
  OpenTable t(8, "p", [] { return uint64_t(1); });
  auto a = t.Get(5);
  auto b = t.Get(5);
  EXPECT_EQ(a.get(), b.get());
  OwnerSlot *owner = a->owner;
  EXPECT_NE(t.OwnerForKey(6), owner);  // in use by file 5
  EXPECT_EQ(t.size(), 1u);
  t.Unpin(a);
  EXPECT_EQ(t.size(), 1u);     // still pinned by b
  EXPECT_EQ(b->owner, owner);  // (the same FileOpen, its owner fixed)
  t.Unpin(b);
  EXPECT_EQ(t.size(), 0u);
}

TEST(OpenTableTest, NewFileAdoptsTheByNameOwnerExistingDoesNot) {
  OpenTable t(8, "p", [] { return uint64_t(1); });
  OwnerSlot *other = t.OwnerForKey(3);
  ASSERT_NE(other, t.OwnerForKey(5));
  auto a = t.GetOrAdopt(5, other);
  EXPECT_EQ(a->owner, other);
  auto b = t.GetOrAdopt(5, t.OwnerForKey(5));  // existing: keeps its owner
  EXPECT_EQ(b->owner, other);
  t.Unpin(a);
  t.Unpin(b);
}

// NFSv4.0: a new open-owner's first OPEN costs an OPEN_CONFIRM round trip,
// and an owner's requests are serialised by its seqid: files new to the
// table get an idle owner the server knows (used in this epoch) when there
// is one.
TEST(OpenTableTest, IdleKnownOwnersArePreferred) {
  uint64_t epoch = 1;
  OpenTable t(8, "p", [&] { return epoch; });
  OwnerSlot *known = t.OwnerForKey(3);
  {
    MutexLock g(&known->mu);
    known->epoch = 1;
    known->seqid = 2;
  }
  EXPECT_EQ(t.OwnerForKey(5), known);
  EXPECT_EQ(t.OwnerFor(9, "name"), known);
  {
    MutexLock busy(&known->mu);  // an OPEN in flight
    EXPECT_NE(t.OwnerForKey(5), known);
  }
  epoch = 2;  // a new client id: the server knows none of them
  EXPECT_EQ(t.OwnerForKey(5), t.OwnerForKey(5));
  EXPECT_NE(t.OwnerForKey(5), known);
}

// A file's upstream calls hold its owner's mutex: an owner a file in the
// table uses (open, or lingering) is not given to another file while a
// free one exists, so that their round trips do not wait for each other.
// Once that file leaves the table its owner is free again.
TEST(OpenTableTest, AnOwnerInUseByAFileGoesToNoOtherWhileOneIsFree) {
  OpenTable t(4, "p", [] { return uint64_t(1); });
  auto a = t.Get(3);
  OwnerSlot *used = a->owner;
  {
    MutexLock g(&a->owner->mu);  // known to the server: preferred before
    a->owner->epoch = 1;
    a->owner->seqid = 2;
    a->SetOpen(upstream::StateId(), 1);  // an open lingering, say
  }
  t.Unpin(a);
  ASSERT_EQ(t.size(), 1u);
  for (Key k = 0; k < 16; k++) EXPECT_NE(t.OwnerForKey(k), used) << k;
  EXPECT_NE(t.OwnerFor(9, "name"), used);
  // Every owner used by some file: an idle one is shared.
  std::vector<std::shared_ptr<FileOpen>> more;
  for (Key k = 10; more.size() < 3; k++) more.push_back(t.Get(k));
  std::set<OwnerSlot *> owners = {used};
  for (auto &f : more) owners.insert(f->owner);
  EXPECT_EQ(owners.size(), 4u);       // each file its own
  EXPECT_EQ(t.OwnerForKey(3), used);  // known and idle: the best of four
  {
    MutexLock busy(&used->mu);
    EXPECT_NE(t.OwnerForKey(3), used);
  }
  for (auto &f : more) t.Unpin(f);
  auto again = t.Get(3);
  {
    MutexLock g(&again->owner->mu);
    again->SetClosed();
  }
  t.Unpin(again);
  ASSERT_EQ(t.size(), 0u);
  EXPECT_EQ(t.OwnerForKey(0), used);  // free and known again
}

// NFSv4.0: a new owner's first OPEN costs an OPEN_CONFIRM round trip, a
// sure one, where sharing an idle known owner only may wait: known first.
TEST(OpenTableTest, UnderNfs40AKnownOwnerIsSharedBeforeANewOneIsUsed) {
  OpenTable t(
      4, "p", [] { return uint64_t(1); }, [] { return true; });
  auto a = t.Get(3);
  OwnerSlot *used = a->owner;
  {
    MutexLock g(&used->mu);
    used->epoch = 1;
    used->seqid = 2;
  }
  EXPECT_EQ(t.OwnerForKey(7), used);
  t.Unpin(a);
}

// An open by a name whose file is in the table (opened by that name, its
// open lingering) takes that file's owner, in use or not: the remote
// merges the OPEN into the open it has, and no second CLOSE is owed.
TEST(OpenTableTest, AnOpenByANameInTheTableTakesItsFilesOwner) {
  OpenTable t(8, "p", [] { return uint64_t(1); });
  OwnerSlot *o = t.OwnerFor(1, "f");
  auto a = t.GetOrAdopt(5, o, 1, "f");
  EXPECT_EQ(t.OwnerFor(1, "f"), o);
  EXPECT_NE(t.OwnerFor(1, "g"), o);
  EXPECT_NE(t.OwnerFor(2, "f"), o);
  {
    MutexLock busy(&o->mu);  // its lingering CLOSE, say: worth the wait
    EXPECT_EQ(t.OwnerFor(1, "f"), o);
  }
  // Opened by another name (renamed at the remote, a hard link): only the
  // last name leads to it.
  auto again = t.GetOrAdopt(5, t.OwnerFor(1, "h"), 1, "h");
  EXPECT_EQ(again.get(), a.get());
  EXPECT_EQ(t.OwnerFor(1, "h"), o);
  {
    MutexLock busy(&o->mu);
    EXPECT_NE(t.OwnerFor(1, "f"), o);
  }
  t.Unpin(again);
  t.Unpin(a);
}

TEST(OpenTableTest, EntryWithUpstreamOpenOutlivesPins) {
  OpenTable t(8, "p", [] { return uint64_t(1); });
  auto a = t.Get(7);
  {
    MutexLock g(&a->owner->mu);
    a->SetOpen(upstream::StateId(), 1);
  }
  t.Unpin(a);
  EXPECT_EQ(t.size(), 1u);
  auto again = t.Get(7);
  EXPECT_EQ(again.get(), a.get());
  {
    MutexLock g(&again->owner->mu);
    again->SetClosed();
  }
  t.Unpin(again);
  EXPECT_EQ(t.size(), 0u);
}

TEST(OpenTableTest, AccessAndDenyAreUnionsOfLocalOpens) {
  OwnerSlot owner;
  FileOpen f;
  f.owner = &owner;
  MutexLock g(&f.owner->mu);
  f.Count(upstream::kShareAccessRead, upstream::kShareDenyNone, +1);
  EXPECT_EQ(f.WantAccess(), upstream::kShareAccessRead);
  f.Count(upstream::kShareAccessBoth, upstream::kShareDenyWrite, +1);
  EXPECT_EQ(f.WantAccess(), upstream::kShareAccessBoth);
  EXPECT_EQ(f.WantDeny(), upstream::kShareDenyWrite);
  EXPECT_EQ(f.n_local, 2u);
  f.Count(upstream::kShareAccessBoth, upstream::kShareDenyWrite, -1);
  EXPECT_EQ(f.WantAccess(), upstream::kShareAccessRead);  // shrinks back
  EXPECT_EQ(f.WantDeny(), upstream::kShareDenyNone);
  EXPECT_EQ(f.n_local, 1u);
}

// An upstream open goes back only to share modes it had: opened READ
// then upgraded to BOTH, it may go back to READ, never to WRITE alone.
TEST(OpenTableTest, DowngradeOnlyToModesTheOpenHad) {
  OpenTable t(8, "p", [] { return uint64_t(1); });
  auto f = t.Get(5);
  MutexLock g(&f->owner->mu);
  EXPECT_FALSE(
      f->MayDowngradeTo(upstream::kShareAccessRead, upstream::kShareDenyNone));
  f->NoteUpstreamModes(upstream::kShareAccessRead, upstream::kShareDenyNone);
  f->NoteUpstreamModes(upstream::kShareAccessBoth, upstream::kShareDenyRead);
  EXPECT_TRUE(
      f->MayDowngradeTo(upstream::kShareAccessRead, upstream::kShareDenyNone));
  EXPECT_TRUE(
      f->MayDowngradeTo(upstream::kShareAccessRead, upstream::kShareDenyRead));
  EXPECT_FALSE(
      f->MayDowngradeTo(upstream::kShareAccessWrite, upstream::kShareDenyNone));
  EXPECT_FALSE(
      f->MayDowngradeTo(upstream::kShareAccessRead, upstream::kShareDenyWrite));
  t.Unpin(f);
}

TEST(OpenTableTest, SeqidAdvancesExceptOnTheListedErrors) {
  uint32_t s = 4;
  OpenTable::AdvanceSeqid(&s, upstream::kNfs4Ok);
  EXPECT_EQ(s, 5u);
  OpenTable::AdvanceSeqid(&s, upstream::kNfs4ErrDenied);  // still consumed
  EXPECT_EQ(s, 6u);
  OpenTable::AdvanceSeqid(&s, upstream::kNfs4ErrAccess);
  EXPECT_EQ(s, 7u);
  for (uint32_t e :
       {upstream::kNfs4ErrStaleClientid, upstream::kNfs4ErrStaleStateid,
        upstream::kNfs4ErrBadStateid, upstream::kNfs4ErrBadSeqid,
        upstream::kNfs4ErrBadxdr, upstream::kNfs4ErrResource,
        upstream::kNfs4ErrNofilehandle, upstream::kNfs4ErrMoved}) {
    OpenTable::AdvanceSeqid(&s, e);
    EXPECT_EQ(s, 7u) << e;
  }
}

TEST(OpenTableTest, OwnerNamesAreDistinct) {
  OpenTable t(4, "nache-1-abc", [] { return uint64_t(1); });
  OwnerSlot *a = t.OwnerForKey(0), *b = t.OwnerForKey(1);
  MutexLock ga(&a->mu);
  MutexLock gb(&b->mu);
  EXPECT_NE(a->name, b->name);
  EXPECT_EQ(a->name.rfind("nache-1-abc", 0), 0u);
}

// What an upstream lock-owner holds, as POSIX locks of one owner behave:
// a new lock replaces the overlapped part, an unlock splits, neighbours of
// one type merge.
TEST(HeldLockTest, RangesFollowLocksAndUnlocks) {
  using upstream::LockType;
  std::vector<HeldLock> held;
  AddHeldLock(&held, LockType::kRead, 0, 100);
  AddHeldLock(&held, LockType::kWrite, 50, 10);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0].end, 50u);
  EXPECT_EQ(held[1].type, LockType::kWrite);
  EXPECT_EQ(held[1].offset, 50u);
  EXPECT_EQ(held[2].offset, 60u);
  EXPECT_EQ(held[2].type, LockType::kRead);
  AddHeldLock(&held, LockType::kRead, 50, 10);  // back to one read range
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].offset, 0u);
  EXPECT_EQ(held[0].end, 100u);
  RemoveHeldLock(&held, 20, 10);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].end, 20u);
  EXPECT_EQ(held[1].offset, 30u);
  // To the end of the file, and an unlock of everything.
  AddHeldLock(&held, LockType::kWrite, 1000, UINT64_MAX);
  EXPECT_EQ(held.back().end, UINT64_MAX);
  AddHeldLock(&held, LockType::kWrite, UINT64_MAX - 5, 100);  // saturates
  EXPECT_EQ(held.back().end, UINT64_MAX);
  RemoveHeldLock(&held, 0, UINT64_MAX);
  EXPECT_TRUE(held.empty());
}

}  // namespace
}  // namespace nache
