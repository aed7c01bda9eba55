// Exclusive-create verifiers kept in a file's times: the stamp is found
// again by the same verifier only, and not on a file whose times were set
// since (the client's SETATTR after the create) or are unknown.
#include "core/create_verifier.h"

#include <gtest/gtest.h>

namespace nache {
namespace {

const uint8_t kVerf[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x08};
const uint8_t kOther[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x09};
// Differs from kVerf only in the top bit of each half: not kept.
const uint8_t kTopBits[8] = {0x11, 0x22, 0x33, 0xc4, 0x55, 0x66, 0x77, 0x88};

TEST(CreateVerifierTest, StampedTimesCarryTheSameVerifierOnly) {
  upstream::Attrs a;
  a.mask = upstream::kAttrMode;
  a.mode = 0600;
  StampCreateVerifier(kVerf, &a);
  EXPECT_EQ(a.mask & (upstream::kAttrAtime | upstream::kAttrMtime),
            upstream::kAttrAtime | upstream::kAttrMtime);
  EXPECT_EQ(a.mode, 0600u);  // other attributes untouched
  EXPECT_EQ(a.atime.nsec, 0u);
  EXPECT_EQ(a.mtime.nsec, 0u);
  EXPECT_FALSE(a.atime_server || a.mtime_server);
  EXPECT_TRUE(CarriesCreateVerifier(a, kVerf));
  EXPECT_FALSE(CarriesCreateVerifier(a, kOther));
}

TEST(CreateVerifierTest, TimesFitSignedThirtyTwoBits) {
  upstream::Attrs a;
  StampCreateVerifier(kTopBits, &a);
  EXPECT_LT(a.atime.sec, int64_t(1) << 31);
  EXPECT_LT(a.mtime.sec, int64_t(1) << 31);
  EXPECT_TRUE(CarriesCreateVerifier(a, kTopBits));
}

TEST(CreateVerifierTest, ChangedOrUnknownTimesCarryNone) {
  upstream::Attrs a;
  StampCreateVerifier(kVerf, &a);
  upstream::Attrs set_later = a;
  set_later.mtime.sec += 1;  // the client's SETATTR after the create
  EXPECT_FALSE(CarriesCreateVerifier(set_later, kVerf));
  upstream::Attrs unknown = a;
  unknown.mask &= ~upstream::kAttrAtime;
  EXPECT_FALSE(CarriesCreateVerifier(unknown, kVerf));
}

}  // namespace
}  // namespace nache
