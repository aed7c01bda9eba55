// Upstream open and lock state: one upstream OPEN per file for all local
// opens of it, whose share access and deny are the union of the local ones;
// OPEN_DOWNGRADE when the union shrinks, CLOSE after the last local close.
//
// NFSv4.0 sequences every OPEN/CLOSE/OPEN_DOWNGRADE/LOCK of an open-owner by
// a seqid, so at most one such request per owner may be in flight. We keep a
// pool of open-owners; each file sticks to the owner it was first opened
// with (its stateid belongs to that owner), and an owner's mutex serialises
// its seqid-bearing requests. Lock-owners are per (local owner, file), so a
// lock seqid never spans files.
//
// Thread safety (checked by clang's analysis, make check-locks): OpenTable's
// map and each file's pins are guarded by its mu_; a FileOpen's fields by
// its owner's mutex (OwnerSlot::mu), which is held across the upstream
// call, but key and owner (set once, before the FileOpen is shared) and
// the open itself (open, stateid, epoch), guarded by the FileOpen's own
// io_mu and written only with owner->mu held too (see FileOpen). Lock
// order: OwnerSlot::mu, then OpenTable::mu_, then FileOpen::io_mu (never
// the reverse, and never two owners at once). No lock of Ganesha's is held
// by callers here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "handles/handle_map.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

struct OwnerSlot {
  Mutex mu{"open_owner"};  // serialises seqid-bearing requests of this owner
  std::string name GUARDED_BY(mu);        // open-owner name sent upstream
  uint32_t seqid GUARDED_BY(mu) = 0;      // next seqid to send
  uint64_t epoch GUARDED_BY(mu) = ~0ull;  // upstream epoch it was used in
  // Files in an OpenTable that use this owner (its bookkeeping; read
  // without a lock when picking an owner for another file).
  std::atomic<int> files{0};
};

// A byte range an upstream lock-owner holds: [offset, end), end
// UINT64_MAX meaning to the end of the file.
struct HeldLock {
  upstream::LockType type = upstream::LockType::kRead;
  uint64_t offset = 0;
  uint64_t end = 0;
};
// Its length as LOCK takes it (UINT64_MAX: to the end of the file).
inline uint64_t HeldLength(const HeldLock &h) {
  return h.end == UINT64_MAX ? UINT64_MAX : h.end - h.offset;
}

// The ranges held after a granted LOCK of [offset, offset+length) (length
// UINT64_MAX: to the end of the file): it replaces what the owner held
// there, as POSIX locks of one owner do.
void AddHeldLock(std::vector<HeldLock> *held, upstream::LockType type,
                 uint64_t offset, uint64_t length);
// The ranges held after a LOCKU of [offset, offset+length).
void RemoveHeldLock(std::vector<HeldLock> *held, uint64_t offset,
                    uint64_t length);

struct LockOwnerState {
  std::string name;            // lock-owner name sent upstream
  upstream::StateId stateid;   // lock stateid once the server gave one
  uint32_t seqid = 0;          // next lock seqid
  bool established = false;    // the server knows this lock-owner
  std::vector<HeldLock> held;  // what the server granted, sorted by offset
  // Granted here under our write delegation, not yet at the server (sent
  // before the delegation goes back). Sorted by offset.
  std::vector<HeldLock> local;
  upstream::Creds creds;  // of the last LOCK (a reclaim uses them)
};

// The upstream open of one file. Its fields are guarded by owner->mu,
// held across the upstream call that changes them. The open itself (open,
// stateid, epoch) is guarded by io_mu and written only through the setters
// below, which also require owner->mu: so it changes only with the
// upstream call that changes it, and I/O can read the stateid under io_mu
// alone (IoStateid) without waiting for an OPEN or CLOSE in progress on
// the owner. io_mu is a leaf, held for a copy only.
class FileOpen {
 public:
  Key key = kNoKey;
  OwnerSlot *owner = nullptr;  // fixed at creation

