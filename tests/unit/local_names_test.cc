// The index of names created locally: built from the log (so it says what
// the durable log says), found by name and by key, children in log order,
// and kept right by moves and erases.
#include "writeback/local_names.h"

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace nache {
namespace {

using upstream::FileType;

LogRecord Create(Key dir, const std::string &name, Key key, FileType type) {
  LogRecord r;
  r.op = LogOp::kCreate;
  r.key = dir;
  r.name = name;
  r.key2 = key;
  r.type = type;
  if (type == FileType::kLnk) r.text = "target";
  return r;
}

TEST(LocalNamesTest, LoadedFromTheLogAndKeptRight) {
  testing_util::TempDir dir;
  std::string err;
  std::unique_ptr<Store> store = Store::Open(dir.path() + "/db", &err);
  ASSERT_TRUE(store) << err;
  OpLog log(store.get());
  uint64_t s_dir = log.Append(Create(1, "d", 10, FileType::kDir));
  uint64_t s_f = log.Append(Create(10, "f", 11, FileType::kReg));
  LogRecord w;
  w.op = LogOp::kWrite;  // not a name
  w.key = 11;
  log.Append(w);
  uint64_t s_l = log.Append(Create(10, "l", 12, FileType::kLnk));

  LocalNames n;
  n.Load(&log);
  EXPECT_EQ(n.size(), 3u);
  LocalNames::Entry e;
  ASSERT_TRUE(n.Find(10, "l", &e));
  EXPECT_EQ(e.key, 12u);
  EXPECT_EQ(e.seq, s_l);
  EXPECT_EQ(e.text, "target");
  EXPECT_FALSE(n.Find(1, "f", nullptr));
  EXPECT_TRUE(n.IsLocal(10));
  EXPECT_FALSE(n.IsLocal(1));
  std::vector<LocalNames::Entry> c = n.Children(10);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, "f");
  EXPECT_EQ(c[1].name, "l");
  EXPECT_EQ(n.LastChildSeq(10), s_l);
  EXPECT_EQ(n.LastChildSeq(1), s_dir);
  EXPECT_EQ(n.LastChildSeq(11), 0u);

  // f renamed to g in the root: a later seq, another directory.
  n.Move(11, s_l + 5, 1, "g");
  EXPECT_FALSE(n.Find(10, "f", nullptr));
  ASSERT_TRUE(n.Find(1, "g", &e));
  EXPECT_EQ(e.key, 11u);
  EXPECT_EQ(n.LastChildSeq(1), s_l + 5);
  EXPECT_EQ(n.LastChildSeq(10), s_l);
  EXPECT_EQ(n.Children(10).size(), 1u);
  (void)s_f;

  n.Erase(12);
  EXPECT_FALSE(n.IsLocal(12));
  EXPECT_EQ(n.LastChildSeq(10), 0u);
  EXPECT_TRUE(n.Children(10).empty());
  n.Erase(12);  // twice: nothing
  EXPECT_EQ(n.size(), 2u);
}

}  // namespace
}  // namespace nache
