// The admin socket (proxy/admin/): the protocol's requests and answers,
// the registry, the server against fake exports over a real Unix socket in
// a temporary directory (what nachectl sees, no daemon), and the core's
// side: status, flush on demand, drain.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include "admin/admin_server.h"
#include "admin/client.h"
#include "admin/protocol.h"
#include "admin/registry.h"
#include "scripted_upstream.h"
#include "util/log.h"
#include "util/recent_errors.h"

namespace nache {
namespace admin {
namespace {

// --- protocol -------------------------------------------------------------

TEST(AdminProtocolTest, RequestsRoundTrip) {
  Request r;
  std::string err;
  for (const char *line :
       {"status", "status json", "stats", "flush", "flush wait",
        "flush wait 30", "drain", "drain nowait", "drain 5", "undrain"}) {
    ASSERT_TRUE(ParseRequest(line, &r, &err)) << line << ": " << err;
    EXPECT_EQ(FormatRequest(r), line);
  }
  ASSERT_TRUE(ParseRequest("  flush   wait  12 ", &r, &err));
  EXPECT_EQ(r.command, Command::kFlush);
  EXPECT_TRUE(r.wait);
  EXPECT_EQ(r.timeout_s, 12);
  ASSERT_TRUE(ParseRequest("drain", &r, &err));
  EXPECT_TRUE(r.wait) << "drain waits unless told not to";
}

TEST(AdminProtocolTest, BadRequestsSayWhatIsWrong) {
  Request r;
  std::string err;
  EXPECT_FALSE(ParseRequest("", &r, &err));
  EXPECT_EQ(err, "empty request");
  EXPECT_FALSE(ParseRequest("reboot", &r, &err));
  EXPECT_NE(err.find("unknown command 'reboot'"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("flush wait -1", &r, &err));
  EXPECT_NE(err.find("bad timeout"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("flush wait 99999999999", &r, &err));
  EXPECT_FALSE(ParseRequest("flush 30", &r, &err))
      << "a timeout without wait means nothing";
  EXPECT_FALSE(ParseRequest("status json extra", &r, &err));
  EXPECT_NE(err.find("unexpected 'extra'"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest(std::string(kMaxRequestLine + 1, 'x'), &r, &err));
}

TEST(AdminProtocolTest, Version2RequestsRoundTrip) {
  Request r;
  std::string err;
  for (const char *line :
       {"flush /a", "flush wait /a", "flush wait 30 export=2 /a/b",
        "flush export=3", "warm /",
        "warm depth=2 data rate=1048576 "
        "parallel=8 wait /projects/a",
        "warm export=1 cancel", "pin /p", "unpin export=0 /p", "evict unpin /e",
        "pin /with%20space/%25/%C3%A9"}) {
    ASSERT_TRUE(ParseRequest(line, &r, &err)) << line << ": " << err;
    EXPECT_EQ(FormatRequest(r), line);
  }
  ASSERT_TRUE(ParseRequest("warm data depth=2 wait /projects/a", &r, &err));
  EXPECT_EQ(r.command, Command::kWarm);
  EXPECT_EQ(r.path, "/projects/a");
  EXPECT_EQ(r.depth, 2);
  EXPECT_TRUE(r.data && r.wait);
  EXPECT_EQ(r.export_id, -1);
  ASSERT_TRUE(ParseRequest("pin /with%20space/%25/%C3%A9", &r, &err));
  EXPECT_EQ(r.path, "/with space/%/\xC3\xA9");
  // Version 1 requests mean what they meant.
  ASSERT_TRUE(ParseRequest("flush wait 30", &r, &err));
  EXPECT_TRUE(r.path.empty());
  EXPECT_EQ(r.timeout_s, 30);
  EXPECT_EQ(r.export_id, -1);
  // Any path survives the trip, however odd.
  std::string odd = "/a b/\t\n%/=/\xff";
  EXPECT_TRUE(DecodePath(EncodePath(odd), &err));
  EXPECT_EQ(err, odd);
  EXPECT_EQ(EncodePath("/a b").find(' '), std::string::npos);
}

TEST(AdminProtocolTest, BadVersion2RequestsSayWhatIsWrong) {
  Request r;
  std::string err;
  EXPECT_FALSE(ParseRequest("warm", &r, &err));
  EXPECT_NE(err.find("warm needs a path"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("pin relative", &r, &err));
  EXPECT_NE(err.find("unexpected 'relative'"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("warm cancel /a", &r, &err));
  EXPECT_NE(err.find("cancel takes no path"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("warm depth=x /a", &r, &err));
  EXPECT_NE(err.find("bad depth"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("warm parallel=0 /a", &r, &err));
  EXPECT_FALSE(ParseRequest("evict export=70000 /a", &r, &err));
  EXPECT_NE(err.find("bad export id"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("pin /a%2", &r, &err));
  EXPECT_NE(err.find("bad path"), std::string::npos) << err;
  EXPECT_FALSE(ParseRequest("pin /a%00b", &r, &err)) << "no NUL in a path";
  EXPECT_FALSE(ParseRequest("pin /a /b", &r, &err)) << "one path";
  EXPECT_FALSE(ParseRequest("pin data /a", &r, &err)) << "warm's word";
  EXPECT_FALSE(ParseRequest("status /a", &r, &err));
}

TEST(AdminProtocolTest, WarmLinesSayWhereItIs) {
  WarmProgress w;
  w.job = 1;
  w.request.path = "/a";
  w.request.data = true;
  w.running = true;
  w.dirs = 3;
  w.files = 40;
  w.bytes_fetched = 2 << 20;
  w.skipped = 1;
  w.elapsed_s = 2;
  w.last_skip = "/a/x: permission denied by the remote";
  EXPECT_EQ(WarmProgressLine(w),
            "2 s: 3 directories, 40 files, 2.0 MiB fetched, 0 B already "
            "cached (1.0 MiB/s), 1 skipped (last: /a/x: permission denied "
            "by the remote)");
  w.running = false;
  w.outcome = "cache full: /a/big (9 bytes) would not fit";
  EXPECT_EQ(WarmSummary(w).rfind("warm of /a stopped (cache full: /a/big", 0),
            0u)
      << WarmSummary(w);
  w.ok = true;
  EXPECT_EQ(WarmSummary(w).rfind("warm of /a done in 2.00 s: 3 directories", 0),
            0u)
      << WarmSummary(w);
}

TEST(AdminProtocolTest, AnswerLinesStayOneLine) {
  EXPECT_EQ(AnswerLine("error", "two\nlines"), "error two lines\n");
  EXPECT_EQ(DataLines("a\n\nb\n"), "data a\ndata \ndata b\n");
  std::string tag, text;
  ASSERT_TRUE(ParseAnswerLine("progress 3 s: 1 B dirty", &tag, &text));
  EXPECT_EQ(tag, "progress");
  EXPECT_EQ(text, "3 s: 1 B dirty");
  ASSERT_TRUE(ParseAnswerLine("ok ", &tag, &text));
  EXPECT_EQ(tag, "ok");
  EXPECT_EQ(text, "");
  EXPECT_FALSE(ParseAnswerLine("okay", &tag, &text));
  EXPECT_FALSE(ParseAnswerLine("", &tag, &text));
}

TEST(AdminProtocolTest, JsonStringsAreEscaped) {
  EXPECT_EQ(JsonString("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(100), "100 B");
  EXPECT_EQ(HumanBytes(3.0 * (1ull << 30)), "3.0 GiB");
}

ExportStatus SampleStatus() {
  ExportStatus s;
  s.export_id = 7;
  s.server = "192.0.2.1";
  s.port = 2049;
  s.path = "/srv/\"x\"";
  s.state = "ready";
  s.connected = true;
  s.client_id = 0xabc;
  s.lease_age_s = 1.5;
  s.lease_time_s = 90;
  s.cache_hits = 3;
  s.cache_misses = 1;
  s.write_back = true;
  s.dirty_bytes = 4096;
  s.dirty_files = 1;
  s.oldest_dirty_s = 12;
  s.last_error = "write: upstream timeout";
  s.last_error_time = 1700000000;
  return s;
}

TEST(AdminProtocolTest, StatusJsonNamesEverything) {
  std::string j = StatusJson({SampleStatus()}, true, {"oops \"quoted\""});
  for (const char *want :
       {"\"version\": 1", "\"draining\": true", "\"export_id\": 7",
        "\"server\": \"192.0.2.1\"", "\"path\": \"/srv/\\\"x\\\"\"",
        "\"connected\": true", "\"client_id\": \"0000000000000abc\"",
        "\"lease_age_s\": 1.5", "\"hit_ratio\": 0.75", "\"dirty_bytes\": 4096",
        "\"oldest_dirty_s\": 12", "\"message\": \"write: upstream timeout\"",
        "\"recent_errors\": [\n    \"oops \\\"quoted\\\"\""})
    EXPECT_NE(j.find(want), std::string::npos) << want << " in\n" << j;
  // Balanced, and no trailing comma before a closing bracket.
  int depth = 0;
  for (char c : j) depth += (c == '{' || c == '[') - (c == '}' || c == ']');
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(j.find(",\n    }"), std::string::npos);
  EXPECT_EQ(j.find(",\n      }"), std::string::npos);
  std::string empty = StatusJson({}, false, {});
  EXPECT_NE(empty.find("\"exports\": [],"), std::string::npos) << empty;
}

TEST(AdminProtocolTest, StatusTextShowsWhatMatters) {
  ExportStatus down = SampleStatus();
  down.connected = false;
  down.state = "connecting";
  std::string t = StatusText({SampleStatus(), down}, false, {});
  EXPECT_NE(t.find("export 7"), std::string::npos) << t;
  EXPECT_NE(t.find("192.0.2.1:2049"), std::string::npos) << t;
  EXPECT_NE(t.find("NFSv4.0, connected\n"), std::string::npos) << t;
  EXPECT_NE(t.find("NOT CONNECTED (connecting)"), std::string::npos) << t;
  EXPECT_NE(t.find("hit ratio 75.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("4.0 KiB dirty"), std::string::npos) << t;
  EXPECT_NE(t.find("2023-11-14T22:13:20Z write: upstream timeout"),
            std::string::npos)
      << t;
}

TEST(AdminProtocolTest, StatsShowEverySeriesAndTheSummary) {
  metrics::Metrics m;
  metrics::ExportMetrics *e = m.ForExport(3);
  e->CountLocal(metrics::LocalOp::kLookup);
  e->CountLocal(metrics::LocalOp::kLookup);
  e->CountWithoutUpstream(metrics::LocalOp::kLookup);
  e->CountCache(metrics::CacheKind::kAttrs, true, 0);
  std::string t = StatsText(m.Collect());
  EXPECT_NE(t.find("export 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("answered here without a round trip: 1 of 2 (50.0%)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("nache_local_ops_total{op=lookup}  2"), std::string::npos)
      << t;
  EXPECT_NE(t.find("nache_upstream_rtt_seconds  count 0"), std::string::npos)
      << t;
  EXPECT_NE(t.find("cache hit ratio (all kinds): 100.0%"), std::string::npos)
      << t;
}

// --- registry and server against fake exports -----------------------------

// An export whose dirty data a flush sends a slice at a time.
class FakeExport : public ExportControl {
 public:
  explicit FakeExport(uint32_t id, bool write_back = true) {
    status_.export_id = id;
    status_.server = "192.0.2.9";
    status_.state = "ready";
    status_.connected = true;
    status_.write_back = write_back;
  }
  ExportStatus Status() override {
    ExportStatus s = status_;
    s.dirty_bytes = dirty_.load();
    s.dirty_files = dirty_.load() ? 1 : 0;
    s.draining = draining_.load();
    return s;
  }
  bool FlushUntil(std::chrono::steady_clock::time_point,
                  std::string *error) override {
    flushes_++;
    if (fail_) {
      *error = "upstream not connected";
      return false;
    }
    // A slice at a time, slowly enough for progress to be seen.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    uint64_t d = dirty_.load();
    dirty_.store(d > 1000 ? d - 1000 : 0);
    return true;
  }
  void SetDraining(bool d) override { draining_.store(d); }

  ExportStatus status_;
  std::atomic<uint64_t> dirty_{0};
  std::atomic<bool> draining_{false};
  std::atomic<bool> fail_{false};
  std::atomic<int> flushes_{0};
};

TEST(AdminRegistryTest, DrainReachesExportsAddedLater) {
  Registry r;
  FakeExport a(1), b(2);
  uint64_t ta = r.Add(1, &a);
  r.SetDraining(true);
  EXPECT_TRUE(a.draining_);
  uint64_t tb = r.Add(2, &b);
  EXPECT_TRUE(b.draining_) << "added while draining";
  r.SetDraining(false);
  EXPECT_FALSE(a.draining_);
  EXPECT_FALSE(b.draining_);
  r.Remove(ta);
  r.Remove(tb);
  EXPECT_EQ(r.size(), 0u);
}

TEST(AdminRegistryTest, RemoveWaitsForACallUnderWay) {
  Registry r;
  FakeExport a(1);
  uint64_t t = r.Add(1, &a);
  std::atomic<bool> in_call{false}, release{false}, removed{false};
  std::thread caller([&] {
    r.ForEach([&](uint32_t, ExportControl *) {
      in_call = true;
      while (!release)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (!in_call) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread remover([&] {
    r.Remove(t);
    removed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(removed) << "removed while a call ran on it";
  release = true;
  caller.join();
  remover.join();
  EXPECT_TRUE(removed);
}

class AdminServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() + "/nache.sock";
    token_ = registry_.Add(1, &export_);
  }
  void TearDown() override {
    server_.reset();
    registry_.Remove(token_);
  }
  void StartServer() {
    AdminServerOptions o;
    o.socket_path = path_;
    o.registry = &registry_;
    o.recent_errors = [] { return std::vector<std::string>{"an error"}; };
    o.progress_every = std::chrono::milliseconds(20);
    o.flush_slice = std::chrono::milliseconds(10);
    std::string err;
    server_ = AdminServer::Start(o, &err);
    ASSERT_TRUE(server_) << err;
  }
  // Runs request; the answer's lines "tag text", the outcome in *out.
  std::vector<std::string> Ask(const std::string &request, ClientOutcome *out,
                               std::string *error) {
    std::vector<std::string> lines;
    *out = RunRequest(
        path_, request,
        [&](const std::string &tag, const std::string &text) {
          lines.push_back(tag + " " + text);
        },
        error);
    return lines;
  }

  testing_util::TempDir dir_;
  std::string path_;
  Registry registry_;
  FakeExport export_{1};
  uint64_t token_ = 0;
  std::unique_ptr<AdminServer> server_;
};

TEST_F(AdminServerTest, TheSocketIsPrivateAndStatusAnswers) {
  StartServer();
  struct stat st;
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  ClientOutcome out;
  std::string err;
  std::vector<std::string> lines = Ask("status json", &out, &err);
  ASSERT_EQ(out, ClientOutcome::kOk) << err;
  std::string all;
  for (auto &l : lines) all += l + "\n";
  EXPECT_NE(all.find("data     {\n"), std::string::npos) << all;
  EXPECT_NE(all.find("\"server\": \"192.0.2.9\""), std::string::npos) << all;
  EXPECT_NE(all.find("\"an error\""), std::string::npos) << all;
  EXPECT_EQ(lines.back(), "ok ");
}

TEST_F(AdminServerTest, FlushWaitReportsProgressUntilNothingIsDirty) {
  StartServer();
  export_.dirty_ = 3500;
  ClientOutcome out;
  std::string err;
  std::vector<std::string> lines = Ask("flush wait 30", &out, &err);
  ASSERT_EQ(out, ClientOutcome::kOk) << err;
  EXPECT_EQ(export_.dirty_, 0u);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0].compare(0, 9, "progress "), 0) << lines[0];
  EXPECT_NE(lines.back().find("nothing dirty"), std::string::npos)
      << lines.back();
}

TEST_F(AdminServerTest, AFlushThatCannotFinishTimesOutWithTheReason) {
  StartServer();
  export_.dirty_ = 5000;
  export_.fail_ = true;
  ClientOutcome out;
  std::string err;
  Ask("flush wait 1", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kFailed);
  EXPECT_NE(err.find("timed out after 1 s"), std::string::npos) << err;
  EXPECT_NE(err.find("upstream not connected"), std::string::npos) << err;
  EXPECT_EQ(export_.dirty_, 5000u);
}

TEST_F(AdminServerTest, DrainThenUndrain) {
  StartServer();
  export_.dirty_ = 1500;
  ClientOutcome out;
  std::string err;
  std::vector<std::string> lines = Ask("drain", &out, &err);
  ASSERT_EQ(out, ClientOutcome::kOk) << err;
  EXPECT_TRUE(export_.draining_);
  EXPECT_EQ(export_.dirty_, 0u);
  EXPECT_NE(lines.back().find("drained"), std::string::npos) << lines.back();
  lines = Ask("status", &out, &err);
  ASSERT_EQ(out, ClientOutcome::kOk) << err;
  EXPECT_NE(lines[0].find("DRAINING"), std::string::npos) << lines[0];
  Ask("undrain", &out, &err);
  ASSERT_EQ(out, ClientOutcome::kOk) << err;
  EXPECT_FALSE(export_.draining_);
  EXPECT_FALSE(registry_.draining());
}

TEST_F(AdminServerTest, SeveralExportsNeedOneNamed) {
  FakeExport other(2);
  uint64_t t = registry_.Add(2, &other);
  StartServer();
  ClientOutcome out;
  std::string err;
  Ask("pin /a", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kFailed);
  EXPECT_NE(err.find("several exports (1, 2): say which with --export ID"),
            std::string::npos)
      << err;
  // Named: that export answers (a fake one cannot pin).
  Ask("pin export=2 /a", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kFailed);
  EXPECT_NE(err.find("this export cannot do that"), std::string::npos) << err;
  Ask("evict export=7 /a", &out, &err);
  EXPECT_NE(err.find("no NACHE export 7"), std::string::npos) << err;
  // A flush of everything still needs no export named.
  std::vector<std::string> lines = Ask("flush", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kOk) << err;
  server_.reset();
  registry_.Remove(t);
}

TEST_F(AdminServerTest, AnUnknownCommandIsAnError) {
  StartServer();
  ClientOutcome out;
  std::string err;
  Ask("reboot", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kFailed);
  EXPECT_NE(err.find("unknown command 'reboot'"), std::string::npos) << err;
}

TEST_F(AdminServerTest, NoDaemonSaysWhichSocketItTried) {
  ClientOutcome out;
  std::string err;
  Ask("status", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kNoDaemon);
  EXPECT_NE(err.find(path_ + " does not exist"), std::string::npos) << err;
  // A socket left by a daemon that died: refused.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  strcpy(a.sun_path, path_.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  close(fd);
  Ask("status", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kNoDaemon);
  EXPECT_NE(err.find("no nache daemon is listening on " + path_),
            std::string::npos)
      << err;
  // The next daemon replaces such a stale socket.
  StartServer();
  Ask("status", &out, &err);
  EXPECT_EQ(out, ClientOutcome::kOk) << err;
}

TEST_F(AdminServerTest, ALiveSocketOrAFileInTheWayIsRefused) {
  StartServer();
  AdminServerOptions o;
  o.socket_path = path_;
  o.registry = &registry_;
  std::string err;
  EXPECT_FALSE(AdminServer::Start(o, &err));
  EXPECT_NE(err.find("another daemon is serving it"), std::string::npos) << err;
  o.socket_path = dir_.path() + "/file";
  std::ofstream(o.socket_path) << "x";
  EXPECT_FALSE(AdminServer::Start(o, &err));
  EXPECT_NE(err.find("is not a socket"), std::string::npos) << err;
  o.socket_path = dir_.path() + "/missing/nache.sock";
  EXPECT_FALSE(AdminServer::Start(o, &err));
  EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
  o.socket_path = "relative.sock";
  EXPECT_FALSE(AdminServer::Start(o, &err));
}

TEST_F(AdminServerTest, StopEndsAWaitAndRemovesTheSocket) {
  StartServer();
  export_.dirty_ = 5000;
  export_.fail_ = true;  // never clean
  ClientOutcome out = ClientOutcome::kOk;
  std::string err;
  std::thread waiter([&] { Ask("flush wait", &out, &err); });
  ASSERT_TRUE(cb_client::WaitFor([&] { return export_.flushes_ > 0; }));
  server_->Stop();
  waiter.join();
  EXPECT_EQ(out, ClientOutcome::kFailed);
  EXPECT_NE(err.find("the daemon is stopping"), std::string::npos) << err;
  struct stat st;
  EXPECT_NE(lstat(path_.c_str(), &st), 0) << "socket left behind";
}

TEST(RecentErrorsTest, WarningsAreKeptWhateverTheLogLevel) {
  ClearRecentErrors();
  int level = nache_log_get_level();
  nache_log_set_level(NACHE_LOG_FATAL);  // nothing shown
  nache_log(NACHE_LOG_WARN, "NACHE_TEST", "careful %d", 1);
  nache_log(NACHE_LOG_EVENT, "NACHE_TEST", "not kept");
  for (int i = 0; i < int(kRecentErrors) + 3; i++)
    nache_log(NACHE_LOG_CRIT, "NACHE_TEST", "bad %d", i);
  nache_log_set_level(level);
  std::vector<std::string> e = RecentErrors();
  ASSERT_EQ(e.size(), kRecentErrors);
  EXPECT_NE(e.back().find("CRIT NACHE_TEST: bad " +
                          std::to_string(kRecentErrors + 2)),
            std::string::npos)
      << e.back();
  ClearRecentErrors();
}

}  // namespace
}  // namespace admin

// --- the core's side ---------------------------------------------------------

namespace coretest {
namespace {

TEST_F(CoreDelegationsTest, AdminStatusShowsTheExport) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  admin::ExportStatus s = core_->AdminStatus();
  EXPECT_EQ(s.server, "127.0.0.1");
  EXPECT_EQ(s.path, "/");
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.state, "ready");
  EXPECT_TRUE(s.write_back);
  EXPECT_TRUE(s.single_writer);
  EXPECT_FALSE(s.draining);
  EXPECT_EQ(s.cache_limit, 16u << 20);
}

TEST_F(CoreDelegationsTest, AdminFlushSendsEverythingDirty) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // never by age
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "HELLO",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  admin::ExportStatus s = core_->AdminStatus();
  EXPECT_EQ(s.dirty_bytes, 5u);
  EXPECT_EQ(s.dirty_files, 1u);
  EXPECT_EQ(up_->Data("f"), "hello");
  std::string err;
  ASSERT_TRUE(core_->AdminFlush(
      std::chrono::steady_clock::now() + std::chrono::seconds(10), &err))
      << err;
  EXPECT_EQ(up_->Data("f"), "HELLO");
  s = core_->AdminStatus();
  EXPECT_EQ(s.dirty_bytes, 0u);
  EXPECT_EQ(s.dirty_files, 0u);
}

TEST_F(CoreDelegationsTest, WhileDrainingWritesAndCreatesGoUpstreamAtOnce) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // never by age
  core_->SetDraining(true);
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "HELLO",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  EXPECT_EQ(up_->Data("f"), "HELLO") << "written through";
  EXPECT_EQ(core_->AdminStatus().dirty_bytes, 0u);
  int opens = up_->Count("OPEN");
  CreateWritten("new", "data");
  EXPECT_EQ(up_->Data("new"), "data") << "created and written through";
  EXPECT_GT(up_->Count("OPEN"), opens);
  EXPECT_EQ(core_->AdminStatus().dirty_files, 0u);
  // Undrained: write-back again.
  core_->SetDraining(false);
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "AGAIN",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  EXPECT_EQ(up_->Data("f"), "HELLO") << "kept here";
  EXPECT_EQ(core_->AdminStatus().dirty_bytes, 5u);
}

TEST_F(CoreDelegationsTest, ADirtyFileStaysWriteBackWhileDraining) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  size_t n = 0;
  upstream::StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "OLDER",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  core_->SetDraining(true);
  // A write sent at once would land before OLDER's flush, which would
  // then overwrite it: kept here until the flush instead.
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "NEWER",
                         upstream::StableHow::kFileSync, &n, &committed),
            0u);
  EXPECT_EQ(up_->Data("f"), "hello");
  std::string err;
  ASSERT_TRUE(core_->AdminFlush(
      std::chrono::steady_clock::now() + std::chrono::seconds(10), &err));
  EXPECT_EQ(up_->Data("f"), "NEWER");
}

}  // namespace
}  // namespace coretest
}  // namespace nache
