// The cache: validation by change attribute, own-write application, the
// size bound with LRU eviction that spares dirty blocks, persistence across
// reopen, and the block reader's coalescing and readahead.
#include "cache/cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/reader.h"
#include "file_attrs.h"
#include "store/store.h"
#include "temp_dir.h"

namespace nache {
namespace {

using upstream::Attrs;

using testing_util::FileAttrs;
using testing_util::TempDir;

constexpr uint32_t kBs = 4096;

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(1 << 20); }
  void Reopen(uint64_t size) {
    cache_.reset();
    store_.reset();
    std::string err;
    store_ = Store::Open(dir_.path() + "/db", &err);
    ASSERT_TRUE(store_) << err;
    CacheOptions o;
    o.size_bytes = size;
    o.block_size = kBs;
    o.attr_timeout_ms = 60000;
    cache_.reset(new Cache(store_.get(), o, nullptr));
  }
  // Caches n full blocks of file key (size n*kBs, change) filled with c.
  void Fill(Key key, uint64_t change, int n, char c) {
    cache_->Validated(key, FileAttrs(change, uint64_t(n) * kBs));
    uint64_t gen = cache_->Generation(key);
    for (int i = 0; i < n; i++)
      ASSERT_TRUE(cache_->PutBlock(key, i, gen, std::string(kBs, c)));
  }

  // Blocks 0, 1, ... of key are cached and hold want's.
  void ExpectBlocks(Key key, const std::vector<std::string> &want) {
    for (size_t i = 0; i < want.size(); i++) {
      std::string d;
      ASSERT_TRUE(cache_->GetBlock(key, i, &d)) << "block " << i;
      EXPECT_EQ(d, want[i]) << "block " << i;
    }
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Cache> cache_;
};

TEST_F(CacheTest, BlocksAreServedWhileTheChangeAttributeHolds) {
  Fill(7, 100, 3, 'a');
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(7, 1, &d));
  EXPECT_EQ(d, std::string(kBs, 'a'));
  cache_->Validated(7, FileAttrs(100, 3 * kBs));  // same change: kept
  EXPECT_TRUE(cache_->GetBlock(7, 2, &d));
  cache_->Validated(7, FileAttrs(101, 3 * kBs));  // moved: all dropped
  EXPECT_FALSE(cache_->GetBlock(7, 0, &d));
  EXPECT_FALSE(cache_->GetBlock(7, 1, &d));
  EXPECT_EQ(cache_->bytes(), 0u);
}

TEST_F(CacheTest, ABlockFetchedAcrossAChangeIsNotStored) {
  Fill(7, 100, 1, 'a');
  uint64_t gen = cache_->Generation(7);
  cache_->Validated(7, FileAttrs(200, 2 * kBs));  // changed during a fetch
  EXPECT_FALSE(cache_->PutBlock(7, 1, gen, std::string(kBs, 'x')));
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(7, 1, &d));
}

TEST_F(CacheTest, ShortBlockServesOnlyWhileItEndsTheFile) {
  cache_->Validated(3, FileAttrs(1, kBs + 10));
  uint64_t gen = cache_->Generation(3);
  ASSERT_TRUE(cache_->PutBlock(3, 1, gen, std::string(10, 'z')));
  std::string d;
  EXPECT_TRUE(cache_->GetBlock(3, 1, &d));
  EXPECT_EQ(d.size(), 10u);
}

TEST_F(CacheTest, OwnWriteUpdatesCachedBlocksOthersInvalidate) {
  Fill(9, 10, 2, 'a');
  // Our write, nothing in between: applied, a read-back hits.
  std::string w(100, 'W');
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, 2 * kBs), 50, w.data(),
                         w.size());
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d.substr(0, 50), std::string(50, 'a'));
  EXPECT_EQ(d.substr(50, 100), w);
  EXPECT_EQ(d.substr(150), std::string(kBs - 150, 'a'));
  // Appending past the end extends the cached last block.
  std::string tail(kBs, 'T');
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, 3 * kBs), 2 * kBs,
                         tail.data(), tail.size());
  ASSERT_TRUE(cache_->GetBlock(9, 2, &d));
  EXPECT_EQ(d, tail);
  // A write whose "before" change is not ours to expect: someone else
  // wrote meanwhile; nothing cached survives.
  cache_->AfterOwnChange(9, true, 99, FileAttrs(13, 3 * kBs), 0, w.data(),
                         w.size());
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d));
  EXPECT_FALSE(cache_->GetBlock(9, 1, &d));
}

TEST_F(CacheTest, ParallelOwnWritesCompletingOutOfOrderStayCached) {
  cache_->Validated(9, FileAttrs(10, 0));
  std::string a(kBs, 'A'), b(kBs, 'B');
  // Write A (10 -> 11) and write B (11 -> 12) were sent together; B's
  // reply is processed first.
  cache_->BeginOwnChange(9);
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, 2 * kBs), kBs, b.data(),
                         b.size());
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, kBs), 0, a.data(),
                         a.size());
  std::string d;
  Attrs now;
  ASSERT_TRUE(cache_->FreshAttrs(9, &now));
  EXPECT_EQ(now.change, 12u);
  EXPECT_EQ(now.size, 2u * kBs);
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d, a);
  ASSERT_TRUE(cache_->GetBlock(9, 1, &d));
  EXPECT_EQ(d, b);
}

// Two writes of ours sent together both read the change (10) before
// either wrote: the second's "before" is the base the first moved on
// from, ours, not someone else's. (Seen as a re-read of a whole file just
// written, once in 14 runs of cache_test's read_after_write_is_a_hit.)
TEST_F(CacheTest, ParallelOwnWritesFromTheSameBaseStayCached) {
  cache_->Validated(9, FileAttrs(10, 0));
  std::string a(kBs, 'A'), b(kBs, 'B');
  cache_->BeginOwnChange(9);
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, kBs), 0, a.data(),
                         a.size());
  cache_->AfterOwnChange(9, true, 10, FileAttrs(12, 2 * kBs), kBs, b.data(),
                         b.size());
  std::string d;
  Attrs now;
  ASSERT_TRUE(cache_->FreshAttrs(9, &now));
  EXPECT_EQ(now.change, 12u);
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d, a);
  ASSERT_TRUE(cache_->GetBlock(9, 1, &d));
  EXPECT_EQ(d, b);
}

// Two writes of ours interleave at the server so that one's "before" was
// never seen: X reads 10 and writes (11), Y reads 11 and writes (12), X's
// closing GETATTR runs after Y's write. X says 10 -> 12, Y 11 -> 12; 11
// is nobody's "after". Y ran inside X's span: ours, in either reply order.
// (Seen as a re-read of a whole file just written, once in 8 runs of
// cache_test's read_after_write_is_a_hit.)
TEST_F(CacheTest, OwnWriteInsideAnotherOwnWritesSpanStaysCached) {
  for (bool x_first : {true, false}) {
    SCOPED_TRACE(x_first ? "X's reply first" : "Y's reply first");
    const Key key = x_first ? 21 : 22;
    Fill(key, 10, 2, 'a');
    std::string x(kBs, 'X'), y(kBs, 'Y');
    cache_->BeginOwnChange(key);
    cache_->BeginOwnChange(key);
    auto reply_x = [&] {
      cache_->AfterOwnChange(key, true, 10, FileAttrs(12, 2 * kBs), 0, x.data(),
                             x.size());
    };
    auto reply_y = [&] {
      cache_->AfterOwnChange(key, true, 11, FileAttrs(12, 2 * kBs), kBs,
                             y.data(), y.size());
    };
    if (x_first) {
      reply_x();
      reply_y();
    } else {
      reply_y();
      reply_x();
    }
    std::string d;
    Attrs now;
    ASSERT_TRUE(cache_->FreshAttrs(key, &now));
    EXPECT_EQ(now.change, 12u);
    ASSERT_TRUE(cache_->GetBlock(key, 0, &d));
    EXPECT_EQ(d, x);
    ASSERT_TRUE(cache_->GetBlock(key, 1, &d));
    EXPECT_EQ(d, y);
  }
}

// Four writes of ours at once (seen in read_after_write_is_a_hit, replies
// in this order): A 3 -> 5, B 0 -> 3, C 2 -> 4, D 4 -> 5. C's "before" (2)
// is nobody's "before" or "after", but lies inside B's span (0, 3]; D's
// "before" is C's "after". All four are ours.
TEST_F(CacheTest, ChainOfInterleavedOwnWritesStaysCached) {
  Fill(9, 100, 4, 'a');
  std::string w[4] = {std::string(kBs, 'A'), std::string(kBs, 'B'),
                      std::string(kBs, 'C'), std::string(kBs, 'D')};
  for (int i = 0; i < 4; i++) cache_->BeginOwnChange(9);
  const uint64_t pre[4] = {103, 100, 102, 104}, post[4] = {105, 103, 104, 105};
  for (int i = 0; i < 4; i++)
    cache_->AfterOwnChange(9, true, pre[i], FileAttrs(post[i], 4 * kBs),
                           i * kBs, w[i].data(), w[i].size());
  Attrs now;
  ASSERT_TRUE(cache_->FreshAttrs(9, &now));
  EXPECT_EQ(now.change, 105u);
  for (int i = 0; i < 4; i++) {
    std::string d;
    ASSERT_TRUE(cache_->GetBlock(9, i, &d)) << "block " << i;
    EXPECT_EQ(d, w[i]);
  }
}

