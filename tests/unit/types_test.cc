#include "upstream/types.h"

#include <gtest/gtest.h>

namespace nache {
namespace upstream {

TEST(StateIdTest, SpecialStateidsDiffer) {
  EXPECT_TRUE(StateId::Anonymous() == StateId());
  EXPECT_FALSE(StateId::Anonymous() == StateId::Bypass());
  EXPECT_EQ(StateId::Bypass().seqid, 0xffffffffu);
}

TEST(CallStatusTest, NamesAreDistinct) {
  EXPECT_STREQ(CallStatusName(CallStatus::kOk), "ok");
  EXPECT_STRNE(CallStatusName(CallStatus::kTimeout),
               CallStatusName(CallStatus::kDisconnected));
}

}  // namespace upstream
}  // namespace nache
