// What the admin socket (admin_server.h) may see and do of each export: a
// snapshot of its state (ExportStatus), a bounded flush, and the drain
// switch; and the process-wide registry in which every export's core puts
// itself from its start to its end.
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

// One export as `nachectl status` shows it. Counters are totals since the
// daemon started (the same values as the Prometheus series).
struct ExportStatus {
  uint32_t export_id = 0;
  // Upstream.
  std::string server;           // Upstream_Server
  uint32_t port = 0;            // Upstream_Port
  std::string path;             // Upstream_Path
  uint32_t minor_version = 0;   // Upstream_Minor_Version
  std::string state;            // "connecting", "ready", "down"
  bool connected = false;       // ready and the lease renewed in time
  uint64_t client_id = 0;       // the NFSv4 client id (0: none yet)
  uint64_t clientid_epoch = 0;  // times it was re-established
  double lease_age_s = -1;      // since the lease was last renewed; -1 never
  uint32_t lease_time_s = 0;    // the server's lease (0: not known yet)
  bool callbacks_configured = false;  // a callback service or back channel
  bool callback_path_up = false;
  double rtt_avg_s = 0;         // mean COMPOUND round trip since start
  // Cache.
  uint64_t cache_bytes = 0;
  uint64_t cache_limit = 0;      // Cache_Size
  uint64_t cache_blocks = 0;     // data blocks stored
  uint64_t objects = 0;          // objects with cached state in memory
  uint64_t max_objects = 0;      // Cache_Objects (derived when 0)
  double cache_hits = 0;         // all kinds
  double cache_misses = 0;
  uint64_t open_files = 0;       // upstream open table
  // Delegations.
  uint64_t delegations_read = 0;
  uint64_t delegations_write = 0;
  uint64_t local_delegations = 0;  // given to the office's clients
  // Write-back.
  bool write_back = false;       // Write_Policy = write_back
  bool single_writer = false;
  bool draining = false;         // new writes go write-through
  uint64_t dirty_bytes = 0;
  uint64_t dirty_files = 0;      // objects (files, directories) not flushed
  uint64_t dirty_max = 0;        // Dirty_Max
  double oldest_dirty_s = 0;     // age of the oldest unflushed write
  uint32_t flush_age_s = 0;      // Flush_Age
  double conflicts = 0;          // nache_writeback_conflicts_total
  // Operations.
  double local_ops = 0;          // C API calls of the FSAL
  double answered_locally = 0;   // of those, with no upstream round trip
  double compounds = 0;          // COMPOUNDs sent upstream
  // The last upstream failure of an operation ("" none) and when (UTC,
  // seconds since the epoch).
  std::string last_error;
  int64_t last_error_time = 0;
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
  void ForEach(const std::function<void(uint32_t export_id,
                                        ExportControl *control)> &fn)
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
  mutable Mutex mu_;
  CondVar cv_{&mu_};  // an entry's in_use dropped
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mu_);  // by token
  uint64_t next_token_ GUARDED_BY(mu_) = 1;
  bool draining_ GUARDED_BY(mu_) = false;
};

}  // namespace admin
}  // namespace nache