// A "before" inside one of our spans counts as ours only while the
// remote's change attributes grow: once one of ours saw it go down, an
// unknown "before" is someone else's again.
TEST_F(CacheTest, ASpanProvesNothingOnceChangesGoDown) {
  Fill(9, 10, 2, 'a');
  std::string w(kBs, 'W');
  for (int i = 0; i < 3; i++) cache_->BeginOwnChange(9);  // all at once
  cache_->AfterOwnChange(9, true, 10, FileAttrs(20, 2 * kBs), 0, w.data(),
                         w.size());
  // The remote's change goes down across one of ours (20 -> 15).
  cache_->AfterOwnChange(9, true, 20, FileAttrs(15, 2 * kBs), 0, w.data(),
                         w.size());
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(9, 1, &d));
  // 17 lies inside (10, 20] but proves nothing now.
  cache_->AfterOwnChange(9, true, 17, FileAttrs(30, 2 * kBs), 0, w.data(),
                         w.size());
  EXPECT_FALSE(cache_->GetBlock(9, 1, &d));
}

// A span vouches only for operations of ours that ran alongside it: a
// later one, alone, whose "before" lies inside an old span found someone
// else's change.
TEST_F(CacheTest, AnEarlierSpanProvesNothingLater) {
  Fill(9, 10, 2, 'a');
  std::string w(kBs, 'W');
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 10, FileAttrs(20, 2 * kBs), 0, w.data(),
                         w.size());
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(9, 1, &d));
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 15, FileAttrs(30, 2 * kBs), 0, w.data(),
                         w.size());
  EXPECT_FALSE(cache_->GetBlock(9, 1, &d));
}

// A write of ours read its "before" (1000) and was then held at the server
// while 100 others of ours went through one after another (a stream of
// small WRITEs that the server takes one at a time: seen against knfsd
// with 16 in flight); its reply comes last. Its "before" is where the
// others started: ours, however many changes ago.
TEST_F(CacheTest, AStragglerAmongManyOwnWritesStaysCached) {
  Fill(9, 1000, 2, 'a');
  const int n = 100;
  std::string w(kBs, 'W'), s(kBs, 'S');
  for (int i = 0; i <= n; i++) cache_->BeginOwnChange(9);
  for (int i = 0; i < n; i++)
    cache_->AfterOwnChange(9, true, 1000 + i, FileAttrs(1001 + i, 2 * kBs), 0,
                           w.data(), w.size());
  cache_->AfterOwnChange(9, true, 1000, FileAttrs(1001 + n, 2 * kBs), kBs,
                         s.data(), s.size());
  ExpectBlocks(9, {w, s});
  Attrs now;
  ASSERT_TRUE(cache_->FreshAttrs(9, &now));
  EXPECT_EQ(now.change, uint64_t(1001 + n));
}

// A GETATTR (a client's, or an OPEN's) runs at the remote between two
// writes of ours, X and Y, and its reply is read before either write's:
// the change it saw (11) is where X left the file, or one X passed through
// (X: 10 -> 12, the remote's change moving twice within it), not someone
// else's. Nothing cached is dropped, and the attributes stay the newest of
// ours.
TEST_F(CacheTest, AGetattrCrossingOwnWritesDropsNothing) {
  struct Case {
    uint64_t x_post, y_pre, y_post;
  };
  for (const Case &c : {Case{11, 11, 12}, Case{12, 12, 13}}) {
    SCOPED_TRACE("X 10 -> " + std::to_string(c.x_post));
    const Key key = 30 + c.x_post;
    Fill(key, 10, 2, 'a');
    std::string x(kBs, 'X'), y(kBs, 'Y');
    cache_->BeginOwnChange(key);
    cache_->BeginOwnChange(key);
    cache_->Validated(key, FileAttrs(11, 2 * kBs));
    cache_->AfterOwnChange(key, true, 10, FileAttrs(c.x_post, 2 * kBs), 0,
                           x.data(), x.size());
    cache_->AfterOwnChange(key, true, c.y_pre, FileAttrs(c.y_post, 2 * kBs),
                           kBs, y.data(), y.size());
    ExpectBlocks(key, {x, y});
    Attrs now;
    ASSERT_TRUE(cache_->FreshAttrs(key, &now));
    EXPECT_EQ(now.change, c.y_post);
  }
}

// A GETATTR's reply overtaken by our write's: it shows the state our
// write moved on from (or one our writes passed through), which is no news.
TEST_F(CacheTest, AGetattrOvertakenByOurWriteDropsNothing) {
  Fill(9, 10, 2, 'a');
  std::string x(kBs, 'X'), y(kBs, 'Y');
  cache_->BeginOwnChange(9);
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 10, FileAttrs(12, 2 * kBs), 0, x.data(),
                         x.size());
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, 2 * kBs), kBs, y.data(),
                         y.size());
  for (uint64_t seen : {10, 11}) {
    SCOPED_TRACE("saw " + std::to_string(seen));
    cache_->Validated(9, FileAttrs(seen, 2 * kBs));
    ExpectBlocks(9, {x, y});
    Attrs now;
    ASSERT_TRUE(cache_->KnownAttrs(9, &now));
    EXPECT_EQ(now.change, 12u);
  }
}

// A change that none of our writes explains, seen by a GETATTR while they
// were in flight, is someone else's: once they are all back, the data goes
// and the attributes are the foreign ones.
TEST_F(CacheTest, AForeignChangeSeenDuringOwnWritesDrops) {
  Fill(9, 10, 2, 'a');
  std::string x(kBs, 'X');
  cache_->BeginOwnChange(9);
  cache_->Validated(9, FileAttrs(50, 2 * kBs));
  std::string d;
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, 2 * kBs), 0, x.data(),
                         x.size());
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d));
  EXPECT_FALSE(cache_->GetBlock(9, 1, &d));
  Attrs now;
  ASSERT_TRUE(cache_->KnownAttrs(9, &now));
  EXPECT_EQ(now.change, 50u);
}

// The own-change chaining against a simulated server, in many random
// interleavings. K writes of ours (one block each, none overlapping: write-
// behind never has overlapping writes in flight) each run as BeginOwnChange,
// the server's GETATTR before (P), WRITE (W), GETATTR after (Q), and the
// reply's AfterOwnChange; clients' GETATTRs (G) run at the server and their
// replies reach Validated later (some after all of ours are back); and at
// most one foreign write (F) moves the change attribute. The server's
// change attribute grows, by one or by a clock tick, or not at all on a
// WRITE in the same tick (a ctime-based one). Without F, every block
// written stays cached and the attributes end at the server's. With F
// outside every write's [P, Q] (the window the cache takes as its own,
// README "Writes") and seen afterwards (by a P or a G), the block the
// foreign write changed must not be served.
TEST_F(CacheTest, OwnWritesStayCachedInAnyInterleaving) {
  enum Kind { kBegin, kPre, kWrite, kPost, kAfter, kGet, kSeen, kForeign };
  struct Event {
    Kind kind;
    int who;
  };
  const uint32_t kSeeds = 2000;
  uint32_t detections_checked = 0;
  for (uint32_t seed = 0; seed < kSeeds; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
    const Key key = 1000 + seed;
    const int k = 2 + pick(40), gets = pick(12);
    const bool foreign = pick(2) == 1;
    const uint64_t size = uint64_t(k + 1) * kBs;  // block k: foreign only
    uint64_t change = 1000;
    Fill(key, change, k + 1, 'a');
    // Each write's, GETATTR's and the foreign write's events in order;
    // merged at random.
    std::vector<std::vector<Event>> chains;
    for (int i = 0; i < k; i++)
      chains.push_back(
          {{kBegin, i}, {kPre, i}, {kWrite, i}, {kPost, i}, {kAfter, i}});
    // Half the GETATTRs' replies are read only after everything else.
    std::vector<int> late;
    for (int g = 0; g < gets; g++) {
      if (pick(2) == 0) {
        chains.push_back({{kGet, g}, {kSeen, g}});
      } else {
        chains.push_back({{kGet, g}});
        late.push_back(g);
      }
    }
    if (foreign) chains.push_back({{kForeign, 0}});
    std::vector<size_t> next(chains.size(), 0);
    std::vector<uint64_t> pre(k), post(k), got(gets);
    std::vector<int> pre_at(k), post_at(k);  // server step of P and Q
    int step = 0, foreign_at = -1, last_look = -1;
    std::vector<std::string> data(k);
    for (int i = 0; i < k; i++) data[i] = std::string(kBs, char('A' + i % 26));
    for (size_t left = chains.size(); left > 0;) {
      size_t c = size_t(pick(int(chains.size())));
      if (next[c] == chains[c].size()) continue;
      const Event e = chains[c][next[c]++];
      if (next[c] == chains[c].size()) left--;
      step++;
      switch (e.kind) {
        case kBegin: cache_->BeginOwnChange(key); break;
        case kPre:
          pre[e.who] = change;
          pre_at[e.who] = step;
          last_look = step;
          break;
        case kWrite:
          change += pick(3) == 0 ? 0 : (pick(4) == 0 ? 1000 : 1);
          break;
        case kPost:
          post[e.who] = change;
          post_at[e.who] = step;
          break;
        case kAfter:
          cache_->AfterOwnChange(
              key, true, pre[e.who], FileAttrs(post[e.who], size),
              uint64_t(e.who) * kBs, data[e.who].data(), data[e.who].size());
          break;
        case kGet:
          got[e.who] = change;
          last_look = step;
          break;
        case kSeen: cache_->Validated(key, FileAttrs(got[e.who], size)); break;
        case kForeign:
          change += 1 + uint64_t(pick(2)) * 1000;
          foreign_at = step;
          break;
      }
    }
    for (int g : late) cache_->Validated(key, FileAttrs(got[g], size));
    std::string d;
    if (!foreign) {
      for (int i = 0; i < k; i++) {
        ASSERT_TRUE(cache_->GetBlock(key, uint64_t(i), &d)) << "block " << i;
        ASSERT_EQ(d, data[i]) << "block " << i;
      }
      Attrs now;
      ASSERT_TRUE(cache_->KnownAttrs(key, &now));
      EXPECT_EQ(now.change, change);
      continue;
    }
    bool inside = false;
    for (int i = 0; i < k; i++)
      inside |= pre_at[i] < foreign_at && foreign_at < post_at[i];
    if (!inside && last_look > foreign_at) {
      detections_checked++;
      EXPECT_FALSE(cache_->GetBlock(key, uint64_t(k), &d))
          << "a foreign change outside our writes was missed";
    }
  }
  // Not vacuous: many interleavings put the foreign write where it must
  // be seen.
  EXPECT_GT(detections_checked, kSeeds / 20);
}

