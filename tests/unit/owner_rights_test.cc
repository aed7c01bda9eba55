// The decisions nache makes from an object's owner (access/owner_rights.h):
// an owner or group the remote named and nache could not map shows as
// nobody (65534), and nobody (an office client's root, squashed) gets no
// owner or group rights from it; the remote's own nobody (65534 by number)
// keeps them.
#include "access/owner_rights.h"

#include <gtest/gtest.h>

#include "upstream/attrs.h"

namespace nache {
namespace {

using upstream::Attrs;
using upstream::Creds;
using upstream::FileType;
using upstream::kNobodyId;

constexpr uint32_t kRwx = upstream::kAccessRead | upstream::kAccessModify |
                          upstream::kAccessExtend | upstream::kAccessExecute;

Creds Caller(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {}) {
  Creds cr;
  cr.uid = uid;
  cr.gid = gid;
  cr.groups = std::move(groups);
  return cr;
}

// A file of mode, owned by uid:gid; unmapped: the bits of kAttr*Unmapped.
Attrs File(uint32_t mode, uint32_t uid, uint32_t gid, uint64_t unmapped = 0) {
  Attrs a;
  a.mask = upstream::kAttrsObject | unmapped;
  a.type = FileType::kReg;
  a.mode = mode;
  a.uid = uid;
  a.gid = gid;
  return a;
}

const Creds kNobody = Caller(kNobodyId, kNobodyId);

TEST(OwnerRightsTest, NobodyOwnsNothingWhoseOwnerIsUnmapped) {
  const Attrs theirs =
      File(0600, kNobodyId, kNobodyId,
           upstream::kAttrOwnerUnmapped | upstream::kAttrGroupUnmapped);
  EXPECT_FALSE(CallerOwns(kNobody, theirs));
  EXPECT_FALSE(CallerInGroup(kNobody, theirs));
  EXPECT_FALSE(CallerInGroup(Caller(1000, 1000, {kNobodyId}), theirs));
  EXPECT_EQ(AccessByMode(kNobody, theirs, kRwx), 0u);
  // The remote's own nobody (by number) is the owner of its files.
  const Attrs nobodys = File(0600, kNobodyId, kNobodyId);
  EXPECT_TRUE(CallerOwns(kNobody, nobodys));
  EXPECT_EQ(AccessByMode(kNobody, nobodys, kRwx), upstream::kAccessRead |
                                                      upstream::kAccessModify |
                                                      upstream::kAccessExtend);
}

TEST(OwnerRightsTest, AnUnmappedGroupGivesNoGroupRights) {
  const Attrs a = File(0070, 1000, kNobodyId, upstream::kAttrGroupUnmapped);
  EXPECT_EQ(AccessByMode(Caller(2000, kNobodyId), a, kRwx), 0u);
  EXPECT_EQ(AccessByMode(Caller(2000, 2000, {kNobodyId}), a, kRwx), 0u);
  // The owner is still the owner (its own bits: none here).
  EXPECT_TRUE(CallerOwns(Caller(1000, 1000), a));
  const Attrs mapped = File(0070, 1000, 3000);
  EXPECT_NE(AccessByMode(Caller(2000, 2000, {3000}), mapped, kRwx), 0u);
}

TEST(OwnerRightsTest, NobodyMaySetNothingLocallyOnAnUnmappedOwnersFile) {
  Attrs chmod;
  chmod.mask = upstream::kAttrMode;
  chmod.mode = 0666;
  const Attrs theirs =
      File(0644, kNobodyId, kNobodyId, upstream::kAttrOwnerUnmapped);
  EXPECT_FALSE(MaySetLocally(kNobody, theirs, chmod)) << "the remote judges";
  EXPECT_TRUE(MaySetLocally(Caller(0, 0), theirs, chmod)) << "root may";
  EXPECT_TRUE(MaySetLocally(kNobody, File(0644, kNobodyId, kNobodyId), chmod));
}

TEST(OwnerRightsTest, NobodyIsNoOwnerUnderTheStickyRule) {
  Attrs tmp = File(01777, 0, 0);
  tmp.type = FileType::kDir;
  const Attrs theirs =
      File(0644, kNobodyId, kNobodyId, upstream::kAttrOwnerUnmapped);
  EXPECT_TRUE(StickyForbids(kNobody, tmp, theirs));
  EXPECT_FALSE(StickyForbids(kNobody, tmp, File(0644, kNobodyId, 0)));
  EXPECT_FALSE(StickyForbids(Caller(0, 0), tmp, theirs));
  // Nor as the directory's owner.
  Attrs their_tmp = tmp;
  their_tmp.uid = kNobodyId;
  their_tmp.mask |= upstream::kAttrOwnerUnmapped;
  EXPECT_TRUE(StickyForbids(kNobody, their_tmp, File(0644, 1000, 1000)));
}

}  // namespace
}  // namespace nache