  // The open as the holder of owner->mu knows it (it cannot change
  // meanwhile): whether a stateid is held, the stateid, its epoch.
  bool open() const REQUIRES(owner->mu) EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    return open_;
  }
  upstream::StateId stateid() const REQUIRES(owner->mu) EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    return stateid_;
  }
  uint64_t epoch() const REQUIRES(owner->mu) EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    return epoch_;
  }
  void SetOpen(const upstream::StateId &sid, uint64_t epoch) REQUIRES(owner->mu)
      EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    stateid_ = sid;
    epoch_ = epoch;
    open_ = true;
  }
  void SetStateid(const upstream::StateId &sid) REQUIRES(owner->mu)
      EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    stateid_ = sid;
  }
  void SetClosed() REQUIRES(owner->mu) EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    open_ = false;
  }
  // Without owner->mu: the open stateid when f is open under epoch.
  bool IoStateid(uint64_t epoch, upstream::StateId *sid) const EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    if (!open_ || epoch_ != epoch) return false;
    *sid = stateid_;
    return true;
  }
  // Whether an upstream open is held (for the table's bookkeeping, which
  // holds no owner mutex).
  bool HoldsUpstreamOpen() const EXCLUDES(io_mu) {
    MutexLock g(&io_mu);
    return open_;
  }

  // The share access and deny the upstream open has.
  uint32_t up_access GUARDED_BY(owner->mu) = 0;
  uint32_t up_deny GUARDED_BY(owner->mu) = 0;
  // The share access and deny values (bit 1 << value) the upstream open
  // was opened or downgraded with: an OPEN_DOWNGRADE may only go back to
  // those (RFC 7530 16.19.4; servers refuse others with NFS4ERR_INVAL, and
  // Ganesha then keeps the owner's seqid). Guarded like up_access.
  uint32_t up_seen_access GUARDED_BY(owner->mu) = 0;
  uint32_t up_seen_deny GUARDED_BY(owner->mu) = 0;
  void NoteUpstreamModes(uint32_t access, uint32_t deny) REQUIRES(owner->mu) {
    up_seen_access |= 1u << (access & 3);
    up_seen_deny |= 1u << (deny & 3);
  }
  bool MayDowngradeTo(uint32_t access, uint32_t deny) const
      REQUIRES(owner->mu) {
    return (up_seen_access & (1u << (access & 3))) &&
           (up_seen_deny & (1u << (deny & 3)));
  }
  // Local opens by bit: counts of local opens asking for read/write access
  // and denying read/write.
  uint32_t n_access_read GUARDED_BY(owner->mu) = 0;
  uint32_t n_access_write GUARDED_BY(owner->mu) = 0;
  uint32_t n_deny_read GUARDED_BY(owner->mu) = 0;
  uint32_t n_deny_write GUARDED_BY(owner->mu) = 0;
  uint32_t n_local GUARDED_BY(owner->mu) = 0;  // local opens in all
  // When the last local close left the upstream open lingering: the time
  // its CLOSE is due.
  std::chrono::steady_clock::time_point linger_until GUARDED_BY(owner->mu);
  // Credentials of the last local open granted under our delegation: a
  // recall opens the file upstream with them.
  upstream::Creds deleg_creds GUARDED_BY(owner->mu);
  // Credentials of the last upstream OPEN: a reclaim after a server
  // restart uses them.
  upstream::Creds open_creds GUARDED_BY(owner->mu);
  // Lock-owners on this file, by local owner bytes.
  std::map<std::string, LockOwnerState> lock_owners GUARDED_BY(owner->mu);

  uint32_t WantAccess() const REQUIRES(owner->mu) {
    return (n_access_read ? uint32_t(upstream::kShareAccessRead) : 0u) |
           (n_access_write ? uint32_t(upstream::kShareAccessWrite) : 0u);
  }
  uint32_t WantDeny() const REQUIRES(owner->mu) {
    return (n_deny_read ? uint32_t(upstream::kShareDenyRead) : 0u) |
           (n_deny_write ? uint32_t(upstream::kShareDenyWrite) : 0u);
  }
  void Count(uint32_t access, uint32_t deny, int delta) REQUIRES(owner->mu) {
    n_access_read += (access & upstream::kShareAccessRead) ? delta : 0;
    n_access_write += (access & upstream::kShareAccessWrite) ? delta : 0;
    n_deny_read += (deny & upstream::kShareDenyRead) ? delta : 0;
    n_deny_write += (deny & upstream::kShareDenyWrite) ? delta : 0;
    n_local += delta;
  }

 private:
  mutable Mutex io_mu{"open_file_io"};   // guards the three below (a leaf)
  bool open_ GUARDED_BY(io_mu) = false;  // an upstream open is held
  upstream::StateId stateid_ GUARDED_BY(io_mu);  // its stateid
  uint64_t epoch_ GUARDED_BY(io_mu) = 0;         // upstream epoch of stateid_
};

