// The persistent store of one export: a RocksDB database in the configured
// cache directory. It owns the database and its column families; modules
// (handles now; blocks, attributes, directories and the write log later) get
// their column family from here and never open RocksDB themselves.
//
// A store that cannot be opened (corrupt, foreign, from an incompatible
// version) is moved aside and replaced by an empty one, with one log line:
// nache never serves data it could not validate, and never refuses to start
// because of its cache.
//
// Thread safety: all methods are thread-safe (RocksDB is).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
}  // namespace rocksdb

namespace nache {

class Store {
 public:
  // Column families, one per kind of record.
  enum Family {
    kMeta = 0,       // store format, incarnation id
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
  // *err; a corrupt or foreign store is not a failure (see above).
  static std::unique_ptr<Store> Open(const std::string &dir, std::string *err);

  rocksdb::DB *db() const { return db_; }
  rocksdb::ColumnFamilyHandle *family(Family f) const { return families_[f]; }

  // Random id chosen when the store was created.
  uint64_t incarnation() const { return incarnation_; }

  // Reads/writes a small metadata value (kMeta family).
  bool GetMeta(const std::string &name, std::string *value) const;
  bool PutMeta(const std::string &name, const std::string &value, bool sync);

 private:
  Store() = default;
  bool Init(const std::string &dir, std::string *err);

  rocksdb::DB *db_ = nullptr;                                 // owned
  rocksdb::ColumnFamilyHandle *families_[kNumFamilies] = {};  // owned
  uint64_t incarnation_ = 0;  // immutable after Open
};

}  // namespace nache
