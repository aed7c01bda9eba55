// The registry, the per-export series and the exposer. See metrics.h.
#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <prometheus/exposer.h>

#include <exception>

#include "metrics/process_stats.h"
#include "nache/nache.h"

namespace nache {
namespace metrics {

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;

// Round trips from a LAN server (~0.1-0.3 ms) to an 80 ms WAN and a
// struggling remote (seconds): both ends must land in distinct buckets.
const prometheus::Histogram::BucketBoundaries &RttBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
      0.05,   0.075,  0.1,    0.15,  0.2,   0.5,   1.0,  2.0};
  return b;
}

constexpr size_t kOtherNfsSlot = 200;
constexpr size_t kFirstTransportSlot = 201;

}  // namespace

const char *LocalOpName(LocalOp op) {
  switch (op) {
#define NACHE_LOCAL_OP_NAME(e, s) \
  case LocalOp::e: return s;
    NACHE_LOCAL_OPS(NACHE_LOCAL_OP_NAME)
#undef NACHE_LOCAL_OP_NAME
    case LocalOp::kCount: break;
  }
  return "unknown";
}

size_t StatusSlot(uint32_t st) {
  if (st < 100) return st;  // 0 is NFS4_OK
  if (st >= 10000 && st < 10100) return 100 + (st - 10000);
  return kOtherNfsSlot;
}

size_t TransportSlot(upstream::CallStatus s) {
  size_t i = size_t(s);
  // kOk is not a transport failure; never asked for, but stay in bounds.
  return i == 0 ? kFirstTransportSlot : kFirstTransportSlot + i - 1;
}

std::string StatusLabel(size_t slot) {
  if (slot == 0) return "ok";
  if (slot < 100) return nache_status_name(uint32_t(slot));
  if (slot < kOtherNfsSlot) return nache_status_name(uint32_t(slot) + 9900);
  if (slot == kOtherNfsSlot) return "NFS4ERR_OTHER";
  std::string s = "transport_";
  s += upstream::CallStatusName(
      upstream::CallStatus(slot - kFirstTransportSlot + 1));
  for (char &ch : s) {
    if (ch == '-') ch = '_';  // "encode-error": keep label values uniform
  }
  return s;
}

// --- ExportMetrics ---------------------------------------------------------

Counter *ExportMetrics::UpstreamOpSeries(size_t op_slot, size_t status_slot) {
  std::atomic<Counter *> &slot =
      upstream_ops_[op_slot * kStatusSlots + status_slot];
  Counter *c = slot.load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &upstream_ops_family_->Add(
        {{"export", export_label_},
         {"op", upstream::OpName(upstream::Op(op_slot))},
         {"status", StatusLabel(status_slot)}});
    slot.store(c, std::memory_order_release);
  }
  return c;
}

Counter *ExportMetrics::CompoundSeries(size_t status_slot) {
  std::atomic<Counter *> &slot = compounds_[status_slot];
  Counter *c = slot.load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &compounds_family_->Add(
        {{"export", export_label_}, {"status", StatusLabel(status_slot)}});
    slot.store(c, std::memory_order_release);
  }
  return c;
}

Counter *ExportMetrics::PurposeSeries(const std::string &tag) {
  MutexLock g(&purpose_mu_);
  Counter *&c = purposes_[tag];
  if (c == nullptr)
    c = &purpose_family_->Add(
        {{"export", export_label_}, {"purpose", tag.empty() ? "other" : tag}});
  return c;
}

void ExportMetrics::ObserveCompound(const upstream::Compound &c,
                                    upstream::CallStatus s,
                                    const upstream::CompoundReply &rep,
                                    std::chrono::steady_clock::duration rtt) {
  PurposeSeries(c.tag())->Increment();
  if (s != upstream::CallStatus::kOk) {
    size_t op = c.size() ? size_t(c.op(0)) : 0;
    size_t status = TransportSlot(s);
    UpstreamOpSeries(op < kOpSlots ? op : 0, status)->Increment();
    CompoundSeries(status)->Increment();
    return;
  }
  rtt_->Observe(std::chrono::duration<double>(rtt).count());
  for (const upstream::OpResult &r : rep.results) {
    size_t op = size_t(r.op);
    UpstreamOpSeries(op < kOpSlots ? op : 0, StatusSlot(r.status))->Increment();
    if (r.status == upstream::kNfs4Ok) {
      if (r.op == upstream::Op::kRead) read_bytes_->Increment(r.count);
      if (r.op == upstream::Op::kReadPlus) {
        read_bytes_->Increment(r.count - r.hole_bytes);
        hole_bytes_->Increment(r.hole_bytes);
      }
      if (r.op == upstream::Op::kWrite) write_bytes_->Increment(r.count);
    }
  }
  CompoundSeries(StatusSlot(rep.status))->Increment();
}

