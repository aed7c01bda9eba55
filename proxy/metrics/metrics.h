// Prometheus metrics of the proxy: the one process-wide registry every
// export's core writes into, the series of each export (labelled
// export="<id>"), the gauges sampled at scrape time, and the HTTP exposer
// that serves the registry at /metrics.
//
// Owns metric names, label sets and bucket layouts; knows nothing of
// Ganesha. Callers (core.cc, nache_api.cc) report events; they never build
// label strings themselves.
//
// Hot path: every per-operation update is one atomic add on a series that
// was resolved ahead of time. "ok" series are created when the export
// registers; an error status's series is created on its first occurrence and
// cached in a lock-free slot (prometheus-cpp's Family::Add is idempotent, so
// two threads racing on the first occurrence get the same series). No string
// formatting and no lock shared between exports per operation; the RTT
// histogram takes its own short mutex inside prometheus-cpp.
//
// Thread safety: everything here is thread-safe.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "upstream/compound.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace prometheus {
class Exposer;
}

namespace nache {
namespace metrics {

// The C API operations the FSAL calls (nache.h), one row each: X(Enum,
// "label"), the label of op="<label>" in nache_local_ops_total and
// nache_local_ops_without_upstream_total.
#define NACHE_LOCAL_OPS(X)          \
  X(kRoot, "root")                  \
  X(kLookup, "lookup")              \
  X(kLookupParent, "lookup_parent") \
  X(kGetattr, "getattr")            \
  X(kSetattr, "setattr")            \
  X(kAccess, "access")              \
  X(kReaddir, "readdir")            \
  X(kCreate, "create")              \
  X(kReadlink, "readlink")          \
  X(kLink, "link")                  \
  X(kRename, "rename")              \
  X(kRemove, "remove")              \
  X(kStatfs, "statfs")              \
  X(kOpen, "open")                  \
  X(kReopen, "reopen")              \
  X(kClose, "close")                \
  X(kRead, "read")                  \
  X(kWrite, "write")                \
  X(kCommit, "commit")              \
  X(kLock, "lock")                  \
  X(kFallocate, "fallocate")        \
  X(kSeek, "seek")                  \
  X(kCopy, "copy")                  \
  X(kXattr, "xattr")

enum class LocalOp : uint8_t {
#define NACHE_LOCAL_OP_ENUM(e, s) e,
  NACHE_LOCAL_OPS(NACHE_LOCAL_OP_ENUM)
#undef NACHE_LOCAL_OP_ENUM
      kCount,  // number of local operations (not an operation)
};

const char *LocalOpName(LocalOp op);

// Kinds of cached things, label kind="<name>".
enum class CacheKind : uint8_t { kData, kAttrs, kAccess, kDirents, kCount };
const char *CacheKindName(CacheKind k);

// Upstream state re-established after the client id changed (a server
// restart): label state="<name>", outcome="<name>".
enum class ReclaimState : uint8_t { kOpen, kLock, kDelegation, kCount };
enum class ReclaimOutcome : uint8_t { kReclaimed, kReacquired, kLost, kCount };
// Whether a cache store moved aside held unflushed write-back state: label
// unflushed="yes", "no", or "unknown" (too damaged to be read).
enum class Unflushed : uint8_t { kYes, kNo, kUnknown, kCount };

// State of one export read at scrape time (cheaper than tracking every
// change, and always current).
struct ExportGauges {
  bool connected = false;          // upstream state is ready
  uint64_t clientid_epoch = 0;     // times the client id was re-established
  uint64_t open_files = 0;         // files in the upstream open table
  bool callback_path_up = false;   // the remote can reach our callback service
  uint64_t cache_bytes = 0;        // cached data bytes
  uint64_t cache_blocks = 0;       // cached data blocks
  uint64_t delegations_read = 0;   // upstream read delegations held
  uint64_t delegations_write = 0;  // upstream write delegations held
  uint64_t local_delegations = 0;  // delegations Ganesha gave our clients
  uint64_t dirty_bytes = 0;        // write-back data not yet flushed
  double flush_lag_s = 0;          // age of the oldest unflushed write
  // Since the lease was last renewed (the send time of the RENEW, SEQUENCE
  // or SETCLIENTID_CONFIRM that proved it); -1 before the first.
  double lease_age_s = -1;
  uint32_t lease_time_s = 0;  // the server's lease (0: not known yet)
  uint64_t dirty_max = 0;     // Dirty_Max (0: no write-back)
};

// Totals of some of an export's counters, for nachectl status (read from
// the series themselves: the same numbers /metrics shows).
struct ExportCounters {
  double local_ops = 0;         // nache_local_ops_total, all ops
  double without_upstream = 0;  // nache_local_ops_without_upstream_total
  double compounds = 0;         // nache_upstream_compounds_total, all
  double cache_hits = 0;        // nache_cache_hits_total, all kinds
  double cache_misses = 0;      // nache_cache_misses_total, all kinds
  double conflicts = 0;         // nache_writeback_conflicts_total
  double rtt_sum_s = 0;         // nache_upstream_rtt_seconds sum
  double rtt_count = 0;         // and count
};

// Slots of the status label: "ok", NFS4ERR_* by number, transport failures.
// The set is bounded so that slots can be an array (see StatusSlot).
constexpr size_t kStatusSlots = 206;
// Slots of the op label: one per compound operation number (ops.h); a
// number no row has shares slot 0, whose label is OpName's "UNKNOWN".
constexpr size_t kOpSlots = upstream::kCompoundOpSlots;

// The series of one export. Created by Metrics::ForExport; lives as long as
// its Metrics.
class ExportMetrics {
 public:
  ExportMetrics(const ExportMetrics &) = delete;
  ExportMetrics &operator=(const ExportMetrics &) = delete;

