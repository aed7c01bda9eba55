// The FSAL's translation between Ganesha's access masks and NFSv4 ACCESS
// bits (fsal_cache/nache_access.c), compiled against Ganesha's headers.
#include <gtest/gtest.h>

#include <cstdint>

extern "C" {
#include "fsal_types.h"

uint32_t nache_access4_wanted(fsal_accessflags_t mask, bool dir,
                              fsal_accessflags_t *rest);
fsal_accessflags_t nache_access_allowed(uint32_t granted, bool dir);
fsal_accessflags_t nache_access_missing(fsal_accessflags_t mask,
                                        fsal_accessflags_t allowed);
}

namespace {

// Ganesha's masks are an enum in C++: built from plain bits here.
fsal_accessflags_t M(uint32_t v) { return fsal_accessflags_t(v); }

constexpr uint32_t kRead = 0x01, kLookup = 0x02, kModify = 0x04, kExtend = 0x08,
                   kDelete = 0x10, kExecute = 0x20;

TEST(FsalAccessTest, GaneshasMasksAskTheMatchingAccessBits) {
  fsal_accessflags_t rest = M(1);
  EXPECT_EQ(nache_access4_wanted(M(FSAL_READ_ACCESS), false, &rest), kRead);
  EXPECT_EQ(uint32_t(rest), 0u);
  EXPECT_EQ(nache_access4_wanted(M(FSAL_WRITE_ACCESS), false, &rest),
            kModify | kExtend);
  EXPECT_EQ(nache_access4_wanted(M(FSAL_EXECUTE_ACCESS), false, &rest),
            kExecute);
  EXPECT_EQ(nache_access4_wanted(M(FSAL_EXECUTE_ACCESS), true, &rest), kLookup);
  EXPECT_EQ(nache_access4_wanted(M(FSAL_MODE_MASK_SET(FSAL_W_OK)), true, &rest),
            kModify | kExtend | kDelete);
  EXPECT_EQ(nache_access4_wanted(
                M(FSAL_ACE4_MASK_SET(FSAL_ACE_PERM_DELETE_CHILD)), true, &rest),
            kDelete | kModify);
}

TEST(FsalAccessTest, AceBitsAccessCannotExpressAreLeftToGanesha) {
  fsal_accessflags_t rest = M(0);
  const fsal_accessflags_t mask =
      M(FSAL_ACE4_MASK_SET(FSAL_ACE_PERM_READ_DATA | FSAL_ACE_PERM_WRITE_ATTR |
                           FSAL_ACE_PERM_WRITE_ACL | FSAL_ACE4_PERM_CONTINUE));
  EXPECT_EQ(nache_access4_wanted(mask, false, &rest), kRead);
  EXPECT_EQ(uint32_t(rest),
            uint32_t(FSAL_ACE_PERM_WRITE_ATTR | FSAL_ACE_PERM_WRITE_ACL))
      << "flags are no permission bits";
}

TEST(FsalAccessTest, TheRemotesAnswerDecides) {
  // Read denied (an ACL deny entry): a read check fails, a write passes.
  fsal_accessflags_t ok = nache_access_allowed(kModify | kExtend, false);
  EXPECT_NE(uint32_t(nache_access_missing(M(FSAL_READ_ACCESS), ok)), 0u);
  EXPECT_EQ(uint32_t(nache_access_missing(M(FSAL_WRITE_ACCESS), ok)), 0u);
  // Write in mode terms needs every write bit: EXTEND alone is appending.
  ok = nache_access_allowed(kRead | kExtend, false);
  EXPECT_EQ(uint32_t(ok & FSAL_W_OK), 0u);
  EXPECT_NE(uint32_t(ok & FSAL_ACE_PERM_APPEND_DATA), 0u);
  EXPECT_NE(uint32_t(nache_access_missing(M(FSAL_WRITE_ACCESS), ok)), 0u);
  // A directory: LOOKUP is its execute.
  ok = nache_access_allowed(kRead | kLookup, true);
  EXPECT_EQ(uint32_t(nache_access_missing(M(FSAL_EXECUTE_ACCESS), ok)), 0u);
  EXPECT_NE(
      uint32_t(nache_access_missing(M(FSAL_MODE_MASK_SET(FSAL_W_OK)), ok)), 0u);
  EXPECT_EQ(uint32_t(nache_access_allowed(0, false)), 0u);
}

}  // namespace
