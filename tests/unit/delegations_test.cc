// The delegation table: which opens a delegation covers, epochs, returns
// that make a delegation unusable, and a new grant surviving the return of
// an old one.
#include <gtest/gtest.h>

#include "delegations/delegation_table.h"

namespace nache {
namespace {

using upstream::DelegationType;
using upstream::StateId;

StateId Sid(uint8_t tag) {
  StateId s;
  s.seqid = 1;
  s.other[0] = tag;
  return s;
}

constexpr uint32_t kRead = upstream::kShareAccessRead;
constexpr uint32_t kWrite = upstream::kShareAccessWrite;
constexpr uint32_t kBoth = kRead | kWrite;

TEST(DelegationTableTest, ReadDelegationCoversOnlyReadOpensDenyingNothing) {
  DelegationTable t;
  t.Grant(1, DelegationType::kRead, Sid(1), 0);
  StateId got;
  EXPECT_TRUE(t.Covers(1, 0, kRead, 0, &got));
  EXPECT_EQ(got.other[0], 1);
  EXPECT_FALSE(t.Covers(1, 0, kBoth, 0, nullptr));
  EXPECT_FALSE(t.Covers(1, 0, kRead, upstream::kShareDenyWrite, nullptr));
  EXPECT_FALSE(t.Covers(2, 0, kRead, 0, nullptr)) << "another file";
  EXPECT_EQ(t.Count(DelegationType::kRead), 1u);
  EXPECT_EQ(t.Count(DelegationType::kWrite), 0u);
}

TEST(DelegationTableTest, WriteDelegationCoversAnyOpen) {
  DelegationTable t;
  t.Grant(1, DelegationType::kWrite, Sid(1), 0);
  EXPECT_TRUE(t.Covers(1, 0, kBoth, upstream::kShareDenyRead, nullptr));
  EXPECT_TRUE(t.Covers(1, 0, kWrite, 0, nullptr));
}

TEST(DelegationTableTest, AnotherEpochMeansTheServerForgotIt) {
  DelegationTable t;
  t.Grant(1, DelegationType::kRead, Sid(1), 3);
  EXPECT_TRUE(t.Usable(1, 3));
  EXPECT_FALSE(t.Usable(1, 4));
  EXPECT_FALSE(t.Covers(1, 4, kRead, 0, nullptr));
  auto gone = t.Clear();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].first, 1u);
  EXPECT_EQ(gone[0].second.type, DelegationType::kRead);
  EXPECT_FALSE(t.Usable(1, 3));
}

TEST(DelegationTableTest, ReturnStopsUseAndMatchesTheRecalledStateid) {
  DelegationTable t;
  t.Grant(1, DelegationType::kRead, Sid(1), 0);
  StateId other = Sid(9);
  EXPECT_FALSE(t.BeginReturn(1, &other)) << "a recall of another stateid";
  StateId recalled = Sid(1);
  recalled.seqid = 0;  // the seqid of a recall does not matter
  EXPECT_TRUE(t.BeginReturn(1, &recalled));
  EXPECT_FALSE(t.BeginReturn(1, nullptr)) << "already being returned";
  EXPECT_FALSE(t.Usable(1, 0));
  HeldDelegation d;
  ASSERT_TRUE(t.Find(1, &d));
  EXPECT_TRUE(d.returning);
  t.Forget(1, Sid(1));
  EXPECT_FALSE(t.Find(1, &d));
}

TEST(DelegationTableTest, ANewGrantSurvivesTheReturnOfTheOldOne) {
  DelegationTable t;
  t.Grant(1, DelegationType::kRead, Sid(1), 0);
  ASSERT_TRUE(t.BeginReturn(1, nullptr));
  t.Grant(1, DelegationType::kRead, Sid(2), 0);  // granted meanwhile
  t.Forget(1, Sid(1));                           // the old one's return ends
  EXPECT_TRUE(t.Usable(1, 0));
  StateId got;
  EXPECT_TRUE(t.Covers(1, 0, kRead, 0, &got));
  EXPECT_EQ(got.other[0], 2);
}

}  // namespace
}  // namespace nache