  // One C API call of the FSAL.
  void CountLocal(LocalOp op) { local_[size_t(op)]->Increment(); }
  // One that succeeded with no upstream round trip of its own (the calling
  // thread neither sent a COMPOUND nor waited for one: round_trips.h).
  void CountWithoutUpstream(LocalOp op) {
    without_upstream_[size_t(op)]->Increment();
  }
  // The round trips one call sent or waited for (round_trips.h), summed per
  // operation: with nache_local_ops_total, the round trips an operation
  // costs on average (the write-through audit).
  void CountRoundTrips(LocalOp op, uint64_t n) {
    if (n) round_trips_[size_t(op)]->Increment(double(n));
  }
  // One call's time in nache's core, and the part of it the calling
  // thread spent in upstream calls (round_trips.h): the rest is nache's
  // own (CPU, its locks, waits for other threads' work).
  void CountLocalTime(LocalOp op, double seconds, double upstream_seconds) {
    local_seconds_[size_t(op)]->Increment(seconds);
    if (upstream_seconds > 0)
      local_upstream_seconds_[size_t(op)]->Increment(upstream_seconds);
  }

  // The counters nachectl status shows.
  ExportCounters Counters() const;

  // A cache lookup of kind: hit or miss, and the bytes a data hit served.
  void CountCache(CacheKind kind, bool hit, uint64_t bytes) {
    (hit ? cache_hits_ : cache_misses_)[size_t(kind)]->Increment();
    if (bytes) cache_hit_bytes_->Increment(double(bytes));
  }
  void CountEvictions(uint64_t n) { evictions_->Increment(double(n)); }

