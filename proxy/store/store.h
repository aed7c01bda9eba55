// The persistent store of one export: a RocksDB database in the configured
// cache directory. It owns the database and its column families; modules
// (handles now; blocks, attributes, directories and the write log later) get
// their column family from here and never open RocksDB themselves.
//
// The store may hold the only copy of acknowledged writes (write-back), so
// it is never discarded on a guess:
// - a store proven corrupt (RocksDB says Corruption, or our own format
//   records are wrong) refuses to start, unless the operator allowed it to
//   be moved aside (StoreOptions::reset_if_corrupt, Cache_Reset_If_Corrupt);
// - a store made for another upstream (server, port or path) refuses to
//   start, unless allowed (reset_on_upstream_change,
//   Cache_Reset_On_Upstream_Change);
// - every other open error (the lock held by another daemon or export, EIO,
//   EMFILE, EACCES, a full disk) refuses to start and leaves the store as it
//   is.
// A store moved aside is renamed beside the directory, never deleted; one
// holding unflushed write-back state is logged as an error and counted
// (nache_cache_store_moved_aside_total{unflushed="yes"}).
//
// A full cache filesystem: a write that fails for lack of space puts the
// store in the "no space" state (RocksDB stops accepting writes; reads go
// on). Write() resumes the database by itself (DB::Resume) at the first
// write after the filesystem's free space grew; RocksDB's own recovery is
// turned off for this case (it waits for a free memtable's worth of space,
// 64 MiB here, and makes Resume() answer Busy meanwhile). RocksDB's info
// log goes to our log, not to a file in the store: the Debian build keeps
// RocksDB's assertions, and its file logger aborts the process on the write
// after one that failed for space.
//
// Durable writes: WriteBeforeReply is for what a client must not hear of
// before it is on disk; under a ReplySync (reply_sync.h) its sync is
// deferred to the call's end, and Sync then flushes the log once for all
// the writers waiting (group commit).
//
// Thread safety: all methods are thread-safe (RocksDB is; the no-space
// state and the sync have their own mutexes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "util/mutex.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class Slice;
class Status;
class WriteBatch;
struct WriteOptions;
}  // namespace rocksdb

namespace nache {
namespace metrics {
class ExportMetrics;
}

// What Store::Open checks and allows. The defaults suit tests: no upstream
// identity check, nothing moved aside.
struct StoreOptions {
  // The remote this store caches: recorded when the store is created and
  // checked at every open. Empty server: not checked.
  std::string upstream_server;
  uint32_t upstream_port = 0;
  std::string upstream_path;
  // Cache_Reset_If_Corrupt: a corrupt store is moved aside and nache starts
  // empty (instead of refusing to start).
  bool reset_if_corrupt = false;
  // Cache_Reset_On_Upstream_Change: a store made for another upstream is
  // moved aside and nache starts empty (instead of refusing to start).
  bool reset_on_upstream_change = false;
  // Where the store's series go (moved aside, no space); may be null.
  metrics::ExportMetrics *metrics = nullptr;
  // The environment RocksDB runs on; null: the default one. For tests (a
  // file system that counts or holds the log's syncs).
  std::shared_ptr<rocksdb::Env> env;
};

// Unflushed write-back state found in a store: what would be lost if it
// were discarded. See Store::CountUnflushed.
struct UnflushedCount {
  uint64_t log_records = 0;    // kWbLog: creates, removes, renames not sent
  uint64_t dirty_blocks = 0;   // kBlockMeta records marked dirty
  uint64_t pending_attrs = 0;  // kAttrs records with attributes to send
  bool any() const { return log_records || dirty_blocks || pending_attrs; }
};

class Store {
 public:
  // Column families, one per kind of record.
  enum Family {
    kMeta = 0,       // store format, incarnation id, upstream identity
    kHandles = 1,    // key -> remote filehandle, parent, name
    kFhIndex = 2,    // remote filehandle -> key
    kAttrs = 3,      // key -> data generation, attributes (cache)
    kBlockMeta = 4,  // key|block -> generation, change, length, dirty
    kBlocks = 5,     // key|block -> block bytes
    kWbLog = 6,      // sequence number -> write-back log record
    kNumFamilies = 7
  };

  ~Store();

  // Opens (or creates) the store in dir. On failure returns nullptr and sets
  // *err to a message that starts with "Cache_Dir: " and names dir, the
  // error and, where one would change the outcome, the parameter (see the
  // file comment for what fails).
  static std::unique_ptr<Store> Open(const std::string &dir,
                                     const StoreOptions &opts,
                                     std::string *err);
  static std::unique_ptr<Store> Open(const std::string &dir, std::string *err) {
    return Open(dir, StoreOptions(), err);
  }

