// The admin socket's server. See admin_server.h.
#include "admin/admin_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace nache {
namespace admin {

namespace {

constexpr const char *kComponent = "NACHE_ADMIN";
// A client has this long to send its request line.
constexpr int kRequestTimeoutMs = 5000;

std::string Printf(const char *fmt, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

bool FillAddr(const std::string &path, sockaddr_un *a) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  if (path.size() >= sizeof(a->sun_path)) return false;
  memcpy(a->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Whether a daemon answers on the socket at path.
bool SomeoneListens(const std::string &path) {
  sockaddr_un a;
  if (!FillAddr(path, &a)) return false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool yes = connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
  close(fd);
  return yes;
}

bool WriteAll(int fd, const std::string &s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// Reads one line (without its newline) within timeout_ms; false on a
// timeout, an error, a closed connection or a line too long.
bool ReadLine(int fd, std::string *line, int timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  line->clear();
  for (;;) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                       deadline - std::chrono::steady_clock::now())
                       .count());
    if (left <= 0) return false;
    pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char buf[128];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return !line->empty();  // a last line without newline
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') return true;
      *line += buf[i];
    }
    if (line->size() > kMaxRequestLine) return true;  // ParseRequest says so
  }
}

}  // namespace

AdminServer::AdminServer(const AdminServerOptions &opts) : opts_(opts) {}

std::unique_ptr<AdminServer> AdminServer::Start(const AdminServerOptions &opts,
                                                std::string *err) {
  const std::string &path = opts.socket_path;
  sockaddr_un addr;
  if (path.empty() || path[0] != '/') {
    *err = "must be an absolute path";
    return nullptr;
  }
  // (The temporary name below is longer than path.)
  if (!FillAddr(path + ".tmp-4294967295", &addr)) {
    *err = path + ": too long for a Unix socket (at most " +
           std::to_string(sizeof(addr.sun_path) - 17) + " bytes)";
    return nullptr;
  }
  std::string dir = path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = path + ": directory " + dir + " does not exist";
    return nullptr;
  }
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *err = path + ": exists and is not a socket (not replaced)";
      return nullptr;
    }
    if (SomeoneListens(path)) {
      *err = path + ": another daemon is serving it";
      return nullptr;
    }
    unlink(path.c_str());  // a stale socket of an earlier run
  }

  std::unique_ptr<AdminServer> s(new AdminServer(opts));
  s->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) {
    *err = path + ": socket: " + strerror(errno);
    return nullptr;
  }
  // Bound under a temporary name, made 0600, then renamed into place: the
  // socket is never reachable with a wider mode (umask is process-wide and
  // other threads create files, so it cannot be narrowed for the bind).
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  FillAddr(tmp, &addr);
  unlink(tmp.c_str());
  auto fail = [&](const char *what) {
    *err = path + ": " + what + ": " + strerror(errno);
    unlink(tmp.c_str());
    return nullptr;
  };
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)))
    return fail("bind");
  if (chmod(tmp.c_str(), 0600)) return fail("chmod");
  if (listen(s->listen_fd_, 16)) return fail("listen");
  if (lstat(tmp.c_str(), &st) == 0) s->socket_ino_ = st.st_ino;
  if (rename(tmp.c_str(), path.c_str())) return fail("rename");
  if (pipe2(s->wake_, O_CLOEXEC)) {
    *err = path + ": pipe: " + strerror(errno);
    unlink(path.c_str());
    return nullptr;
  }
  AdminServer *raw = s.get();
  s->flush_thread_ = std::thread([raw] { raw->FlushJobLoop(); });
  s->accept_thread_ = std::thread([raw] { raw->AcceptLoop(); });
  return s;
}

AdminServer::~AdminServer() { Stop(); }