uint64_t ExportMetrics::SetSampler(std::function<ExportGauges()> sampler) {
  MutexLock g(&sampler_mu_);
  sampler_ = std::move(sampler);
  return ++sampler_token_;
}

void ExportMetrics::ClearSampler(uint64_t token) {
  MutexLock g(&sampler_mu_);
  if (token != sampler_token_) return;
  sampler_ = nullptr;
  connected_->Set(0);
  open_files_->Set(0);
  callback_up_->Set(0);
  deleg_held_read_->Set(0);
  deleg_held_write_->Set(0);
  local_delegs_->Set(0);
  dirty_bytes_->Set(0);
  flush_lag_->Set(0);
  lease_age_->Set(-1);
}

ExportCounters ExportMetrics::Counters() const {
  ExportCounters c;
  for (size_t i = 0; i < local_.size(); i++) {
    c.local_ops += local_[i]->Value();
    c.without_upstream += without_upstream_[i]->Value();
  }
  for (const auto &slot : compounds_) {
    const Counter *s = slot.load(std::memory_order_acquire);
    if (s) c.compounds += s->Value();
  }
  for (size_t i = 0; i < cache_hits_.size(); i++) {
    c.cache_hits += cache_hits_[i]->Value();
    c.cache_misses += cache_misses_[i]->Value();
  }
  c.conflicts = conflicts_->Value();
  prometheus::ClientMetric rtt = rtt_->Collect();
  c.rtt_sum_s = rtt.histogram.sample_sum;
  c.rtt_count = double(rtt.histogram.sample_count);
  return c;
}

void ExportMetrics::Sample() {
  MutexLock g(&sampler_mu_);
  if (!sampler_) return;
  ExportGauges v = sampler_();
  connected_->Set(v.connected ? 1 : 0);
  epoch_->Set(double(v.clientid_epoch));
  open_files_->Set(double(v.open_files));
  callback_up_->Set(v.callback_path_up ? 1 : 0);
  cache_bytes_->Set(double(v.cache_bytes));
  cache_blocks_->Set(double(v.cache_blocks));
  deleg_held_read_->Set(double(v.delegations_read));
  deleg_held_write_->Set(double(v.delegations_write));
  local_delegs_->Set(double(v.local_delegations));
  dirty_bytes_->Set(double(v.dirty_bytes));
  flush_lag_->Set(v.flush_lag_s);
  lease_age_->Set(v.lease_age_s);
  lease_time_->Set(double(v.lease_time_s));
  dirty_max_->Set(double(v.dirty_max));
}

// --- Metrics ---------------------------------------------------------------