TEST_F(CacheTest, ParkedCompletionWithAForeignBeforeInvalidates) {
  Fill(9, 10, 1, 'a');
  std::string w(kBs, 'W');
  cache_->BeginOwnChange(9);
  cache_->BeginOwnChange(9);
  // "Before" 50 is nobody's of ours: parked while the other is in flight,
  // then judged foreign once it completes.
  cache_->AfterOwnChange(9, true, 50, FileAttrs(51, kBs), 0, w.data(),
                         w.size());
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, kBs), 0, w.data(),
                         w.size());
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d));
  Attrs now;
  ASSERT_TRUE(cache_->FreshAttrs(9, &now));
  EXPECT_EQ(now.change, 51u);
}

TEST_F(CacheTest, PartialWriteOfAnUncachedBlockIsNotCached) {
  cache_->Validated(4, FileAttrs(1, 2 * kBs));
  std::string w(10, 'q');
  cache_->AfterOwnChange(4, true, 1, FileAttrs(2, 2 * kBs), 5, w.data(),
                         w.size());
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(4, 0, &d));
}

TEST_F(CacheTest, TruncateDropsData) {
  Fill(5, 1, 2, 'a');
  cache_->AfterOwnChange(5, true, 1, FileAttrs(2, 0));
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(5, 0, &d));
  EXPECT_EQ(cache_->bytes(), 0u);
}

TEST_F(CacheTest, BoundHoldsAndEvictsLeastRecentlyUsed) {
  Reopen(8 * kBs);
  Fill(1, 1, 4, 'a');
  Fill(2, 1, 4, 'b');
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(1, 0, &d));  // block (1,0) is now recent
  Fill(3, 1, 2, 'c');                       // needs two blocks of room
  EXPECT_LE(cache_->bytes(), 8u * kBs);
  EXPECT_EQ(cache_->evictions(), 2u);
  EXPECT_TRUE(cache_->GetBlock(1, 0, &d));   // recently used: kept
  EXPECT_FALSE(cache_->GetBlock(1, 1, &d));  // least recent: evicted
  EXPECT_FALSE(cache_->GetBlock(1, 2, &d));
  EXPECT_TRUE(cache_->GetBlock(3, 1, &d));
}

TEST_F(CacheTest, DirtyBlocksAreNeverEvicted) {
  Reopen(4 * kBs);
  cache_->Validated(1, FileAttrs(1, 0));
  uint64_t need = 0;
  std::string data(4 * kBs, 'd');
  ASSERT_TRUE(cache_->LocalWrite(1, 0, data.data(), data.size(), &need));
  Fill(2, 1, 4, 'c');  // over the bound: only clean blocks may go
  std::string d;
  for (int i = 0; i < 4; i++) EXPECT_TRUE(cache_->GetBlock(1, i, &d)) << i;
  // Once flushed they are ordinary blocks again.
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 4u);
  cache_->Flushed(1, r, 0, FileAttrs(9, 4 * kBs));
  EXPECT_FALSE(cache_->IsDirty(1));
  EXPECT_LE(cache_->bytes(), 4u * kBs);
}

TEST_F(CacheTest, LocalWritesAreDurableAuthoritativeAndFlushedByEpoch) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "hello", 5, &need));
  Attrs a;
  ASSERT_TRUE(cache_->FreshAttrs(1, &a));
  EXPECT_EQ(a.size, 5u);
  EXPECT_NE(a.change, 5u) << "clients see the file change";
  // The remote still has the old file: its attributes change nothing here.
  cache_->Validated(1, FileAttrs(5, 0));
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(1, 0, &d));
  EXPECT_EQ(d, "hello");
  // A crash now: everything acknowledged is in the store.
  Reopen(1 << 20);
  ASSERT_TRUE(cache_->IsDirty(1));
  EXPECT_EQ(cache_->DirtyFiles(std::chrono::milliseconds(0), 10),
            std::vector<Key>{1});
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "hello");
  EXPECT_EQ(cache_->dirty_bytes(), 5u);
  // Written again while the flush is on its way: still dirty afterwards.
  ASSERT_TRUE(cache_->LocalWrite(1, 5, " world", 6, &need));
  cache_->Flushed(1, r, 0, FileAttrs(6, 5));
  ASSERT_TRUE(cache_->IsDirty(1));
  r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].lo, 0u);
  EXPECT_EQ(r[0].data, "hello world");
  cache_->Flushed(1, r, 0, FileAttrs(7, 11));
  EXPECT_FALSE(cache_->IsDirty(1));
  EXPECT_EQ(cache_->dirty_bytes(), 0u);
  ASSERT_TRUE(cache_->FreshAttrs(1, &a));
  EXPECT_EQ(a.change, 7u) << "follows the remote again";
  ASSERT_TRUE(cache_->GetBlock(1, 0, &d));
  EXPECT_EQ(d, "hello world");
}

// A file rewritten in place with mostly the same bytes: the blocks the
// write puts back as they were are not dirtied (never re-sent); a write
// changing nothing leaves only the mtime to flush.
TEST_F(CacheTest, BytesWrittenBackUnchangedAreNotDirtied) {
  Fill(1, 5, 3, 'c');
  std::string data(3 * kBs, 'c');
  data[kBs + 7] = 'X';  // only block 1 changes
  uint64_t need = 0, unchanged = 0;
  ASSERT_TRUE(
      cache_->LocalWrite(1, 0, data.data(), data.size(), &need, &unchanged));
  EXPECT_EQ(unchanged, 2u * kBs);
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].idx, 1u);
  EXPECT_EQ(cache_->dirty_bytes(), uint64_t(kBs));
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(1, 1, &d));
  EXPECT_EQ(d[7], 'X');
  Attrs set;
  uint64_t epoch = 0;
  EXPECT_FALSE(cache_->PendingSetattr(1, &set, &epoch))
      << "the data write moves the remote's mtime";

  Fill(2, 5, 2, 'e');
  std::string same(2 * kBs, 'e');
  ASSERT_TRUE(
      cache_->LocalWrite(2, 0, same.data(), same.size(), &need, &unchanged));
  EXPECT_EQ(unchanged, 2u * kBs);
  EXPECT_TRUE(cache_->DirtyRanges(2).empty());
  ASSERT_TRUE(cache_->PendingSetattr(2, &set, &epoch));
  EXPECT_EQ(set.mask, uint64_t(upstream::kAttrMtime));
  EXPECT_TRUE(cache_->IsDirty(2));
  // Extending the file is a change, even with the bytes of its last block.
  ASSERT_TRUE(
      cache_->LocalWrite(2, kBs, same.data(), same.size(), &need, &unchanged));
  EXPECT_EQ(unchanged, uint64_t(kBs));
  EXPECT_EQ(cache_->DirtyRanges(2).size(), 1u);
}

