// The libnfs 4.0.0 compatibility send path (upstream/libnfs_compat.h): the
// private-layout self-check, and that a 1 MiB WRITE compound encodes, which
// libnfs' own rpc_nfs4_compound_async cannot do in 4.0.0.
#include "upstream/libnfs_compat.h"

#include <gtest/gtest.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>

#include <string>

#include "upstream/compound.h"

namespace nache {
namespace upstream {
namespace {

constexpr uint32_t kMiB = 1 << 20;

class CompatTest : public ::testing::Test {
 protected:
  void SetUp() override { rpc_ = rpc_init_context(); }
  void TearDown() override {
    if (rpc_ != nullptr) rpc_destroy_context(rpc_);
  }
  struct rpc_context *rpc_ = nullptr;
};

Compound WriteCompound(const std::string &data) {
  Compound c;
  c.SetTag("write1m")
      .Putfh(std::string(28, 'h'))
      .Write(StateId(), 0, StableHow::kFileSync, data.data(),
             uint32_t(data.size()))
      .Getattr(kAttrSize);
  return c;
}

TEST_F(CompatTest, SelfCheckPasses) {
  char why[256];
  EXPECT_EQ(nache_compat_selfcheck(why, sizeof(why)), NACHE_COMPAT_OK) << why;
  // Cached: the same answer again.
  EXPECT_EQ(nache_compat_selfcheck(nullptr, 0), NACHE_COMPAT_OK);
}

TEST_F(CompatTest, OneMibWriteEncodes) {
  ASSERT_NE(rpc_, nullptr);
  std::string data(kMiB, 'a');
  Compound c = WriteCompound(data);
  size_t header = 0, total = 0;
  ASSERT_EQ(nache_compat_encode_size(rpc_, c.Args(), c.EncodedSizeHint(),
                                     &header, &total),
            NACHE_COMPAT_OK);
  EXPECT_GT(header, 24u);
  EXPECT_GT(total, size_t(kMiB));
  // The hint bounds the arguments (4 KiB more is reserved for the header).
  EXPECT_LE(total - 4 - header, c.EncodedSizeHint());
}

TEST_F(CompatTest, TooSmallHintFailsCleanly) {
  std::string data(64 * 1024, 'b');
  Compound c = WriteCompound(data);
  size_t header = 0, total = 0;
  EXPECT_EQ(nache_compat_encode_size(rpc_, c.Args(), 0, &header, &total),
            NACHE_COMPAT_EENCODE);
}

TEST_F(CompatTest, StockLibnfsCannotEncodeIt) {
  // Documents why libnfs_compat exists: 4.0.0's own entry point has a fixed
  // 4 KiB encode buffer. If this starts passing, libnfs was upgraded and the
  // compat path can go.
  std::string data(kMiB, 'c');
  Compound c = WriteCompound(data);
  int cancelled = 0;
  int rc = rpc_nfs4_compound_async(
      rpc_,
      [](struct rpc_context *, int, void *, void *p) { ++*static_cast<int *>(p); },
      c.Args(), &cancelled);
  EXPECT_NE(rc, 0);
}

TEST_F(CompatTest, QueuedCompoundIsReleasedWithTheContext) {
  std::string data(kMiB, 'd');
  Compound c = WriteCompound(data);
  int calls = 0;
  ASSERT_EQ(nache_compat_queue_compound(
                rpc_,
                [](struct rpc_context *, int status, void *, void *p) {
                  EXPECT_NE(status, RPC_STATUS_SUCCESS);
                  ++*static_cast<int *>(p);
                },
                &calls, c.Args(), c.EncodedSizeHint()),
            NACHE_COMPAT_OK);
  rpc_destroy_context(rpc_);
  rpc_ = nullptr;
  // libnfs cancels what it still holds, calling back at most once.
  EXPECT_LE(calls, 1);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
