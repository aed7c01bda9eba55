// Metrics: each event moves exactly its series (read back through
// Collect(), as a scrape sees them), labels are the documented ones, and
// the exposer serves /metrics and refuses a port in use.
#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "metrics/process_stats.h"
#include "nache/nache.h"

namespace nache {
namespace metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using std::chrono::milliseconds;
using upstream::CallStatus;
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Op;
using upstream::OpResult;

using LabelMap = std::map<std::string, std::string>;

// The series of family name whose labels are exactly want, or null.
const ClientMetric *Find(const std::vector<MetricFamily> &fams,
                         const std::string &name, const LabelMap &want) {
  for (const MetricFamily &f : fams) {
    if (f.name != name) continue;
    for (const ClientMetric &m : f.metric) {
      LabelMap have;
      for (const auto &l : m.label) have[l.name] = l.value;
      if (have == want) return &m;
    }
  }
  return nullptr;
}

// A counter's value; -1 when the series does not exist.
double CounterValue(Metrics &m, const std::string &name, const LabelMap &l) {
  std::vector<MetricFamily> fams = m.Collect();
  const ClientMetric *c = Find(fams, name, l);
  return c ? c->counter.value : -1;
}

double GaugeValue(Metrics &m, const std::string &name, const LabelMap &l) {
  std::vector<MetricFamily> fams = m.Collect();
  const ClientMetric *c = Find(fams, name, l);
  return c ? c->gauge.value : -1;
}

OpResult Result(Op op, uint32_t status, uint32_t count = 0) {
  OpResult r;
  r.op = op;
  r.status = status;
  r.count = count;
  return r;
}

// Reclaims after a remote restart and the write-back counters of this
// stop move their own series only.
TEST(MetricsTest, ReclaimAndWriteBackOutcomesHaveTheirSeries) {
  Metrics m;
  ExportMetrics *e = m.ForExport(3);
  e->CountReclaim(ReclaimState::kLock, ReclaimOutcome::kLost);
  e->CountReclaim(ReclaimState::kOpen, ReclaimOutcome::kReclaimed);
  e->CountReclaim(ReclaimState::kOpen, ReclaimOutcome::kReclaimed);
  e->CountUnchangedWrite(4096);
  e->CountRefusedRemove();
  const std::string r = "nache_upstream_reclaims_total";
  EXPECT_EQ(
      CounterValue(m, r,
                   {{"export", "3"}, {"state", "lock"}, {"outcome", "lost"}}),
      1);
  EXPECT_EQ(
      CounterValue(
          m, r, {{"export", "3"}, {"state", "open"}, {"outcome", "reclaimed"}}),
      2);
  EXPECT_EQ(CounterValue(m, r,
                         {{"export", "3"},
                          {"state", "delegation"},
                          {"outcome", "reacquired"}}),
            0);
  EXPECT_EQ(CounterValue(m, "nache_writeback_unchanged_bytes_total",
                         {{"export", "3"}}),
            4096);
  EXPECT_EQ(CounterValue(m, "nache_writeback_removes_total",
                         {{"export", "3"}, {"outcome", "refused"}}),
            1);
  EXPECT_EQ(CounterValue(m, "nache_writeback_removes_total",
                         {{"export", "3"}, {"outcome", "sent"}}),
            0);
}

TEST(MetricsTest, LocalOpsCountedPerOperationAndExport) {
  Metrics m;
  ExportMetrics *e = m.ForExport(7);
  EXPECT_EQ(e, m.ForExport(7));  // one set of series per export id
  e->CountLocal(LocalOp::kOpen);
  e->CountLocal(LocalOp::kOpen);
  e->CountLocal(LocalOp::kLookupParent);
  m.ForExport(8)->CountLocal(LocalOp::kOpen);
  EXPECT_EQ(CounterValue(m, "nache_local_ops_total",
                         {{"export", "7"}, {"op", "open"}}),
            2);
  EXPECT_EQ(CounterValue(m, "nache_local_ops_total",
                         {{"export", "7"}, {"op", "lookup_parent"}}),
            1);
  EXPECT_EQ(CounterValue(m, "nache_local_ops_total",
                         {{"export", "8"}, {"op", "open"}}),
            1);
  // Every operation's series exists before its first use.
  EXPECT_EQ(CounterValue(m, "nache_local_ops_total",
                         {{"export", "7"}, {"op", "commit"}}),
            0);
}

// A call's time and the upstream's part of it are summed per operation;
// a call with no upstream part leaves that series as it was.
TEST(MetricsTest, LocalTimeSplitsIntoTheUpstreamsPartAndTheRest) {
  Metrics m;
  ExportMetrics *e = m.ForExport(3);
  e->CountLocalTime(LocalOp::kCreate, 0.25, 0.125);
  e->CountLocalTime(LocalOp::kCreate, 0.5, 0.25);
  e->CountLocalTime(LocalOp::kGetattr, 0.001, 0);
  const LabelMap create = {{"export", "3"}, {"op", "create"}};
  const LabelMap getattr = {{"export", "3"}, {"op", "getattr"}};
  EXPECT_EQ(CounterValue(m, "nache_local_op_seconds_total", create), 0.75);
  EXPECT_EQ(CounterValue(m, "nache_local_op_upstream_seconds_total", create),
            0.375);
  EXPECT_EQ(CounterValue(m, "nache_local_op_seconds_total", getattr), 0.001);
  EXPECT_EQ(CounterValue(m, "nache_local_op_upstream_seconds_total", getattr),
            0);
}

TEST(MetricsTest, RoundTripsSummedPerOperation) {
  Metrics m;
  ExportMetrics *e = m.ForExport(2);
  e->CountRoundTrips(LocalOp::kOpen, 2);
  e->CountRoundTrips(LocalOp::kOpen, 1);
  e->CountRoundTrips(LocalOp::kLookup, 0);  // answered here: nothing added
  EXPECT_EQ(CounterValue(m, "nache_local_op_round_trips_total",
                         {{"export", "2"}, {"op", "open"}}),
            3);
  EXPECT_EQ(CounterValue(m, "nache_local_op_round_trips_total",
                         {{"export", "2"}, {"op", "lookup"}}),
            0);
}

TEST(MetricsTest, UpstreamOpsCountedByStatusWithBytesAndRtt) {
  Metrics m;
  ExportMetrics *e = m.ForExport(1);
  char buf[4096] = {};

  Compound w;
  w.SetTag("write").Putfh("fh").Write(
      upstream::StateId(), 0, upstream::StableHow::kUnstable, buf, sizeof(buf));
  CompoundReply wr;
  wr.results = {Result(Op::kPutfh, 0), Result(Op::kWrite, 0, 4096)};
  e->ObserveCompound(w, CallStatus::kOk, wr, milliseconds(1));

  Compound r;
  r.SetTag("read").Putfh("fh").Read(upstream::StateId(), 0, 100, buf);
  CompoundReply rr;
  rr.results = {Result(Op::kPutfh, 0), Result(Op::kRead, 0, 100)};
  e->ObserveCompound(r, CallStatus::kOk, rr, milliseconds(2));

  // The server stops at the failing LOOKUP; GETFH never ran.
  Compound l;
  l.SetTag("lookup").Putfh("fh").Lookup("x").Getfh();
  CompoundReply lr;
  lr.status = upstream::kNfs4ErrNoent;
  lr.results = {Result(Op::kPutfh, 0),
                Result(Op::kLookup, upstream::kNfs4ErrNoent)};
  e->ObserveCompound(l, CallStatus::kOk, lr, milliseconds(80));

  const std::string ops = "nache_upstream_ops_total";
  EXPECT_EQ(CounterValue(m, ops,
                         {{"export", "1"}, {"op", "PUTFH"}, {"status", "ok"}}),
            3);
  EXPECT_EQ(CounterValue(m, ops,
                         {{"export", "1"}, {"op", "WRITE"}, {"status", "ok"}}),
            1);
  EXPECT_EQ(
      CounterValue(m, ops, {{"export", "1"}, {"op", "READ"}, {"status", "ok"}}),
      1);
  EXPECT_EQ(
      CounterValue(
          m, ops,
          {{"export", "1"}, {"op", "LOOKUP"}, {"status", "NFS4ERR_NOENT"}}),
      1);
  EXPECT_EQ(CounterValue(m, ops,
                         {{"export", "1"}, {"op", "GETFH"}, {"status", "ok"}}),
            0);
  EXPECT_EQ(CounterValue(m, "nache_upstream_compounds_total",
                         {{"export", "1"}, {"status", "ok"}}),
            2);
  EXPECT_EQ(CounterValue(m, "nache_upstream_compounds_total",
                         {{"export", "1"}, {"status", "NFS4ERR_NOENT"}}),
            1);
  // By purpose: the tag of each COMPOUND, whatever its outcome.
  const std::string by = "nache_upstream_compounds_by_purpose_total";
  EXPECT_EQ(CounterValue(m, by, {{"export", "1"}, {"purpose", "write"}}), 1);
  EXPECT_EQ(CounterValue(m, by, {{"export", "1"}, {"purpose", "lookup"}}), 1);
  EXPECT_EQ(CounterValue(m, by, {{"export", "1"}, {"purpose", "read"}}), 1);
  EXPECT_EQ(CounterValue(m, "nache_upstream_bytes_total",
                         {{"export", "1"}, {"direction", "write"}}),
            4096);
  EXPECT_EQ(CounterValue(m, "nache_upstream_bytes_total",
                         {{"export", "1"}, {"direction", "read"}}),
            100);

  std::vector<MetricFamily> fams = m.Collect();
  const ClientMetric *h =
      Find(fams, "nache_upstream_rtt_seconds", {{"export", "1"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, 3u);
  EXPECT_NEAR(h->histogram.sample_sum, 0.083, 1e-9);
  // 1 ms and 2 ms below the 80 ms WAN round trip's bucket.
  std::map<double, uint64_t> cumulative;
  for (const auto &b : h->histogram.bucket)
    cumulative[b.upper_bound] = b.cumulative_count;
  EXPECT_EQ(cumulative[0.001], 1u);
  EXPECT_EQ(cumulative[0.002], 2u);
  EXPECT_EQ(cumulative[0.075], 2u);  // the 80 ms WAN trip is above ...
  EXPECT_EQ(cumulative[0.1], 3u);    // ... and below these bounds
}

TEST(MetricsTest, TransportFailureCountsFirstOpAndNoRtt) {
  Metrics m;
  ExportMetrics *e = m.ForExport(2);
  Compound c;
  c.SetTag("getattr").Putfh("fh").Getattr(1);
  CompoundReply rep;
  e->ObserveCompound(c, CallStatus::kTimeout, rep, milliseconds(30000));
  e->ObserveCompound(c, CallStatus::kEncodeError, rep, milliseconds(0));
  EXPECT_EQ(
      CounterValue(
          m, "nache_upstream_ops_total",
          {{"export", "2"}, {"op", "PUTFH"}, {"status", "transport_timeout"}}),
      1);
  EXPECT_EQ(CounterValue(m, "nache_upstream_ops_total",
                         {{"export", "2"},
                          {"op", "PUTFH"},
                          {"status", "transport_encode_error"}}),
            1);
  EXPECT_EQ(
      CounterValue(m, "nache_upstream_ops_total",
                   {{"export", "2"}, {"op", "GETATTR"}, {"status", "ok"}}),
      0);
  EXPECT_EQ(CounterValue(m, "nache_upstream_compounds_total",
                         {{"export", "2"}, {"status", "transport_timeout"}}),
            1);
  std::vector<MetricFamily> fams = m.Collect();
  const ClientMetric *h =
      Find(fams, "nache_upstream_rtt_seconds", {{"export", "2"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, 0u);
}

TEST(MetricsTest, StatusLabelsAreBoundedAndNamed) {
  EXPECT_EQ(StatusLabel(StatusSlot(0)), "ok");
  EXPECT_EQ(StatusLabel(StatusSlot(70)), "NFS4ERR_STALE");
  EXPECT_EQ(StatusLabel(StatusSlot(10008)), "NFS4ERR_DELAY");
  EXPECT_EQ(StatusLabel(StatusSlot(10048)), "NFS4ERR_CB_PATH_DOWN");
  EXPECT_EQ(StatusLabel(StatusSlot(123456)), "NFS4ERR_OTHER");
  EXPECT_EQ(StatusLabel(TransportSlot(CallStatus::kDisconnected)),
            "transport_disconnected");
  EXPECT_EQ(StatusLabel(TransportSlot(CallStatus::kShutdown)),
            "transport_shutdown");
  for (uint32_t st : {0u, 99u, 10000u, 10099u, 10100u, 4000000000u})
    EXPECT_LT(StatusSlot(st), kStatusSlots) << st;
  EXPECT_LT(TransportSlot(CallStatus::kShutdown), kStatusSlots);
  EXPECT_GT(TransportSlot(CallStatus::kDisconnected), StatusSlot(123456));
}

TEST(MetricsTest, OldCoreClosingKeepsTheNewCoresSampler) {
  Metrics m;
  ExportMetrics *e = m.ForExport(5);
  ExportGauges up;
  up.connected = true;
  uint64_t old_token = e->SetSampler([] { return ExportGauges(); });
  e->SetSampler([&up] { return up; });  // a new core of export 5
  e->ClearSampler(old_token);           // the old core closes afterwards
  EXPECT_EQ(GaugeValue(m, "nache_upstream_connected", {{"export", "5"}}), 1);
}

TEST(MetricsTest, GaugesAreSampledAtScrapeTime) {
  Metrics m;
  ExportMetrics *e = m.ForExport(3);
  ExportGauges now;
  now.connected = true;
  now.clientid_epoch = 2;
  now.open_files = 5;
  uint64_t token = e->SetSampler([&now] { return now; });
  const LabelMap ex = {{"export", "3"}};
  EXPECT_EQ(GaugeValue(m, "nache_upstream_connected", ex), 1);
  EXPECT_EQ(GaugeValue(m, "nache_upstream_clientid_epoch", ex), 2);
  EXPECT_EQ(GaugeValue(m, "nache_upstream_open_files", ex), 5);
  EXPECT_EQ(GaugeValue(m, "nache_callback_path_up", ex), 0);
  now.connected = false;
  now.open_files = 1;
  EXPECT_EQ(GaugeValue(m, "nache_upstream_connected", ex), 0);
  EXPECT_EQ(GaugeValue(m, "nache_upstream_open_files", ex), 1);
  now.connected = true;
  e->ClearSampler(token);  // the export closed: nothing connected or open
  EXPECT_EQ(GaugeValue(m, "nache_upstream_connected", ex), 0);
  EXPECT_EQ(GaugeValue(m, "nache_upstream_open_files", ex), 0);
}

// GET path from 127.0.0.1:port; the whole response, or "" on error.
std::string HttpGet(int port, const std::string &path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0) {
    std::string req = "GET " + path +
                      " HTTP/1.0\r\nHost: localhost\r\n"
                      "Connection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == ssize_t(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
    }
  }
  close(fd);
  return out;
}

TEST(MetricsTest, ExposerServesMetricsAndRefusesAPortInUse) {
  Metrics m;
  m.ForExport(4)->CountLocal(LocalOp::kRead);
  std::string err;
  ASSERT_TRUE(m.StartExposer("127.0.0.1", 0, &err)) << err;
  int port = m.exposer_port();
  ASSERT_GT(port, 0);
  std::string body = HttpGet(port, "/metrics");
  EXPECT_NE(body.find("nache_local_ops_total{export=\"4\",op=\"read\"} 1"),
            std::string::npos)
      << body.substr(0, 2000);
  EXPECT_NE(body.find("# HELP nache_upstream_rtt_seconds"), std::string::npos);

  Metrics other;
  EXPECT_FALSE(other.StartExposer("127.0.0.1", uint32_t(port), &err));
  EXPECT_NE(err.find("cannot listen on 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << err;
  EXPECT_FALSE(other.StartExposer("not-an-address", 9464, &err));
  EXPECT_FALSE(m.StartExposer("127.0.0.1", 0, &err));  // already serving

  m.StopExposer();
  EXPECT_EQ(m.exposer_port(), 0);
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

TEST(MetricsTest, CApiValidationNamesTheParameter) {
  char err[256] = "";
  EXPECT_TRUE(nache_metrics_validate("0.0.0.0", 9464, err, sizeof(err)));
  EXPECT_FALSE(nache_metrics_validate("0.0.0.0", 70000, err, sizeof(err)));
  EXPECT_EQ(std::string(err).rfind("Metrics_Port:", 0), 0u) << err;
  EXPECT_FALSE(nache_metrics_validate("0.0.0.0", 0, err, sizeof(err)));
  EXPECT_EQ(std::string(err).rfind("Metrics_Port:", 0), 0u) << err;
  EXPECT_FALSE(nache_metrics_validate("nache-box", 9464, err, sizeof(err)));
  EXPECT_EQ(std::string(err).rfind("Metrics_Address:", 0), 0u) << err;
}

TEST(MetricsTest, CApiStartBlamesAnAddressNotOnThisHost) {
  char err[512] = "";
  // 192.0.2.1 (TEST-NET-1) is on no interface here: the address is wrong,
  // not the port.
  EXPECT_FALSE(nache_metrics_start("192.0.2.1", 9464, err, sizeof(err)));
  EXPECT_EQ(std::string(err).rfind("Metrics_Address:", 0), 0u) << err;
}

// /proc/<pid>/stat: a command name holding spaces and a ')' does not
// shift the fields; a line that is not one is refused.
TEST(ProcessStatsTest, ParsesTheKernelsFields) {
  // Fields 14 and 15: 250 and 50 ticks; 20: 7 threads; 24: 300 pages.
  const std::string stat =
      "4242 (ganesha) (x y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 "
      "20 0 7 0 1000 123456789 300 18446744073709551615";
  ProcessStats p;
  ASSERT_TRUE(ParseProcStat(stat, 100, 4096, &p));
  EXPECT_DOUBLE_EQ(p.user_cpu_s, 2.5);
  EXPECT_DOUBLE_EQ(p.system_cpu_s, 0.5);
  EXPECT_EQ(p.threads, 7u);
  EXPECT_EQ(p.resident_bytes, 300u * 4096u);
  EXPECT_FALSE(ParseProcStat("4242 (short) S 1 2 3", 100, 4096, &p));
  EXPECT_FALSE(ParseProcStat("no parenthesis at all", 100, 4096, &p));
  EXPECT_FALSE(ParseProcStat(
      "1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 50 0 0 20 0 7 0 1 1 300 1", 100, 4096,
      &p));
}

double UserCpuNow() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec) + double(u.ru_utime.tv_usec) / 1e6;
}

// What the process costs is served under Prometheus' usual names, and the
// CPU counter follows the kernel's count.
TEST(MetricsTest, TheProcessesOwnCostsAreServed) {
  Metrics m;
  const LabelMap user = {{"mode", "user"}};
  const double before = CounterValue(m, "process_cpu_seconds_total", user);
  ASSERT_GE(before, 0) << "no process_cpu_seconds_total{mode=\"user\"}";
  EXPECT_GE(CounterValue(m, "process_cpu_seconds_total", {{"mode", "system"}}),
            0);
  // Burn 0.3 s of user CPU (as the kernel counts it).
  volatile uint64_t spin = 0;
  for (const double until = UserCpuNow() + 0.3; UserCpuNow() < until;)
    for (int i = 0; i < 100000; i++) spin = spin + i;
  const double after = CounterValue(m, "process_cpu_seconds_total", user);
  EXPECT_GE(after - before, 0.25) << "before " << before << ", after " << after;
  EXPECT_GT(GaugeValue(m, "process_resident_memory_bytes", {}), 1 << 20);
  EXPECT_GE(GaugeValue(m, "process_threads", {}), 1);
  const double fds = GaugeValue(m, "process_open_fds", {});
  int p[2][2];
  ASSERT_EQ(pipe(p[0]), 0);
  ASSERT_EQ(pipe(p[1]), 0);
  EXPECT_EQ(GaugeValue(m, "process_open_fds", {}), fds + 4);
  for (auto &q : p) close(q[0]), close(q[1]);
}

// The state letter of thread tid of this process (proc(5): R, S, D...).
char ThreadState(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)),
                   std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size()
             ? '?'
             : stat[paren + 2];
}

// A thread that finds a mutex held and waits for it is counted under the
// mutex's name, with the time it waited; taking a free mutex is not.
TEST(MetricsTest, WaitsForAMutexAreCountedByItsName) {
  Metrics m;
  const LabelMap lock = {{"lock", "metrics_test_contended"}};
  Mutex free_mu("metrics_test_free");
  for (int i = 0; i < 1000; i++) MutexLock g(&free_mu);
  EXPECT_EQ(CounterValue(m, "nache_lock_waits_total",
                         {{"lock", "metrics_test_free"}}),
            0);

  Mutex mu("metrics_test_contended");
  std::atomic<pid_t> waiter{0};
  mu.Lock();
  std::thread t([&] {
    waiter = pid_t(syscall(SYS_gettid));
    MutexLock g(&mu);
  });
  // Hold it until the other thread sleeps in the kernel for it: after
  // publishing its id the waiter does nothing but take the mutex.
  while (waiter == 0 || ThreadState(waiter) != 'S') std::this_thread::yield();
  const auto held_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - held_since < milliseconds(20))
    std::this_thread::yield();
  mu.Unlock();
  t.join();
  EXPECT_EQ(CounterValue(m, "nache_lock_waits_total", lock), 1);
  EXPECT_GE(CounterValue(m, "nache_lock_wait_seconds_total", lock), 0.02);
  // A second Metrics (a second core) serves the same process-wide totals.
  Metrics m2;
  EXPECT_EQ(CounterValue(m2, "nache_lock_waits_total", lock), 1);
}

}  // namespace
}  // namespace metrics
}  // namespace nache
