// Durable writes made durable at the call's end (store/reply_sync.h) and
// the store's shared sync (Store::Sync): counted and held on a file system
// that sees every sync of RocksDB's log.
#include "store/reply_sync.h"

#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "file_attrs.h"
#include "metrics/metrics.h"
#include "store/store.h"
#include "temp_dir.h"
#include "util/mutex.h"

namespace nache {
namespace {

using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using testing_util::TempDir;

constexpr auto kPatience = std::chrono::seconds(20);

// The local file system, except that the syncs of RocksDB's write-ahead
// logs (*.log) are counted, can be held (a sync waits until let go), and
// can be made to fail.
class LogSyncFs : public rocksdb::FileSystemWrapper {
 public:
  LogSyncFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char *Name() const override { return "LogSyncFs"; }

  IOStatus NewWritableFile(const std::string &f, const FileOptions &o,
                           std::unique_ptr<FSWritableFile> *r,
                           IODebugContext *d) override {
    return Wrap(f, target()->NewWritableFile(f, o, r, d), r);
  }
  IOStatus ReopenWritableFile(const std::string &f, const FileOptions &o,
                              std::unique_ptr<FSWritableFile> *r,
                              IODebugContext *d) override {
    return Wrap(f, target()->ReopenWritableFile(f, o, r, d), r);
  }
  IOStatus ReuseWritableFile(const std::string &f, const std::string &old,
                             const FileOptions &o,
                             std::unique_ptr<FSWritableFile> *r,
                             IODebugContext *d) override {
    return Wrap(f, target()->ReuseWritableFile(f, old, o, r, d), r);
  }

  int syncs() {
    MutexLock g(&mu_);
    return syncs_;
  }

  // Syncs from now on wait until Release.
  void Hold() {
    MutexLock g(&mu_);
    hold_ = true;
  }
  void Release() {
    MutexLock g(&mu_);
    hold_ = false;
    cv_.SignalAll();
  }
  // True once n syncs are waiting in the hold (false after kPatience).
  bool WaitHeld(int n) {
    MutexLock g(&mu_);
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (held_ < n)
      if (!cv_.WaitUntil(until) && held_ < n) return false;
    return true;
  }
  void FailSyncs(bool fail) {
    MutexLock g(&mu_);
    fail_ = fail;
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<FSWritableFile> f, LogSyncFs *fs)
        : FSWritableFileOwnerWrapper(std::move(f)), fs_(fs) {}
    IOStatus Sync(const IOOptions &o, IODebugContext *d) override {
      IOStatus s = fs_->OnSync();
      return s.ok() ? target()->Sync(o, d) : s;
    }
    IOStatus Fsync(const IOOptions &o, IODebugContext *d) override {
      IOStatus s = fs_->OnSync();
      return s.ok() ? target()->Fsync(o, d) : s;
    }

   private:
    LogSyncFs *fs_;
  };

  IOStatus Wrap(const std::string &name, IOStatus s,
                std::unique_ptr<FSWritableFile> *r) {
    if (s.ok() && name.size() > 4 && name.substr(name.size() - 4) == ".log")
      r->reset(new File(std::move(*r), this));
    return s;
  }
  IOStatus OnSync() {
    MutexLock g(&mu_);
    syncs_++;
    if (hold_) {
      held_++;
      cv_.SignalAll();
      while (hold_) cv_.Wait();
      held_--;
    }
    return fail_ ? IOStatus::IOError("sync failed (test)") : IOStatus::OK();
  }

  Mutex mu_;
  CondVar cv_{&mu_};
  int syncs_ GUARDED_BY(mu_) = 0;
  int held_ GUARDED_BY(mu_) = 0;
  bool hold_ GUARDED_BY(mu_) = false;
  bool fail_ GUARDED_BY(mu_) = false;
};

// Lets held syncs go at the end of its scope, however the test ends
// (declared after the futures whose threads may be held, so that it runs
// before they are joined).
struct ReleaseAtEnd {
  LogSyncFs *fs;
  ~ReleaseAtEnd() { fs->Release(); }
};

double Counter(metrics::Metrics &m, const std::string &name) {
  for (const prometheus::MetricFamily &f : m.Collect())
    if (f.name == name && !f.metric.empty()) return f.metric[0].counter.value;
  return -1;
}

class ReplySyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs_ = std::make_shared<LogSyncFs>();
    StoreOptions o;
    o.env = std::shared_ptr<rocksdb::Env>(rocksdb::NewCompositeEnv(fs_));
    o.metrics = metrics_.ForExport(1);
    std::string err;
    store_ = Store::Open(dir_.path() + "/db", o, &err);
    ASSERT_TRUE(store_) << err;
  }
  // A batch of one record in the meta family.
  rocksdb::WriteBatch Batch(const std::string &k) {
    rocksdb::WriteBatch b;
    b.Put(store_->family(Store::kMeta), k, "v");
    return b;
  }

  TempDir dir_;
  metrics::Metrics metrics_;
  std::shared_ptr<LogSyncFs> fs_;
  std::unique_ptr<Store> store_;
};