// Writes reaching a file's holes out of order (a client flushing its
// pages in parallel): a block between the remote's end and a later write
// holds zeros, not remote data, so a partial write into it needs no
// fetch (the remote has nothing to give: the fetch would never cache it).
TEST_F(CacheTest, PartialWriteIntoAHoleOfOurOwnNeedsNoFetch) {
  cache_->Validated(1, FileAttrs(5, 10));
  std::string head(10, 'h');
  ASSERT_TRUE(cache_->PutBlock(1, 0, cache_->Generation(1), head));
  uint64_t need = 99;
  ASSERT_TRUE(cache_->LocalWrite(1, 3 * kBs, "far", 3, &need));
  ASSERT_TRUE(cache_->LocalWrite(1, kBs + 100, "mid", 3, &need))
      << "asked for block " << need;
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(1, 1, &d));
  ASSERT_EQ(d.size(), size_t(kBs));
  EXPECT_EQ(d.substr(100, 3), "mid");
  EXPECT_EQ(d[0], '\0');
  EXPECT_EQ(d[kBs - 1], '\0');
  EXPECT_TRUE(cache_->ReadsAsZeros(1, 2)) << "block 2 is still a hole";
}

TEST_F(CacheTest, PartialWriteOverUncachedRemoteDataNeedsTheBlock) {
  cache_->Validated(1, FileAttrs(5, 2 * kBs));  // remote data, not cached
  uint64_t need = 99;
  EXPECT_FALSE(cache_->LocalWrite(1, kBs + 10, "x", 1, &need));
  EXPECT_EQ(need, 1u);
  EXPECT_FALSE(cache_->IsDirty(1)) << "nothing changed";
  // A write covering a whole block needs nothing.
  std::string whole(kBs, 'w');
  EXPECT_TRUE(cache_->LocalWrite(1, 0, whole.data(), whole.size(), &need));
  // With the block cached, the partial write goes in.
  ASSERT_TRUE(
      cache_->PutBlock(1, 1, cache_->Generation(1), std::string(kBs, 'r')));
  ASSERT_TRUE(cache_->LocalWrite(1, kBs + 10, "x", 1, &need));
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(1, 1, &d));
  EXPECT_EQ(d[9], 'r');
  EXPECT_EQ(d[10], 'x');
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].lo, 10u);
  EXPECT_EQ(r[1].hi, 11u) << "only the bytes written are sent";
}

TEST_F(CacheTest, ExtendingLeavesZerosAndHoles) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "abc", 3, &need));
  // Far beyond the end: the old last block is completed with zeros, the
  // blocks between are holes.
  ASSERT_TRUE(cache_->LocalWrite(1, 3 * kBs + 1, "z", 1, &need));
  Attrs a;
  ASSERT_TRUE(cache_->FreshAttrs(1, &a));
  EXPECT_EQ(a.size, 3u * kBs + 2);
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(1, 0, &d));
  EXPECT_EQ(d, "abc" + std::string(kBs - 3, '\0'));
  EXPECT_TRUE(cache_->ReadsAsZeros(1, 1));
  EXPECT_TRUE(cache_->ReadsAsZeros(1, 2));
  ASSERT_TRUE(cache_->GetBlock(1, 3, &d));
  EXPECT_EQ(d, std::string(1, '\0') + "z");
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].idx, 0u);
  EXPECT_EQ(r[0].data.size(), size_t(kBs)) << "the zeros go too";
  EXPECT_EQ(r[1].idx, 3u);
  EXPECT_EQ(r[1].lo, 0u);
  EXPECT_EQ(r[1].data, std::string(1, '\0') + "z");
}

// What a dirty file is based on at the remote (its size and change when it
// became dirty, then after each complete flush) survives a crash: uncached
// blocks below the remote's size are fetched, not read as zeros, and the
// conflict check compares with the right change attribute.
TEST_F(CacheTest, DirtyBaseSurvivesACrashAndFollowsFlushes) {
  cache_->Validated(1, FileAttrs(7, 3 * kBs));
  uint64_t need = 0;
  ASSERT_TRUE(
      cache_->LocalWrite(1, 0, std::string(kBs, 'a').data(), kBs, &need));
  Cache::DirtyBase b;
  ASSERT_TRUE(cache_->GetDirtyBase(1, &b));
  EXPECT_EQ(b.change, 7u);
  EXPECT_EQ(b.size, 3u * kBs);
  EXPECT_FALSE(b.uncertain);
  EXPECT_TRUE(b.has_data);
  cache_->FlushBegins(1);
  Reopen(1 << 20);  // a crash in the middle of a flush
  EXPECT_FALSE(cache_->ReadsAsZeros(1, 2)) << "remote data, not a hole";
  ASSERT_TRUE(cache_->GetDirtyBase(1, &b));
  EXPECT_EQ(b.change, 7u);
  EXPECT_TRUE(b.uncertain) << "the cut-off flush may have landed";
  // A flush that left it dirty (written again meanwhile) moves the base to
  // what the remote holds after it.
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(
      cache_->LocalWrite(1, 0, std::string(kBs, 'b').data(), kBs, &need));
  cache_->Flushed(1, r, 0, FileAttrs(9, 3 * kBs));
  ASSERT_TRUE(cache_->GetDirtyBase(1, &b));
  EXPECT_EQ(b.change, 9u);
  EXPECT_FALSE(b.uncertain);
  // A local create has no remote base; a clean file has none either.
  ASSERT_TRUE(cache_->LocalCreate(2, FileAttrs(1, 0)));
  EXPECT_FALSE(cache_->GetDirtyBase(2, &b));
  EXPECT_FALSE(cache_->GetDirtyBase(3, &b));
}

TEST_F(CacheTest, LocalSetattrIsDurableAndFlushedByEpoch) {
  cache_->Validated(1, FileAttrs(5, 3));
  Attrs set;
  set.mask = upstream::kAttrMode | upstream::kAttrMtime;
  set.mode = 0600;
  set.mtime = upstream::Time{1000, 5};
  ASSERT_TRUE(cache_->LocalSetattr(1, set));
  Attrs a;
  ASSERT_TRUE(cache_->FreshAttrs(1, &a));
  EXPECT_EQ(a.mode, 0600u);
  EXPECT_EQ(a.mtime.sec, 1000);
  EXPECT_TRUE(cache_->IsDirty(1));
  Reopen(1 << 20);  // a crash: the change is in the store
  EXPECT_EQ(cache_->DirtyFiles(std::chrono::milliseconds(0), 10),
            std::vector<Key>{1});
  Attrs pending;
  uint64_t epoch = 0;
  ASSERT_TRUE(cache_->PendingSetattr(1, &pending, &epoch));
  EXPECT_EQ(pending.mask, upstream::kAttrMode | upstream::kAttrMtime);
  EXPECT_EQ(pending.mode, 0600u);
  EXPECT_EQ(pending.mtime.nsec, 5u);
  // Set again while the flush is on its way: still pending afterwards.
  set.mask = upstream::kAttrMode;
  set.mode = 0640;
  ASSERT_TRUE(cache_->LocalSetattr(1, set));
  cache_->Flushed(1, {}, epoch, FileAttrs(6, 3));
  ASSERT_TRUE(cache_->PendingSetattr(1, &pending, &epoch));
  EXPECT_EQ(pending.mode, 0640u);
  cache_->Flushed(1, {}, epoch, FileAttrs(7, 3));
  EXPECT_FALSE(cache_->IsDirty(1));
  EXPECT_FALSE(cache_->PendingSetattr(1, &pending, &epoch));
}

// An object created locally (write-back namespace): its attributes are
// ours, fresh and durable, a remote GETATTR does not replace them, every
// block of it reads as zeros until written, and the flush of its create
// (an empty set of attributes beyond its mtime) makes it follow the remote.
TEST_F(CacheTest, LocallyCreatedObjectIsOursUntilFlushed) {
  Attrs a = FileAttrs(1, 0);
  a.mode = 0640;
  a.mtime = upstream::Time{2000, 0};
  ASSERT_TRUE(cache_->LocalCreate(5, a));
  Attrs got;
  ASSERT_TRUE(cache_->FreshAttrs(5, &got));
  EXPECT_EQ(got.mode, 0640u);
  EXPECT_TRUE(cache_->IsDirty(5));
  cache_->Validated(5, FileAttrs(77, 0));  // the remote's, once created
  ASSERT_TRUE(cache_->FreshAttrs(5, &got));
  EXPECT_EQ(got.change, 1u) << "ours, not the remote's";
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(5, kBs + 1, "new", 3, &need))
      << "nothing of it at the remote: no block to fetch first";
  EXPECT_TRUE(cache_->ReadsAsZeros(5, 0)) << "a hole before the write";
  Reopen(1 << 20);  // a crash
  EXPECT_EQ(cache_->DirtyFiles(std::chrono::milliseconds(0), 10),
            std::vector<Key>{5});
  Attrs pending;
  uint64_t epoch = 0;
  ASSERT_TRUE(cache_->PendingSetattr(5, &pending, &epoch));
  EXPECT_EQ(pending.mask, upstream::kAttrMtime)
      << "only real attributes go to the remote";
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(5);
  ASSERT_EQ(r.size(), 1u);
  cache_->Flushed(5, r, epoch, FileAttrs(80, kBs + 4));
  EXPECT_FALSE(cache_->IsDirty(5));
  ASSERT_TRUE(cache_->FreshAttrs(5, &got));
  EXPECT_EQ(got.change, 80u);
}