class OpenTable {
 public:
  // owners: size of the open-owner pool; prefix makes names unique per
  // proxy incarnation.
  // epoch: the upstream's current epoch (see Upstream::epoch), to tell
  // which owners the server knows.
  // confirms: whether the server makes a new owner's first OPEN cost an
  // OPEN_CONFIRM (NFSv4.0; null: never).
  OpenTable(int owners, const std::string &prefix,
            std::function<uint64_t()> epoch,
            std::function<bool()> confirms = nullptr);

  // The FileOpen of key, created if absent (its owner chosen by key), and
  // pinned: it stays in the table until the matching Unpin. A local open
  // keeps its pin for its whole life.
  std::shared_ptr<FileOpen> Get(Key key);
  // Get, but a file new to the table takes `owner` (the owner a by-name
  // OPEN just used), so its first upstream open needs no second OPEN.
  // dir and name: where the by-name OPEN found it, so that the next open
  // by that name picks this file's owner (OwnerFor).
  std::shared_ptr<FileOpen> GetOrAdopt(Key key, OwnerSlot *owner,
                                       Key dir = kNoKey,
                                       const std::string &name = "");
  // Unpins; the entry is dropped when nobody pins it and no upstream open
  // is held.
  void Unpin(const std::shared_ptr<FileOpen> &f);
  // Drops f when nobody pins it and it holds no upstream open (after a
  // lingering open was closed).
  void DropIfIdle(const std::shared_ptr<FileOpen> &f);
  // The owner a by-name open of (dir, name) uses before its key is known,
  // and the one a file new to the table gets, searched from a slot the
  // name or key picks. A file's calls to the remote hold its owner's mutex
  // (its OPENs and CLOSEs, a lingering CLOSE), so an owner another file in
  // the table uses would make this file's calls wait for that file's round
  // trips and the other way round: a free owner comes first. Among those,
  // one the server already knows (NFSv4.0 makes a new owner's first OPEN
  // cost an OPEN_CONFIRM round trip). Owners busy right now are skipped;
  // when every owner is in use by some file, an idle one is shared (under
  // NFSv4.0 a known one before a new one, free or not). A name whose file
  // is in the table (opened by that name before) gets that file's owner:
  // the server merges the OPEN into the open it has, which one CLOSE ends.
  OwnerSlot *OwnerFor(Key dir, const std::string &name);
  OwnerSlot *OwnerForKey(Key key);

  // Advances an owner's seqid after a reply with this status, as RFC 7530
  // 9.1.7 prescribes (most errors still consume the seqid).
  static void AdvanceSeqid(uint32_t *seqid, uint32_t status);

  size_t size() const;
  // Whether key is in the table (pinned by a local open, or holding or
  // lingering with an upstream open).
  bool Contains(Key key) const;
  // Every file in the table (for the reclaim after a server restart).
  std::vector<std::shared_ptr<FileOpen>> Snapshot() const;

 private:
  OwnerSlot *PickOwner(size_t start);

  // A file in the table and its pins (users between Get and Unpin).
  struct Entry {
    std::shared_ptr<FileOpen> file;
    int pins = 0;
    std::string name;  // NameOf(dir, name) it was opened by, or ""
  };
  static std::string NameOf(Key dir, const std::string &name) {
    return std::to_string(dir) + "/" + name;
  }

  std::unique_ptr<OwnerSlot[]> owners_;  // immutable array, slots own locks
  int n_owners_;
  std::function<uint64_t()> epoch_;  // immutable
  std::function<bool()> confirms_;   // immutable
  mutable Mutex mu_{"opens"};
  std::unordered_map<Key, Entry> files_ GUARDED_BY(mu_);
  // NameOf(dir, name) -> the file in files_ last opened by that name.
  std::unordered_map<std::string, Key> named_ GUARDED_BY(mu_);
  // Drops f's entry when nobody pins it and it holds no upstream open.
  void EraseIfIdle(const std::shared_ptr<FileOpen> &f) REQUIRES(mu_);
};

}  // namespace nache