TEST_F(ReplySyncTest, WithoutAScopeADurableWriteIsSyncedAtOnce) {
  const int before = fs_->syncs();
  rocksdb::WriteBatch b = Batch("a");
  ASSERT_TRUE(store_->WriteBeforeReply(&b).ok());
  EXPECT_EQ(fs_->syncs(), before + 1);
}

TEST_F(ReplySyncTest, UnderAScopeDurableWritesAreSyncedOnceAtFinish) {
  const int before = fs_->syncs();
  ReplySync reply;
  for (const char *k : {"a", "b", "c"}) {
    rocksdb::WriteBatch b = Batch(k);
    ASSERT_TRUE(store_->WriteBeforeReply(&b).ok());
  }
  EXPECT_EQ(fs_->syncs(), before) << "synced before the call's end";
  EXPECT_EQ(reply.Finish(), nullptr);
  EXPECT_EQ(fs_->syncs(), before + 1);
  EXPECT_EQ(Counter(metrics_, "nache_cache_store_durable_writes_total"), 3);
  EXPECT_EQ(Counter(metrics_, "nache_cache_store_syncs_total"), 1);
}

TEST_F(ReplySyncTest, ANestedScopesWritesAreTheOuterOnesToSync) {
  const int before = fs_->syncs();
  ReplySync outer;
  {
    ReplySync inner;
    rocksdb::WriteBatch b = Batch("a");
    ASSERT_TRUE(store_->WriteBeforeReply(&b).ok());
    EXPECT_EQ(inner.Finish(), nullptr);
  }
  EXPECT_EQ(fs_->syncs(), before);
  EXPECT_EQ(ReplySync::Current(), &outer);
  EXPECT_EQ(outer.Finish(), nullptr);
  EXPECT_EQ(fs_->syncs(), before + 1);
}

TEST_F(ReplySyncTest, AScopeLeftWithoutFinishStillSyncs) {
  const int before = fs_->syncs();
  {
    ReplySync reply;
    rocksdb::WriteBatch b = Batch("a");
    ASSERT_TRUE(store_->WriteBeforeReply(&b).ok());
  }
  EXPECT_EQ(fs_->syncs(), before + 1);
  EXPECT_EQ(ReplySync::Current(), nullptr);
}

TEST_F(ReplySyncTest, AFailedSyncIsReportedByFinishAndCounted) {
  ReplySync reply;
  rocksdb::WriteBatch b = Batch("a");
  ASSERT_TRUE(store_->WriteBeforeReply(&b).ok());
  fs_->FailSyncs(true);
  EXPECT_EQ(reply.Finish(), store_.get());
  fs_->FailSyncs(false);
  for (const prometheus::MetricFamily &f : metrics_.Collect()) {
    if (f.name != "nache_cache_store_write_failures_total") continue;
    double other = 0;
    for (const auto &m : f.metric)
      for (const auto &l : m.label)
        if (l.name == "reason" && l.value == "other") other = m.counter.value;
    EXPECT_EQ(other, 1);
  }
}

// Linux reports a failed write-back of a file once: a second sync of the
// log after a failed one would succeed although pages of it may be gone.
// Durability here rests on RocksDB refusing that (its log writer keeps the
// error, and the database stops taking writes until it is reopened): a
// call that wrote before another's sync failed must not be told its write
// is durable, nor may a later write be taken.
TEST_F(ReplySyncTest, AfterAFailedSyncNoLaterSyncVouchesForTheLog) {
  std::promise<void> b_wrote, a_failed;
  std::shared_future<void> a_failed_f = a_failed.get_future().share();
  auto b = std::async(std::launch::async, [this, &b_wrote, a_failed_f] {
    ReplySync reply;
    rocksdb::WriteBatch w = Batch("b");
    const bool ok = store_->WriteBeforeReply(&w).ok();
    b_wrote.set_value();
    a_failed_f.wait();
    return ok && reply.Finish() == nullptr;
  });
  b_wrote.get_future().wait();
  {
    ReplySync reply;
    rocksdb::WriteBatch w = Batch("a");
    ASSERT_TRUE(store_->WriteBeforeReply(&w).ok());
    fs_->FailSyncs(true);
    EXPECT_EQ(reply.Finish(), store_.get());
    fs_->FailSyncs(false);  // reported once
  }
  a_failed.set_value();
  EXPECT_FALSE(b.get()) << "told durable by a sync after a failed one";
  rocksdb::WriteBatch w = Batch("c");
  EXPECT_FALSE(store_->WriteBeforeReply(&w).ok())
      << "a synced write taken after a failed sync";
}

