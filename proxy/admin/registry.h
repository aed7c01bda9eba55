// What the admin socket (admin_server.h) may see and do of each export: a
// snapshot of its state (ExportStatus), a bounded flush, and the drain
// switch; the work on one path inside the export (warm, pin, unpin, evict,
// flush of a subtree); and the process-wide registry in which every
// export's core puts itself from its start to its end.
//
// Owns the export list and the daemon's drain state; knows nothing of the
// core's internals (the core implements ExportControl, core_admin.cc) nor
// of sockets.
//
// Lifetime: Remove waits until no call into that export is running, so a
// core may be destroyed right after it returns. Calls are made without the
// registry's lock held (a flush takes seconds); an entry in use is pinned
// by a count instead.
//
// Thread safety: everything here is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/mutex.h"

namespace nache {
namespace admin {

// nachectl warm: what to fetch into the cache.
struct WarmRequest {
  std::string path = "/";  // inside the export (its root: "/")
  int depth = -1;          // levels below path to descend (-1: all)
  bool data = false;       // files' data too, not only metadata
  uint64_t rate = 0;       // bytes of data per second at most (0: no cap)
  int parallel = 4;        // upstream operations in flight at most
};

// A warm job: the one running, or the last one that ran.
struct WarmProgress {
  uint64_t job = 0;  // numbered from 1 per export; 0: none since start
  WarmRequest request;
  bool running = false;
  bool ok = false;             // ended having walked everything asked
  std::string outcome;         // once ended: why ("done", "cancelled", ...)
  uint64_t dirs = 0;           // directories reached
  uint64_t files = 0;          // other objects reached
  uint64_t bytes_fetched = 0;  // data read from the remote
  uint64_t bytes_cached = 0;   // data found in the cache already
  uint64_t skipped = 0;        // objects the remote would not let us read
  double elapsed_s = 0;
  std::string last_skip;  // the last object skipped and why ("" none)
};

// One pin, as `nachectl status` lists it.
struct PinInfo {
  std::string path;
  uint64_t objects = 0;
  uint64_t size = 0;  // bytes its files take cached whole
};

// One export as `nachectl status` shows it. Counters are totals since the
// daemon started (the same values as the Prometheus series).
struct ExportStatus {
  uint32_t export_id = 0;
  // Upstream.
  std::string server;           // Upstream_Server
  uint32_t port = 0;            // Upstream_Port
  std::string path;             // Upstream_Path
  uint32_t minor_version = 0;   // spoken (Upstream_Minor_Version or less)
  std::string state;            // "connecting", "ready", "down"
  bool connected = false;       // ready and the lease renewed in time
  uint64_t client_id = 0;       // the NFSv4 client id (0: none yet)
  uint64_t clientid_epoch = 0;  // times it was re-established
  double lease_age_s = -1;      // since the lease was last renewed; -1 never
  uint32_t lease_time_s = 0;    // the server's lease (0: not known yet)
  bool callbacks_configured = false;  // a callback service or back channel
  bool callback_path_up = false;
  double rtt_avg_s = 0;  // mean COMPOUND round trip since start
  // Cache.
  uint64_t cache_bytes = 0;
  uint64_t cache_limit = 0;   // Cache_Size
  uint64_t cache_blocks = 0;  // data blocks stored
  uint64_t objects = 0;       // objects with cached state in memory
  uint64_t max_objects = 0;   // Cache_Objects (derived when 0)
  double cache_hits = 0;      // all kinds
  double cache_misses = 0;
  uint64_t open_files = 0;  // upstream open table
  // Delegations.
  uint64_t delegations_read = 0;
  uint64_t delegations_write = 0;
  uint64_t local_delegations = 0;  // given to the office's clients
  // Write-back.
  bool write_back = false;  // Write_Policy = write_back
  bool single_writer = false;
  bool draining = false;  // new writes go write-through
  uint64_t dirty_bytes = 0;
  uint64_t dirty_files = 0;   // objects (files, directories) not flushed
  uint64_t dirty_max = 0;     // Dirty_Max
  double oldest_dirty_s = 0;  // age of the oldest unflushed write
  uint32_t flush_age_s = 0;   // Flush_Age
  double conflicts = 0;       // nache_writeback_conflicts_total
  // Operations.
  double local_ops = 0;         // C API calls of the FSAL
  double answered_locally = 0;  // of those, with no upstream round trip
  double compounds = 0;         // COMPOUNDs sent upstream
  // The last upstream failure of an operation ("" none) and when (UTC,
  // seconds since the epoch).
  std::string last_error;
  int64_t last_error_time = 0;
  // Pins (nachectl pin) and the warm job (nachectl warm).
  uint64_t pins = 0;
  uint64_t pinned_objects = 0;
  uint64_t pinned_size = 0;    // bytes pinned files take cached whole
  uint64_t pinned_cached = 0;  // bytes of them cached now
  uint64_t pin_limit = 0;      // pins may take this much at most
  std::vector<PinInfo> pin_list;
  WarmProgress warm;
};

// One export's side (implemented by the core).
class ExportControl {
 public:
  virtual ~ExportControl() = default;
  virtual ExportStatus Status() = 0;
  // Flushes dirty write-back data, oldest first, until nothing is dirty or
  // deadline passes; false (with *error set) when a flush failed before
  // the deadline. True at once on an export without write-back.
  virtual bool FlushUntil(std::chrono::steady_clock::time_point deadline,
                          std::string *error) = 0;
  // Draining: no new data or namespace change is kept for write-back; what
  // is dirty already is still flushed as usual.
  virtual void SetDraining(bool draining) = 0;

