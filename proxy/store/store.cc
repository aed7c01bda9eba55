// RocksDB setup of the persistent store. See store.h.
#include "store/store.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/transaction_log.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "metrics/metrics.h"
#include "store/reply_sync.h"
#include "util/bytes.h"
#include "util/log.h"

namespace nache {
namespace {

// Stored in kMeta under "format": a store written by another program, or by
// an incompatible nache, is not misread.
constexpr char kFormat[] = "nache-store-v1";

// kMeta names of the upstream identity (recorded at creation).
constexpr char kUpstreamServer[] = "upstream_server";
constexpr char kUpstreamPort[] = "upstream_port";
constexpr char kUpstreamPath[] = "upstream_path";

const char *const kFamilyNames[Store::kNumFamilies] = {
    "meta", "handles", "fh_index", "attrs", "block_meta", "blocks", "wblog"};

// RocksDB's info log, into ours. Its default logger writes a LOG file in
// the store; once an append to it fails (a full disk), the Debian build's
// assertions abort the process at the next log line.
class StoreLogger : public rocksdb::Logger {
 public:
  StoreLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char *format, va_list ap) override {
    Emit(kLogWarn, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char *format,
            va_list ap) override {
    // Below WARN: flush and compaction chatter, option dumps (HEADER).
    if (level < GetInfoLogLevel() ||
        level == rocksdb::InfoLogLevel::HEADER_LEVEL)
      return;
    Emit(level >= rocksdb::InfoLogLevel::ERROR_LEVEL ? kLogCrit : kLogWarn,
         format, ap);
  }

 private:
  static void Emit(int level, const char *format, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof(msg), format, ap);
    NACHE_LOG(level, "NACHE_CACHE", "rocksdb: %s", msg);
  }
};

// RocksDB would recover from a full disk by itself only once a memtable's
// worth of space (64 MiB, the blocks family's) is free, checking every few
// seconds, and answers Resume() with Busy meanwhile. We resume ourselves
// (Store::MaybeResume) as soon as space has come back.
class NoSpaceListener : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                            rocksdb::Status error,
                            bool *auto_recovery) override {
    if (error.IsNoSpace()) *auto_recovery = false;
  }
};

rocksdb::Options BaseOptions() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  // Small values, point lookups: a bloom filter per table and a modest
  // block cache (data blocks get their own settings with the data cache).
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = rocksdb::NewLRUCache(64 << 20);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  // Records are small and mostly handles and attributes, which compress
  // poorly; the CPU is better spent serving clients.
  o.compression = rocksdb::kNoCompression;
  o.max_background_jobs = 2;
  o.keep_log_file_num = 4;
  // The WAL is written but not synced per write: a daemon crash keeps
  // everything (the WAL is in the page cache); a power loss may lose the
  // newest cache entries, and the cache is rebuilt from the remote. What
  // must survive power loss (the write-back log) is written with sync.
  o.manual_wal_flush = false;
  o.info_log = std::make_shared<StoreLogger>();
  o.listeners.push_back(std::make_shared<NoSpaceListener>());
  return o;
}

// Options of the blocks family: large values (a data block each), written
// once, read whole, deleted by range on invalidation. Bigger memtables mean
// fewer, larger flushes; no compression (file data is often compressed
// already and these two cores serve clients); blob-free plain SST. Reads of
// blocks bypass RocksDB's block cache (ReadOptions::fill_cache = false in
// the cache) and rely on the OS page cache, so block bytes are not cached
// twice.
rocksdb::ColumnFamilyOptions BlockFamilyOptions(const rocksdb::Options &base) {
  rocksdb::ColumnFamilyOptions o(base);
  o.write_buffer_size = 64 << 20;
  o.max_write_buffer_number = 3;
  o.target_file_size_base = 128 << 20;
  o.compression = rocksdb::kNoCompression;
  return o;
}

