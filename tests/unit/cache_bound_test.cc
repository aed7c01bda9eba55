// The cache's memory bound (cache.h, "Memory bound"): objects beyond
// max_objects are dropped from memory, least recently used first, and come
// back from the store with their generation, blocks and base; state that
// was only in memory is written before the drop, so a block fetch across
// a drop stores nothing stale; dirty, delegated and busy objects are never
// dropped; the listing hints go with the object; the records of an object
// gone are deleted.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <chrono>
#include <memory>
#include <string>

#include "cache/cache.h"
#include "store/store.h"
#include "temp_dir.h"
#include "util/bytes.h"

namespace nache {
namespace {

using testing_util::TempDir;
using upstream::Attrs;

constexpr uint32_t kBs = 4096;
constexpr uint64_t kBound = 50;

Attrs FileAttrs(uint64_t change, uint64_t size) {
  Attrs a;
  a.mask = upstream::kAttrsObject;
  a.type = upstream::FileType::kReg;
  a.change = change;
  a.size = size;
  a.mode = 0644;
  a.nlink = 1;
  return a;
}

class CacheBoundTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    cache_.reset();
    store_.reset();
    std::string err;
    store_ = Store::Open(dir_.path() + "/db", &err);
    ASSERT_TRUE(store_) << err;
    CacheOptions o;
    o.size_bytes = 1 << 20;
    o.block_size = kBs;
    o.attr_timeout_ms = 60000;
    o.max_objects = kBound;
    cache_.reset(new Cache(store_.get(), o, nullptr));
  }
  // Uses n objects never seen before (keys from 1000 on): every object
  // used before them is then older than these.
  void TouchOthers(uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
      cache_->Validated(next_other_++, FileAttrs(1, 0));
  }
  // Whether key's attrs record is in the store.
  bool HasRecord(Key key) {
    std::string k, v;
    PutBE64(&k, key);
    return store_->db()
        ->Get(rocksdb::ReadOptions(), store_->family(Store::kAttrs), k, &v)
        .ok();
  }
  // Number of block_meta records of key in the store.
  int StoredBlocks(Key key) {
    std::unique_ptr<rocksdb::Iterator> it(store_->db()->NewIterator(
        rocksdb::ReadOptions(), store_->family(Store::kBlockMeta)));
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next())
      if (it->key().size() == 16 && GetBE64(it->key().data()) == key) n++;
    return n;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Cache> cache_;
  Key next_other_ = 1000;
};

TEST_F(CacheBoundTest, ObjectsInMemoryStayWithinTheBound) {
  for (Key k = 1; k <= 10 * kBound; k++) {
    cache_->Validated(k, FileAttrs(k, 0));
    ASSERT_LE(cache_->objects(), kBound) << "after " << k;
  }
  EXPECT_GE(cache_->object_evictions(), 9 * kBound);
  // Dropped from memory, not from the store: the attributes come back
  // (not fresh: validated again before use).
  Attrs a;
  ASSERT_TRUE(cache_->KnownAttrs(1, &a));
  EXPECT_EQ(a.change, 1u);
  EXPECT_FALSE(cache_->FreshAttrs(1, &a));
}

// With nothing configured the bound derives from the cache size (10,000
// objects for 16 MiB).
TEST_F(CacheBoundTest, TheDefaultBoundHoldsWithoutConfiguration) {
  CacheOptions o;
  o.size_bytes = 16 << 20;
  Cache c(store_.get(), o, nullptr);
  for (Key k = 1; k <= 20000; k++) c.Validated(k, FileAttrs(k, 0));
  EXPECT_LE(c.objects(), 10000u);
}

TEST_F(CacheBoundTest, TheLeastRecentlyUsedGoFirst) {
  for (Key k = 1; k <= kBound; k++) cache_->Validated(k, FileAttrs(1, 0));
  Attrs a;
  // Key 1 used again: key 2 is now the oldest.
  ASSERT_TRUE(cache_->FreshAttrs(1, &a));
  TouchOthers(1);
  EXPECT_TRUE(cache_->FreshAttrs(1, &a));   // kept (its validation too)
  EXPECT_FALSE(cache_->FreshAttrs(2, &a));  // dropped: revalidate
}

TEST_F(CacheBoundTest, TheDefaultBoundFollowsTheCacheSize) {
  EXPECT_EQ(DefaultMaxObjects(4ull << 30), 131072u);
  EXPECT_EQ(DefaultMaxObjects(16ull << 20), 10000u);
  EXPECT_EQ(DefaultMaxObjects(1ull << 50), 1000000u);
  CacheOptions o;
  o.size_bytes = 8ull << 30;
  Cache c(store_.get(), o, nullptr);
  EXPECT_EQ(c.max_objects(), 262144u);
}