// What the exposer scrapes: gauges sampled, then the registry.
class Metrics::Scrape : public prometheus::Collectable {
 public:
  explicit Scrape(Metrics *m) : m_(m) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return m_->Collect();
  }

 private:
  Metrics *m_;  // outlives the exposer that calls us
};

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry &r = *registry_;
  local_ops_ = &prometheus::BuildCounter()
                    .Name("nache_local_ops_total")
                    .Help(
                        "Operations the FSAL asked of the core (C API "
                        "calls), by operation")
                    .Register(r);
  without_upstream_ =
      &prometheus::BuildCounter()
           .Name("nache_local_ops_without_upstream_total")
           .Help(
               "Operations of nache_local_ops_total that succeeded with "
               "no upstream round trip of their own (answered from the "
               "cache, the local names or a delegation), by operation")
           .Register(r);
  round_trips_ =
      &prometheus::BuildCounter()
           .Name("nache_local_op_round_trips_total")
           .Help(
               "Upstream round trips the operations of "
               "nache_local_ops_total sent or waited for themselves, by "
               "operation (divided by nache_local_ops_total: the round "
               "trips one operation costs)")
           .Register(r);
  local_seconds_ =
      &prometheus::BuildCounter()
           .Name("nache_local_op_seconds_total")
           .Help(
               "Time the operations of nache_local_ops_total took in "
               "nache's core, from the FSAL's call to its return, by "
               "operation")
           .Register(r);
  local_upstream_seconds_ =
      &prometheus::BuildCounter()
           .Name("nache_local_op_upstream_seconds_total")
           .Help(
               "The part of nache_local_op_seconds_total the calling "
               "threads spent in upstream calls (waiting for a session "
               "slot, the link and the remote), by operation; the rest "
               "is nache's own")
           .Register(r);
  lease_age_ = &prometheus::BuildGauge()
                    .Name("nache_upstream_lease_age_seconds")
                    .Help(
                        "Seconds since nache's lease at the remote was "
                        "last renewed (-1 before the first)")
                    .Register(r);
  lease_time_ = &prometheus::BuildGauge()
                     .Name("nache_upstream_lease_seconds")
                     .Help(
                         "The remote's lease time (0 until known): state "
                         "is lost once the lease age passes it")
                     .Register(r);
  dirty_max_ = &prometheus::BuildGauge()
                    .Name("nache_dirty_max_bytes")
                    .Help(
                        "Dirty_Max: the bound on unflushed write-back data "
                        "(0 without write-back); writers wait beyond it")
                    .Register(r);
  upstream_ops_ = &prometheus::BuildCounter()
                       .Name("nache_upstream_ops_total")
                       .Help(
                           "NFSv4 operations the upstream server executed "
                           "inside our COMPOUNDs, by operation and status "
                           "(ok, NFS4ERR_*); transport_* counts the first "
                           "operation of a COMPOUND that got no reply")
                       .Register(r);
  compounds_ = &prometheus::BuildCounter()
                    .Name("nache_upstream_compounds_total")
                    .Help(
                        "COMPOUNDs sent upstream by the core, by status "
                        "(ok, the failing NFS4ERR_*, or transport_*)")
                    .Register(r);
  purposes_ = &prometheus::BuildCounter()
                   .Name("nache_upstream_compounds_by_purpose_total")
                   .Help(
                       "COMPOUNDs sent upstream by the core, by what they "
                       "were for (getattr: a revalidation, write: a "
                       "write-through or write-behind WRITE, flush_*: "
                       "write-back, ...)")
                   .Register(r);
  rtt_ = &prometheus::BuildHistogram()
              .Name("nache_upstream_rtt_seconds")
              .Help("Round-trip time of upstream COMPOUNDs that got a reply")
              .Register(r);
  bytes_ = &prometheus::BuildCounter()
                .Name("nache_upstream_bytes_total")
                .Help(
                    "File data moved upstream: READ and READ_PLUS data "
                    "received (direction=read), WRITE data the server "
                    "accepted (direction=write), READ_PLUS ranges the "
                    "server sent as holes, zeros that never crossed the "
                    "link (direction=hole)")
                .Register(r);
  connected_ = &prometheus::BuildGauge()
                    .Name("nache_upstream_connected")
                    .Help(
                        "1 when the upstream client is connected with a "
                        "confirmed client id, else 0")
                    .Register(r);
  epoch_ = &prometheus::BuildGauge()
                .Name("nache_upstream_clientid_epoch")
                .Help(
                    "Times the NFSv4 client id was re-established after "
                    "the first (each one loses upstream open/lock state)")
                .Register(r);
  open_files_ = &prometheus::BuildGauge()
                     .Name("nache_upstream_open_files")
                     .Help(
                         "Files in the upstream open table (open locally "
                         "or holding an upstream open)")
                     .Register(r);
  callback_up_ = &prometheus::BuildGauge()
                      .Name("nache_callback_path_up")
                      .Help(
                          "1 when the remote has called our NFSv4 "
                          "callback service and does not report the "
                          "callback path down (delegations possible)")
                      .Register(r);
  cache_hits_ = &prometheus::BuildCounter()
                     .Name("nache_cache_hits_total")
                     .Help(
                         "Lookups answered from the cache, by kind (data "
                         "blocks, attributes, access, dirents)")
                     .Register(r);
  cache_misses_ = &prometheus::BuildCounter()
                       .Name("nache_cache_misses_total")
                       .Help("Lookups the cache could not answer, by kind")
                       .Register(r);
  cache_hit_bytes_ = &prometheus::BuildCounter()
                          .Name("nache_cache_hit_bytes_total")
                          .Help("File data bytes served from the cache")
                          .Register(r);
  evictions_ = &prometheus::BuildCounter()
                    .Name("nache_cache_evictions_total")
                    .Help("Data blocks evicted to stay within Cache_Size")
                    .Register(r);
  cache_bytes_ = &prometheus::BuildGauge()
                      .Name("nache_cache_size_bytes")
                      .Help("File data bytes held in the cache")
                      .Register(r);
  cache_blocks_ = &prometheus::BuildGauge()
                       .Name("nache_cache_entries")
                       .Help("Data blocks held in the cache")
                       .Register(r);
  deleg_held_ = &prometheus::BuildGauge()
                     .Name("nache_delegations_held")
                     .Help(
                         "Upstream delegations held, by type (read, "
                         "write)")
                     .Register(r);
  deleg_granted_ = &prometheus::BuildCounter()
                        .Name("nache_delegations_granted_total")
                        .Help(
                            "Upstream delegations granted with an OPEN, "
                            "by type")
                        .Register(r);
  local_delegs_ = &prometheus::BuildGauge()
                       .Name("nache_local_delegations_held")
                       .Help(
                           "Delegations Ganesha has given the office's "
                           "clients on files nache holds an upstream "
                           "delegation for")
                       .Register(r);
  dirty_bytes_ = &prometheus::BuildGauge()
                      .Name("nache_dirty_bytes")
                      .Help(
                          "Write-back data acknowledged to clients and not "
                          "yet at the remote (durable in the cache store)")
                      .Register(r);
  flush_lag_ = &prometheus::BuildGauge()
                    .Name("nache_flush_lag_seconds")
                    .Help(
                        "Age of the oldest write not yet flushed to the "
                        "remote (0 when nothing is dirty)")
                    .Register(r);
  recalls_ = &prometheus::BuildCounter()
                  .Name("nache_delegation_recalls_total")
                  .Help("CB_RECALLs received from the upstream server")
                  .Register(r);
  cb_gss_contexts_ =
      &prometheus::BuildCounter()
           .Name("nache_callback_gss_contexts_total")
           .Help(
               "RPCSEC_GSS contexts made with the NFSv4.0 callback service: "
               "accepted (the remote's principal) or refused (any other)")
           .Register(r);
  local_locks_ = &prometheus::BuildCounter()
                      .Name("nache_delegation_local_locks_total")
                      .Help(
                          "Byte-range locks granted locally under a write "
                          "delegation (sent upstream only when it is "
                          "returned)")
                      .Register(r);
  local_removes_ = &prometheus::BuildCounter()
                        .Name("nache_writeback_removes_total")
                        .Help(
                            "Removes of objects the remote has, on "
                            "write-back single-writer exports, by outcome: "
                            "logged (kept local), sent (removed at the "
                            "remote), refused (the remote said no for good: "
                            "the object stays)")
                        .Register(r);
  reclaims_ = &prometheus::BuildCounter()
                   .Name("nache_upstream_reclaims_total")
                   .Help(
                       "Upstream opens, lock ranges and delegations of an "
                       "earlier client id (the remote restarted), by "
                       "state and outcome: reclaimed in the remote's "
                       "grace period, reacquired (no grace period), lost")
                   .Register(r);
  store_moved_ = &prometheus::BuildCounter()
                      .Name("nache_cache_store_moved_aside_total")
                      .Help(
                          "Cache stores moved aside at start, as the "
                          "configuration allowed, by reason (corrupt, "
                          "upstream_changed) and whether they held "
                          "unflushed write-back data (yes, no, unknown): "
                          "such data was not sent to the remote")
                      .Register(r);
  store_write_failures_ = &prometheus::BuildCounter()
                               .Name("nache_cache_store_write_failures_total")
                               .Help(
                                   "Writes to the cache store that failed, "
                                   "by reason (no_space, other)")
                               .Register(r);
  store_durable_writes_ =
      &prometheus::BuildCounter()
           .Name("nache_cache_store_durable_writes_total")
           .Help(
               "Writes to the cache store that a client's call answers only "
               "once they are on disk (write-back data, setattrs, log "
               "records)")
           .Register(r);
  store_syncs_ = &prometheus::BuildCounter()
                      .Name("nache_cache_store_syncs_total")
                      .Help(
                          "Flushes of the cache store's log to disk that "
                          "made such writes durable (concurrent calls share "
                          "one)")
                      .Register(r);
  auto &cpu = prometheus::BuildCounter()
                  .Name("process_cpu_seconds_total")
                  .Help(
                      "CPU time the daemon (Ganesha and nache, all threads) "
                      "has used, by mode (user, system)")
                  .Register(r);
  cpu_user_ = &cpu.Add({{"mode", "user"}});
  cpu_system_ = &cpu.Add({{"mode", "system"}});
  lock_waits_ = &prometheus::BuildCounter()
                     .Name("nache_lock_waits_total")
                     .Help(
                         "Times a thread found one of nache's mutexes held "
                         "and waited for it, by lock (the mutex's role)")
                     .Register(r);
  lock_wait_s_ = &prometheus::BuildCounter()
                      .Name("nache_lock_wait_seconds_total")
                      .Help(
                          "Time threads spent waiting for nache's mutexes, "
                          "by lock: high where independent clients' "
                          "requests serialise")
                      .Register(r);
  resident_ = &prometheus::BuildGauge()
                   .Name("process_resident_memory_bytes")
                   .Help("The daemon's resident memory")
                   .Register(r)
                   .Add({});
  threads_ = &prometheus::BuildGauge()
                  .Name("process_threads")
                  .Help("The daemon's threads")
                  .Register(r)
                  .Add({});
  open_fds_ = &prometheus::BuildGauge()
                   .Name("process_open_fds")
                   .Help("The daemon's open file descriptors")
                   .Register(r)
                   .Add({});
  store_no_space_ = &prometheus::BuildGauge()
                         .Name("nache_cache_store_no_space")
                         .Help(
                             "1 while the cache store refuses writes "
                             "because its filesystem is full")
                         .Register(r);
  refused_ = &prometheus::BuildCounter()
                  .Name("nache_writeback_refused_total")
                  .Help(
                      "Changes acknowledged by nache in write-back mode "
                      "that the remote refused at flush time "
                      "(NFS4ERR_ACCESS or NFS4ERR_PERM) as the caller "
                      "who made them, by op (create, remove, rename, "
                      "write, setattr)")
                  .Register(r);
  full_disk_writes_ = &prometheus::BuildCounter()
                           .Name("nache_writeback_full_disk_writes_total")
                           .Help(
                               "Writes on write-back exports that the full "
                               "cache disk could not keep, sent to the "
                               "remote at once (write-through) instead of "
                               "NFS4ERR_NOSPC: the file was at the remote "
                               "with nothing unflushed")
                           .Register(r);
  open_name_waits_ = &prometheus::BuildCounter()
                          .Name("nache_open_name_waits_total")
                          .Help(
                              "Opens by name that waited while another "
                              "open of the same name was at the remote, "
                              "to open by handle the file it found")
                          .Register(r);
  open_joins_ = &prometheus::BuildCounter()
                     .Name("nache_upstream_open_joins_total")
                     .Help(
                         "Upstream OPENs of a file nache held open already "
                         "for the same owner (an upgrade, or an open by "
                         "name): the remote merged them into that open, "
                         "which one CLOSE ends")
                     .Register(r);
  conflict_waits_ = &prometheus::BuildCounter()
                         .Name("nache_writeback_conflict_waits_total")
                         .Help(
                             "Local writes that waited while a conflict "
                             "of their file was being resolved (ours "
                             "copied aside), to go on the remote's "
                             "version")
                         .Register(r);
  created_as_nobody_ = &prometheus::BuildCounter()
                            .Name("nache_upstream_created_as_nobody_total")
                            .Help(
                                "Objects nache made at the remote under its "
                                "own principal (Upstream_Sec krb5*) that the "
                                "remote gave to nobody: it maps nache's "
                                "principal to its anonymous user")
                            .Register(r);
  identity_waits_expired_ =
      &prometheus::BuildCounter()
           .Name("nache_upstream_identity_waits_expired_total")
           .Help(
               "Upstream_Identity = user: calls that waited the call "
               "timeout for their user's credentials (a slow or "
               "unreachable KDC) and were answered NFS4ERR_DELAY")
           .Register(r);
  flush_resent_ = &prometheus::BuildCounter()
                       .Name("nache_writeback_flush_resent_total")
                       .Help(
                           "Dirty ranges flushed UNSTABLE whose COMMIT "
                           "came back with another write verifier (the "
                           "remote restarted in between), sent again "
                           "FILE_SYNC")
                       .Register(r);
  seqid_resends_ = &prometheus::BuildCounter()
                        .Name("nache_upstream_seqid_resends_total")
                        .Help(
                            "NFSv4.0 seqid-bearing requests (OPEN, CLOSE, "
                            "LOCK...) resent unchanged after getting no "
                            "reply, by outcome: answered, unanswered "
                            "(again), gave_up (the client id and its state "
                            "were given up to make the seqid known)")
                        .Register(r);
  unchanged_bytes_ = &prometheus::BuildCounter()
                          .Name("nache_writeback_unchanged_bytes_total")
                          .Help(
                              "Bytes written locally on write-back exports "
                              "that were equal to what the cache held: not "
                              "dirtied, never sent")
                          .Register(r);
  local_renames_ = &prometheus::BuildCounter()
                        .Name("nache_writeback_renames_total")
                        .Help(
                            "Renames of files and symlinks the remote has, "
                            "on write-back single-writer exports, by "
                            "outcome: logged (kept local), sent (renamed at "
                            "the remote), refused (the remote said no for "
                            "good: the object keeps its old name)")
                        .Register(r);
  conflicts_ = &prometheus::BuildCounter()
                    .Name("nache_writeback_conflicts_total")
                    .Help(
                        "Files changed at the remote while nache held "
                        "unflushed writes of them: the remote's version "
                        "was kept, nache's saved beside it as "
                        "NAME.nache-conflict-<time>")
                    .Register(r);
  flush_waits_ = &prometheus::BuildCounter()
                      .Name("nache_writeback_flush_waits_total")
                      .Help(
                          "Times a local operation on a write-back file "
                          "(a truncate, a flush on demand) waited for a "
                          "flush of the same file already under way")
                      .Register(r);
  lost_files_ = &prometheus::BuildCounter()
                     .Name("nache_writeback_lost_files_total")
                     .Help(
                         "Files gone at the remote (NFS4ERR_STALE at "
                         "flush) while nache held acknowledged data of "
                         "them, by outcome: saved (written at the remote "
                         "as NAME.nache-lost-<time>, beside the file or "
                         "in nache-lost+found), unsaved (kept in the "
                         "cache, retried)")
                     .Register(r);
  local_creates_ = &prometheus::BuildCounter()
                        .Name("nache_writeback_creates_total")
                        .Help(
                            "Creates on write-back single-writer exports, "
                            "by outcome: logged (kept local), sent (created "
                            "at the remote), cancelled (removed or "
                            "replaced before being sent: never sent)")
                        .Register(r);
  deleg_return_ = &prometheus::BuildHistogram()
                       .Name("nache_delegation_return_seconds")
                       .Help(
                           "Time from the start of a delegation return to "
                           "its DELEGRETURN reply, by reason (recall, "
                           "own_conflict: before an operation of ours "
                           "that would have caused a recall)")
                       .Register(r);
}