void AdminServer::Stop() {
  {
    MutexLock g(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stop_ = true;
    // Connections blocked reading their request return at once; those
    // waiting on a flush see stop_ and say so (a write to a nachectl that
    // stopped reading gives up after SO_SNDTIMEO).
    for (Connection &c : conns_)
      if (c.fd >= 0) shutdown(c.fd, SHUT_RD);
  }
  cv_.SignalAll();
  if (wake_[1] >= 0) {
    char b = 0;
    (void)!write(wake_[1], &b, 1);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  // No new connection after the accept loop ended.
  std::list<Connection> conns;
  {
    MutexLock g(&mu_);
    conns.splice(conns.end(), conns_);
  }
  for (Connection &c : conns)
    if (c.thread.joinable()) c.thread.join();
  if (flush_thread_.joinable()) flush_thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
  for (int &fd : wake_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  // Only our own socket: a newer daemon may have replaced it meanwhile.
  struct stat st;
  if (socket_ino_ && lstat(opts_.socket_path.c_str(), &st) == 0 &&
      st.st_ino == socket_ino_)
    unlink(opts_.socket_path.c_str());
}

void AdminServer::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    {
      MutexLock g(&mu_);
      if (stop_) return;
      // Threads of finished connections are joined here, off their own.
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->done) {
          it->thread.join();
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (r <= 0 || !(p[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    timeval tv = {10, 0};  // a client that stops reading is dropped
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    MutexLock g(&mu_);
    if (int(conns_.size()) >= kMaxConnections) {
      WriteAll(fd, AnswerLine("error",
                              "busy: too many nachectl "
                              "connections; try again"));
      close(fd);
      continue;
    }
    conns_.emplace_back();
    Connection *c = &conns_.back();
    c->fd = fd;
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void AdminServer::Serve(Connection *c) {
  std::string line;
  ucred peer = {};
  socklen_t len = sizeof(peer);
  if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
      (peer.uid != 0 && peer.uid != geteuid())) {
    WriteAll(c->fd, AnswerLine("error",
                               "permission denied: run nachectl as "
                               "root"));
  } else if (!ReadLine(c->fd, &line, kRequestTimeoutMs)) {
    WriteAll(c->fd, AnswerLine("error", "no request line received"));
  } else {
    const int fd = c->fd;
    Handle(line, [fd](const std::string &s) { return WriteAll(fd, s); });
  }
  MutexLock g(&mu_);
  close(c->fd);
  c->fd = -1;
  c->done = true;
}

std::vector<ExportStatus> AdminServer::Statuses() {
  std::vector<ExportStatus> out;
  opts_.registry->ForEach(
      [&](uint32_t, ExportControl *e) { out.push_back(e->Status()); });
  return out;
}

void AdminServer::RequestFlush() {
  {
    MutexLock g(&mu_);
    flush_requested_ = true;
  }
  cv_.SignalAll();
}

void AdminServer::FlushJobLoop() {
  using Clock = std::chrono::steady_clock;
  MutexLock g(&mu_);
  for (;;) {
    while (!stop_ && !flush_requested_) cv_.Wait();
    if (stop_) return;
    flush_requested_ = false;
    flush_running_ = true;
    flush_error_.clear();
    const Clock::time_point give_up = Clock::now() + opts_.flush_job_max;
    for (;;) {
      g.Unlock();
      std::string error;
      bool dirty = false;
      opts_.registry->ForEach([&](uint32_t id, ExportControl *e) {
        std::string why;
        if (!e->FlushUntil(Clock::now() + opts_.flush_slice, &why))
          error = "export " + std::to_string(id) + ": " + why;
        ExportStatus s = e->Status();
        if (s.dirty_bytes || s.dirty_files) dirty = true;
      });
      g.Lock();
      if (!error.empty()) {
        if (error != flush_error_)
          NACHE_LOG(kLogInfo, kComponent, "flush requested by nachectl: %s",
                    error.c_str());
        flush_error_ = error;
      }
      if (stop_ || !dirty || Clock::now() >= give_up) break;
      // A failure (the remote away): try again in a while, not in a loop.
      if (!error.empty() && !stop_)
        cv_.WaitUntil(std::chrono::steady_clock::now() +
                      std::chrono::seconds(1));
      if (stop_) break;
    }
    flush_running_ = false;
    flush_jobs_++;
    cv_.SignalAll();
  }
}

std::string AdminServer::WaitClean(
    int timeout_s, const std::function<bool(const std::string &)> &write) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    std::vector<ExportStatus> st = Statuses();
    uint64_t bytes = 0, files = 0;
    for (const ExportStatus &e : st) {
      bytes += e.dirty_bytes;
      files += e.dirty_files;
    }
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - t0).count();
    std::string error;
    bool running;
    {
      MutexLock g(&mu_);
      if (stop_) return AnswerLine("error", "the daemon is stopping");
      error = flush_error_;
      running = flush_running_ || flush_requested_;
    }
    if (bytes == 0 && files == 0)
      return AnswerLine("ok",
                        "nothing dirty: every write-back change is at "
                        "the remote");
    if (!write(AnswerLine("progress", FlushProgress(st, elapsed, error))))
      return "";  // nachectl went away (^C): stop watching
    if (timeout_s > 0 && elapsed >= timeout_s)
      return AnswerLine("error",
                        "timed out after " + std::to_string(timeout_s) +
                            " s: " + HumanBytes(double(bytes)) + " in " +
                            std::to_string(files) + " objects still dirty" +
                            (error.empty() ? "" : " (" + error + ")"));
    // The job gave up (failures for an hour): start another.
    if (!running) RequestFlush();
    MutexLock g(&mu_);
    if (!stop_) cv_.WaitUntil(Clock::now() + opts_.progress_every);
  }
}

bool AdminServer::OnExport(const Request &req,
                           const std::function<void(ExportControl *)> &fn,
                           std::string *error) {
  std::vector<uint32_t> ids;
  opts_.registry->ForEach(
      [&ids](uint32_t id, ExportControl *) { ids.push_back(id); });
  int64_t want = req.export_id;
  if (ids.empty()) {
    *error = "no NACHE export is running";
    return false;
  }
  if (want < 0) {
    if (ids.size() > 1) {
      std::string list;
      for (uint32_t id : ids)
        list += (list.empty() ? "" : ", ") + std::to_string(id);
      *error = "several exports (" + list + "): say which with --export ID";
      return false;
    }
    want = ids[0];
  }
  bool found = false;
  opts_.registry->ForEach([&](uint32_t id, ExportControl *c) {
    if (int64_t(id) != want || found) return;
    found = true;
    fn(c);
  });
  if (!found) *error = "no NACHE export " + std::to_string(want);
  return found;
}

bool AdminServer::Pause() {
  MutexLock g(&mu_);
  if (stop_) return false;
  cv_.WaitUntil(std::chrono::steady_clock::now() + opts_.progress_every);
  return !stop_;
}

std::string AdminServer::FlushPath(
    const Request &req, const std::function<bool(const std::string &)> &write) {
  using Clock = std::chrono::steady_clock;
  const std::string path = req.path.empty() ? "/" : req.path;
  std::vector<uint64_t> objects;
  std::string summary, error;
  bool ok = false;
  if (!OnExport(
          req,
          [&](ExportControl *c) {
            ok = c->FlushPath(path, &objects, &summary, &error);
          },
          &error) ||
      !ok)
    return AnswerLine("error", error);
  if (!req.wait || objects.empty()) return AnswerLine("ok", summary);
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    uint64_t bytes = 0, count = 0;
    if (!OnExport(
            req,
            [&](ExportControl *c) { c->DirtyAmong(objects, &bytes, &count); },
            &error))
      return AnswerLine("error", error);
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - t0).count();
    if (count == 0)
      return AnswerLine("ok", "nothing dirty at or below " + path +
                                  ": its write-back changes are at the "
                                  "remote");
    const std::string line =
        Printf("%.0f s: ", elapsed) + HumanBytes(double(bytes)) + " dirty in " +
        std::to_string(count) + " objects at or below " + path;
    if (!write(AnswerLine("progress", line))) return "";
    if (req.timeout_s > 0 && elapsed >= req.timeout_s)
      return AnswerLine("error", "timed out after " +
                                     std::to_string(req.timeout_s) +
                                     " s: " + line.substr(line.find(": ") + 2) +
                                     " still dirty (see nachectl status)");
    if (!Pause()) return AnswerLine("error", "the daemon is stopping");
  }
}

std::string AdminServer::Warm(
    const Request &req, const std::function<bool(const std::string &)> &write) {
  std::string error;
  WarmProgress w;
  bool ok = false;
  if (req.cancel) {
    if (!OnExport(
            req,
            [&](ExportControl *c) {
              w = c->Warm();
              ok = c->CancelWarm(&error);
            },
            &error) ||
        !ok)
      return AnswerLine("error", error);
    return AnswerLine("ok", "cancelling the warm of " + w.request.path +
                                " (job " + std::to_string(w.job) + ")");
  }
  WarmRequest wr;
  wr.path = req.path;
  wr.depth = req.depth;
  wr.data = req.data;
  wr.rate = req.rate;
  if (req.parallel > 0) wr.parallel = req.parallel;
  if (!OnExport(
          req,
          [&](ExportControl *c) {
            ok = c->StartWarm(wr, &error);
            if (ok) w = c->Warm();
          },
          &error) ||
      !ok)
    return AnswerLine("error", error);
  const uint64_t job = w.job;
  if (!req.wait)
    return AnswerLine("ok", "warm of " + w.request.path + " started (job " +
                                std::to_string(job) +
                                "): nachectl status shows its progress, "
                                "nachectl warm --cancel stops it");
  for (;;) {
    if (!OnExport(
            req, [&](ExportControl *c) { w = c->Warm(); }, &error))
      return AnswerLine("error", error);
    if (w.job != job)
      return AnswerLine("error", "the warm (job " + std::to_string(job) +
                                     ") is no longer known");
    if (!w.running) return AnswerLine(w.ok ? "ok" : "error", WarmSummary(w));
    // nachectl went away (^C): the warm goes on (warm --cancel stops it).
    if (!write(AnswerLine("progress", WarmProgressLine(w)))) return "";
    if (!Pause()) return AnswerLine("error", "the daemon is stopping");
  }
}

std::string AdminServer::HandlePath(
    const Request &req, const std::function<bool(const std::string &)> &write) {
  if (req.command == Command::kWarm) return Warm(req, write);
  std::string summary, error;
  bool ok = false;
  // A pin lists its tree: a progress line now and then meanwhile.
  auto progress = [&write](const std::string &line) {
    write(AnswerLine("progress", line));
  };
  bool found = OnExport(
      req,
      [&](ExportControl *c) {
        switch (req.command) {
          case Command::kPin:
            ok = c->Pin(req.path, progress, &summary, &error);
            break;
          case Command::kUnpin:
            ok = c->Unpin(req.path, &summary, &error);
            break;
          case Command::kEvict:
            ok = c->Evict(req.path, req.unpin, &summary, &error);
            break;
          default: error = "not a command on a path";
        }
      },
      &error);
  const bool done = found && ok;
  return AnswerLine(done ? "ok" : "error", done ? summary : error);
}

void AdminServer::Handle(
    const std::string &line,
    const std::function<bool(const std::string &)> &write) {
  Request req;
  std::string error;
  if (!ParseRequest(line, &req, &error)) {
    write(AnswerLine("error", error));
    return;
  }
  const Registry &reg = *opts_.registry;
  switch (req.command) {
    case Command::kStatus: {
      std::vector<std::string> recent;
      if (opts_.recent_errors) recent = opts_.recent_errors();
      std::vector<ExportStatus> st = Statuses();
      std::string body = req.json ? StatusJson(st, reg.draining(), recent)
                                  : StatusText(st, reg.draining(), recent);
      if (write(DataLines(body))) write(AnswerLine("ok", ""));
      return;
    }
    case Command::kStats: {
      std::vector<prometheus::MetricFamily> f;
      if (opts_.collect) f = opts_.collect();
      if (write(DataLines(StatsText(f)))) write(AnswerLine("ok", ""));
      return;
    }
    case Command::kUndrain:
      opts_.registry->SetDraining(false);
      NACHE_LOG(kLogEvent, kComponent,
                "undrained by nachectl: write-back resumes");
      write(AnswerLine("ok",
                       "write-back resumed: new writes are kept "
                       "here again"));
      return;
    case Command::kWarm:
    case Command::kPin:
    case Command::kUnpin:
    case Command::kEvict: {
      std::string last = HandlePath(req, write);
      if (!last.empty()) write(last);
      return;
    }
    case Command::kFlush:
      if (!req.path.empty() || req.export_id >= 0) {
        std::string last = FlushPath(req, write);
        if (!last.empty()) write(last);
        return;
      }
      break;
    case Command::kDrain: break;
  }
  bool any_write_back = false;
  for (const ExportStatus &e : Statuses())
    any_write_back = any_write_back || e.write_back;
  if (req.command == Command::kDrain) {
    opts_.registry->SetDraining(true);
    NACHE_LOG(kLogEvent, kComponent,
              "drained by nachectl: new writes go to the remote at once "
              "until nachectl undrain or a restart");
  }
  RequestFlush();
  if (!req.wait) {
    std::vector<ExportStatus> st = Statuses();
    write(AnswerLine(
        "ok", std::string(req.command == Command::kDrain
                              ? "draining: new writes go to the remote at "
                                "once; flushing: "
                              : "flushing: ") +
                  (any_write_back ? FlushProgress(st, 0, "")
                                  : "no write-back export")));
    return;
  }
  std::string last = WaitClean(req.timeout_s, write);
  if (!last.empty() && last.compare(0, 3, "ok ") == 0 &&
      req.command == Command::kDrain)
    last = AnswerLine("ok",
                      "drained: nothing dirty; new writes go to the "
                      "remote at once until nachectl undrain or a "
                      "restart");
  if (!last.empty()) write(last);
}

}  // namespace admin
}  // namespace nache
