// Handle map: keys are stable, persistent across reopen, and never reused.
#include "handles/handle_map.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "store/store.h"
#include "temp_dir.h"

namespace nache {
namespace {

using testing_util::TempDir;

TEST(HandleMapTest, InternIsIdempotentAndRecordsName) {
  TempDir d;
  std::string err;
  auto store = Store::Open(d.path() + "/db", &err);
  ASSERT_TRUE(store) << err;
  HandleMap m(store.get());
  Key root = m.Intern("root-fh", kNoKey, "");
  Key a = m.Intern("fh-a", root, "a");
  EXPECT_NE(root, kNoKey);
  EXPECT_NE(a, root);
  EXPECT_EQ(m.Intern("fh-a", root, "a"), a);
  HandleRecord r;
  ASSERT_TRUE(m.Get(a, &r));
  EXPECT_EQ(r.fh, "fh-a");
  EXPECT_EQ(r.parent, root);
  EXPECT_EQ(r.name, "a");
  // Seen again under another name (rename): the record follows.
  EXPECT_EQ(m.Intern("fh-a", root, "b"), a);
  ASSERT_TRUE(m.Get(a, &r));
  EXPECT_EQ(r.name, "b");
  EXPECT_EQ(m.Find("fh-a"), a);
  EXPECT_EQ(m.Find("nope"), kNoKey);
  EXPECT_FALSE(m.Get(a + 1000, &r));
}

TEST(HandleMapTest, KeysSurviveReopenAndAreNeverReused) {
  TempDir d;
  std::string err;
  Key a, b;
  uint64_t inc;
  {
    auto store = Store::Open(d.path() + "/db", &err);
    ASSERT_TRUE(store) << err;
    inc = store->incarnation();
    HandleMap m(store.get());
    a = m.Intern(std::string(128, 'x'), kNoKey, "");  // a maximal handle
    b = m.Intern("fh-b", a, "b");
  }
  auto store = Store::Open(d.path() + "/db", &err);
  ASSERT_TRUE(store) << err;
  EXPECT_EQ(store->incarnation(), inc);
  HandleMap m(store.get());
  HandleRecord r;
  ASSERT_TRUE(m.Get(a, &r));
  EXPECT_EQ(r.fh, std::string(128, 'x'));
  ASSERT_TRUE(m.Get(b, &r));
  EXPECT_EQ(r.fh, "fh-b");
  EXPECT_EQ(m.Find("fh-b"), b);
  Key c = m.Intern("fh-c", a, "c");
  EXPECT_GT(c, b);  // keys of the previous run are not handed out again
}

TEST(HandleMapTest, RecordEncodingRoundTripsAndRejectsGarbage) {
  HandleRecord in{std::string("\0\1\2fh", 5), 42, "name with spaces"};
  HandleRecord out;
  ASSERT_TRUE(HandleMap::DecodeRecord(HandleMap::EncodeRecord(in), &out));
  EXPECT_EQ(out.fh, in.fh);
  EXPECT_EQ(out.parent, 42u);
  EXPECT_EQ(out.name, in.name);
  EXPECT_FALSE(HandleMap::DecodeRecord("", &out));
  EXPECT_FALSE(HandleMap::DecodeRecord(std::string("\x09\x05"), &out));
  EXPECT_FALSE(HandleMap::DecodeRecord(std::string("\x01\xff"
                                                   "ab"),
                                       &out));
}

// Corrupt, foreign and in-use stores: store_test.cc.

TEST(StoreTest, UncreatableDirectoryIsAnError) {
  std::string err;
  auto store = Store::Open("/proc/nache-cannot-exist/db", &err);
  EXPECT_FALSE(store);
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
}

}  // namespace
}  // namespace nache