const char *CacheKindName(CacheKind k) {
  switch (k) {
    case CacheKind::kData: return "data";
    case CacheKind::kAttrs: return "attributes";
    case CacheKind::kAccess: return "access";
    case CacheKind::kDirents: return "dirents";
    case CacheKind::kCount: break;
  }
  return "?";
}

Metrics::~Metrics() { StopExposer(); }

Metrics &Metrics::Global() {
  static Metrics *global = new Metrics();
  return *global;
}

ExportMetrics *Metrics::ForExport(uint32_t export_id) {
  MutexLock g(&mu_);
  std::unique_ptr<ExportMetrics> &e = exports_[export_id];
  if (e) return e.get();
  e.reset(new ExportMetrics());
  e->export_label_ = std::to_string(export_id);
  const prometheus::Labels ex = {{"export", e->export_label_}};
  e->upstream_ops_family_ = upstream_ops_;
  e->compounds_family_ = compounds_;
  e->purpose_family_ = purposes_;
  for (size_t i = 0; i < size_t(LocalOp::kCount); i++) {
    e->local_[i] = &local_ops_->Add(
        {{"export", e->export_label_}, {"op", LocalOpName(LocalOp(i))}});
    e->without_upstream_[i] = &without_upstream_->Add(
        {{"export", e->export_label_}, {"op", LocalOpName(LocalOp(i))}});
    e->round_trips_[i] = &round_trips_->Add(
        {{"export", e->export_label_}, {"op", LocalOpName(LocalOp(i))}});
    e->local_seconds_[i] = &local_seconds_->Add(
        {{"export", e->export_label_}, {"op", LocalOpName(LocalOp(i))}});
    e->local_upstream_seconds_[i] = &local_upstream_seconds_->Add(
        {{"export", e->export_label_}, {"op", LocalOpName(LocalOp(i))}});
  }
  e->upstream_ops_.reset(new std::atomic<Counter *>[kOpSlots * kStatusSlots]());
  // The "ok" series of every operation we send exist from the start, so
  // rate() sees them before their first use.
  for (size_t op = 0; op < kOpSlots; op++) {
    if (upstream::IsCompoundOp(uint32_t(op))) e->UpstreamOpSeries(op, 0);
  }
  e->CompoundSeries(0);
  e->rtt_ = &rtt_->Add(ex, RttBuckets());
  e->read_bytes_ =
      &bytes_->Add({{"export", e->export_label_}, {"direction", "read"}});
  e->write_bytes_ =
      &bytes_->Add({{"export", e->export_label_}, {"direction", "write"}});
  e->hole_bytes_ =
      &bytes_->Add({{"export", e->export_label_}, {"direction", "hole"}});
  e->connected_ = &connected_->Add(ex);
  e->epoch_ = &epoch_->Add(ex);
  e->open_files_ = &open_files_->Add(ex);
  e->callback_up_ = &callback_up_->Add(ex);
  e->lease_age_ = &lease_age_->Add(ex);
  e->lease_age_->Set(-1);
  e->lease_time_ = &lease_time_->Add(ex);
  e->dirty_max_ = &dirty_max_->Add(ex);
  for (size_t i = 0; i < size_t(CacheKind::kCount); i++) {
    prometheus::Labels l = {{"export", e->export_label_},
                            {"kind", CacheKindName(CacheKind(i))}};
    e->cache_hits_[i] = &cache_hits_->Add(l);
    e->cache_misses_[i] = &cache_misses_->Add(l);
  }
  e->cache_hit_bytes_ = &cache_hit_bytes_->Add(ex);
  e->evictions_ = &evictions_->Add(ex);
  e->cache_bytes_ = &cache_bytes_->Add(ex);
  e->cache_blocks_ = &cache_blocks_->Add(ex);
  auto with = [&](const char *name, const char *value) {
    return prometheus::Labels{{"export", e->export_label_}, {name, value}};
  };
  e->deleg_held_read_ = &deleg_held_->Add(with("type", "read"));
  e->deleg_held_write_ = &deleg_held_->Add(with("type", "write"));
  e->deleg_granted_read_ = &deleg_granted_->Add(with("type", "read"));
  e->deleg_granted_write_ = &deleg_granted_->Add(with("type", "write"));
  e->recalls_ = &recalls_->Add(ex);
  e->cb_gss_contexts_[0] = &cb_gss_contexts_->Add(with("result", "accepted"));
  e->cb_gss_contexts_[1] = &cb_gss_contexts_->Add(with("result", "refused"));
  e->local_locks_ = &local_locks_->Add(ex);
  e->conflicts_ = &conflicts_->Add(ex);
  e->flush_waits_ = &flush_waits_->Add(ex);
  e->unchanged_bytes_ = &unchanged_bytes_->Add(ex);
  for (size_t i = 0; i < e->refused_.size(); i++)
    e->refused_[i] = &refused_->Add(with("op", ExportMetrics::kRefusedOps[i]));
  e->full_disk_writes_ = &full_disk_writes_->Add(ex);
  e->flush_resent_ = &flush_resent_->Add(ex);
  e->conflict_waits_ = &conflict_waits_->Add(ex);
  e->open_name_waits_ = &open_name_waits_->Add(ex);
  e->open_joins_ = &open_joins_->Add(ex);
  e->created_as_nobody_ = &created_as_nobody_->Add(ex);
  e->identity_waits_expired_ = &identity_waits_expired_->Add(ex);
  for (size_t i = 0; i < e->seqid_resends_.size(); i++)
    e->seqid_resends_[i] = &seqid_resends_->Add(
        with("outcome", ExportMetrics::kSeqidResendOutcomes[i]));
  e->lost_files_[0] = &lost_files_->Add(with("outcome", "saved"));
  e->lost_files_[1] = &lost_files_->Add(with("outcome", "unsaved"));
  e->local_creates_[0] = &local_creates_->Add(with("outcome", "logged"));
  e->local_creates_[1] = &local_creates_->Add(with("outcome", "sent"));
  e->local_creates_[2] = &local_creates_->Add(with("outcome", "cancelled"));
  e->local_removes_[0] = &local_removes_->Add(with("outcome", "logged"));
  e->local_removes_[1] = &local_removes_->Add(with("outcome", "sent"));
  e->local_removes_[2] = &local_removes_->Add(with("outcome", "refused"));
  e->local_renames_[0] = &local_renames_->Add(with("outcome", "logged"));
  e->local_renames_[1] = &local_renames_->Add(with("outcome", "sent"));
  e->local_renames_[2] = &local_renames_->Add(with("outcome", "refused"));
  static const char *const kStates[] = {"open", "lock", "delegation"};
  static const char *const kOutcomes[] = {"reclaimed", "reacquired", "lost"};
  for (size_t i = 0; i < size_t(ReclaimState::kCount); i++)
    for (size_t j = 0; j < size_t(ReclaimOutcome::kCount); j++)
      e->reclaims_[i][j] = &reclaims_->Add({{"export", e->export_label_},
                                            {"state", kStates[i]},
                                            {"outcome", kOutcomes[j]}});
  e->local_delegs_ = &local_delegs_->Add(ex);
  e->dirty_bytes_ = &dirty_bytes_->Add(ex);
  e->flush_lag_ = &flush_lag_->Add(ex);
  e->return_recall_ =
      &deleg_return_->Add(with("reason", "recall"), RttBuckets());
  e->return_own_ =
      &deleg_return_->Add(with("reason", "own_conflict"), RttBuckets());
  static const char *const kMovedReasons[] = {"corrupt", "upstream_changed"};
  static const char *const kUnflushed[] = {"yes", "no", "unknown"};
  for (size_t i = 0; i < 2; i++)
    for (size_t j = 0; j < size_t(Unflushed::kCount); j++)
      e->store_moved_[i][j] =
          &store_moved_->Add({{"export", e->export_label_},
                              {"reason", kMovedReasons[i]},
                              {"unflushed", kUnflushed[j]}});
  e->store_write_failures_[0] =
      &store_write_failures_->Add(with("reason", "no_space"));
  e->store_write_failures_[1] =
      &store_write_failures_->Add(with("reason", "other"));
  e->store_no_space_ = &store_no_space_->Add(ex);
  e->store_durable_writes_ = &store_durable_writes_->Add(ex);
  e->store_syncs_ = &store_syncs_->Add(ex);
  return e.get();
}

