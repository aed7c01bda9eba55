// RocksDB setup of the persistent store. See store.h.
#include "store/store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/cache.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "util/log.h"

namespace nache {
namespace {

// Stored in kMeta under "format": a store written by another program, or by
// an incompatible nache, is moved aside instead of being misread.
constexpr char kFormat[] = "nache-store-v1";

const char *const kFamilyNames[Store::kNumFamilies] = {
    "meta", "handles", "fh_index", "attrs", "block_meta", "blocks", "wblog"};

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

}  // namespace

Store::~Store() {
  if (db_ != nullptr) {
    for (auto *f : families_)
      if (f != nullptr) db_->DestroyColumnFamilyHandle(f);
    delete db_;
  }
}

std::unique_ptr<Store> Store::Open(const std::string &dir, std::string *err) {
  if (!MakeDirs(dir)) {
    *err = "cannot create cache directory " + dir + ": " + strerror(errno);
    return nullptr;
  }
  std::unique_ptr<Store> s(new Store());
  std::string why;
  if (s->Init(dir, &why)) return s;

  // Unusable store: keep it for inspection, start empty.
  std::string aside = dir + ".unusable-" + std::to_string(time(nullptr));
  NACHE_LOG(kLogMajor, "NACHE_CACHE",
            "cache store %s is unusable (%s); moved to %s, starting empty",
            dir.c_str(), why.c_str(), aside.c_str());
  s.reset(new Store());
  if (rename(dir.c_str(), aside.c_str()) != 0 || !MakeDirs(dir)) {
    *err = "cannot replace unusable cache directory " + dir + ": " +
           strerror(errno);
    return nullptr;
  }
  if (!s->Init(dir, &why)) {
    *err = "cannot create cache store in " + dir + ": " + why;
    return nullptr;
  }
  return s;
}

bool Store::Init(const std::string &dir, std::string *err) {
  rocksdb::Options opts = BaseOptions();
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char *name : kFamilyNames) {
    std::string n(name);
    cfs.emplace_back(n == "meta" ? rocksdb::kDefaultColumnFamilyName : n,
                     n == "blocks" ? BlockFamilyOptions(opts)
                                   : rocksdb::ColumnFamilyOptions(opts));
  }
  std::vector<rocksdb::ColumnFamilyHandle *> handles;
  // A foreign RocksDB may hold column families we do not know; refuse it
  // (the open fails with InvalidArgument) rather than guess.
  rocksdb::Status st = rocksdb::DB::Open(opts, dir, cfs, &handles, &db_);
  if (!st.ok()) {
    *err = st.ToString();
    db_ = nullptr;
    return false;
  }
  for (size_t i = 0; i < handles.size(); i++) families_[i] = handles[i];

  std::string format;
  bool fresh = !GetMeta("format", &format);
  if (!fresh && format != kFormat) {
    *err = "unknown store format '" + format + "'";
    return false;
  }
  std::string inc;
  if (fresh) {
    std::random_device rd;
    incarnation_ = (uint64_t(rd()) << 32) ^ rd();
    if (incarnation_ == 0) incarnation_ = 1;
    inc.assign(reinterpret_cast<const char *>(&incarnation_), 8);
    if (!PutMeta("incarnation", inc, true) ||
        !PutMeta("format", kFormat, true)) {
      *err = "cannot write store metadata";
      return false;
    }
    NACHE_LOG(kLogEvent, "NACHE_CACHE", "created cache store %s (id %016llx)",
              dir.c_str(), (unsigned long long)incarnation_);
  } else {
    if (!GetMeta("incarnation", &inc) || inc.size() != 8) {
      *err = "store metadata lacks its incarnation id";
      return false;
    }
    memcpy(&incarnation_, inc.data(), 8);
    NACHE_LOG(kLogEvent, "NACHE_CACHE", "opened cache store %s (id %016llx)",
              dir.c_str(), (unsigned long long)incarnation_);
  }
  return true;
}

bool Store::GetMeta(const std::string &name, std::string *value) const {
  return db_->Get(rocksdb::ReadOptions(), families_[kMeta], name, value).ok();
}

bool Store::PutMeta(const std::string &name, const std::string &value,
                    bool sync) {
  rocksdb::WriteOptions w;
  w.sync = sync;
  return db_->Put(w, families_[kMeta], name, value).ok();
}

}  // namespace nache
