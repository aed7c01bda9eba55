// The admin socket: a Unix stream socket (owned by the daemon's user,
// root, mode 0600) on which nachectl asks for status and statistics and
// starts flushes and drains (protocol.h). One per daemon, like the metrics
// exposer; started from the top-level NACHE { } block (Admin_Socket).
//
// Threads: one accepts; each connection is served on a thread of its own
// (at most kMaxConnections at once), so a `flush --wait` that streams
// progress for minutes does not hold up a `status`; one flush job thread
// pushes write-back data for flush and drain requests, one job at a time,
// so that any number of waiting nachectls cause one flush.
//
// Only callers with the daemon's uid (or root) are served (SO_PEERCRED),
// on top of the socket's mode.
//
// Thread safety: Start and Stop from one thread; Handle from any.
#pragma once

#include <prometheus/metric_family.h>

#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admin/protocol.h"
#include "admin/registry.h"
#include "util/mutex.h"

namespace nache {
namespace admin {

struct AdminServerOptions {
  std::string socket_path;       // absolute; its directory must exist
  Registry *registry = nullptr;  // the exports (not owned)
  // The series `stats` shows (Metrics::Collect); empty: none.
  std::function<std::vector<prometheus::MetricFamily>()> collect;
  // `status`'s recent errors (RecentErrors); empty: none.
  std::function<std::vector<std::string>()> recent_errors;
  // How often a waiting flush or drain reports progress.
  std::chrono::milliseconds progress_every{1000};
  // A flush round per export before the job looks again (bounds how long
  // an export's removal can wait for the job).
  std::chrono::milliseconds flush_slice{2000};
  // A flush job that keeps failing gives up after this (a waiting nachectl
  // starts another).
  std::chrono::seconds flush_job_max{3600};
};

class AdminServer {
 public:
  static constexpr int kMaxConnections = 16;

  // Listens on opts.socket_path. A stale socket there (nobody answers on
  // it) is replaced; a live one (another daemon), or anything that is not
  // a socket, refuses with *err set, as does a path too long for a Unix
  // socket or in a directory that does not exist.
  static std::unique_ptr<AdminServer> Start(const AdminServerOptions &opts,
                                            std::string *err);
  ~AdminServer();  // Stop()

  // Stops accepting, ends the connections (a waiting nachectl is told the
  // daemon is stopping), joins every thread, and removes the socket.
  void Stop() EXCLUDES(mu_);

  // Serves one request line, writing the answer's lines through write
  // (which returns false once the peer is gone; the answer then stops).
  // What every connection runs; tests call it directly.
  void Handle(const std::string &line,
              const std::function<bool(const std::string &)> &write)
      EXCLUDES(mu_);

  const std::string &socket_path() const { return opts_.socket_path; }

 private:
  explicit AdminServer(const AdminServerOptions &opts);
  struct Connection {
    int fd;  // closed by its thread when done
    std::thread thread;
    bool done = false;  // guarded by mu_
  };

  void AcceptLoop() EXCLUDES(mu_);
  void Serve(Connection *c) EXCLUDES(mu_);
  void FlushJobLoop() EXCLUDES(mu_);
  std::vector<ExportStatus> Statuses();
  // Wakes the flush job (starts a job when none runs).
  void RequestFlush() EXCLUDES(mu_);
  // Streams progress until nothing is dirty; the answer's last line.
  std::string WaitClean(int timeout_s,
                        const std::function<bool(const std::string &)> &write)
      EXCLUDES(mu_);
  // Runs fn on the export req names (export=N), or on the only one; false
  // with *error when there is no such export, or several and req names
  // none. The export is pinned in the registry while fn runs.
  bool OnExport(const Request &req,
                const std::function<void(ExportControl *)> &fn,
                std::string *error);
  // The commands on a path (version 2); the answer's last line ("" when
  // the peer went away).
  std::string HandlePath(const Request &req,
                         const std::function<bool(const std::string &)> &write)
      EXCLUDES(mu_);
  std::string FlushPath(const Request &req,
                        const std::function<bool(const std::string &)> &write)
      EXCLUDES(mu_);
  std::string Warm(const Request &req,
                   const std::function<bool(const std::string &)> &write)
      EXCLUDES(mu_);
  // Waits up to progress_every, or until Stop; false once stopping.
  bool Pause() EXCLUDES(mu_);

  AdminServerOptions opts_;  // immutable
  int listen_fd_ = -1;       // owned; closed by Stop
  int wake_[2] = {-1, -1};   // pipe: Stop wakes the accept loop
  ino_t socket_ino_ = 0;     // our socket file (Stop removes only it)
  std::thread accept_thread_;
  std::thread flush_thread_;

  Mutex mu_{"admin_server"};
  CondVar cv_{&mu_};  // stop, a flush requested or ended
  bool stop_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;  // Stop ran
  std::list<Connection> conns_ GUARDED_BY(mu_);
  bool flush_requested_ GUARDED_BY(mu_) = false;
  bool flush_running_ GUARDED_BY(mu_) = false;
  uint64_t flush_jobs_ GUARDED_BY(mu_) = 0;  // jobs ended so far
  std::string flush_error_ GUARDED_BY(mu_);  // the last job's failure
};

}  // namespace admin
}  // namespace nache