// SyncDeferred (write-back's sends): a flush of the log while a call's
// durable write is not yet synced, none once it is.
TEST_F(ReplySyncTest, SyncDeferredSyncsOnlyWhatACallHasNotYet) {
  std::promise<void> wrote, synced;
  std::shared_future<void> synced_f = synced.get_future().share();
  auto call = std::async(std::launch::async, [this, &wrote, synced_f] {
    ReplySync reply;
    rocksdb::WriteBatch w = Batch("a");
    const bool ok = store_->WriteBeforeReply(&w).ok();
    wrote.set_value();
    synced_f.wait();
    return ok && reply.Finish() == nullptr;
  });
  wrote.get_future().wait();
  const int before = fs_->syncs();
  EXPECT_TRUE(store_->SyncDeferred().ok());
  EXPECT_EQ(fs_->syncs(), before + 1);
  synced.set_value();
  EXPECT_TRUE(call.get());
  const int after = fs_->syncs();
  rocksdb::WriteBatch plain = Batch("not durable");
  ASSERT_TRUE(store_->Write(rocksdb::WriteOptions(), &plain).ok());
  EXPECT_TRUE(store_->SyncDeferred().ok());
  EXPECT_EQ(fs_->syncs(), after) << "nothing deferred was left to sync";
}

// Four calls, one sync of the log under way when the other three write:
// those three share the next sync (two in all, not four).
TEST_F(ReplySyncTest, CallsThatWriteDuringASyncShareTheNextOne) {
  const int before = fs_->syncs();
  std::vector<std::promise<void>> wrote(3);
  std::future<bool> first;
  std::vector<std::future<bool>> others;
  ReleaseAtEnd release{fs_.get()};
  fs_->Hold();
  first = std::async(std::launch::async, [this] {
    ReplySync reply;
    rocksdb::WriteBatch b = Batch("first");
    store_->WriteBeforeReply(&b);
    return reply.Finish() == nullptr;
  });
  ASSERT_TRUE(fs_->WaitHeld(1));
  for (int i = 0; i < 3; i++) {
    others.push_back(std::async(std::launch::async, [this, i, &wrote] {
      ReplySync reply;
      rocksdb::WriteBatch b = Batch("other" + std::to_string(i));
      bool ok = store_->WriteBeforeReply(&b).ok();
      wrote[i].set_value();
      return ok && reply.Finish() == nullptr;
    }));
  }
  for (auto &w : wrote)
    ASSERT_EQ(w.get_future().wait_for(kPatience), std::future_status::ready)
        << "a write waited for another call's sync";
  fs_->Release();
  EXPECT_TRUE(first.get());
  for (auto &o : others) EXPECT_TRUE(o.get());
  EXPECT_EQ(fs_->syncs(), before + 2);
  EXPECT_EQ(Counter(metrics_, "nache_cache_store_durable_writes_total"), 4);
  EXPECT_EQ(Counter(metrics_, "nache_cache_store_syncs_total"), 2);
}

// The point of it all: while a client's write-back write is being made
// durable, the cache's lock is free for every other call.
TEST_F(ReplySyncTest, TheCacheLockIsFreeWhileALocalWriteIsSynced) {
  CacheOptions co;
  co.size_bytes = 1 << 20;
  co.block_size = 4096;
  co.attr_timeout_ms = 60000;
  Cache cache(store_.get(), co, nullptr);
  cache.Validated(1, testing_util::FileAttrs(1, 0));
  cache.Validated(2, testing_util::FileAttrs(1, 0));
  std::future<bool> writer, other;
  ReleaseAtEnd release{fs_.get()};
  fs_->Hold();
  writer = std::async(std::launch::async, [&cache] {
    ReplySync reply;
    uint64_t need;
    bool ok = cache.LocalWrite(1, 0, "data", 4, &need);
    return ok && reply.Finish() == nullptr;
  });
  ASSERT_TRUE(fs_->WaitHeld(1));
  // Another client's calls, while the first one's sync waits.
  other = std::async(std::launch::async, [&cache] {
    upstream::Attrs got;
    return cache.IsDirty(1) && cache.KnownAttrs(2, &got);
  });
  const bool free = other.wait_for(kPatience) == std::future_status::ready;
  fs_->Release();
  EXPECT_TRUE(free) << "the cache's lock was held across the sync";
  EXPECT_TRUE(writer.get());
  EXPECT_TRUE(other.get());
}

}  // namespace
}  // namespace nache