  rocksdb::DB *db() const { return db_; }
  rocksdb::ColumnFamilyHandle *family(Family f) const { return families_[f]; }

  // Random id chosen when the store was created.
  uint64_t incarnation() const { return incarnation_; }

  // Reads/writes a small metadata value (kMeta family).
  bool GetMeta(const std::string &name, std::string *value) const;
  bool PutMeta(const std::string &name, const std::string &value, bool sync);

  // Writes batch. The path for writes that may meet a full disk: in the
  // no-space state it first resumes the database when space has come
  // back since; a write failing for space enters that state (logged once,
  // counted).
  rocksdb::Status Write(const rocksdb::WriteOptions &opts,
                        rocksdb::WriteBatch *batch);
  // Writes batch, to be on disk before the client of the calling thread's
  // call hears of it: under a ReplySync, unsynced now and synced by the
  // scope's Finish (outside the caller's locks, shared with other calls);
  // without one, synced now.
  rocksdb::Status WriteBeforeReply(rocksdb::WriteBatch *batch);
  // Makes every write this store has taken so far durable (RocksDB's log
  // synced). Callers that arrive while a sync is under way wait for it and
  // then share one more: one flush of the disk for all of them. A failure
  // is counted as a store write failure.
  rocksdb::Status Sync() EXCLUDES(sync_mu_);
  // Makes every WriteBeforeReply write taken so far durable: at once when
  // they are (no disk flush), else as Sync. For what reads such writes and
  // acts on them elsewhere (write-back's sends to the remote): a power
  // loss must not take back here what the remote already has.
  rocksdb::Status SyncDeferred() EXCLUDES(sync_mu_);
  // One key's value, the same way (a batch of one).
  rocksdb::Status Put(const rocksdb::WriteOptions &opts,
                      rocksdb::ColumnFamilyHandle *family,
                      const rocksdb::Slice &key, const rocksdb::Slice &value);
  // True while the store refuses writes for lack of space.
  bool no_space() const { return no_space_.load(); }

  // The unflushed write-back state this store holds (a full scan of the
  // log, block_meta and attrs families; for the open checks and tests).
  UnflushedCount CountUnflushed() const;

 private:
  enum class OpenFailure {
    kNone,
    kCorrupt,
    kLocked,
    kNoSpace,
    kOther,
    kUpstreamChanged
  };

  Store() = default;
  // Opens dir; on failure says why and what kind of failure it is.
  OpenFailure Init(const std::string &dir, const StoreOptions &opts,
                   std::string *why);
  // Checks (or records) the upstream identity of an open store.
  OpenFailure CheckUpstream(const StoreOptions &opts, bool fresh,
                            std::string *why);
  void Close();
  // Entered when a write failed for space.
  void NoteNoSpace(const rocksdb::Status &st) EXCLUDES(space_mu_);
  // In the no-space state: resumes the database when the filesystem has
  // more free space than at the last failure.
  void MaybeResume() EXCLUDES(space_mu_);

  std::string dir_;                                           // immutable
  rocksdb::DB *db_ = nullptr;                                 // owned
  rocksdb::ColumnFamilyHandle *families_[kNumFamilies] = {};  // owned
  uint64_t incarnation_ = 0;                   // immutable after Open
  metrics::ExportMetrics *metrics_ = nullptr;  // not owned; may be null
  std::atomic<bool> no_space_{false};          // writes fail for lack of space
  Mutex space_mu_{"store_space"};              // also held across Resume
  // Free bytes when a write last failed.
  uint64_t free_at_failure_ GUARDED_BY(space_mu_) = 0;
  std::shared_ptr<rocksdb::Env> env_;  // StoreOptions::env; outlives db_
  Mutex sync_mu_{"store_sync"};        // not held across the disk's flush
  CondVar sync_done_{&sync_mu_};       // a sync ended
  bool syncing_ GUARDED_BY(sync_mu_) = false;
  // Every write with a sequence number up to this one is durable.
  uint64_t synced_seq_ GUARDED_BY(sync_mu_) = 0;
  // WriteBeforeReply writes under way in a call's scope, and the highest
  // sequence number one of them has seen after writing (SyncDeferred).
  std::atomic<uint64_t> deferring_{0};
  std::atomic<uint64_t> deferred_seq_{0};
};

}  // namespace nache