// A name added or removed locally edits the directory's listing, moves
// its mtime and change, and leaves its mtime to be flushed.
TEST_F(CacheTest, LocalDirectoryEditsKeepTheListingAndDirtyTheDirectory) {
  Attrs d = FileAttrs(10, 4096);
  d.type = upstream::FileType::kDir;
  cache_->Validated(2, d);
  cache_->PutListing(2, 10, {CachedDirent{"old", 3, 100}},
                     cache_->ListingEpoch(2));
  EXPECT_FALSE(cache_->LocalDirEdit(9, "", "x", 4)) << "unknown directory";
  ASSERT_TRUE(cache_->LocalDirEdit(2, "", "new", 4));
  ASSERT_TRUE(cache_->LocalDirEdit(2, "old", "", kNoKey));
  auto l = cache_->Listing(2);
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].name, "new");
  EXPECT_EQ((*l)[0].key, 4u);
  EXPECT_FALSE(cache_->Listing(2, true)) << "not the server's cookies";
  Attrs got;
  ASSERT_TRUE(cache_->FreshAttrs(2, &got));
  EXPECT_EQ(got.change, 12u);
  Attrs pending;
  uint64_t epoch = 0;
  ASSERT_TRUE(cache_->PendingSetattr(2, &pending, &epoch));
  EXPECT_EQ(pending.mask, upstream::kAttrMtime);
}

// Serving stale while disconnected: every known object is fresh while
// the predicate says so (also one not validated since a restart), and
// only then.
TEST_F(CacheTest, StaleIsFreshOnlyWhileDisconnected) {
  bool disconnected = false;
  cache_->SetStaleOk([&] { return disconnected; });
  cache_->Validated(3, FileAttrs(4, 10));
  Reopen(1 << 20);  // not validated since
  cache_->SetStaleOk([&] { return disconnected; });
  Attrs a;
  EXPECT_FALSE(cache_->FreshAttrs(3, &a));
  disconnected = true;
  ASSERT_TRUE(cache_->FreshAttrs(3, &a));
  EXPECT_EQ(a.change, 4u);
  EXPECT_FALSE(cache_->FreshAttrs(99, &a)) << "unknown stays unknown";
  disconnected = false;
  EXPECT_FALSE(cache_->FreshAttrs(3, &a));
}

TEST_F(CacheTest, ForgettingARemovedFileDropsItsDirtyData) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "temp", 4, &need));
  cache_->Forget(1);
  EXPECT_FALSE(cache_->IsDirty(1));
  EXPECT_EQ(cache_->dirty_bytes(), 0u);
  Reopen(1 << 20);
  EXPECT_TRUE(cache_->DirtyFiles(std::chrono::milliseconds(0), 10).empty());
}

// A truncate drops a file's unflushed data (Forget) and the file is
// written again while a flush of the old data is still on its way: the
// flush must not take the new bytes for the ones it sent (issue: dirty
// epochs restarted at 1 after a Forget, so the new write was marked clean
// and never sent).
TEST_F(CacheTest, AFlushNeverClearsWhatItDidNotSendAcrossAForget) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "old data!", 9, &need));
  std::vector<Cache::DirtyRange> in_flight = cache_->DirtyRanges(1);
  ASSERT_EQ(in_flight.size(), 1u);
  cache_->Forget(1);  // truncated to nothing
  cache_->Validated(1, FileAttrs(6, 0));
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "new", 3, &need));
  cache_->Flushed(1, in_flight, 0, FileAttrs(7, 9));
  ASSERT_TRUE(cache_->IsDirty(1)) << "the new bytes were never sent";
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "new");
}

// The same for attributes set locally: a flush of the old ones does not
// clear new ones set after a Forget.
TEST_F(CacheTest, AFlushedSetattrEpochNeverMatchesANewerOne) {
  cache_->Validated(1, FileAttrs(5, 0));
  Attrs set;
  set.mask = upstream::kAttrMode;
  set.mode = 0600;
  ASSERT_TRUE(cache_->LocalSetattr(1, set));
  Attrs pending;
  uint64_t old_epoch = 0;
  ASSERT_TRUE(cache_->PendingSetattr(1, &pending, &old_epoch));
  cache_->Forget(1);
  cache_->Validated(1, FileAttrs(6, 0));
  set.mode = 0640;
  ASSERT_TRUE(cache_->LocalSetattr(1, set));
  cache_->Flushed(1, {}, old_epoch, FileAttrs(7, 0));
  uint64_t epoch = 0;
  ASSERT_TRUE(cache_->PendingSetattr(1, &pending, &epoch))
      << "the new mode was never sent";
  EXPECT_EQ(pending.mode, 0640u);
  EXPECT_NE(epoch, old_epoch);
}

// A block fetched for a file that was forgotten meanwhile (truncated,
// removed) is not stored under its new incarnation: generations never
// repeat either.
TEST_F(CacheTest, ABlockFetchedBeforeAForgetIsNotStoredAfterIt) {
  cache_->Validated(1, FileAttrs(5, kBs));
  uint64_t gen = cache_->Generation(1);
  cache_->Forget(1);
  cache_->Validated(1, FileAttrs(6, kBs));
  EXPECT_FALSE(cache_->PutBlock(1, 0, gen, std::string(kBs, 's')));
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(1, 0, &d));
}

// Generations and epochs continue above what the store holds after a
// restart.
TEST_F(CacheTest, StampsContinueAboveTheStoreAfterAReopen) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "abc", 3, &need));
  uint64_t before = cache_->DirtyRanges(1).at(0).epoch;
  Reopen(1 << 20);
  ASSERT_TRUE(cache_->LocalWrite(1, 3, "def", 3, &need));
  EXPECT_GT(cache_->DirtyRanges(1).at(0).epoch, before);
  cache_->Validated(2, FileAttrs(1, 0));
  EXPECT_GT(cache_->Generation(2), before);
}

// After a flush whose attributes are not ours (the remote's size differs,
// so our view is kept and revalidated later), the next local write is
// based on what the remote holds, not on our own view: otherwise the next
// flush takes our own earlier flush for someone else's write and makes a
// false conflict copy.
TEST_F(CacheTest, TheBaseOfTheNextChangeIsTheRemotesAfterAFlush) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "0123456789", 10, &need));
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  cache_->FlushBegins(1);
  cache_->Flushed(1, r, 0, FileAttrs(8, 12));
  ASSERT_FALSE(cache_->IsDirty(1));
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "abcdefghij", 10, &need));
  Cache::DirtyBase base;
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_EQ(base.change, 8u) << "the remote's change after our flush";
  EXPECT_EQ(base.size, 12u);
  EXPECT_FALSE(base.uncertain);
  // Also across a restart.
  Reopen(1 << 20);
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_EQ(base.change, 8u);
}

// An operation of ours at the remote on a file with unflushed data (a
// SETATTR the flush did not cover) keeps the data and our view, and moves
// the base with it; one whose outcome is unknown makes the base uncertain.
TEST_F(CacheTest, OwnRemoteChangesOfADirtyFileKeepItsDataAndMoveItsBase) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "hello", 5, &need));
  cache_->BeginOwnChange(1);
  cache_->AfterOwnChange(1, true, 5, FileAttrs(9, 0));
  ASSERT_TRUE(cache_->IsDirty(1)) << "unflushed data dropped";
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, "hello");
  Attrs a;
  ASSERT_TRUE(cache_->KnownAttrs(1, &a));
  EXPECT_EQ(a.size, 5u) << "our view stays";
  Cache::DirtyBase base;
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_EQ(base.change, 9u);
  EXPECT_FALSE(base.uncertain);
  // Someone else changed it before our operation: the base stays, for
  // the conflict check to see.
  cache_->BeginOwnChange(1);
  cache_->AfterOwnChange(1, true, 11, FileAttrs(12, 0));
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_EQ(base.change, 9u);
  // Cut off: the remote may have it, under a change we never saw.
  cache_->BeginOwnChange(1);
  cache_->AfterOwnChange(1, false, 0, Attrs());
  ASSERT_TRUE(cache_->IsDirty(1));
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_TRUE(base.uncertain);
}

