// Write-back's own state, moving out of Core (issue 18) one concern at a
// time. It owns now the open-owners that create flushed files, the names
// of the copies a conflict or a lost file leaves, and who each dirty
// file's flush writes as: the last local
// writer of the file (NoteWriter), persisted in the store (kMeta,
// "wb_writer/<key>") when it changes, so that a flush after a restart is
// still sent as that user, with its groups; a file no one wrote here is
// flushed as its owner. Different users writing the same file between two
// flushes: all of it is flushed as the last of them.
//
// The namespace's write-back (the log, local names, logged removes and
// renames, and their lock) is NamespaceWriteBack's
// (namespace_writeback.h); the conflict checks and copies are
// Conflicts' (conflicts.h); the flusher's sends are FlushSender's
// (flush_sender.h). Still in Core (core_writeback.cc): the local write.
//
// What it needs of the rest is narrow: the store (persisted writers) and,
// through Host, the cache's dirty mark and known attributes.
//
// It also gates local writes while a conflict of their file is being
// resolved (BeginResolving, WaitUnresolved), and says whether nachectl
// drain is in force (Draining: nothing new is kept for write-back).
//
// Thread safety: all methods are thread-safe. A flush open-owner's mutex
// (OwnerSlot::mu) is the caller's to take, at level 1 of the core's lock
// order like any open-owner's. writers_mu_ sits at level 2
// of the core's lock order (core.h): taken with no other core lock held,
// held across the store's writes and the Host's cache calls (leaves),
// never across an upstream call.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "handles/handle_map.h"
#include "opens/opens.h"
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

  // Open-owners that create flushed files (NFSv4.0 creates by OPEN); a
  // file's is chosen by its key, modulo this.
  static constexpr size_t kFlushOwners = 8;
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

  // The flush open-owner of key's create, and its index (0 to
  // kFlushOwners - 1: the suffix of its name).
  OwnerSlot *FlushOwner(Key key) {
    return &flush_owners_[key % flush_owners_.size()];
  }
  size_t FlushOwnerIndex(const OwnerSlot *owner) const {
    return size_t(owner - flush_owners_.data());
  }

  // A conflict (or a lost file) of key is being resolved: our version is
  // being copied beside it, and then dropped so that key follows the
  // remote. A local write that comes meanwhile waits (WaitUnresolved):
  // made once the client may have seen the remote's version, it belongs
  // to that version, not in the copy of ours. Scoped: ends when the
  // returned object goes.
  class Resolving {
   public:
    Resolving(WriteBack *wb, Key key) : wb_(wb), key_(key) {}
    Resolving(const Resolving &) = delete;
    Resolving &operator=(const Resolving &) = delete;
    ~Resolving() { wb_->EndResolving(key_); }

   private:
    WriteBack *wb_;
    Key key_;
  };
  Resolving BeginResolving(Key key) EXCLUDES(resolving_mu_);
  // Waits until no conflict of key is being resolved; false when deadline
  // passed first (the caller answers retryably). on_wait runs (without the
  // lock) before a wait, if there is one.
  bool WaitUnresolved(Key key, std::chrono::steady_clock::time_point deadline,
                      const std::function<void()> &on_wait)
      EXCLUDES(resolving_mu_);

  // Draining (nachectl drain): no new data, attribute or namespace change
  // is kept for write-back; what is dirty already stays write-back until
  // flushed (a write-through write landing before an older flush would be
  // overwritten by it).
  void SetDraining(bool draining) { draining_.store(draining); }
  bool Draining() const { return draining_.load(); }

  // NAME.nache-<kind>-<stamp>[-n], the copy a conflict ("conflict") or a
  // lost file ("lost") leaves; ConflictName: kind "conflict".
  static std::string CopyName(const std::string &name, const char *kind,
                              const std::string &stamp, int n);
  static std::string ConflictName(const std::string &name,
                                  const std::string &stamp, int n);
  // The time now, UTC, as a copy's stamp ("20261122T210501Z").
  static std::string UtcStamp();

 private:
  Store *const store_;
  Host *const host_;
  // The open-owners that create flushed files (their own: a flush may run
  // while a pool owner's mutex is held by the thread that needs it;
  // several, since an owner's OPEN and CLOSE are serialised). Each slot's
  // fields are guarded by its own mu.
  std::array<OwnerSlot, kFlushOwners> flush_owners_;
  // Who last wrote each dirty file locally: the flush writes as them.
  Mutex writers_mu_{"writeback_writers"};
  std::unordered_map<Key, upstream::Creds> writers_ GUARDED_BY(writers_mu_);
  void EndResolving(Key key) EXCLUDES(resolving_mu_);
  // Keys whose conflict is being resolved (BeginResolving); a leaf lock.
  Mutex resolving_mu_{"writeback_resolving"};
  CondVar resolving_cv_{&resolving_mu_};
  std::unordered_multiset<Key> resolving_ GUARDED_BY(resolving_mu_);
  std::atomic<bool> draining_{false};  // nachectl drain is in force
};

}  // namespace nache
