// The NFSv4.1 fore channel's slot table: sequence ids per slot, busy slots
// skipped, a lost reply's slot recovered through SEQ_MISORDERED, and the
// server's target honoured.
#include "upstream/slot_table.h"

#include <gtest/gtest.h>

namespace nache {
namespace upstream {
namespace {

using Outcome = SlotTable::Outcome;

TEST(SlotTableTest, EachSlotCountsItsOwnSequence) {
  SlotTable t(2);
  SlotTable::Slot a, b, c, r;
  ASSERT_TRUE(t.Acquire(&a));
  ASSERT_TRUE(t.Acquire(&b));
  EXPECT_EQ(a.slotid, 0u);
  EXPECT_EQ(b.slotid, 1u);
  EXPECT_EQ(a.sequenceid, 1u) << "a new slot starts at 1";
  EXPECT_EQ(b.highest_slotid, 1u);
  EXPECT_FALSE(t.Acquire(&c)) << "both busy";
  EXPECT_FALSE(t.Release(a, Outcome::kDone, &r));
  ASSERT_TRUE(t.Acquire(&c));
  EXPECT_EQ(c.slotid, 0u);
  EXPECT_EQ(c.sequenceid, 2u);
  // Not executed (say NFS4ERR_DELAY): the same id again.
  EXPECT_FALSE(t.Release(c, Outcome::kNotDone, &r));
  ASSERT_TRUE(t.Acquire(&c));
  EXPECT_EQ(c.sequenceid, 2u);
  EXPECT_EQ(t.busy(), 2u);
}

TEST(SlotTableTest, ALostReplyIsSettledBySeqMisordered) {
  SlotTable t(1);
  SlotTable::Slot s, r;
  ASSERT_TRUE(t.Acquire(&s));  // id 1
  t.Release(s, Outcome::kDone, &r);
  ASSERT_TRUE(t.Acquire(&s));  // id 2, its reply lost
  EXPECT_EQ(s.sequenceid, 2u);
  t.Release(s, Outcome::kLost, &r);
  // Never 2 again first: a server that executed it would replay it.
  ASSERT_TRUE(t.Acquire(&s));
  EXPECT_EQ(s.sequenceid, 3u);
  // The server never saw 2: the new request goes again as 2.
  ASSERT_TRUE(t.Release(s, Outcome::kMisordered, &r));
  EXPECT_EQ(r.slotid, 0u);
  EXPECT_EQ(r.sequenceid, 2u);
  SlotTable::Slot none;
  EXPECT_FALSE(t.Acquire(&none)) << "the slot stays taken for the retry";
  EXPECT_FALSE(t.Release(r, Outcome::kDone, &r));
  ASSERT_TRUE(t.Acquire(&s));
  EXPECT_EQ(s.sequenceid, 3u);
  // Misordered with nothing lost: no retry, the slot is free again.
  EXPECT_FALSE(t.Release(s, Outcome::kMisordered, &r));
  EXPECT_EQ(t.busy(), 0u);
}

TEST(SlotTableTest, TheServersTargetLimitsTheSlotsUsed) {
  SlotTable t(4);
  t.SetTarget(1);
  SlotTable::Slot a, b, c;
  ASSERT_TRUE(t.Acquire(&a));
  ASSERT_TRUE(t.Acquire(&b));
  EXPECT_FALSE(t.Acquire(&c)) << "slots 2 and 3 are above the target";
  t.SetTarget(99);  // bounded by the table
  ASSERT_TRUE(t.Acquire(&c));
  EXPECT_EQ(c.slotid, 2u);
  EXPECT_EQ(t.size(), 4u);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