// An operation of ours that moved the remote's change attribute unseen
// (a RENAME): the base of the object's changes is uncertain, now when it
// is dirty, or once it becomes dirty unless the remote is seen first.
TEST_F(CacheTest, OwnUnseenChangesMakeTheBaseUncertain) {
  cache_->Validated(1, FileAttrs(5, 0));
  cache_->OwnChangeUnseen(1);
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "abc", 3, &need));
  Cache::DirtyBase base;
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_TRUE(base.uncertain) << "clean when renamed, dirty after";
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  cache_->Flushed(1, r, 0, FileAttrs(9, 3));
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "xyz", 3, &need));
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_FALSE(base.uncertain) << "the flush saw the remote";
  EXPECT_EQ(base.change, 9u);
  cache_->OwnChangeUnseen(1);
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_TRUE(base.uncertain) << "dirty when renamed";
  Reopen(1 << 20);
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_TRUE(base.uncertain) << "kept across a restart";
  // Seen at the remote before it is written: certain again.
  cache_->Validated(2, FileAttrs(5, 0));
  cache_->OwnChangeUnseen(2);
  cache_->Validated(2, FileAttrs(6, 0));
  ASSERT_TRUE(cache_->LocalWrite(2, 0, "abc", 3, &need));
  ASSERT_TRUE(cache_->GetDirtyBase(2, &base));
  EXPECT_FALSE(base.uncertain);
  EXPECT_EQ(base.change, 6u);
}

// A READDIR that crossed a change of ours to the directory's names (a
// create the flusher just sent) is not kept: it may lack that name, and a
// single-writer export answers a lookup of a name a fresh listing lacks
// with NOENT (the crash loop with rewrites saw files made anew under
// names that existed). A sent name is added to a listing already held.
TEST_F(CacheTest, AListingThatCrossedOurOwnNameChangeIsNotKept) {
  Attrs dir = FileAttrs(10, 4096);
  dir.type = upstream::FileType::kDir;
  cache_->Validated(2, dir);
  uint64_t epoch = cache_->ListingEpoch(2);  // the READDIR goes out
  cache_->NoteNameSent(2, "", "new", 7);     // our create lands meanwhile
  cache_->PutListing(2, 10, {CachedDirent{"old", 3, 1}}, epoch);
  EXPECT_EQ(cache_->Listing(2), nullptr);
  // Read again after it: kept, and a later sent name joins it.
  cache_->PutListing(2, 10, {CachedDirent{"old", 3, 1}, {"new", 7, 2}},
                     cache_->ListingEpoch(2));
  ASSERT_NE(cache_->Listing(2), nullptr);
  cache_->NoteNameSent(2, "old", "newer", 8);
  auto l = cache_->Listing(2);
  ASSERT_NE(l, nullptr);
  std::set<std::string> names;
  for (const CachedDirent &e : *l) names.insert(e.name);
  EXPECT_EQ(names, (std::set<std::string>{"new", "newer"}));
}

// A RENAME of ours sent while a flush of the same file is on its way (the
// directory's flush and the file's run apart): the flush's attributes are
// from before the rename, so they must not make the base certain again
// (the crash loop with rewrites saw the false conflict this made).
TEST_F(CacheTest, AnUnseenChangeDuringAFlushKeepsTheBaseUncertain) {
  cache_->Validated(1, FileAttrs(5, 0));
  uint64_t need = 0;
  ASSERT_TRUE(cache_->LocalWrite(1, 0, "abc", 3, &need));
  std::vector<Cache::DirtyRange> r = cache_->DirtyRanges(1);
  cache_->FlushBegins(1);
  ASSERT_TRUE(cache_->LocalWrite(1, 3, "def", 3, &need));  // still dirty
  cache_->OwnChangeUnseen(1);                              // the RENAME
  cache_->Flushed(1, r, 0, FileAttrs(9, 3));
  Cache::DirtyBase base;
  ASSERT_TRUE(cache_->GetDirtyBase(1, &base));
  EXPECT_TRUE(base.uncertain);
  // Clean after its flush: uncertain once it is written again.
  cache_->Validated(2, FileAttrs(5, 0));
  ASSERT_TRUE(cache_->LocalWrite(2, 0, "abc", 3, &need));
  r = cache_->DirtyRanges(2);
  cache_->FlushBegins(2);
  cache_->OwnChangeUnseen(2);
  cache_->Flushed(2, r, 0, FileAttrs(9, 3));
  ASSERT_FALSE(cache_->IsDirty(2));
  ASSERT_TRUE(cache_->LocalWrite(2, 0, "xyz", 3, &need));
  ASSERT_TRUE(cache_->GetDirtyBase(2, &base));
  EXPECT_TRUE(base.uncertain);
}

TEST_F(CacheTest, SurvivesReopenButNeedsRevalidation) {
  Fill(8, 42, 3, 'p');
  Reopen(1 << 20);
  Attrs a;
  EXPECT_FALSE(cache_->FreshAttrs(8, &a));  // not validated since start
  ASSERT_TRUE(cache_->KnownAttrs(8, &a));
  EXPECT_EQ(a.change, 42u);
  EXPECT_EQ(cache_->bytes(), 3u * kBs);
  cache_->Validated(8, FileAttrs(42, 3 * kBs));
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(8, 2, &d));
  EXPECT_EQ(d, std::string(kBs, 'p'));
  // Changed remotely while we were down: dropped on validation.
  Reopen(1 << 20);
  cache_->Validated(8, FileAttrs(43, 3 * kBs));
  EXPECT_FALSE(cache_->GetBlock(8, 0, &d));
}

TEST_F(CacheTest, ReopenWithSmallerBoundEvicts) {
  Fill(1, 1, 8, 'a');
  Reopen(3 * kBs);
  EXPECT_LE(cache_->bytes(), 3u * kBs);
}

TEST_F(CacheTest, AccessIsCachedPerIdentityAndDroppedOnModeChange) {
  cache_->Validated(6, FileAttrs(1, 0));
  upstream::Creds alice, bob;
  alice.uid = 1000;
  bob.uid = 1001;
  uint32_t allowed = 0;
  EXPECT_FALSE(cache_->CachedAccess(6, Cache::CredId(alice), 1, &allowed));
  cache_->NoteAccess(6, Cache::CredId(alice), 0x3f, 0x01);
  ASSERT_TRUE(cache_->CachedAccess(6, Cache::CredId(alice), 0x01, &allowed));
  EXPECT_EQ(allowed, 0x01u);
  ASSERT_TRUE(cache_->CachedAccess(6, Cache::CredId(alice), 0x04, &allowed));
  EXPECT_EQ(allowed, 0u);
  EXPECT_FALSE(cache_->CachedAccess(6, Cache::CredId(bob), 0x01, &allowed));
  Attrs changed = FileAttrs(1, 0);
  changed.mode = 0600;
  cache_->Validated(6, changed);
  EXPECT_FALSE(cache_->CachedAccess(6, Cache::CredId(alice), 0x01, &allowed));
}

// A write of ours moves the change attribute but no one's rights: the
// callers' ACCESS answers stay (a reopen of a file just written asks the
// remote nothing more). Any other change of ours may have moved an ACL,
// which only the change attribute shows: they go.
TEST_F(CacheTest, OurWritesKeepAccessAnswersOurOtherChangesDoNot) {
  cache_->Validated(6, FileAttrs(1, 0));
  upstream::Creds alice;
  alice.uid = 1000;
  const uint64_t who = Cache::CredId(alice);
  uint32_t allowed = 0;
  cache_->NoteAccess(6, who, 0x3f, 0x07);
  std::string data(100, 'w');
  cache_->BeginOwnChange(6);
  cache_->AfterOwnChange(6, true, 1, FileAttrs(2, 100), 0, data.data(),
                         data.size());
  ASSERT_TRUE(cache_->CachedAccess(6, who, 0x04, &allowed))
      << "dropped by our own write";
  EXPECT_EQ(allowed, 0x04u);
  Attrs setuid_cleared = FileAttrs(3, 200);
  setuid_cleared.mode = 0644;
  Attrs before = FileAttrs(2, 100);
  before.mode = 04644;
  cache_->Validated(6, before);
  cache_->NoteAccess(6, who, 0x3f, 0x07);
  cache_->BeginOwnChange(6);
  cache_->AfterOwnChange(6, true, 2, setuid_cleared, 100, data.data(),
                         data.size());
  EXPECT_FALSE(cache_->CachedAccess(6, who, 0x04, &allowed))
      << "kept across a mode change";
  cache_->Validated(6, FileAttrs(3, 200));
  cache_->NoteAccess(6, who, 0x3f, 0x07);
  cache_->BeginOwnChange(6);
  cache_->AfterOwnChange(6, true, 3, FileAttrs(4, 200));  // a SETATTR
  EXPECT_FALSE(cache_->CachedAccess(6, who, 0x04, &allowed))
      << "kept across our SETATTR";
}

TEST_F(CacheTest, ListingValidOnlyUnderItsChangeAndUntilExpired) {
  cache_->Validated(2, FileAttrs(5, 0));
  cache_->PutListing(2, 5, {{"a", 10, 1}, {"b", 11, 2}},
                     cache_->ListingEpoch(2));
  auto l = cache_->Listing(2);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->size(), 2u);
  cache_->ExpireAttrs(2);  // we changed the directory
  EXPECT_FALSE(cache_->Listing(2));
  cache_->Validated(2, FileAttrs(5, 0));
  cache_->PutListing(2, 5, {{"a", 10, 1}}, cache_->ListingEpoch(2));
  cache_->Validated(2, FileAttrs(6, 0));  // someone else changed it
  EXPECT_FALSE(cache_->Listing(2));
}