void Metrics::SampleProcess() {
  ProcessStats p;
  if (!SampleThisProcess(&p)) return;
  // Counters only grow: add what the kernel counted since the last scrape.
  if (p.user_cpu_s > cpu_user_seen_) {
    cpu_user_->Increment(p.user_cpu_s - cpu_user_seen_);
    cpu_user_seen_ = p.user_cpu_s;
  }
  if (p.system_cpu_s > cpu_system_seen_) {
    cpu_system_->Increment(p.system_cpu_s - cpu_system_seen_);
    cpu_system_seen_ = p.system_cpu_s;
  }
  resident_->Set(double(p.resident_bytes));
  threads_->Set(double(p.threads));
  open_fds_->Set(double(p.open_fds));
}

void Metrics::SampleLocks() {
  LockStats::ForEach([this](const LockStats &l) {
    mu_.AssertHeld();
    LockSeen &s = lock_seen_[&l];
    if (!s.waits) {
      s.waits = &lock_waits_->Add({{"lock", l.name()}});
      s.seconds = &lock_wait_s_->Add({{"lock", l.name()}});
    }
    const uint64_t waits = l.waits(), ns = l.wait_ns();
    if (waits > s.waits_seen) s.waits->Increment(double(waits - s.waits_seen));
    if (ns > s.ns_seen) s.seconds->Increment(double(ns - s.ns_seen) / 1e9);
    s.waits_seen = waits;
    s.ns_seen = ns;
  });
}

