// The write-back flusher. See flusher.h.
#include "writeback/flusher.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "util/log.h"
#include "util/parallel.h"

namespace nache {
namespace {

const char *const kComponent = kWritebackComponent;
using Clock = std::chrono::steady_clock;

}  // namespace

Flusher::Flusher(Cache *cache, SendFn send, CommitFn commit, SetattrFn setattr,
                 const FlusherOptions &opts, PrepareFn prepare, GoneFn gone)
    : cache_(cache),
      send_(std::move(send)),
      commit_(std::move(commit)),
      setattr_(std::move(setattr)),
      prepare_(std::move(prepare)),
      gone_(std::move(gone)),
      opts_(opts) {
  thread_ = std::thread([this] { Loop(); });
}

Flusher::~Flusher() { Stop(); }

void Flusher::Stop() {
  {
    MutexLock g(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Flusher::Kick() {
  {
    MutexLock g(&mu_);
    kicked_ = true;
  }
  cv_.SignalAll();
}

void Flusher::Request(const std::vector<Key> &keys) {
  {
    MutexLock g(&mu_);
    requested_.insert(keys.begin(), keys.end());
  }
  cv_.SignalAll();
}

uint64_t Flusher::flushed_bytes() const {
  MutexLock g(&mu_);
  return flushed_bytes_;
}

bool Flusher::WaitForRoom(uint64_t bytes, std::chrono::milliseconds timeout) {
  Clock::time_point end = Clock::now() + timeout;
  MutexLock g(&mu_);
  for (;;) {
    // Reserved: writes let in before this one and not yet in the cache
    // count, so parallel writers cannot all slip under the bound at once.
    if (cache_->dirty_bytes() + reserved_ + bytes <= opts_.dirty_max) {
      reserved_ += bytes;
      return true;
    }
    if (Clock::now() >= end || stop_) return false;
    kicked_ = true;  // the flusher makes room, whatever the files' age
    cv_.SignalAll();
    // Woken when a file's flush ends; the bound is re-read then.
    cv_.WaitUntil(std::min(end, Clock::now() + std::chrono::seconds(1)));
  }
}

void Flusher::RoomUsed(uint64_t bytes) {
  {
    MutexLock g(&mu_);
    reserved_ -= std::min(reserved_, bytes);
  }
  cv_.SignalAll();
}

uint32_t Flusher::FlushFile(Key key) { return FlushFileAs(key, false); }

void Flusher::Acquire(Key key) {
  MutexLock g(&mu_);
  if (busy_.count(key)) {
    // (nache_writeback_flush_waits_total)
    if (opts_.metrics) opts_.metrics->CountFlushWait();
    while (busy_.count(key)) cv_.Wait();
  }
  busy_.insert(key);
}

void Flusher::Release(Key key) {
  {
    MutexLock g(&mu_);
    busy_.erase(key);
  }
  cv_.SignalAll();
}

uint32_t Flusher::FlushFileAs(Key key, bool patient) {
  Acquire(key);
  uint32_t st = FlushOne(key, patient);
  Release(key);
  return st;
}

Flusher::Ownership Flusher::Own(Key key) {
  Acquire(key);
  return Ownership(this, key);
}

Flusher::Ownership::~Ownership() {
  if (flusher_) flusher_->Release(key_);
}

uint32_t Flusher::Ownership::Flush(Urgency urgency) {
  return flusher_->FlushOne(key_, false, urgency);
}

uint32_t Flusher::FlushMany(const std::vector<Key> &keys,
                            Clock::time_point deadline, bool patient) {
  return ParallelFor(keys.size(), size_t(std::max(1, opts_.files)),
                     [&](size_t i) -> uint32_t {
                       // Past the deadline: stop as if failed (retryable).
                       if (Clock::now() >= deadline)
                         return upstream::kNfs4ErrDelay;
                       return FlushFileAs(keys[i], patient);
                     });
}

bool Flusher::FlushAll(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    std::vector<Key> due =
        cache_->DirtyFiles(std::chrono::milliseconds(0), 256);
    if (due.empty()) return true;
    // the upstream is failing
    if (FlushMany(due, deadline, false)) return false;
  }
  return cache_->DirtyFiles(std::chrono::milliseconds(0), 1).empty();
}

uint32_t Flusher::FlushOne(Key key, bool patient, Urgency urgency) {
  if (prepare_) {
    uint32_t st = prepare_(key, patient);
    if (st == kNotYet) return 0;  // stays dirty, not a failure
    if (st == upstream::kNfs4ErrStale) return Gone(key);  // see SendFn
    if (st) return st;
  }
  std::vector<Cache::DirtyRange> ranges = cache_->DirtyRanges(key);
  upstream::Attrs set;
  uint64_t set_epoch = 0;
  bool have_set = cache_->PendingSetattr(key, &set, &set_epoch);
  if (ranges.empty() && !have_set) return 0;
  if (nache_log_get_level() >= kLogDebug) {
    uint64_t total = 0;
    for (const Cache::DirtyRange &r : ranges) total += r.data.size();
    NACHE_LOG(kLogDebug, kComponent,
              "flush of %llu: %zu range(s), %llu byte(s)%s",
              (unsigned long long)key, ranges.size(), (unsigned long long)total,
              have_set ? ", attributes" : "");
  }
  // From here until Flushed the remote's change attribute moves by our
  // own sends: a flush cut off leaves the file's base uncertain.
  cache_->FlushBegins(key);
  std::vector<uint32_t> status(ranges.size(), 0);
  std::vector<upstream::Attrs> after(ranges.size());
  SendRanges(key, ranges, urgency, &status, &after);
  // Clean what arrived; the newest attributes (highest change) describe
  // the file after all of it.
  std::vector<Cache::DirtyRange> sent;
  upstream::Attrs newest;
  uint32_t first_error = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < ranges.size(); i++) {
    // Gone at the remote: nothing of this flush is clean (what else
    // landed went into a file nobody can read).
    if (status[i] == upstream::kNfs4ErrStale) return Gone(key);
    if (status[i]) {
      if (!first_error) first_error = status[i];
      continue;
    }
    if (!(newest.mask & upstream::kAttrChange) ||
        after[i].change > newest.change)
      newest = after[i];
    bytes += ranges[i].data.size();
    sent.push_back(std::move(ranges[i]));
  }
  // Then the attributes set locally (mtime after the data, as tar wants).
  if (!first_error && have_set) {
    upstream::Attrs after_set;
    uint32_t st = setattr_(key, set, &after_set);
    if (st == upstream::kNfs4ErrStale) return Gone(key);
    if (st) {
      first_error = st;
    } else {
      newest = after_set;
    }
  }
  if (first_error) {
    // The file stays dirty, and what the remote holds of it is uncertain
    // (a send that failed may have landed).
    newest.mask = 0;
    set_epoch = 0;
  }
  cache_->Flushed(key, sent, have_set ? set_epoch : 0, newest);
  {
    MutexLock g(&mu_);
    flushed_bytes_ += bytes;
  }
  NACHE_LOG(
      kLogDebug, kComponent,
      "flush of %llu: %zu of %zu range(s) (%llu bytes) at the remote, "
      "size there %llu",
      (unsigned long long)key, sent.size(), ranges.size(),
      (unsigned long long)bytes,
      (unsigned long long)((newest.mask & upstream::kAttrSize) ? newest.size
                                                               : 0));
  if (first_error)
    NACHE_LOG(kLogInfo, kComponent,
              "flush of %llu: %zu of %zu range(s) failed (nfs status %u); "
              "kept dirty, retried later",
              (unsigned long long)key, ranges.size() - sent.size(),
              ranges.size(), first_error);
  return first_error;
}

std::vector<Flusher::Group> Flusher::JoinRanges(
    const std::vector<Cache::DirtyRange> &ranges, uint64_t max_send) const {
  // Dirty blocks that follow each other go in one WRITE, up to max_send
  // bytes: fewer, larger WRITEs, several in flight, keep a long fat link
  // busy where one block per WRITE would leave it waiting for replies.
  const uint64_t bs = cache_->block_size();
  std::vector<Group> groups;
  for (size_t i = 0; i < ranges.size(); i++) {
    const Cache::DirtyRange &r = ranges[i];
    if (!groups.empty()) {
      Group &g = groups.back();
      const Cache::DirtyRange &prev = ranges[i - 1];
      if (prev.idx + 1 == r.idx && prev.hi == bs && r.lo == 0 &&
          g.data.size() + r.data.size() <= max_send) {
        g.data += r.data;
        g.end = i + 1;
        continue;
      }
    }
    Group g;
    g.first = i;
    g.end = i + 1;
    g.offset = r.idx * bs + r.lo;
    g.data = r.data;
    groups.push_back(std::move(g));
  }
  return groups;
}

void Flusher::SendGroups(Key key, uint64_t max_send, Urgency urgency,
                         std::vector<Group> *groups) {
  using upstream::StableHow;
  // A group bigger than one WRITE (a dirty block larger than the remote's
  // WRITE size) goes as pieces of one WRITE each, sent in parallel like
  // groups: sent one after the other they would leave the link idle for a
  // round trip each.
  struct Piece {
    Group *group;
    size_t from, len;  // of group->data
    uint32_t status = 0;
    Sent sent;
  };
  std::vector<Piece> pieces;
  for (Group &g : *groups)
    for (size_t from = 0; from < g.data.size(); from += max_send)
      pieces.push_back(
          Piece{&g, from, std::min<size_t>(max_send, g.data.size() - from)});
  // In flight: opts_.parallel WRITEs, and more when they are small
  // (RequestsInFlight), at most 16.
  constexpr size_t kMaxInFlight = 16;
  const size_t parallel = size_t(std::max(1, opts_.parallel));
  const size_t in_flight =
      RequestsInFlight(max_send, parallel, std::max(parallel, kMaxInFlight));
  // One WRITE: FILE_SYNC (a COMMIT would cost a second round trip). So is
  // one wave of them when a client waits for this flush at the remote.
  const size_t file_sync_up_to = urgency == Urgency::kWaitedFor ? in_flight : 1;
  const StableHow stable = pieces.size() > file_sync_up_to
                               ? StableHow::kUnstable
                               : StableHow::kFileSync;
  // Every piece is tried (the status of each decides what is clean).
  ParallelFor(pieces.size(), in_flight, [&](size_t i) -> uint32_t {
    Piece &p = pieces[i];
    const std::string &all = p.group->data;
    // (A group of one WRITE, the usual case, goes without a copy.)
    p.status = p.len == all.size()
                   ? send_(key, p.group->offset, all, stable, &p.sent)
                   : send_(key, p.group->offset + p.from,
                           all.substr(p.from, p.len), stable, &p.sent);
    return 0;
  });
  // A group is what its pieces say together: the first failure, the
  // weakest stability, one verifier (or mixed), the newest attributes.
  for (Group &g : *groups) {
    g.status = 0;
    g.sent = Sent();
    bool first = true;
    for (const Piece &p : pieces) {
      if (p.group != &g) continue;
      if (p.status) {
        if (!g.status) g.status = p.status;
        continue;
      }
      if (uint32_t(p.sent.committed) < uint32_t(g.sent.committed))
        g.sent.committed = p.sent.committed;
      g.sent.mixed |=
          p.sent.mixed || (!first && p.sent.verifier != g.sent.verifier);
      g.sent.verifier = p.sent.verifier;
      const bool newer = (p.sent.after.mask & upstream::kAttrChange) &&
                         (!(g.sent.after.mask & upstream::kAttrChange) ||
                          p.sent.after.change > g.sent.after.change);
      if (first || newer) g.sent.after = p.sent.after;
      first = false;
    }
  }
}

void Flusher::CommitGroups(Key key, std::vector<Group> *groups) {
  using upstream::StableHow;
  std::vector<Group *> uncommitted;
  for (Group &g : *groups)
    if (g.status == 0 && g.sent.committed != StableHow::kFileSync)
      uncommitted.push_back(&g);
  if (uncommitted.empty()) return;
  upstream::Verifier verf;
  upstream::Attrs committed_attrs;
  const uint32_t st = commit_(key, &verf, &committed_attrs);
  NACHE_LOG(kLogDebug, kComponent, "flush of %llu: COMMIT of %zu: %u",
            (unsigned long long)key, uncommitted.size(), st);
  std::vector<Group *> lost;
  for (Group *g : uncommitted) {
    if (st) {
      // Not known to be durable: stays dirty (sent again later).
      g->status = st;
      continue;
    }
    // The COMMIT's attributes follow every WRITE it covers.
    g->sent.after = committed_attrs;
    if (g->sent.mixed || g->sent.verifier != verf) lost.push_back(g);
  }
  if (lost.empty()) return;
  // The server restarted between a WRITE and the COMMIT: what it held
  // only in memory may be gone. Those again, each durable at once.
  size_t n = 0;
  for (Group *g : lost) n += g->end - g->first;
  if (opts_.metrics) opts_.metrics->CountFlushResent(n);
  NACHE_LOG(kLogEvent, kComponent,
            "flush of %llu: the COMMIT's verifier is not the WRITEs' "
            "(the remote restarted): %zu range(s) sent again FILE_SYNC",
            (unsigned long long)key, n);
  ParallelFor(lost.size(), size_t(std::max(1, opts_.parallel)),
              [&](size_t k) -> uint32_t {
                Group &g = *lost[k];
                g.sent = Sent();
                g.status =
                    send_(key, g.offset, g.data, StableHow::kFileSync, &g.sent);
                return 0;
              });
}

void Flusher::SendRanges(Key key, const std::vector<Cache::DirtyRange> &ranges,
                         Urgency urgency, std::vector<uint32_t> *status,
                         std::vector<upstream::Attrs> *after) {
  const uint64_t max_send = opts_.max_send ? opts_.max_send() : 1 << 20;
  std::vector<Group> groups = JoinRanges(ranges, max_send);
  SendGroups(key, max_send, urgency, &groups);
  CommitGroups(key, &groups);
  for (const Group &g : groups)
    for (size_t i = g.first; i < g.end; i++) {
      (*status)[i] = g.status;
      (*after)[i] = g.sent.after;
    }
}

uint32_t Flusher::Gone(Key key) {
  if (gone_) return gone_(key);
  NACHE_LOG(kLogCrit, kComponent,
            "%llu is gone at the remote; its unflushed data stays here",
            (unsigned long long)key);
  return upstream::kNfs4ErrStale;
}

void Flusher::Loop() {
  // Woken by kicks, and at least every quarter of the flush age (at most
  // a second) to look for files that came of age.
  const auto tick =
      std::max(std::chrono::milliseconds(50),
               std::min(std::chrono::milliseconds(1000), opts_.age / 4));
  auto backoff = tick;
  MutexLock g(&mu_);
  while (!stop_) {
    const Clock::time_point until = Clock::now() + backoff;
    // (Files requested after a failure wait for the backoff too.)
    while (!stop_ && !kicked_ && (requested_.empty() || backoff > tick) &&
           cv_.WaitUntil(until)) {
    }
    if (stop_) break;
    // A kick means a writer waits for room: flush regardless of age.
    bool over = kicked_ || cache_->dirty_bytes() > opts_.dirty_max;
    kicked_ = false;
    std::vector<Key> asked(requested_.begin(), requested_.end());
    requested_.clear();
    g.Unlock();
    bool failed = false;
    if (!asked.empty()) {
      failed = FlushMany(asked, Clock::time_point::max(), false) != 0;
      // Those a failure left dirty are tried again (after the backoff);
      // one written again since its flush is due by age as usual.
      std::vector<Key> left;
      for (Key k : asked)
        if (failed && cache_->IsDirty(k)) left.push_back(k);
      if (!left.empty()) {
        MutexLock r(&mu_);
        requested_.insert(left.begin(), left.end());
      }
    }
    std::vector<Key> due = cache_->DirtyFiles(
        over ? std::chrono::milliseconds(0) : opts_.age, 256);
    failed = FlushMany(due, Clock::time_point::max(), !over) != 0 || failed;
    // The upstream refuses or is away: retry less often (up to 30 s).
    backoff =
        failed ? std::min(backoff * 2, std::chrono::milliseconds(30000)) : tick;
    g.Lock();
  }
}

}  // namespace nache