  // An upstream delegation granted with an OPEN (write or read).
  void CountDelegationGranted(bool write) {
    (write ? deleg_granted_write_ : deleg_granted_read_)->Increment();
  }
  // A CB_RECALL received.
  void CountRecall() { recalls_->Increment(); }
  // An RPCSEC_GSS context made with our NFSv4.0 callback service, kept
  // (its initiator is the remote's principal) or refused (any other).
  void CountCallbackGssContext(bool refused) {
    cb_gss_contexts_[refused ? 1 : 0]->Increment();
  }
  // A byte-range lock granted here under our write delegation.
  void CountLocalLock() { local_locks_->Increment(); }
  // Write-back namespace: a create kept local, sent to the remote later, or
  // cancelled (removed or replaced before it was sent).
  void CountLocalCreate() { local_creates_[0]->Increment(); }
  void CountFlushedCreate() { local_creates_[1]->Increment(); }
  void CountLocalCancel() { local_creates_[2]->Increment(); }
  // Write-back: a file changed at the remote while we held unflushed
  // writes; ours was saved beside it as a conflict copy.
  void CountConflict() { conflicts_->Increment(); }
  // Write-back: a local operation (a truncate, a flush on demand) waited
  // for a flush of the same file already under way.
  void CountFlushWait() { flush_waits_->Increment(); }
  // Write-back: a file gone at the remote while we held acknowledged data
  // of it; saved (NAME.nache-lost-<time> at the remote) or not (kept in
  // the cache, retried).
  void CountLostFile(bool saved) { lost_files_[saved ? 0 : 1]->Increment(); }
  // Write-back namespace: a remove of an object the remote has, kept
  // local and logged, then sent.
  void CountLoggedRemove() { local_removes_[0]->Increment(); }
  void CountSentRemove() { local_removes_[1]->Increment(); }
  void CountRefusedRemove() { local_removes_[2]->Increment(); }
  // Write-back namespace: a rename of an object the remote has.
  void CountLoggedRename() { local_renames_[0]->Increment(); }
  void CountSentRename() { local_renames_[1]->Increment(); }
  void CountRefusedRename() { local_renames_[2]->Increment(); }
  // Write-back: a change acknowledged here that the remote refused at
  // flush time for the permissions of the caller it is sent as
  // (NFS4ERR_ACCESS or NFS4ERR_PERM); op is one of kRefusedOps.
  static constexpr const char *kRefusedOps[] = {"create", "remove", "rename",
                                                "write", "setattr"};
  void CountWritebackRefused(const std::string &op) {
    for (size_t i = 0; i < refused_.size(); i++)
      if (op == kRefusedOps[i]) refused_[i]->Increment();
  }
  // Write-back: a write the full cache disk could not keep, sent to the
  // remote at once instead.
  void CountFullDiskWrite() { full_disk_writes_->Increment(); }
  // Write-back: a local write that waited while a conflict of its file
  // was being resolved.
  void CountConflictWait() { conflict_waits_->Increment(); }
  // An open by name that waited for another open of the same name.
  void CountOpenNameWait() { open_name_waits_->Increment(); }
  // An upstream OPEN the remote merged into an open nache held.
  void CountOpenJoin() { open_joins_->Increment(); }
  // Upstream_Sec krb5* as nache's own principal: an object nache made at
  // the remote came back owned by nobody (the remote maps nache's
  // principal to its anonymous user).
  void CountCreatedAsNobody() { created_as_nobody_->Increment(); }
  // Upstream_Identity = user: a call that waited the call timeout for its
  // user's credentials (a slow KDC) and was answered NFS4ERR_DELAY.
  void CountIdentityWaitExpired() { identity_waits_expired_->Increment(); }
  // Write-back: ranges sent UNSTABLE whose COMMIT came back with another
  // verifier (the remote restarted), sent again FILE_SYNC.
  void CountFlushResent(size_t ranges) {
    flush_resent_->Increment(double(ranges));
  }
  // NFSv4.0: a seqid-bearing request (OPEN, CLOSE, LOCK...) that got no
  // reply, resent unchanged: answered, unanswered again, or given up
  // (the client id was given up with it). kSeqidResendOutcomes.
  static constexpr const char *kSeqidResendOutcomes[] = {
      "answered", "unanswered", "gave_up"};
  void CountSeqidResend(const std::string &outcome) {
    for (size_t i = 0; i < seqid_resends_.size(); i++)
      if (outcome == kSeqidResendOutcomes[i]) seqid_resends_[i]->Increment();
  }
  // Write-back: bytes a local write put back as the cache held them (not
  // dirtied, never sent).
  void CountUnchangedWrite(uint64_t bytes) {
    unchanged_bytes_->Increment(double(bytes));
  }
  // Upstream state of an earlier client id: reclaimed in the server's
  // grace period, acquired anew (no grace period), or lost.
  void CountReclaim(ReclaimState s, ReclaimOutcome o) {
    reclaims_[size_t(s)][size_t(o)]->Increment();
  }
  // A delegation returned (DELEGRETURN sent) after a recall (recalled) or
  // before a conflicting operation of ours; seconds from the start of the
  // return to its end.
  void ObserveDelegationReturn(bool recalled, double seconds) {
    (recalled ? return_recall_ : return_own_)->Observe(seconds);
  }
  // The cache store was moved aside at start (allowed by the operator):
  // corrupt, or made for another upstream; and whether it held unflushed
  // write-back state (left there, not sent).
  void CountStoreMovedAside(bool corrupt, Unflushed u) {
    store_moved_[corrupt ? 0 : 1][size_t(u)]->Increment();
  }
  // A write to the cache store failed, for lack of space or otherwise.
  void CountStoreWriteFailure(bool no_space) {
    store_write_failures_[no_space ? 0 : 1]->Increment();
  }
  // A write a client's call must not answer before it is on disk
  // (Store::WriteBeforeReply), and one flush of the store's log to disk
  // (Store::Sync: several such writes share one).
  void CountStoreDurableWrite() { store_durable_writes_->Increment(); }
  void CountStoreSync() { store_syncs_->Increment(); }
  // The cache store refuses writes for lack of space (1) or takes them (0).
  void SetStoreNoSpace(bool full) { store_no_space_->Set(full ? 1 : 0); }

