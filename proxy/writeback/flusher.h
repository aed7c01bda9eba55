// The write-back flusher: sends the dirty data of write-back files upstream
// (proxy/writeback/DESIGN.md), by age (a file's oldest unflushed write is
// older than Flush_Age) and by size (dirty bytes above Dirty_Max: oldest
// files first, whatever their age), and on demand for one file (before a
// SETATTR, a delegation return, shutdown).
//
// One file is flushed by one thread at a time, up to `files` files at once
// (over a WAN each costs round trips, not bandwidth); its dirty ranges go
// upstream in parallel (contiguous dirty blocks joined into WRITEs of up to
// max_send bytes, a block bigger than that cut into several; `parallel`
// in flight, more when they are small), and a range is clean only once the
// server has it on stable storage and the block was not written again
// meanwhile (Cache::Flushed). A single WRITE goes FILE_SYNC; several go
// UNSTABLE, then one COMMIT makes them durable together (the server syncs
// once, not once per WRITE): a range whose WRITE verifier differs from the
// COMMIT's (the server restarted in between and may have lost it) is sent
// again FILE_SYNC before it counts as sent. Except where a client waits at
// the remote for the flush (a delegation's return, Urgency::kWaitedFor):
// WRITEs that all go in one wave go FILE_SYNC, so no COMMIT's round trip
// follows them.
// A failed send leaves the file dirty and the flusher backs off; the data
// stays durable in the store whatever happens.
//
// Thread safety: all methods are thread-safe. The send function runs on
// the flusher's threads and may block on the upstream.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "metrics/metrics.h"
#include "util/mutex.h"

namespace nache {

struct FlusherOptions {
  std::chrono::milliseconds age{30000};  // Flush_Age
  uint64_t dirty_max = 1ull << 30;       // Dirty_Max (bytes)
  // WRITEs of one file in flight (more when the remote's WRITEs are
  // small: enough for about 2 MiB, at most 16).
  int parallel = 8;
  // Bytes of contiguous dirty blocks per WRITE: the largest WRITE the
  // remote takes, asked before each flush; empty: 1 MiB.
  std::function<uint64_t()> max_send;
  int files = 8;                              // files flushed at once
  metrics::ExportMetrics *metrics = nullptr;  // may be null; not owned
};

class Flusher {
 public:
  using Clock = std::chrono::steady_clock;
  // Whom a flush's durability costs more: the server (a sync per WRITE)
  // or a waiter (a COMMIT's round trip after the WRITEs).
  enum class Urgency {
    // Several WRITEs go UNSTABLE, then one COMMIT: the server syncs once.
    kBackground,
    // A client waits at the remote until the flush is done (the flush
    // before a delegation's return, which another client's OPEN waits
    // for). WRITEs that all go in flight at once go FILE_SYNC (the server
    // syncs each, in parallel with the others) and no COMMIT follows;
    // more than that go as kBackground.
    kWaitedFor,
  };
  // What the server said of one range's WRITEs.
  struct Sent {
    // The weakest stability any of its WRITEs got (the server may give
    // more than asked: FILE_SYNC needs no COMMIT).
    upstream::StableHow committed = upstream::StableHow::kFileSync;
    // The WRITE verifier; "mixed" when the range's WRITEs came back with
    // different ones (the server restarted in between: it matches no
    // COMMIT).
    upstream::Verifier verifier;
    bool mixed = false;
    upstream::Attrs after;  // the file's attributes after the last WRITE
  };
  // Writes one dirty range upstream with the stability asked; returns the
  // NFS status and what the server said. NFS4ERR_STALE means the file is
  // gone at the remote: GoneFn decides what becomes of its data.
  using SendFn =
      std::function<uint32_t(Key key, uint64_t offset, const std::string &data,
                             upstream::StableHow stable, Sent *sent)>;
  // COMMITs the whole file upstream; returns the NFS status, the write
  // verifier and the file's attributes after.
  using CommitFn = std::function<uint32_t(Key key, upstream::Verifier *verf,
                                          upstream::Attrs *after)>;
  // Sets the attributes set->mask names upstream (after the file's data);
  // returns the NFS status and the attributes after.
  using SetattrFn = std::function<uint32_t(Key key, const upstream::Attrs &set,
                                           upstream::Attrs *after)>;

  // Runs first for each file flushed; it may send what is cheaper sent
  // together (an object created locally: created remotely with its data
  // and attributes in one COMPOUND), leaving the rest to send and setattr.
  // patient: a flush by age (not on demand, not for room); kNotYet then
  // leaves the file dirty for a later round without counting as a failure
  // (a directory whose entries are still too young to send).
  using PrepareFn = std::function<uint32_t(Key key, bool patient)>;
  static constexpr uint32_t kNotYet = 1u << 31;
  // Called (on a flusher thread, the file owned) when a send, the setattr
  // or the prepare step found key gone at the remote (NFS4ERR_STALE):
  // acknowledged data must go somewhere visible, never nowhere. 0 when it
  // is settled (the file's state dropped by it); otherwise the file stays
  // dirty and that status counts as a failed flush. Without one, the file
  // stays dirty.
  using GoneFn = std::function<uint32_t(Key key)>;

  Flusher(Cache *cache, SendFn send, CommitFn commit, SetattrFn setattr,
          const FlusherOptions &opts, PrepareFn prepare = nullptr,
          GoneFn gone = nullptr);
  ~Flusher();  // Stop()
  void Stop();

