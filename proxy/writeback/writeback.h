// Write-back's own state, moving out of Core (issue 18) one concern at a
// time. It owns now who each dirty file's flush writes as: the last local
// writer of the file (NoteWriter), persisted in the store (kMeta,
// "wb_writer/<key>") when it changes, so that a flush after a restart is
// still sent as that user, with its groups; a file no one wrote here is
// flushed as its owner. Different users writing the same file between two
// flushes: all of it is flushed as the last of them.
//
// Still in Core (core_writeback.cc, core_local_*.cc, core_conflicts.cc),
// to move here: the local write and the flusher's sends, the local
// namespace (meta_mu_ and its sets), logged removes and renames,
// conflicts, the flush open-owners.
//
// What it needs of the rest is narrow: the store (persisted writers) and,
// through Host, the cache's dirty mark and known attributes.
//
// Thread safety: all methods are thread-safe. writers_mu_ sits at level 2
// of the core's lock order (core.h): taken with no other core lock held,
// held across the store's writes and the Host's cache calls (leaves),
// never across an upstream call.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "handles/handle_map.h"
#include "store/store.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

class WriteBack {
 public:
  // What WriteBack needs of the cache.
  class Host {
   public:
    virtual ~Host() = default;
    // key has unflushed data or attributes.
    virtual bool IsDirty(Key key) = 0;
    // The attributes last known of key.
    virtual bool KnownAttrs(Key key, upstream::Attrs *attrs) = 0;
  };

  // Remembered writers beyond this are pruned of files no longer dirty.
  static constexpr size_t kMaxWriters = 4096;

  // store and host outlive this.
  WriteBack(Store *store, Host *host) : store_(store), host_(host) {}
  WriteBack(const WriteBack &) = delete;
  WriteBack &operator=(const WriteBack &) = delete;

  // cr wrote key locally (its groups cut to what the log keeps).
  // Persisted when it changes, unsynced: the caller's own synced write
  // that follows (the data, the attributes) makes it durable with it.
  void NoteWriter(Key key, const upstream::Creds &cr) EXCLUDES(writers_mu_);
  // The credentials a flush of key uses: its last local writer's, or its
  // owner's (default credentials when its attributes are not known).
  upstream::Creds FlushCreds(Key key) EXCLUDES(writers_mu_);

 private:
  Store *const store_;
  Host *const host_;
  // Who last wrote each dirty file locally: the flush writes as them.
  Mutex writers_mu_;
  std::unordered_map<Key, upstream::Creds> writers_ GUARDED_BY(writers_mu_);
};

}  // namespace nache