TEST_F(CacheBoundTest, ADroppedObjectComesBackWithGenerationBlocksAndBase) {
  cache_->Validated(7, FileAttrs(100, 2 * kBs));
  uint64_t gen = cache_->Generation(7);
  ASSERT_TRUE(cache_->PutBlock(7, 0, gen, std::string(kBs, 'a')));
  ASSERT_TRUE(cache_->PutBlock(7, 1, gen, std::string(kBs, 'b')));
  // A rename of ours moved its ctime unseen: the base of its next local
  // change is uncertain.
  cache_->OwnChangeUnseen(7);
  TouchOthers(kBound);
  ASSERT_LE(cache_->objects(), kBound);
  Attrs a;
  ASSERT_FALSE(cache_->FreshAttrs(7, &a)) << "7 should have been dropped";
  // Loaded again: the same generation, so the blocks are still served.
  EXPECT_EQ(cache_->Generation(7), gen);
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(7, 1, &d));
  EXPECT_EQ(d, std::string(kBs, 'b'));
  EXPECT_EQ(cache_->bytes(), 2u * kBs);
  // And its base: a local write makes it dirty on the remote's state as
  // last seen, still uncertain.
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(7, 0, "zz", 2, &need));
  Cache::DirtyBase base;
  ASSERT_TRUE(cache_->GetDirtyBase(7, &base));
  EXPECT_EQ(base.change, 100u);
  EXPECT_EQ(base.size, 2u * kBs);
  EXPECT_TRUE(base.uncertain);
}

TEST_F(CacheBoundTest, AFetchAcrossADropStoresNoStaleBlock) {
  cache_->Validated(7, FileAttrs(100, kBs));
  uint64_t gen = cache_->Generation(7);  // a reader's fetch starts
  // An operation of ours whose reply lacked the change attribute: nothing
  // cached of 7 is trusted any more (known only in memory until now).
  cache_->BeginOwnChange(7);
  cache_->AfterOwnChange(7, false, 0, Attrs());
  TouchOthers(kBound);
  ASSERT_LE(cache_->objects(), kBound);
  // The fetch completes after 7 was dropped and loaded again.
  EXPECT_FALSE(cache_->PutBlock(7, 0, gen, std::string(kBs, 'x')));
  EXPECT_FALSE(cache_->HasBlock(7, 0));
  Attrs a;
  EXPECT_FALSE(cache_->KnownAttrs(7, &a));

  // Validated again: a fetch that started before a change of the remote's
  // and completes across a drop is refused as well...
  cache_->Validated(7, FileAttrs(101, kBs));
  uint64_t gen2 = cache_->Generation(7);
  EXPECT_NE(gen2, gen);
  cache_->Validated(7, FileAttrs(102, kBs));
  TouchOthers(kBound);
  EXPECT_FALSE(cache_->PutBlock(7, 0, gen2, std::string(kBs, 'y')));
  // ... and one with no change in between is cached.
  uint64_t gen3 = cache_->Generation(7);
  TouchOthers(kBound);
  EXPECT_TRUE(cache_->PutBlock(7, 0, gen3, std::string(kBs, 'z')));
  EXPECT_TRUE(cache_->HasBlock(7, 0));
}

TEST_F(CacheBoundTest, ADirectorysChangeFromOurOwnEditSurvivesTheDrop) {
  Attrs d = FileAttrs(10, 4096);
  d.type = upstream::FileType::kDir;
  cache_->Validated(3, d);
  cache_->PutListing(3, 10, {CachedDirent{"a", 4, 1}}, cache_->ListingEpoch(3));
  upstream::ChangeInfo ci;
  ci.atomic = true;
  ci.before = 10;
  ci.after = 11;
  // Our create in it, change attribute not fetched: only in memory.
  cache_->OwnDirChange(3, ci, Attrs(), "", "b", 5);
  TouchOthers(kBound);
  Attrs a;
  ASSERT_TRUE(cache_->KnownAttrs(3, &a));
  EXPECT_EQ(a.change, 11u);
}