std::vector<rocksdb::ColumnFamilyDescriptor> FamilyDescriptors(
    const rocksdb::Options &opts) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char *name : kFamilyNames) {
    std::string n(name);
    cfs.emplace_back(n == "meta" ? rocksdb::kDefaultColumnFamilyName : n,
                     n == "blocks" ? BlockFamilyOptions(opts)
                                   : rocksdb::ColumnFamilyOptions(opts));
  }
  return cfs;
}

bool MakeDirs(const std::string &dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); i++) {
    if (i == dir.size() || dir[i] == '/') {
      if (!path.empty() && mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
        return false;
    }
    if (i < dir.size()) path += dir[i];
  }
  return true;
}

uint64_t FreeBytes(const std::string &dir) {
  struct statvfs sv;
  if (statvfs(dir.c_str(), &sv) != 0) return 0;
  return uint64_t(sv.f_bavail) * sv.f_frsize;
}

// The unflushed write-back state in the families of an open database. The
// record layouts are the cache's and the log's (cache.cc: a block_meta
// record of 41 bytes whose byte 24 is set is dirty; an attrs record of
// version 2 or later carries the mask of attributes set locally after the
// raw attributes, whose size is at offset 10). StoreTest.CountsUnflushed
// checks this against the real cache.
UnflushedCount CountIn(rocksdb::DB *db,
                       rocksdb::ColumnFamilyHandle *const *families) {
  UnflushedCount n;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(ro, families[Store::kWbLog]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) n.log_records++;
  it.reset(db->NewIterator(ro, families[Store::kBlockMeta]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice v = it->value();
    if (v.size() == 41 && v.data()[24] != 0) n.dirty_blocks++;
  }
  it.reset(db->NewIterator(ro, families[Store::kAttrs]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice v = it->value();
    if (v.size() < 14 || uint8_t(v.data()[0]) < 2) continue;
    uint32_t attrs_size;
    memcpy(&attrs_size, v.data() + 10, 4);
    size_t mask_at = 14 + size_t(attrs_size);
    if (v.size() >= mask_at + 8 && GetBE64(v.data() + mask_at) != 0)
      n.pending_attrs++;
  }
  return n;
}

std::string Describe(const UnflushedCount &n) {
  char buf[160];
  snprintf(buf, sizeof(buf),
           "%llu dirty blocks, %llu log records (creates, removes, "
           "renames), %llu files with attribute changes",
           (unsigned long long)n.dirty_blocks,
           (unsigned long long)n.log_records,
           (unsigned long long)n.pending_attrs);
  return buf;
}

// Counts the unflushed state of a store that would not open read-write
// (corrupt): read-only, which may still work. False when it does not.
bool CountUnreadable(const std::string &dir, UnflushedCount *out) {
  rocksdb::Options opts = BaseOptions();
  opts.create_if_missing = false;
  std::vector<rocksdb::ColumnFamilyHandle *> handles;
  rocksdb::DB *db = nullptr;
  rocksdb::Status st = rocksdb::DB::OpenForReadOnly(
      opts, dir, FamilyDescriptors(opts), &handles, &db);
  if (!st.ok()) return false;
  *out = CountIn(db, handles.data());
  for (auto *h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
  return true;
}

// Renames dir beside itself as dir.<tag>-<UTC time>[-N]; the new name, or
// empty with *why set.
std::string MoveAside(const std::string &dir, const char *tag,
                      std::string *why) {
  char stamp[32];
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  std::string base = dir + "." + tag + "-" + stamp;
  std::string aside = base;
  struct stat sb;
  for (int i = 1; lstat(aside.c_str(), &sb) == 0; i++)
    aside = base + "-" + std::to_string(i);
  if (rename(dir.c_str(), aside.c_str()) != 0) {
    *why =
        "cannot rename it to " + aside + ": " + strerror(errno) +
        (errno == EBUSY ? " (a mount point? use a directory inside it)" : "");
    return std::string();
  }
  return aside;
}

std::string WithoutTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

Store::~Store() { Close(); }

void Store::Close() {
  if (db_ == nullptr) return;
  for (auto *&f : families_) {
    if (f != nullptr) db_->DestroyColumnFamilyHandle(f);
    f = nullptr;
  }
  delete db_;
  db_ = nullptr;
}

std::unique_ptr<Store> Store::Open(const std::string &dir_in,
                                   const StoreOptions &opts, std::string *err) {
  const std::string dir = WithoutTrailingSlashes(dir_in);
  if (!MakeDirs(dir)) {
    *err = "Cache_Dir: cannot create " + dir + ": " + strerror(errno);
    return nullptr;
  }
  std::unique_ptr<Store> s(new Store());
  std::string why;
  OpenFailure f = s->Init(dir, opts, &why);
  if (f == OpenFailure::kNone) return s;

  const char *tag = nullptr;  // what the store is moved aside as
  bool corrupt = f == OpenFailure::kCorrupt;
  switch (f) {
    case OpenFailure::kCorrupt:
      if (!opts.reset_if_corrupt) {
        *err = "Cache_Dir: the store in " + dir + " is corrupt (" + why +
               "); it may hold writes not yet sent to the remote, so nache "
               "leaves it alone: repair or remove it, or set "
               "Cache_Reset_If_Corrupt = true to have it moved aside and "
               "start with an empty cache";
        return nullptr;
      }
      tag = "corrupt";
      break;
    case OpenFailure::kUpstreamChanged:
      if (!opts.reset_on_upstream_change) {
        *err = "Cache_Dir: " + why +
               "; restore the old setting, or set "
               "Cache_Reset_On_Upstream_Change = true to have the old "
               "store moved aside (its unflushed writes kept there, not "
               "sent) and start with an empty cache";
        return nullptr;
      }
      tag = "upstream-changed";
      break;
    case OpenFailure::kLocked:
      *err = "Cache_Dir: " + dir +
             " is in use: another nache daemon, or another export of this "
             "one, has its store open (" +
             why + "); each export needs its own Cache_Dir";
      return nullptr;
    case OpenFailure::kNoSpace:
      *err = "Cache_Dir: cannot open the store in " + dir +
             ": its filesystem is full (" + why +
             "); free some space there and start again (the store is "
             "kept as it is)";
      return nullptr;
    default:
      *err = "Cache_Dir: cannot open the store in " + dir + ": " + why;
      return nullptr;
  }

  // Moving aside (allowed by the operator): say loudly what it holds.
  UnflushedCount unflushed;
  bool counted = true;
  if (corrupt) {
    s->Close();
    counted = CountUnreadable(dir, &unflushed);
  } else {
    unflushed = s->CountUnflushed();
    s->Close();
  }
  std::string move_err;
  std::string aside = MoveAside(dir, tag, &move_err);
  if (aside.empty()) {
    *err = "Cache_Dir: cannot move the store in " + dir + " aside (" + why +
           "): " + move_err;
    return nullptr;
  }
  if (!counted)
    NACHE_LOG(kLogMajor, "NACHE_CACHE",
              "cache store %s moved to %s (%s); it could not be read to "
              "check for unflushed write-back data, which if any was NOT "
              "sent to the remote and is only there",
              dir.c_str(), aside.c_str(), why.c_str());
  else if (unflushed.any())
    NACHE_LOG(kLogMajor, "NACHE_CACHE",
              "cache store %s moved to %s (%s) holding unflushed write-back "
              "data that was NOT sent to the remote: %s; it is only there",
              dir.c_str(), aside.c_str(), why.c_str(),
              Describe(unflushed).c_str());
  else
    NACHE_LOG(kLogCrit, "NACHE_CACHE",
              "cache store %s moved to %s (%s); it held no unflushed "
              "write-back data; starting with an empty cache",
              dir.c_str(), aside.c_str(), why.c_str());
  if (opts.metrics)
    opts.metrics->CountStoreMovedAside(
        corrupt, !counted          ? metrics::Unflushed::kUnknown
                 : unflushed.any() ? metrics::Unflushed::kYes
                                   : metrics::Unflushed::kNo);
  s.reset(new Store());
  if (!MakeDirs(dir)) {
    *err = "Cache_Dir: cannot create " + dir + ": " + strerror(errno);
    return nullptr;
  }
  if (s->Init(dir, opts, &why) != OpenFailure::kNone) {
    *err = "Cache_Dir: cannot create a store in " + dir + ": " + why;
    return nullptr;
  }
  return s;
}

Store::OpenFailure Store::Init(const std::string &dir, const StoreOptions &opts,
                               std::string *why) {
  dir_ = dir;
  metrics_ = opts.metrics;
  env_ = opts.env;
  rocksdb::Options o = BaseOptions();
  if (env_) o.env = env_.get();
  std::vector<rocksdb::ColumnFamilyHandle *> handles;
  // A foreign RocksDB may hold column families we do not know; it is
  // refused (the open fails with InvalidArgument) rather than guessed at.
  rocksdb::Status st =
      rocksdb::DB::Open(o, dir, FamilyDescriptors(o), &handles, &db_);
  if (!st.ok()) {
    db_ = nullptr;
    *why = st.ToString();
    if (st.IsCorruption()) return OpenFailure::kCorrupt;
    if (st.IsNoSpace()) return OpenFailure::kNoSpace;
    // RocksDB's LOCK file: fcntl-locked by another process, or open in
    // this one ("lock hold by current process").
    if (st.IsIOError() && (why->find("/LOCK") != std::string::npos ||
                           why->find("lock hold") != std::string::npos))
      return OpenFailure::kLocked;
    return OpenFailure::kOther;
  }
  for (size_t i = 0; i < handles.size(); i++) families_[i] = handles[i];

  std::string format;
  bool fresh = !GetMeta("format", &format);
  if (!fresh && format != kFormat) {
    *why = "unknown store format '" + format + "'";
    return OpenFailure::kCorrupt;
  }
  std::string inc;
  if (fresh) {
    std::random_device rd;
    incarnation_ = (uint64_t(rd()) << 32) ^ rd();
    if (incarnation_ == 0) incarnation_ = 1;
    inc.assign(reinterpret_cast<const char *>(&incarnation_), 8);
    if (!PutMeta("incarnation", inc, true) ||
        !PutMeta("format", kFormat, true)) {
      *why = "cannot write store metadata";
      return OpenFailure::kOther;
    }
    NACHE_LOG(kLogEvent, "NACHE_CACHE", "created cache store %s (id %016llx)",
              dir.c_str(), (unsigned long long)incarnation_);
  } else {
    if (!GetMeta("incarnation", &inc) || inc.size() != 8) {
      *why = "store metadata lacks its incarnation id";
      return OpenFailure::kCorrupt;
    }
    memcpy(&incarnation_, inc.data(), 8);
    NACHE_LOG(kLogEvent, "NACHE_CACHE", "opened cache store %s (id %016llx)",
              dir.c_str(), (unsigned long long)incarnation_);
  }
  return CheckUpstream(opts, fresh, why);
}

Store::OpenFailure Store::CheckUpstream(const StoreOptions &opts, bool fresh,
                                        std::string *why) {
  if (opts.upstream_server.empty()) return OpenFailure::kNone;
  const std::string port = std::to_string(opts.upstream_port);
  const std::string now =
      opts.upstream_server + ":" + port + opts.upstream_path;
  std::string server, old_port, path;
  bool recorded = GetMeta(kUpstreamServer, &server) &&
                  GetMeta(kUpstreamPort, &old_port) &&
                  GetMeta(kUpstreamPath, &path);
  if (recorded) {
    if (server == opts.upstream_server && old_port == port &&
        path == opts.upstream_path)
      return OpenFailure::kNone;
    std::string params;
    auto add = [&params](const char *p) {
      params += params.empty() ? p : std::string(", ") + p;
    };
    if (server != opts.upstream_server) add("Upstream_Server");
    if (old_port != port) add("Upstream_Port");
    if (path != opts.upstream_path) add("Upstream_Path");
    *why = "the store in " + dir_ + " was made for upstream " + server + ":" +
           old_port + path + ", but this export's upstream is " + now + " (" +
           params + " changed)";
    return OpenFailure::kUpstreamChanged;
  }
  // A new store, or one from before identities were recorded: it is taken
  // to cache the upstream configured now.
  rocksdb::WriteBatch b;
  b.Put(families_[kMeta], kUpstreamServer, opts.upstream_server);
  b.Put(families_[kMeta], kUpstreamPort, port);
  b.Put(families_[kMeta], kUpstreamPath, opts.upstream_path);
  rocksdb::WriteOptions w;
  w.sync = true;
  rocksdb::Status st = db_->Write(w, &b);
  if (!st.ok()) {
    *why = "cannot record the upstream identity: " + st.ToString();
    return st.IsNoSpace() ? OpenFailure::kNoSpace : OpenFailure::kOther;
  }
  if (!fresh)
    NACHE_LOG(kLogEvent, "NACHE_CACHE",
              "cache store %s records no upstream (made by an older nache): "
              "it now belongs to %s",
              dir_.c_str(), now.c_str());
  return OpenFailure::kNone;
}

bool Store::GetMeta(const std::string &name, std::string *value) const {
  return db_->Get(rocksdb::ReadOptions(), families_[kMeta], name, value).ok();
}

bool Store::PutMeta(const std::string &name, const std::string &value,
                    bool sync) {
  rocksdb::WriteOptions w;
  w.sync = sync;
  return Put(w, families_[kMeta], name, value).ok();
}

UnflushedCount Store::CountUnflushed() const { return CountIn(db_, families_); }

rocksdb::Status Store::Write(const rocksdb::WriteOptions &opts,
                             rocksdb::WriteBatch *batch) {
  if (no_space_.load()) MaybeResume();
  rocksdb::Status st = db_->Write(opts, batch);
  if (st.ok()) {
    if (no_space_.load()) {
      // Resumed by another writer meanwhile (or the failure was passing).
      MutexLock g(&space_mu_);
      if (no_space_.exchange(false) && metrics_)
        metrics_->SetStoreNoSpace(false);
    }
    return st;
  }
  if (st.IsNoSpace()) {
    NoteNoSpace(st);
  } else if (metrics_) {
    metrics_->CountStoreWriteFailure(false);
  }
  return st;
}

rocksdb::Status Store::WriteBeforeReply(rocksdb::WriteBatch *batch) {
  ReplySync *reply = ReplySync::Current();
  rocksdb::WriteOptions w;
  w.sync = reply == nullptr;
  if (reply != nullptr) deferring_.fetch_add(1);
  rocksdb::Status st = Write(w, batch);
  if (reply != nullptr) {
    // For SyncDeferred, which must not take this write as synced while it
    // is under way: the count first, then the sequence number, then the
    // count back.
    const uint64_t seq = db_->GetLatestSequenceNumber();
    uint64_t had = deferred_seq_.load();
    while (had < seq && !deferred_seq_.compare_exchange_weak(had, seq)) {
    }
    deferring_.fetch_sub(1);
  }
  if (!st.ok()) return st;
  if (metrics_) metrics_->CountStoreDurableWrite();
  if (reply != nullptr) {
    reply->Defer(this);
  } else if (metrics_) {
    metrics_->CountStoreSync();  // the write's own
  }
  return st;
}

rocksdb::Status Store::Sync() {
  // Every write taken before this call has a sequence number up to this
  // one: RocksDB publishes a write's number after its log record is
  // written.
  const uint64_t need = db_->GetLatestSequenceNumber();
  MutexLock g(&sync_mu_);
  while (synced_seq_ < need) {
    if (syncing_) {
      // Its sync may have started before our write: wait, and look again.
      sync_done_.Wait();
      continue;
    }
    syncing_ = true;
    const uint64_t upto = db_->GetLatestSequenceNumber();
    g.Unlock();
    rocksdb::Status st = db_->SyncWAL();
    g.Lock();
    syncing_ = false;
    sync_done_.SignalAll();
    if (!st.ok()) {
      if (st.IsNoSpace()) {
        g.Unlock();
        NoteNoSpace(st);
      } else if (metrics_) {
        metrics_->CountStoreWriteFailure(false);
      }
      return st;
    }
    synced_seq_ = std::max(synced_seq_, upto);
    if (metrics_) metrics_->CountStoreSync();
  }
  return rocksdb::Status::OK();
}

rocksdb::Status Store::SyncDeferred() {
  if (deferring_.load() == 0) {
    const uint64_t deferred = deferred_seq_.load();
    MutexLock g(&sync_mu_);
    if (synced_seq_ >= deferred) return rocksdb::Status::OK();
  }
  return Sync();
}

rocksdb::Status Store::Put(const rocksdb::WriteOptions &opts,
                           rocksdb::ColumnFamilyHandle *family,
                           const rocksdb::Slice &key,
                           const rocksdb::Slice &value) {
  rocksdb::WriteBatch b;
  rocksdb::Status st = b.Put(family, key, value);
  return st.ok() ? Write(opts, &b) : st;
}

void Store::NoteNoSpace(const rocksdb::Status &st) {
  if (metrics_) metrics_->CountStoreWriteFailure(true);
  MutexLock g(&space_mu_);
  free_at_failure_ = FreeBytes(dir_);
  if (no_space_.exchange(true)) return;
  if (metrics_) metrics_->SetStoreNoSpace(true);
  NACHE_LOG(kLogCrit, "NACHE_CACHE",
            "cache store %s: the filesystem is full (%s): writes to the "
            "cache are refused (write-back writes get NFS4ERR_NOSPC, reads "
            "are not cached), cached data is still served; nache resumes "
            "by itself once space is freed",
            dir_.c_str(), st.ToString().c_str());
}

void Store::MaybeResume() {
  MutexLock g(&space_mu_);
  if (!no_space_.load()) return;  // resumed by another writer meanwhile
  // Only when space came back, enough for what the memtables hold: a
  // resume flushes them into table files, so trying with less would only
  // fail again. What they hold is what the live WAL files hold (the
  // memtables' own size counts their whole arena blocks, 8 MiB each).
  constexpr uint64_t kMargin = 1 << 20;
  uint64_t free = FreeBytes(dir_), unflushed = 0;
  rocksdb::VectorLogPtr wals;
  if (db_->GetSortedWalFiles(wals).ok())
    for (const auto &w : wals)
      if (w->Type() == rocksdb::kAliveLogFile) unflushed += w->SizeFileBytes();
  if (free < free_at_failure_ + kMargin || free < unflushed + kMargin) return;
  rocksdb::Status st = db_->Resume();
  if (!st.ok()) {
    free_at_failure_ = FreeBytes(dir_);
    NACHE_LOG(kLogWarn, "NACHE_CACHE",
              "cache store %s: %llu bytes free, still too few to resume "
              "(%s)",
              dir_.c_str(), (unsigned long long)free, st.ToString().c_str());
    return;
  }
  no_space_.store(false);
  if (metrics_) metrics_->SetStoreNoSpace(false);
  NACHE_LOG(kLogEvent, "NACHE_CACHE",
            "cache store %s: space is back (%llu bytes free), writes to the "
            "cache resume",
            dir_.c_str(), (unsigned long long)free);
}

}  // namespace nache