  // One upstream COMPOUND as Core::Run saw it: counts the compound, each
  // operation the server executed (rep.results, with its status), the bytes
  // of READ/WRITE results, and the round trip. On a transport failure (no
  // reply) counts the compound's first operation under
  // status="transport_<call status>" and observes no round trip.
  void ObserveCompound(const upstream::Compound &c, upstream::CallStatus s,
                       const upstream::CompoundReply &rep,
                       std::chrono::steady_clock::duration rtt);

  // Installs the function that reads this export's gauges at scrape time
  // (called on the exposer's thread; must not block on the upstream).
  // Returns a token for ClearSampler.
  uint64_t SetSampler(std::function<ExportGauges()> sampler);
  // Removes the sampler installed with token and zeroes the gauges; no call
  // of it runs after return. A no-op when another sampler replaced it (a
  // new core of the same export id opened before the old one closed).
  void ClearSampler(uint64_t token);

 private:
  friend class Metrics;
  ExportMetrics() = default;
  // Reads the sampler into the gauges (scrape time).
  void Sample();
  prometheus::Counter *UpstreamOpSeries(size_t op_slot, size_t status_slot);
  prometheus::Counter *CompoundSeries(size_t status_slot);

  std::string export_label_;  // the export id as a label value (immutable)
  // Families of the owning Metrics (immutable; live as long as it).
  prometheus::Family<prometheus::Counter> *upstream_ops_family_ = nullptr;
  prometheus::Family<prometheus::Counter> *compounds_family_ = nullptr;
  // nache_local_ops_total per LocalOp (immutable after creation).
  std::array<prometheus::Counter *, size_t(LocalOp::kCount)> local_{};
  // nache_local_ops_without_upstream_total per LocalOp (immutable).
  std::array<prometheus::Counter *, size_t(LocalOp::kCount)>
      without_upstream_{};
  // nache_local_op_round_trips_total per LocalOp (immutable).
  std::array<prometheus::Counter *, size_t(LocalOp::kCount)> round_trips_{};
  // nache_local_op_seconds_total and nache_local_op_upstream_seconds_total
  // per LocalOp (immutable).
  std::array<prometheus::Counter *, size_t(LocalOp::kCount)> local_seconds_{};
  std::array<prometheus::Counter *, size_t(LocalOp::kCount)>
      local_upstream_seconds_{};
  // nache_upstream_ops_total by [op][status]; null until first use.
  std::unique_ptr<std::atomic<prometheus::Counter *>[]> upstream_ops_;
  // nache_upstream_compounds_total by status; null until first use.
  std::array<std::atomic<prometheus::Counter *>, kStatusSlots> compounds_{};
  prometheus::Family<prometheus::Counter> *purpose_family_ = nullptr;
  // nache_upstream_compounds_by_purpose_total by the COMPOUND's tag (a
  // bounded set of literals).
  Mutex purpose_mu_{"metrics_purpose"};
  std::unordered_map<std::string, prometheus::Counter *> purposes_
      GUARDED_BY(purpose_mu_);
  prometheus::Counter *PurposeSeries(const std::string &tag);
  prometheus::Histogram *rtt_ = nullptr;        // nache_upstream_rtt_seconds
  prometheus::Counter *read_bytes_ = nullptr;   // direction="read"
  prometheus::Counter *write_bytes_ = nullptr;  // direction="write"
  prometheus::Counter *hole_bytes_ = nullptr;   // direction="hole"
  prometheus::Gauge *connected_ = nullptr;      // nache_upstream_connected
  prometheus::Gauge *epoch_ = nullptr;          // ..._clientid_epoch
  prometheus::Gauge *open_files_ = nullptr;     // ..._open_files
  prometheus::Gauge *callback_up_ = nullptr;    // nache_callback_path_up
  prometheus::Gauge *lease_age_ = nullptr;      // ..._lease_age_seconds
  prometheus::Gauge *lease_time_ = nullptr;     // nache_upstream_lease_seconds
  prometheus::Gauge *dirty_max_ = nullptr;      // nache_dirty_max_bytes
  // nache_cache_{hits,misses}_total by kind (immutable after creation).
  std::array<prometheus::Counter *, size_t(CacheKind::kCount)> cache_hits_{};
  std::array<prometheus::Counter *, size_t(CacheKind::kCount)> cache_misses_{};
  prometheus::Counter *cache_hit_bytes_ = nullptr;  // kind="data"
  prometheus::Counter *evictions_ = nullptr;      // nache_cache_evictions_total
  prometheus::Gauge *cache_bytes_ = nullptr;      // nache_cache_size_bytes
  prometheus::Gauge *cache_blocks_ = nullptr;     // nache_cache_entries
  prometheus::Gauge *deleg_held_read_ = nullptr;  // ..._delegations_held
  prometheus::Gauge *deleg_held_write_ = nullptr;      // type="read"/"write"
  prometheus::Counter *deleg_granted_read_ = nullptr;  // ..._granted_total
  prometheus::Counter *deleg_granted_write_ = nullptr;
  prometheus::Gauge *local_delegs_ = nullptr;  // ..._local_delegations_held
  prometheus::Gauge *dirty_bytes_ = nullptr;   // nache_dirty_bytes
  prometheus::Gauge *flush_lag_ = nullptr;     // nache_flush_lag_seconds
  prometheus::Counter *recalls_ = nullptr;     // nache_delegation_recalls_total
  // nache_callback_gss_contexts_total{result="accepted"|"refused"}
  std::array<prometheus::Counter *, 2> cb_gss_contexts_{};
  prometheus::Counter *local_locks_ = nullptr;  // ..._local_locks_total
  prometheus::Counter *conflicts_ = nullptr;  // nache_writeback_conflicts_total
  prometheus::Counter *flush_waits_ = nullptr;  // ..._flush_waits_total
  // nache_writeback_lost_files_total{outcome=saved|unsaved}
  std::array<prometheus::Counter *, 2> lost_files_{};
  prometheus::Counter *unchanged_bytes_ = nullptr;  // ..._unchanged_bytes_total
  // nache_writeback_creates_total{outcome=logged|sent|cancelled}
  std::array<prometheus::Counter *, 3> local_creates_{};
  std::array<prometheus::Counter *, 3> local_removes_{};
  std::array<prometheus::Counter *, 3> local_renames_{};
  // nache_writeback_refused_total{op=create|remove|rename|write|setattr}
  std::array<prometheus::Counter *, 5> refused_{};
  // nache_upstream_seqid_resends_total{outcome}
  std::array<prometheus::Counter *, 3> seqid_resends_{};
  prometheus::Counter *full_disk_writes_ =
      nullptr;                                     // ..._full_disk_writes_total
  prometheus::Counter *flush_resent_ = nullptr;    // ..._flush_resent_total
  prometheus::Counter *conflict_waits_ = nullptr;  // ..._conflict_waits_total
  prometheus::Counter *open_name_waits_ = nullptr;  // ..._open_name_waits_total
  prometheus::Counter *open_joins_ = nullptr;  // ..._upstream_open_joins_total
  // nache_upstream_created_as_nobody_total
  prometheus::Counter *created_as_nobody_ = nullptr;
  // nache_upstream_identity_waits_expired_total
  prometheus::Counter *identity_waits_expired_ = nullptr;
  // nache_upstream_reclaims_total{state, outcome}
  std::array<std::array<prometheus::Counter *, size_t(ReclaimOutcome::kCount)>,
             size_t(ReclaimState::kCount)>
      reclaims_{};
  // nache_delegation_return_seconds by reason ("recall", "own_conflict").
  prometheus::Histogram *return_recall_ = nullptr;
  prometheus::Histogram *return_own_ = nullptr;
  // nache_cache_store_moved_aside_total{reason=corrupt|upstream_changed,
  // unflushed}
  std::array<std::array<prometheus::Counter *, size_t(Unflushed::kCount)>, 2>
      store_moved_{};
  // nache_cache_store_write_failures_total{reason=no_space|other}
  std::array<prometheus::Counter *, 2> store_write_failures_{};
  prometheus::Gauge *store_no_space_ = nullptr;  // nache_cache_store_no_space
  // nache_cache_store_durable_writes_total, nache_cache_store_syncs_total
  prometheus::Counter *store_durable_writes_ = nullptr;
  prometheus::Counter *store_syncs_ = nullptr;
  Mutex sampler_mu_{"metrics_sampler"};
  // Empty: export closed.
  std::function<ExportGauges()> sampler_ GUARDED_BY(sampler_mu_);
  uint64_t sampler_token_ GUARDED_BY(sampler_mu_) = 0;  // token of sampler_
};

// A registry of nache's series and, once started, its HTTP exposer.
// Global() is the process-wide one (several exports share it); tests make
// their own.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics &) = delete;
  Metrics &operator=(const Metrics &) = delete;