TEST_F(CacheBoundTest, DirtyDelegatedAndBusyObjectsAreNeverDropped) {
  cache_->SetLeaseClock(
      [] { return Cache::Clock::now() + std::chrono::hours(1); });
  uint64_t need = 0;
  cache_->Validated(1, FileAttrs(10, 0));
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "dirty", 5, &need));  // dirty
  cache_->Validated(2, FileAttrs(20, 0));
  cache_->SetDelegated(2, true);  // delegated
  cache_->Validated(3, FileAttrs(30, 0));
  cache_->BeginOwnChange(3);  // in flight
  cache_->Validated(4, FileAttrs(40, 0));
  cache_->BeginOwnChange(4);
  cache_->BeginOwnChange(4);
  // One completes with a "before" none of ours explains yet: parked.
  cache_->AfterOwnChange(4, true, 45, FileAttrs(46, 0));
  cache_->Validated(5, FileAttrs(50, 0));  // control
  TouchOthers(10 * kBound);
  EXPECT_LE(cache_->objects(), kBound);
  Attrs a;
  EXPECT_TRUE(cache_->IsDirty(1));
  EXPECT_EQ(cache_->DirtyRanges(1).size(), 1u);
  EXPECT_TRUE(cache_->FreshAttrs(2, &a));
  EXPECT_TRUE(cache_->FreshAttrs(3, &a));
  EXPECT_TRUE(cache_->FreshAttrs(4, &a));
  EXPECT_FALSE(cache_->FreshAttrs(5, &a));
  // Once clean, idle and no longer delegated, they may go.
  cache_->Flushed(1, cache_->DirtyRanges(1), 0, FileAttrs(11, 5));
  cache_->SetDelegated(2, false);
  cache_->AfterOwnChange(3, true, 30, FileAttrs(31, 0));
  cache_->AfterOwnChange(4, true, 40, FileAttrs(45, 0));
  TouchOthers(2 * kBound);
  EXPECT_LE(cache_->objects(), kBound);
  for (Key k : {1, 2, 3, 4}) EXPECT_FALSE(cache_->FreshAttrs(k, &a)) << k;
  // Their state came through: 1's flushed size, 4's newest change.
  ASSERT_TRUE(cache_->KnownAttrs(1, &a));
  EXPECT_EQ(a.size, 5u);
  ASSERT_TRUE(cache_->KnownAttrs(4, &a));
  EXPECT_EQ(a.change, 46u);
}

TEST_F(CacheBoundTest, ListingHintsAreBoundedWithTheObjects) {
  for (Key d = 1; d <= 10 * kBound; d++) {
    cache_->SetUnlistable(d);
    cache_->SetCookieVerf(d, "verifier");
    ASSERT_LE(cache_->objects(), kBound);
  }
  Key last = 10 * kBound;
  EXPECT_TRUE(cache_->Unlistable(last));
  EXPECT_EQ(cache_->CookieVerf(last), "verifier");
  // The oldest went with their objects: learnt again when needed.
  EXPECT_FALSE(cache_->Unlistable(1));
  EXPECT_EQ(cache_->CookieVerf(1), std::string(8, '\0'));
}

TEST_F(CacheBoundTest, TheRecordsOfAnObjectGoneAreDeleted) {
  cache_->Validated(7, FileAttrs(100, 2 * kBs));
  uint64_t gen = cache_->Generation(7);
  ASSERT_TRUE(cache_->PutBlock(7, 0, gen, std::string(kBs, 'a')));
  ASSERT_TRUE(cache_->PutBlock(7, 1, gen, std::string(kBs, 'b')));
  TouchOthers(kBound);  // gone from memory too: found in the store
  ASSERT_TRUE(HasRecord(7));
  ASSERT_EQ(StoredBlocks(7), 2);
  EXPECT_TRUE(cache_->ForgetGone(7));
  EXPECT_FALSE(HasRecord(7));
  EXPECT_EQ(StoredBlocks(7), 0);
  EXPECT_EQ(cache_->bytes(), 0u);
  EXPECT_EQ(cache_->blocks(), 0u);
  // A dirty one stays: its data is ours to save.
  uint64_t need = 0;
  cache_->Validated(8, FileAttrs(10, 0));
  ASSERT_TRUE(cache_->LocalWrite(8, 0, "mine", 4, &need));
  EXPECT_FALSE(cache_->ForgetGone(8));
  EXPECT_TRUE(cache_->IsDirty(8));
  EXPECT_TRUE(HasRecord(8));
}

TEST_F(CacheBoundTest, ARestartFindsTheBlocksOfDroppedObjects) {
  cache_->Validated(7, FileAttrs(100, kBs));
  ASSERT_TRUE(
      cache_->PutBlock(7, 0, cache_->Generation(7), std::string(kBs, 'a')));
  TouchOthers(kBound);
  Reopen();
  EXPECT_LE(cache_->objects(), kBound);
  EXPECT_TRUE(cache_->HasBlock(7, 0));
  EXPECT_EQ(cache_->bytes(), uint64_t(kBs));
}

}  // namespace
}  // namespace nache