TEST_F(CacheTest, DelegatedAttributesStayFreshOnlyWhileTheLeaseHolds) {
  CacheOptions o;
  o.block_size = kBs;
  o.attr_timeout_ms = 1;  // the window is over as soon as it starts
  cache_.reset(new Cache(store_.get(), o, nullptr));
  std::atomic<int64_t> lease_left_ms{60000};
  auto start = Cache::Clock::now();
  cache_->SetLeaseClock(
      [&] { return start + std::chrono::milliseconds(lease_left_ms.load()); });
  // Lets the 1 ms window after a validation at `since` pass (a condition
  // on the clock, not a sleep).
  auto pass_window = [](Cache::Clock::time_point since) {
    while (Cache::Clock::now() - since < std::chrono::milliseconds(2)) {
    }
  };
  auto validated = Cache::Clock::now();
  cache_->Validated(7, FileAttrs(5, 10));
  pass_window(validated);
  Attrs a;
  EXPECT_FALSE(cache_->FreshAttrs(7, &a)) << "window passed, no delegation";
  validated = Cache::Clock::now();
  cache_->Validated(7, FileAttrs(5, 10));
  cache_->SetDelegated(7, true);
  pass_window(validated);
  ASSERT_TRUE(cache_->FreshAttrs(7, &a)) << "delegated: fresh past the window";
  EXPECT_EQ(a.change, 5u);
  lease_left_ms = 0;  // the lease is no longer known to hold
  EXPECT_FALSE(cache_->FreshAttrs(7, &a));
  lease_left_ms = 60000;
  cache_->ExpireAttrs(7);
  EXPECT_FALSE(cache_->FreshAttrs(7, &a)) << "an explicit expiry still counts";
  cache_->Validated(7, FileAttrs(5, 10));
  EXPECT_TRUE(cache_->FreshAttrs(7, &a));
  validated = Cache::Clock::now();  // (at most: validated just before)
  cache_->SetDelegated(7, false);
  pass_window(validated);
  EXPECT_FALSE(cache_->FreshAttrs(7, &a)) << "returned: the window rules";
}

// The change info of a directory operation the server did atomically.
upstream::ChangeInfo AtomicChange(uint64_t before, uint64_t after) {
  upstream::ChangeInfo ci;
  ci.atomic = true;
  ci.before = before;
  ci.after = after;
  return ci;
}

TEST_F(CacheTest, OwnDirectoryChangesEditTheListingForLookups) {
  Attrs dir = FileAttrs(5, 0);
  dir.type = upstream::FileType::kDir;
  cache_->Validated(2, dir);
  cache_->PutListing(2, 5, {{"a", 10, 1}, {"b", 11, 2}},
                     cache_->ListingEpoch(2));
  upstream::ChangeInfo ci = AtomicChange(5, 6);
  Attrs after = dir;
  after.change = 6;
  cache_->OwnDirChange(2, ci, after, "a", "c", 12);
  auto l = cache_->Listing(2);
  ASSERT_TRUE(l);
  std::vector<std::string> names;
  for (auto &e : *l) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "c"}));
  // Edited listings carry no server cookies: not for READDIR.
  EXPECT_FALSE(cache_->Listing(2, true));
  // Someone else's change came in between (6 -> 7): no edit, dropped.
  ci.before = 7;
  ci.after = 8;
  after.change = 8;
  cache_->OwnDirChange(2, ci, after, "", "d", 13);
  EXPECT_FALSE(cache_->Listing(2));
}

// A create of ours in a directory with no listing kept: only names moved,
// so the rights answered for it still hold; a change that was not ours
// alone drops them.
TEST_F(CacheTest, OwnDirectoryChangesKeepTheRightsAnswered) {
  Attrs dir = FileAttrs(5, 0);
  dir.type = upstream::FileType::kDir;
  cache_->Validated(2, dir);
  upstream::Creds alice;
  alice.uid = 1000;
  cache_->NoteAccess(2, Cache::CredId(alice), 0x3f, 0x1f);
  upstream::ChangeInfo ci = AtomicChange(5, 6);
  Attrs after = dir;
  after.change = 6;
  cache_->OwnDirChange(2, ci, after, "", "c", 12);
  uint32_t allowed = 0;
  ASSERT_TRUE(cache_->CachedAccess(2, Cache::CredId(alice), 0x0c, &allowed));
  EXPECT_EQ(allowed, 0x0cu);
  Attrs a;
  ASSERT_TRUE(cache_->FreshAttrs(2, &a));
  EXPECT_EQ(a.change, 6u);
  // Someone else's change came in between (6 -> 7): the answers go.
  ci.before = 7;
  ci.after = 8;
  after.change = 8;
  cache_->OwnDirChange(2, ci, after, "", "d", 13);
  EXPECT_FALSE(cache_->CachedAccess(2, Cache::CredId(alice), 0x0c, &allowed));
  // Ours alone, but the mode moved too: they go.
  cache_->NoteAccess(2, Cache::CredId(alice), 0x3f, 0x1f);
  ci.before = 8;
  ci.after = 9;
  after.change = 9;
  after.mode = 0700;
  cache_->OwnDirChange(2, ci, after, "", "e", 14);
  EXPECT_FALSE(cache_->CachedAccess(2, Cache::CredId(alice), 0x0c, &allowed));
}

// A SETATTR of ours on a directory (tar sets a new directory's owner and
// mode) changes no entry: its listing stays. One that did not start from
// the listing's change does not keep it.
TEST_F(CacheTest, OwnSetattrOfADirectoryKeepsItsListing) {
  Attrs dir = FileAttrs(5, 0);
  dir.type = upstream::FileType::kDir;
  cache_->Validated(2, dir);
  cache_->PutListing(2, 5, {{"a", 10, 1}}, cache_->ListingEpoch(2));
  Attrs after = dir;
  after.change = 6;
  after.mode = 0700;
  cache_->BeginOwnChange(2);
  cache_->AfterOwnChange(2, true, 5, after);
  auto l = cache_->Listing(2);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->size(), 1u);
  // Two of ours in flight at once: which came first is not known here.
  after.change = 7;
  Attrs later = dir;
  later.change = 8;
  cache_->BeginOwnChange(2);
  cache_->BeginOwnChange(2);
  cache_->AfterOwnChange(2, true, 6, after);
  cache_->AfterOwnChange(2, true, 7, later);
  EXPECT_FALSE(cache_->Listing(2));
}

// --- block reader -----------------------------------------------------------

class ReaderTest : public CacheTest {};

TEST_F(ReaderTest, ConcurrentMissesOnOneBlockFetchOnce) {
  cache_->Validated(1, FileAttrs(1, 4 * kBs));
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> calls{0};
  BlockReader r(
      cache_.get(),
      [&](Key key, uint64_t idx, const upstream::Creds &,
          const upstream::StateId &, std::string *data) {
        calls++;
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return release; });
        *data = std::string(kBs, char('0' + idx));
        cache_->PutBlock(key, idx, cache_->Generation(key), *data);
        return uint32_t(0);
      },
      0, 0);
  std::vector<std::thread> readers;
  std::vector<std::string> got(8);
  for (int i = 0; i < 8; i++)
    readers.emplace_back([&, i] {
      r.Get(1, 2, upstream::Creds(), upstream::StateId(), &got[i]);
    });
  // All eight wait on one fetch: let it finish once they are queued.
  while (calls.load() == 0) std::this_thread::yield();
  {
    std::lock_guard<std::mutex> g(mu);
    release = true;
  }
  cv.notify_all();
  for (auto &t : readers) t.join();
  // Readers that came before the release joined the flight; later ones
  // found the block cached.
  EXPECT_EQ(r.fetches(), 1u);
  EXPECT_EQ(calls.load(), 1);
  for (auto &g : got) EXPECT_EQ(g, std::string(kBs, '2'));
  // Once cached, no fetch at all.
  std::string again;
  uint64_t before = r.fetches();
  r.Get(1, 2, upstream::Creds(), upstream::StateId(), &again);
  EXPECT_EQ(r.fetches(), before);
}

TEST(ReadaheadPolicyTest, SequentialDoublesRandomResets) {
  ReadaheadPolicy p(8);
  EXPECT_EQ(p.OnRead(0), 0u);  // first read: nothing known
  EXPECT_EQ(p.OnRead(1), 1u);
  EXPECT_EQ(p.OnRead(2), 2u);
  EXPECT_EQ(p.OnRead(3), 4u);
  EXPECT_EQ(p.OnRead(4), 8u);
  EXPECT_EQ(p.OnRead(5), 8u);   // capped
  EXPECT_EQ(p.OnRead(5), 8u);   // re-reading the same block keeps it
  EXPECT_EQ(p.OnRead(40), 0u);  // a jump resets
  EXPECT_EQ(p.OnRead(41), 1u);
}

