// nachectl warm and pin: a walk of a tree inside the export through the
// core's own operations (Readdir, and for data the block reader that a
// client's READ goes through, so blocks land in the cache exactly as a
// client's read would put them), and the export's background warm job.
//
// Credentials: the walk runs as root (uid 0, no groups), the daemon's own
// identity. What it reaches is what the remote lets root read: with
// root_squash there (the usual export), what nobody may read. An object the
// remote refuses (a directory it will not list, a file it will not let us
// read) is counted as skipped and the walk goes on; only an unreachable
// remote stops it. Data warmed so is no leak: a client is served cached
// data only after the remote's ACCESS answer for that client allows it.
//
// WAN use is bounded: directories are listed one at a time (one READDIR
// round trip per chunk), and at most `parallel` block fetches are in
// flight, paced to `rate` bytes a second when one is given. The walk's
// fetches run on its own threads (never on the readahead threads clients
// use), so a client's read waits at most behind one fetch of the same
// block, which it then shares.
//
// The cache's bound: before a file's data is fetched, the walk checks that
// what it has warmed so far and the file fit in what the cache may hold
// beside pinned and dirty data; when not, it stops ("cache full") rather
// than evict what it has just fetched. Pinned files count in the pinned
// data, not against the walk.
//
// Thread safety: TreeWalk::Run on one thread, counts() from any; Warmer's
// methods from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "admin/registry.h"
#include "handles/handle_map.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

class Core;

class TreeWalk {
 public:
  struct Options {
    int depth = -1;     // levels below the root to list (-1: all)
    bool data = false;  // fetch regular files' data
    uint64_t rate = 0;  // data bytes per second at most (0: no cap)
    int parallel = 4;   // block fetches in flight at most
  };
  struct Counts {
    uint64_t dirs = 0, files = 0, bytes_fetched = 0, bytes_cached = 0,
             skipped = 0;
    std::string last_skip;
  };
  // stop: polled between operations; once true the walk ends "cancelled".
  // progress (may be empty): called on Run's thread between directories,
  // at most once a second.
  TreeWalk(Core *core, const Options &opts, std::function<bool()> stop,
           std::function<void(const Counts &)> progress = nullptr);

  // Walks breadth-first from root (named path, with attributes attrs).
  // visit(key, attrs) is called for every object reached, root included.
  // Returns "" once everything asked was walked, else why it stopped.
  std::string Run(
      const std::string &path, Key root, const upstream::Attrs &attrs,
      const std::function<void(Key, const upstream::Attrs &)> &visit)
      EXCLUDES(mu_);
  Counts counts() const EXCLUDES(mu_);

 private:
  struct File;
  // Fetches the data of files not cached yet; "" or why the walk stops.
  std::string FetchData(std::vector<File> *files) EXCLUDES(mu_);
  // Waits until bytes more may be fetched under the rate cap; false when
  // stopped meanwhile.
  bool Pace(uint64_t bytes) EXCLUDES(mu_);
  // Counts an object the remote refused (status st) as skipped.
  void Skip(const std::string &path, uint32_t st) EXCLUDES(mu_);
  // Whether status st means the remote cannot be reached (the walk stops).
  static bool Unreachable(uint32_t st);
  void MaybeReport() EXCLUDES(mu_);

  Core *core_;  // not owned
  const Options opts_;
  const std::function<bool()> stop_;
  const std::function<void(const Counts &)> progress_;
  std::atomic<uint64_t> dirs_{0}, files_{0}, fetched_{0}, cached_{0},
      skipped_{0};
  // Bytes of unpinned files warmed so far (the cache-full check).
  uint64_t warmed_ = 0;                               // Run's thread only
  std::chrono::steady_clock::time_point reported_{};  // Run's thread only
  mutable Mutex mu_{"tree_walk"};
  CondVar pace_cv_{&mu_};  // (waited on with a deadline: the rate cap)
  std::string last_skip_ GUARDED_BY(mu_);
  // When the next fetch may start (the rate cap).
  std::chrono::steady_clock::time_point next_fetch_ GUARDED_BY(mu_){};
};

// The export's warm job: at most one at a time, on a thread of its own.
class Warmer {
 public:
  explicit Warmer(Core *core) : core_(core) {}
  ~Warmer() { Stop(); }
  // Cancels a running job and waits for it; no job starts afterwards.
  void Stop() EXCLUDES(mu_);

  // Starts a warm of req.path (which must resolve now); refused while a
  // job runs.
  bool Start(const admin::WarmRequest &req, std::string *error) EXCLUDES(mu_);
  bool Cancel(std::string *error) EXCLUDES(mu_);
  // The running job, or the last one.
  admin::WarmProgress Progress() const EXCLUDES(mu_);

 private:
  void RunJob(std::shared_ptr<TreeWalk> walk, std::string path, Key key,
              upstream::Attrs attrs) EXCLUDES(mu_);

  Core *core_;  // not owned; outlives us
  std::atomic<bool> cancel_{false};
  mutable Mutex mu_{"warmer"};
  bool stopped_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);              // the current or last job's
  admin::WarmProgress job_ GUARDED_BY(mu_);         // its request and outcome
  std::shared_ptr<TreeWalk> walk_ GUARDED_BY(mu_);  // its counters
  std::chrono::steady_clock::time_point started_ GUARDED_BY(mu_){};
  std::chrono::steady_clock::time_point ended_ GUARDED_BY(mu_){};
};

}  // namespace nache