  // Flushes key now (waiting for a flush of it already under way); the
  // NFS status of the first failed send, or 0.
  uint32_t FlushFile(Key key);

  // Ownership of one file's flushing. While it is held no flush of the
  // file is in flight and none starts: whatever the holder does to the
  // file at the remote or to its dirty state (a truncate that drops our
  // unflushed data and sends the new size) cannot interleave with a send
  // of older data, which would land after it at the remote. Waits for a
  // flush already under way. Released when destroyed; not reentrant (a
  // holder flushes through Flush(), never FlushFile).
  class Ownership {
   public:
    Ownership(Ownership &&o) noexcept : flusher_(o.flusher_), key_(o.key_) {
      o.flusher_ = nullptr;
    }
    Ownership(const Ownership &) = delete;
    Ownership &operator=(const Ownership &) = delete;
    Ownership &operator=(Ownership &&) = delete;
    ~Ownership();
    // Flushes the owned file now, as FlushFile does.
    uint32_t Flush(Urgency urgency = Urgency::kBackground);

   private:
    friend class Flusher;
    Ownership(Flusher *f, Key key) : flusher_(f), key_(key) {}
    Flusher *flusher_;  // null once moved from
    Key key_;
  };
  Ownership Own(Key key);
  // Flushes everything dirty, oldest first, until done or deadline passes.
  // True when nothing is left dirty.
  bool FlushAll(std::chrono::steady_clock::time_point deadline);
  // Dirty data above the bound: flush without waiting for the age.
  void Kick();
  // These files are due now, whatever their age (nachectl flush PATH):
  // the flusher's thread sends them first, at once, and again after a
  // failure (backing off as usual) until each is clean.
  void Request(const std::vector<Key> &keys) EXCLUDES(mu_);
  // Waits until dirty bytes (and room already granted) are at most bytes
  // below the bound, then grants that room; false when the timeout passes.
  // Every true is followed by RoomUsed(bytes) once the write is in the
  // cache (or failed).
  bool WaitForRoom(uint64_t bytes, std::chrono::milliseconds timeout);
  void RoomUsed(uint64_t bytes);

  uint64_t flushed_bytes() const;  // sent upstream since start

 private:
  void Loop();
  uint32_t FlushOne(Key key, bool patient,
                    Urgency urgency = Urgency::kBackground);
  // Sends ranges of key (UNSTABLE then COMMIT when there are several,
  // unless urgency says otherwise); status[i] and after[i] are range i's
  // outcome. NFS4ERR_STALE from the COMMIT is every range's.
  void SendRanges(Key key, const std::vector<Cache::DirtyRange> &ranges,
                  Urgency urgency, std::vector<uint32_t> *status,
                  std::vector<upstream::Attrs> *after);
  // Contiguous dirty ranges [first, end) joined into one WRITE's bytes
  // (up to max_send), and what the server said of them.
  struct Group {
    size_t first = 0, end = 0;  // ranges [first, end)
    uint64_t offset = 0;
    std::string data;
    uint32_t status = 0;
    Sent sent;
  };
  std::vector<Group> JoinRanges(const std::vector<Cache::DirtyRange> &ranges,
                                uint64_t max_send) const;
  // Sends every group, cut into WRITEs of at most max_send bytes, in
  // parallel: FILE_SYNC when that is one WRITE (or, kWaitedFor, one wave
  // in flight), else UNSTABLE.
  void SendGroups(Key key, uint64_t max_send, Urgency urgency,
                  std::vector<Group> *groups);
  // The COMMIT of the groups sent UNSTABLE; those whose verifier is not
  // the COMMIT's are sent again FILE_SYNC.
  void CommitGroups(Key key, std::vector<Group> *groups);
  // key is gone at the remote (see GoneFn).
  uint32_t Gone(Key key);
  uint32_t FlushFileAs(Key key, bool patient);
  // Waits until key is not being flushed, then marks it so (busy_).
  void Acquire(Key key) EXCLUDES(mu_);
  void Release(Key key) EXCLUDES(mu_);
  // Flushes keys, up to opts_.files at once; stops starting new ones after
  // the first failure (or once deadline passes) and returns its status.
  uint32_t FlushMany(const std::vector<Key> &keys, Clock::time_point deadline,
                     bool patient);

  Cache *cache_;         // not owned
  SendFn send_;          // immutable
  CommitFn commit_;      // immutable
  SetattrFn setattr_;    // immutable
  PrepareFn prepare_;    // immutable; may be empty
  GoneFn gone_;          // immutable; may be empty
  FlusherOptions opts_;  // immutable
  mutable Mutex mu_{"flusher"};
  CondVar cv_{&mu_};                    // kicks, stop, a file flush ended
  std::set<Key> busy_ GUARDED_BY(mu_);  // files being flushed (or owned)
  bool stop_ GUARDED_BY(mu_) = false;
  bool kicked_ GUARDED_BY(mu_) = false;
  std::set<Key> requested_ GUARDED_BY(mu_);  // Request: due now
  // Room granted, not yet in the cache.
  uint64_t reserved_ GUARDED_BY(mu_) = 0;
  uint64_t flushed_bytes_ GUARDED_BY(mu_) = 0;
  std::thread thread_;  // Loop
};

}  // namespace nache
