// WriteBack through its narrow interface (a real store, a fake cache):
// who each dirty file's flush writes as, across a restart, and the pruning
// of writers of files no longer dirty; the flush open-owners; the names of
// conflict and lost-file copies.
#include "writeback/writeback.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "temp_dir.h"
#include "writeback/oplog.h"

namespace nache {
namespace {

using upstream::Creds;

class FakeCache : public WriteBack::Host {
 public:
  bool IsDirty(Key key) override { return dirty.count(key) != 0; }
  bool KnownAttrs(Key key, upstream::Attrs *attrs) override {
    if (key != kOwned) return false;
    attrs->uid = 1000;
    attrs->gid = 100;
    return true;
  }
  static constexpr Key kOwned = 42;
  std::set<Key> dirty;
};

Creds User(uint32_t uid, size_t groups = 0) {
  Creds cr;
  cr.uid = uid;
  cr.gid = uid;
  for (size_t i = 0; i < groups; i++) cr.groups.push_back(uint32_t(i));
  return cr;
}

class WriteBackTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    wb_.reset();
    store_.reset();
    std::string err;
    store_ = Store::Open(dir_.path() + "/db", &err);
    ASSERT_TRUE(store_) << err;
    wb_.reset(new WriteBack(store_.get(), &cache_));
  }

  testing_util::TempDir dir_;
  FakeCache cache_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<WriteBack> wb_;
};

TEST_F(WriteBackTest, FlushWritesAsTheLastLocalWriter) {
  wb_->NoteWriter(7, User(1001));
  wb_->NoteWriter(7, User(1002));
  EXPECT_EQ(wb_->FlushCreds(7).uid, 1002u);
}

TEST_F(WriteBackTest, FileNoOneWroteHereIsFlushedAsItsOwner) {
  Creds cr = wb_->FlushCreds(FakeCache::kOwned);
  EXPECT_EQ(cr.uid, 1000u);
  EXPECT_EQ(cr.gid, 100u);
  EXPECT_EQ(wb_->FlushCreds(8).uid, Creds().uid) << "no attributes known";
}

TEST_F(WriteBackTest, WriterSurvivesARestartWithItsGroups) {
  wb_->NoteWriter(7, User(1001, 3));
  Reopen();
  Creds cr = wb_->FlushCreds(7);
  EXPECT_EQ(cr.uid, 1001u);
  EXPECT_EQ(cr.groups.size(), 3u);
}

TEST_F(WriteBackTest, GroupsAreCutToWhatTheLogKeeps) {
  wb_->NoteWriter(7, User(1001, LogRecord::kMaxGroups + 5));
  EXPECT_EQ(wb_->FlushCreds(7).groups.size(), size_t(LogRecord::kMaxGroups));
}

TEST_F(WriteBackTest, WritersOfCleanFilesArePrunedBeyondTheBound) {
  cache_.dirty.insert(1);
  for (Key k = 1; k <= WriteBack::kMaxWriters + 1; k++)
    wb_->NoteWriter(k, User(1001));
  Reopen();  // what the store kept
  EXPECT_EQ(wb_->FlushCreds(1).uid, 1001u) << "dirty: kept";
  EXPECT_EQ(wb_->FlushCreds(2).uid, Creds().uid) << "clean: forgotten";
}

TEST_F(WriteBackTest, EachFileHasOneFlushOwnerAndTheyAreSpread) {
  std::set<size_t> used;
  for (Key k = 0; k < 4 * WriteBack::kFlushOwners; k++) {
    OwnerSlot *o = wb_->FlushOwner(k);
    EXPECT_EQ(o, wb_->FlushOwner(k)) << "the same for the same file";
    size_t i = wb_->FlushOwnerIndex(o);
    EXPECT_LT(i, WriteBack::kFlushOwners);
    used.insert(i);
  }
  EXPECT_EQ(used.size(), WriteBack::kFlushOwners);
}

TEST_F(WriteBackTest, CopyNamesCarryKindStampAndNumber) {
  EXPECT_EQ(WriteBack::ConflictName("a.txt", "20261122T210501Z", 0),
            "a.txt.nache-conflict-20261122T210501Z");
  EXPECT_EQ(WriteBack::CopyName("a.txt", "lost", "20261122T210501Z", 2),
            "a.txt.nache-lost-20261122T210501Z-2");
  const std::string stamp = WriteBack::UtcStamp();
  ASSERT_EQ(stamp.size(), 16u);
  EXPECT_EQ(stamp[8], 'T');
  EXPECT_EQ(stamp[15], 'Z');
  EXPECT_EQ(stamp.find_first_not_of("0123456789TZ"), std::string::npos);
}

}  // namespace
}  // namespace nache