  // Work on a path inside the export (WarmRequest::path). Each returns
  // false with *error (a message for the administrator) when refused or
  // failed; the defaults refuse (an export that cannot do it).
  // Starts a warm job in the background; refused while one runs.
  virtual bool StartWarm(const WarmRequest &req, std::string *error) {
    (void)req;
    return Unsupported(error);
  }
  // Stops the running warm job (it ends "cancelled" soon after).
  virtual bool CancelWarm(std::string *error) { return Unsupported(error); }
  virtual WarmProgress Warm() { return WarmProgress(); }
  // Pins path's object and subtree as it is now; progress (at most once a
  // second) gets a line for a person while the subtree is walked.
  virtual bool Pin(const std::string &path,
                   const std::function<void(const std::string &)> &progress,
                   std::string *summary, std::string *error) {
    (void)path, (void)progress, (void)summary;
    return Unsupported(error);
  }
  virtual bool Unpin(const std::string &path, std::string *summary,
                     std::string *error) {
    (void)path, (void)summary;
    return Unsupported(error);
  }
  // Drops the clean cached data and attributes of path and its subtree;
  // unpin: pins at or below path go first.
  virtual bool Evict(const std::string &path, bool unpin, std::string *summary,
                     std::string *error) {
    (void)path, (void)unpin, (void)summary;
    return Unsupported(error);
  }
  // Makes the write-back data of path and its subtree due now; *objects:
  // the dirty objects that covers (for DirtyAmong).
  virtual bool FlushPath(const std::string &path,
                         std::vector<uint64_t> *objects, std::string *summary,
                         std::string *error) {
    (void)path, (void)objects, (void)summary;
    return Unsupported(error);
  }
  // How much of objects is still dirty: bytes and objects.
  virtual void DirtyAmong(const std::vector<uint64_t> &objects, uint64_t *bytes,
                          uint64_t *count) {
    (void)objects;
    *bytes = *count = 0;
  }

 private:
  static bool Unsupported(std::string *error) {
    *error = "this export cannot do that";
    return false;
  }
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry &) = delete;
  Registry &operator=(const Registry &) = delete;

  // The process-wide one; never destroyed.
  static Registry &Global();

  // Adds export_id's control (not owned; it must outlive the matching
  // Remove). The daemon's drain state is applied to it at once. Returns a
  // token for Remove.
  uint64_t Add(uint32_t export_id, ExportControl *control) EXCLUDES(mu_);
  // Removes the entry of token, waiting until no call into it runs. A
  // no-op for an unknown token.
  void Remove(uint64_t token) EXCLUDES(mu_);

  // Calls fn for each export in export id order, without the lock held;
  // each export's entry is pinned while fn runs on it.
  void ForEach(
      const std::function<void(uint32_t export_id, ExportControl *control)> &fn)
      EXCLUDES(mu_);

  // The daemon's drain state: set on every export now and on those added
  // later, until cleared (or the daemon restarts: it is not persisted).
  void SetDraining(bool draining) EXCLUDES(mu_);
  bool draining() const EXCLUDES(mu_);

  size_t size() const EXCLUDES(mu_);

 private:
  struct Entry {
    uint32_t export_id;
    ExportControl *control;  // not owned
    int in_use = 0;          // calls running on it (ForEach)
    bool removing = false;   // Remove waits; ForEach skips it
  };
  mutable Mutex mu_{"admin_registry"};
  CondVar cv_{&mu_};  // an entry's in_use dropped
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mu_);  // by token
  uint64_t next_token_ GUARDED_BY(mu_) = 1;
  bool draining_ GUARDED_BY(mu_) = false;
};

}  // namespace admin
}  // namespace nache