  // The process-wide instance; never destroyed (cores of exports may still
  // report while the process exits).
  static Metrics &Global();

  // The series of export export_id, created on first call; the same object
  // for later calls with the same id.
  ExportMetrics *ForExport(uint32_t export_id);

  // Samples every export's gauges, then returns all series (what a scrape
  // serves).
  std::vector<prometheus::MetricFamily> Collect();

  // Serves Collect() at http://address:port/metrics. address: an IPv4
  // address; port 0 picks a free port (tests). False with *err set when the
  // address cannot be bound. A second start while running fails.
  bool StartExposer(const std::string &address, uint32_t port,
                    std::string *err);
  // Stops serving (joins the HTTP threads). No-op when not started.
  void StopExposer();
  // The port being served, or 0.
  int exposer_port();

 private:
  class Scrape;  // the Collectable the exposer calls

  std::shared_ptr<prometheus::Registry> registry_;  // all series
  // Families (owned by registry_; immutable after construction).
  prometheus::Family<prometheus::Counter> *local_ops_ = nullptr;
  prometheus::Family<prometheus::Counter> *without_upstream_ = nullptr;
  prometheus::Family<prometheus::Counter> *round_trips_ = nullptr;
  prometheus::Family<prometheus::Counter> *local_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter> *local_upstream_seconds_ = nullptr;
  prometheus::Family<prometheus::Gauge> *lease_age_ = nullptr;
  prometheus::Family<prometheus::Gauge> *lease_time_ = nullptr;
  prometheus::Family<prometheus::Gauge> *dirty_max_ = nullptr;
  prometheus::Family<prometheus::Counter> *upstream_ops_ = nullptr;
  prometheus::Family<prometheus::Counter> *compounds_ = nullptr;
  prometheus::Family<prometheus::Counter> *purposes_ = nullptr;
  prometheus::Family<prometheus::Histogram> *rtt_ = nullptr;
  prometheus::Family<prometheus::Counter> *bytes_ = nullptr;
  prometheus::Family<prometheus::Gauge> *connected_ = nullptr;
  prometheus::Family<prometheus::Gauge> *epoch_ = nullptr;
  prometheus::Family<prometheus::Gauge> *open_files_ = nullptr;
  prometheus::Family<prometheus::Gauge> *callback_up_ = nullptr;
  prometheus::Family<prometheus::Counter> *cache_hits_ = nullptr;
  prometheus::Family<prometheus::Counter> *cache_misses_ = nullptr;
  prometheus::Family<prometheus::Counter> *cache_hit_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter> *evictions_ = nullptr;
  prometheus::Family<prometheus::Gauge> *cache_bytes_ = nullptr;
  prometheus::Family<prometheus::Gauge> *cache_blocks_ = nullptr;
  prometheus::Family<prometheus::Gauge> *deleg_held_ = nullptr;
  prometheus::Family<prometheus::Counter> *deleg_granted_ = nullptr;
  prometheus::Family<prometheus::Counter> *recalls_ = nullptr;
  prometheus::Family<prometheus::Counter> *cb_gss_contexts_ = nullptr;
  prometheus::Family<prometheus::Counter> *local_locks_ = nullptr;
  prometheus::Family<prometheus::Counter> *conflicts_ = nullptr;
  prometheus::Family<prometheus::Counter> *flush_waits_ = nullptr;
  prometheus::Family<prometheus::Counter> *lost_files_ = nullptr;
  prometheus::Family<prometheus::Counter> *local_creates_ = nullptr;
  prometheus::Family<prometheus::Counter> *local_removes_ = nullptr;
  prometheus::Family<prometheus::Counter> *local_renames_ = nullptr;
  prometheus::Family<prometheus::Counter> *reclaims_ = nullptr;
  prometheus::Family<prometheus::Counter> *unchanged_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter> *refused_ = nullptr;
  prometheus::Family<prometheus::Counter> *seqid_resends_ = nullptr;
  prometheus::Family<prometheus::Counter> *full_disk_writes_ = nullptr;
  prometheus::Family<prometheus::Counter> *flush_resent_ = nullptr;
  prometheus::Family<prometheus::Counter> *conflict_waits_ = nullptr;
  prometheus::Family<prometheus::Counter> *open_name_waits_ = nullptr;
  prometheus::Family<prometheus::Counter> *open_joins_ = nullptr;
  prometheus::Family<prometheus::Counter> *created_as_nobody_ = nullptr;
  prometheus::Family<prometheus::Counter> *identity_waits_expired_ = nullptr;
  prometheus::Family<prometheus::Gauge> *local_delegs_ = nullptr;
  prometheus::Family<prometheus::Gauge> *dirty_bytes_ = nullptr;
  prometheus::Family<prometheus::Gauge> *flush_lag_ = nullptr;
  prometheus::Family<prometheus::Histogram> *deleg_return_ = nullptr;
  prometheus::Family<prometheus::Counter> *store_moved_ = nullptr;
  prometheus::Family<prometheus::Counter> *store_write_failures_ = nullptr;
  prometheus::Family<prometheus::Gauge> *store_no_space_ = nullptr;
  prometheus::Family<prometheus::Counter> *store_durable_writes_ = nullptr;
  prometheus::Family<prometheus::Counter> *store_syncs_ = nullptr;
  // The process's own (process_stats.h), sampled at each Collect.
  prometheus::Counter *cpu_user_ = nullptr;
  prometheus::Counter *cpu_system_ = nullptr;
  prometheus::Gauge *resident_ = nullptr;
  prometheus::Gauge *threads_ = nullptr;
  prometheus::Gauge *open_fds_ = nullptr;
  void SampleProcess() REQUIRES(mu_);
  // Waits for nache's mutexes (util/lock_stats.h), sampled at each Collect.
  prometheus::Family<prometheus::Counter> *lock_waits_ = nullptr;
  prometheus::Family<prometheus::Counter> *lock_wait_s_ = nullptr;
  void SampleLocks() REQUIRES(mu_);