TEST(ReadaheadPolicyTest, OutOfOrderParallelReadsStaySequential) {
  ReadaheadPolicy p(16);
  p.OnRead(0);
  EXPECT_EQ(p.OnRead(4), 1u);  // a second READ in flight, further on
  EXPECT_EQ(p.OnRead(1), 1u);  // behind the frontier: kept
  EXPECT_EQ(p.OnRead(5), 2u);
  EXPECT_EQ(p.OnRead(2), 2u);
  EXPECT_EQ(p.OnRead(8), 4u);
  EXPECT_EQ(p.OnRead(1000), 0u);
}

TEST_F(ReaderTest, SequentialReadsPrefetchAhead) {
  cache_->Validated(1, FileAttrs(1, 64 * kBs));
  std::mutex mu;
  std::vector<uint64_t> fetched;
  BlockReader r(
      cache_.get(),
      [&](Key key, uint64_t idx, const upstream::Creds &,
          const upstream::StateId &, std::string *data) {
        {
          std::lock_guard<std::mutex> g(mu);
          fetched.push_back(idx);
        }
        *data = std::string(kBs, 'r');
        cache_->PutBlock(key, idx, cache_->Generation(key), *data);
        return uint32_t(0);
      },
      4, 2);
  std::string d;
  for (uint64_t i = 0; i < 4; i++) {
    r.NoteRead(1, i, 64, upstream::Creds(), upstream::StateId());
    ASSERT_EQ(r.Get(1, i, upstream::Creds(), upstream::StateId(), &d), 0u);
  }
  // After block 3 the window is 4: blocks up to 7 are fetched in the
  // background; wait for them (bounded) and check none went past.
  for (int i = 0; i < 2000 && !cache_->HasBlock(1, 7); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(cache_->HasBlock(1, 7));
  std::lock_guard<std::mutex> g(mu);
  for (uint64_t idx : fetched) EXPECT_LE(idx, 7u);
}

// A directory's listing is due once per window (WorthListing's rule: a
// lookup reads a small directory's listing at most once per attribute
// window), each directory on its own.
TEST_F(CacheTest, AListingIsDueOncePerWindow) {
  const auto window = std::chrono::milliseconds(200);
  EXPECT_TRUE(cache_->ListingDue(3, window));
  EXPECT_FALSE(cache_->ListingDue(3, window)) << "within the window";
  EXPECT_TRUE(cache_->ListingDue(4, window)) << "another directory";
  std::this_thread::sleep_for(window);
  EXPECT_TRUE(cache_->ListingDue(3, window)) << "the window is over";
}

// A write larger than the remote's goes as pieces sent side by side; a
// later piece's reply may come first. Neither piece covers its block up
// to the file's end alone (the later one has already grown the file past
// the earlier): together they do, and the block is cached.
TEST_F(CacheTest, OwnPiecesOfABlockCompletingOutOfOrderBuildIt) {
  cache_->Validated(9, FileAttrs(10, 0));
  const size_t half = kBs / 2;
  std::string a(half, 'A'), b(half, 'B'), c(half, 'C');
  cache_->BeginOwnChange(9);
  cache_->BeginOwnChange(9);
  cache_->BeginOwnChange(9);
  // Pieces [0, half), [half, kBs), [kBs, kBs + half); replies: 2nd, 3rd, 1st.
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, kBs), half, b.data(),
                         b.size());
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, kBs + half), kBs, c.data(),
                         c.size());
  cache_->AfterOwnChange(9, true, 10, FileAttrs(12, kBs + half), 0, a.data(),
                         a.size());
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d, a + b);
  ASSERT_TRUE(cache_->GetBlock(9, 1, &d));
  EXPECT_EQ(d, c);
}

// A block built short (the file ended inside it then) and passed by a
// later piece while one between is still in flight: the piece beyond a
// gap cannot extend it, and the block is built again once the gap comes.
TEST_F(CacheTest, AShortBlockPassedByALaterPieceIsBuiltWhenTheGapComes) {
  cache_->Validated(9, FileAttrs(10, 0));
  const size_t q = kBs / 4;
  std::string p1(q, '1'), p2(q, '2'), p3(q, '3'), p4(q, '4'), p5(q, '5');
  for (int i = 0; i < 5; i++) cache_->BeginOwnChange(9);
  // The remote ran them in this order, and replied in it.
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, 2 * q), q, p2.data(), q);
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, 2 * q), 0, p1.data(), q);
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d)) << "built up to the file's end";
  EXPECT_EQ(d, p1 + p2);
  cache_->AfterOwnChange(9, true, 12, FileAttrs(13, kBs + q), kBs, p5.data(),
                         q);
  cache_->AfterOwnChange(9, true, 13, FileAttrs(14, kBs + q), 3 * q, p4.data(),
                         q);
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d)) << "a gap in it";
  cache_->AfterOwnChange(9, true, 14, FileAttrs(15, kBs + q), 2 * q, p3.data(),
                         q);
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d, p1 + p2 + p3 + p4);
}

// Two writes of ours one after the other, each part of a block, build it
// together: the kernel client's writes need not start on our blocks, and
// none of ours may be in flight between them.
TEST_F(CacheTest, OurWritesOneAfterAnotherBuildABlockTogether) {
  cache_->Validated(9, FileAttrs(10, 0));
  const size_t half = kBs / 2;
  std::string a(half, 'A'), b(half, 'B');
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, 2 * kBs), half, b.data(),
                         b.size());
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d)) << "only half of it is known";
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, 2 * kBs), 0, a.data(),
                         a.size());
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d, a + b);
}

// Someone else changing the file between two writes of ours: the bytes
// the first wrote may be gone, and the second builds nothing with them.
TEST_F(CacheTest, AForeignChangeBetweenOurWritesForgetsTheirPieces) {
  cache_->Validated(9, FileAttrs(10, 2 * kBs));
  const size_t half = kBs / 2;
  std::string a(half, 'A'), b(half, 'B');
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, 2 * kBs), half, b.data(),
                         b.size());
  // The remote's attributes say 11 to 13 was not ours.
  cache_->Validated(9, FileAttrs(13, 2 * kBs));
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 13, FileAttrs(14, 2 * kBs), 0, a.data(),
                         a.size());
  std::string d;
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d))
      << "built with the older pieces: " << d.substr(half, 1);
}

// A block stored (read from the remote) takes over from the pieces
// assembled before it: a write of ours into it changes the stored block,
// and once that block is evicted, the old pieces must not come back.
TEST_F(CacheTest, AStoredBlockReplacesTheOwnPiecesOfIt) {
  Reopen(4 * kBs);
  cache_->Validated(9, FileAttrs(10, 2 * kBs));
  const size_t half = kBs / 2;
  std::string a(half, 'A'), n(half, 'N'), c(half, 'C');
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 10, FileAttrs(11, 2 * kBs), 0, a.data(),
                         a.size());
  ASSERT_TRUE(cache_->PutBlock(9, 0, cache_->Generation(9),
                               n + std::string(half, 'R')));  // read at 11
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 11, FileAttrs(12, 2 * kBs), 0, n.data(),
                         n.size());
  std::string d;
  ASSERT_TRUE(cache_->GetBlock(9, 0, &d));
  EXPECT_EQ(d, n + std::string(half, 'R'));
  Fill(5, 1, 4, 'x');  // evicts it
  ASSERT_FALSE(cache_->GetBlock(9, 0, &d));
  cache_->BeginOwnChange(9);
  cache_->AfterOwnChange(9, true, 12, FileAttrs(13, 2 * kBs), half, c.data(),
                         c.size());
  EXPECT_FALSE(cache_->GetBlock(9, 0, &d))
      << "built from the old pieces: " << d.substr(0, 1);
}

// Assemblies are bounded over all files: the oldest goes first.
TEST_F(CacheTest, BlockAssembliesAreBoundedOldestFirst) {
  const size_t half = kBs / 2;
  std::string a(half, 'A'), b(half, 'B');
  const Key first = 100, files = 65;
  for (Key k = first; k < first + files; k++) {
    cache_->Validated(k, FileAttrs(10, 0));
    cache_->BeginOwnChange(k);
    cache_->BeginOwnChange(k);
    cache_->AfterOwnChange(k, true, 10, FileAttrs(11, kBs), half, b.data(),
                           b.size());
  }
  std::string d;
  for (Key k : {first, first + files - 1})
    cache_->AfterOwnChange(k, true, 10, FileAttrs(11, kBs), 0, a.data(),
                           a.size());
  EXPECT_FALSE(cache_->GetBlock(first, 0, &d)) << "the oldest was dropped";
  ASSERT_TRUE(cache_->GetBlock(first + files - 1, 0, &d));
  EXPECT_EQ(d, a + b);
}

}  // namespace
}  // namespace nache