std::vector<prometheus::MetricFamily> Metrics::Collect() {
  {
    MutexLock g(&mu_);
    SampleProcess();
    SampleLocks();
    for (auto &e : exports_) e.second->Sample();
  }
  return registry_->Collect();
}

bool Metrics::StartExposer(const std::string &address, uint32_t port,
                           std::string *err) {
  struct in_addr a;
  if (inet_pton(AF_INET, address.c_str(), &a) != 1) {
    *err = "not an IPv4 address: " + address;
    return false;
  }
  if (port > 65535) {
    *err = "port out of range: " + std::to_string(port);
    return false;
  }
  MutexLock g(&exposer_mu_);
  if (exposer_) {
    *err = "metrics are already served";
    return false;
  }
  std::string where = address + ":" + std::to_string(port);
  try {
    // Two threads: a slow scraper does not block a second one.
    exposer_.reset(new prometheus::Exposer(where, 2));
  } catch (const std::exception &e) {
    // civetweb's message is generic ("...binding to port"); say where.
    *err = "cannot listen on " + where +
           " (in use, or address not local): " + e.what();
    return false;
  }
  scrape_ = std::make_shared<Scrape>(this);
  exposer_->RegisterCollectable(scrape_);
  return true;
}

void Metrics::StopExposer() {
  std::unique_ptr<prometheus::Exposer> old;
  {
    MutexLock g(&exposer_mu_);
    old = std::move(exposer_);
    scrape_.reset();
  }
  old.reset();  // joins civetweb's threads, outside exposer_mu_
}

int Metrics::exposer_port() {
  MutexLock g(&exposer_mu_);
  if (!exposer_) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

}  // namespace metrics
}  // namespace nache