  Mutex mu_{"metrics"};  // (not held per operation)
  std::map<uint32_t, std::unique_ptr<ExportMetrics>> exports_ GUARDED_BY(mu_);
  // CPU seconds already added to cpu_user_ and cpu_system_.
  double cpu_user_seen_ GUARDED_BY(mu_) = 0;
  double cpu_system_seen_ GUARDED_BY(mu_) = 0;
  // Per lock name: waits and nanoseconds already added to the counters.
  struct LockSeen {
    prometheus::Counter *waits = nullptr, *seconds = nullptr;
    uint64_t waits_seen = 0, ns_seen = 0;
  };
  std::map<const LockStats *, LockSeen> lock_seen_ GUARDED_BY(mu_);

  Mutex exposer_mu_{"metrics_exposer"};
  std::unique_ptr<prometheus::Exposer> exposer_ GUARDED_BY(exposer_mu_);
  std::shared_ptr<Scrape> scrape_ GUARDED_BY(exposer_mu_);
};

// Index of status in the status label's slots: 0 "ok", NFS4ERR_* by
// number, one slot for other NFS statuses, then the transport failures.
size_t StatusSlot(uint32_t nfs_status);
size_t TransportSlot(upstream::CallStatus s);
// The label value of a slot ("ok", "NFS4ERR_NOENT", "transport_timeout").
std::string StatusLabel(size_t slot);

}  // namespace metrics
}  // namespace nache
