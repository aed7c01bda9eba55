// The FSAL's one mapping between NFSv4 statuses and Ganesha's fsal_errors_t
// (fsal_cache/nache_errors.c), compiled against Ganesha's headers.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdint>

extern "C" {
#include "fsal_types.h"
#include "log.h"

fsal_status_t nache_status(uint32_t nfs4_status);
uint32_t nache_nfs4_status(fsal_errors_t err);

// Stand-ins for the daemon's logging, which the mapping uses for odd codes.
log_levels_t stub_levels[COMPONENT_COUNT];
log_levels_t *component_log_level = stub_levels;
void DisplayLogComponentLevel(log_components_t, const char *, int, const char *,
                              log_levels_t, const char *, ...) {}
}

namespace {

TEST(FsalErrorsTest, CommonStatusesMapBothWays) {
  const struct {
    uint32_t nfs4;
    fsal_errors_t fsal;
  } cases[] = {
      {0, ERR_FSAL_NO_ERROR},     {2, ERR_FSAL_NOENT},
      {13, ERR_FSAL_ACCESS},      {17, ERR_FSAL_EXIST},
      {20, ERR_FSAL_NOTDIR},      {21, ERR_FSAL_ISDIR},
      {28, ERR_FSAL_NOSPC},       {66, ERR_FSAL_NOTEMPTY},
      {70, ERR_FSAL_STALE},       {10008, ERR_FSAL_DELAY},
      {10013, ERR_FSAL_IN_GRACE}, {10015, ERR_FSAL_SHARE_DENIED},
      {10029, ERR_FSAL_SYMLINK},  {10045, ERR_FSAL_DEADLOCK},
  };
  for (const auto &c : cases) {
    EXPECT_EQ(nache_status(c.nfs4).major, c.fsal) << c.nfs4;
    EXPECT_EQ(nache_nfs4_status(c.fsal), c.nfs4) << c.nfs4;
  }
}

TEST(FsalErrorsTest, LostUpstreamStateIsRetryable) {
  // The core re-establishes state; the client's retry then works.
  for (uint32_t st : {10011u, 10022u, 10023u, 10024u, 10025u, 10026u})
    EXPECT_EQ(nache_status(st).major, ERR_FSAL_DELAY) << st;
}

TEST(FsalErrorsTest, LockConflictsAndUnknownCodes) {
  EXPECT_EQ(nache_status(10010).major, ERR_FSAL_LOCKED);  // DENIED
  EXPECT_EQ(nache_status(10012).major, ERR_FSAL_LOCKED);  // LOCKED
  EXPECT_EQ(nache_status(99999).major, ERR_FSAL_IO);
  EXPECT_EQ(nache_nfs4_status(ERR_FSAL_NOMEM), 10008u);
  EXPECT_EQ(nache_nfs4_status(ERR_FSAL_NOT_INIT), 10006u);
}

}  // namespace
