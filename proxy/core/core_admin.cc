// The core's side of the admin socket (proxy/admin/): what nachectl status
// shows of this export, its flush on demand, the drain switch, and the
// work on one path (warm, pin, unpin, evict, flush PATH). Reads what the
// core keeps anyway (the same sources as the Prometheus gauges and
// counters); adds no state but the drain flag, the last upstream error,
// the warm job (warm.h) and the pins (kept by the cache).
#include <ctime>
#include <sstream>

#include "admin/protocol.h"
#include "admin/registry.h"
#include "core/core.h"
#include "util/log.h"

namespace nache {

using upstream::DelegationType;

namespace {

const char *StateName(upstream::UpstreamState s) {
  switch (s) {
    case upstream::UpstreamState::kConnecting: return "connecting";
    case upstream::UpstreamState::kReady: return "ready";
    case upstream::UpstreamState::kDown: return "down";
  }
  return "?";
}

// The registry's handle on a core (the registry knows nothing of Core).
class CoreControl : public admin::ExportControl {
 public:
  explicit CoreControl(Core *core) : core_(core) {}
  admin::ExportStatus Status() override { return core_->AdminStatus(); }
  bool FlushUntil(std::chrono::steady_clock::time_point deadline,
                  std::string *error) override {
    return core_->AdminFlush(deadline, error);
  }
  void SetDraining(bool draining) override { core_->SetDraining(draining); }
  bool StartWarm(const admin::WarmRequest &req, std::string *error) override {
    return core_->AdminStartWarm(req, error);
  }
  bool CancelWarm(std::string *error) override {
    return core_->AdminCancelWarm(error);
  }
  admin::WarmProgress Warm() override { return core_->AdminWarm(); }
  bool Pin(const std::string &path,
           const std::function<void(const std::string &)> &progress,
           std::string *summary, std::string *error) override {
    return core_->AdminPin(path, progress, summary, error);
  }
  bool Unpin(const std::string &path, std::string *summary,
             std::string *error) override {
    return core_->AdminUnpin(path, summary, error);
  }
  bool Evict(const std::string &path, bool unpin, std::string *summary,
             std::string *error) override {
    return core_->AdminEvict(path, unpin, summary, error);
  }
  bool FlushPath(const std::string &path, std::vector<uint64_t> *objects,
                 std::string *summary, std::string *error) override {
    return core_->AdminFlushPath(path, objects, summary, error);
  }
  void DirtyAmong(const std::vector<uint64_t> &objects, uint64_t *bytes,
                  uint64_t *count) override {
    core_->AdminDirtyAmong(objects, bytes, count);
  }

 private:
  Core *core_;  // owns us
};

}  // namespace

void Core::RegisterAdmin() {
  admin_control_.reset(new CoreControl(this));
  admin_token_ =
      admin::Registry::Global().Add(cfg_.export_id, admin_control_.get());
}

double Core::LeaseAge() const {
  const uint32_t lease = up_->lease_time();
  auto until = up_->lease_valid_until();
  if (until == std::chrono::steady_clock::time_point() || lease == 0) return -1;
  // lease_valid_until is the renewal's send time plus 9/10 of the lease
  // (upstream.h).
  auto renewed = until - std::chrono::milliseconds(lease * 900);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       renewed)
      .count();
}

bool Core::CallbackPathUp() const {
  // (NFSv4.0: once the server has called our service; NFSv4.1: its
  // SEQUENCE replies say whether our back channel works.)
  return delegations_->CallbacksPossible() &&
         (delegations_->back_channel() ? !Disconnected()
                                       : delegations_->Contacted()) &&
         !up_->callback_path_down();
}

void Core::NoteUpstreamError(const std::string &what) {
  MutexLock g(&last_error_mu_);
  last_error_ = what;
  last_error_time_ = int64_t(time(nullptr));
}

admin::ExportStatus Core::AdminStatus() {
  admin::ExportStatus s;
  s.export_id = cfg_.export_id;
  s.server = cfg_.upstream_server;
  s.port = cfg_.upstream_port;
  s.path = cfg_.upstream_path;
  // As negotiated: 4.2 may have become 4.1, and 4.1 4.0.
  s.minor_version = up_->minor_version();
  s.state = StateName(up_->state());
  s.connected = !Disconnected();
  s.client_id = up_->clientid();
  s.clientid_epoch = up_->epoch();
  s.lease_age_s = LeaseAge();
  s.lease_time_s = up_->lease_time();
  s.callbacks_configured = delegations_->CallbacksPossible();
  s.callback_path_up = CallbackPathUp();
  s.cache_bytes = cache_->bytes();
  s.cache_limit = cfg_.cache.size_bytes;
  s.cache_blocks = cache_->blocks();
  s.objects = cache_->objects();
  s.max_objects = cache_->max_objects();
  s.open_files = opens_->size();
  s.delegations_read = delegations_->Count(DelegationType::kRead);
  s.delegations_write = delegations_->Count(DelegationType::kWrite);
  s.local_delegations = LocalDelegations();
  s.write_back = flusher_ != nullptr;
  s.single_writer = cfg_.single_writer;
  s.draining = Draining();
  s.dirty_bytes = cache_->dirty_bytes();
  s.dirty_files = cache_->dirty_files();
  s.dirty_max = cfg_.dirty_max;
  s.oldest_dirty_s = cache_->flush_lag().count() / 1000.0;
  s.flush_age_s = cfg_.flush_age_ms / 1000;
  metrics::ExportCounters c = metrics_->Counters();
  s.cache_hits = c.cache_hits;
  s.cache_misses = c.cache_misses;
  s.conflicts = c.conflicts;
  s.local_ops = c.local_ops;
  s.answered_locally = c.without_upstream;
  s.compounds = c.compounds;
  s.rtt_avg_s = c.rtt_count > 0 ? c.rtt_sum_s / c.rtt_count : 0;
  {
    MutexLock g(&last_error_mu_);
    s.last_error = last_error_;
    s.last_error_time = last_error_time_;
  }
  Cache::PinTotals pt = cache_->pin_totals();
  s.pins = pt.pins;
  s.pinned_objects = pt.objects;
  s.pinned_size = pt.size;
  s.pinned_cached = pt.cached;
  s.pin_limit = uint64_t(double(cfg_.cache.size_bytes) * kPinShare);
  for (const Cache::PinSummary &p : cache_->PinList())
    s.pin_list.push_back(admin::PinInfo{p.path, p.objects, p.size});
  s.warm = AdminWarm();
  return s;
}

bool Core::AdminFlush(std::chrono::steady_clock::time_point deadline,
                      std::string *error) {
  if (!flusher_) return true;
  if (flusher_->FlushAll(deadline)) return true;
  if (std::chrono::steady_clock::now() >= deadline) return true;  // no failure
  // FlushAll says only that a file failed; the usual cause first.
  *error = Disconnected() ? "upstream not connected"
                          : "a flush failed (see the log, NACHE_WRITEBACK)";
  return false;
}

// --- work on a path -------------------------------------------------------

namespace {

std::string Human(uint64_t bytes) { return admin::HumanBytes(double(bytes)); }

std::string Plural(uint64_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

bool Core::AdminResolve(std::string *path, Key *key, Attrs *attrs,
                        std::string *error) {
  std::vector<std::string> parts;
  std::stringstream in(*path);
  for (std::string part; std::getline(in, part, '/');) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      *error = *path +
               ": '..' is not allowed (a path inside the export, "
               "from its root)";
      return false;
    }
    parts.push_back(part);
  }
  std::string norm;
  for (const std::string &p : parts) norm += "/" + p;
  if (norm.empty()) norm = "/";
  *path = norm;
  const Creds root;
  uint32_t st = Root(root, key, attrs);
  std::string at = "";
  for (size_t i = 0; st == upstream::kNfs4Ok && i < parts.size(); i++) {
    if (attrs->type != upstream::FileType::kDir) {
      st = upstream::kNfs4ErrNotdir;
      break;
    }
    at += "/" + parts[i];
    st = Lookup(root, *key, parts[i], key, attrs);
  }
  // (Root's stand-in attributes while the remote cannot be reached.)
  if (st == upstream::kNfs4Ok && !(attrs->mask & upstream::kAttrChange))
    st = upstream::kNfs4ErrDelay;
  if (st == upstream::kNfs4Ok) return true;
  const std::string where = at.empty() ? norm : at;
  switch (st) {
    case upstream::kNfs4ErrNoent:
      *error = norm + ": no such file or directory in the export (" + where +
               " is missing)";
      break;
    case upstream::kNfs4ErrNotdir:
      *error = norm + ": " + (at.empty() ? "/" : at) + " is not a directory";
      break;
    case upstream::kNfs4ErrAccess:
    case upstream::kNfs4ErrPerm:
      *error = norm + ": the remote refuses root access to " + where;
      break;
    case upstream::kNfs4ErrDelay:
      *error = norm + ": the remote cannot be reached";
      break;
    default: *error = norm + ": " + where + ": " + nache_status_name(st);
  }
  return false;
}

bool Core::AdminStartWarm(const admin::WarmRequest &req, std::string *error) {
  return warmer_->Start(req, error);
}

bool Core::AdminCancelWarm(std::string *error) {
  return warmer_->Cancel(error);
}

admin::WarmProgress Core::AdminWarm() const { return warmer_->Progress(); }

bool Core::Below(Key k, Key top, std::unordered_map<Key, bool> *memo) {
  if (top == root_key_) return true;
  std::vector<Key> chain;
  bool below = false;
  // (Bounded: a cycle of stale parents must not hang the walk up.)
  for (int steps = 0; steps < 4096; steps++) {
    if (k == top) {
      below = true;
      break;
    }
    auto m = memo->find(k);
    if (m != memo->end()) {
      below = m->second;
      break;
    }
    chain.push_back(k);
    Key parent = kNoKey;
    LocalNames::Entry e;
    HandleRecord r;
    if (LocalNamespace() && namespace_->names().Get(k, &e))
      parent = e.dir;  // where it is here, not (yet) at the remote
    else if (handles_->Get(k, &r))
      parent = r.parent;
    if (parent == kNoKey || k == root_key_) break;
    k = parent;
  }
  for (Key c : chain) (*memo)[c] = below;
  return below;
}

bool Core::AdminPin(const std::string &path_in,
                    const std::function<void(const std::string &)> &progress,
                    std::string *summary, std::string *error) {
  std::string path = path_in;
  Key key;
  Attrs attrs;
  if (!AdminResolve(&path, &key, &attrs, error)) return false;
  Cache::Pin pin;
  pin.root = key;
  pin.path = path;
  TreeWalk walk(
      this, TreeWalk::Options(), [this] { return AdminStopping(); },
      [&progress](const TreeWalk::Counts &c) {
        if (progress)
          progress(
              "listing: " + Plural(c.dirs, "directory", "directories") + ", " +
              Plural(c.files, "file", "files") +
              (c.skipped ? ", " + std::to_string(c.skipped) + " skipped" : ""));
      });
  std::string why = walk.Run(path, key, attrs, [&pin](Key k, const Attrs &a) {
    pin.objects.push_back(Cache::PinnedObject{
        k, a.type == upstream::FileType::kReg ? a.size : 0});
  });
  if (!why.empty()) {
    *error = "pin of " + path + " not made: " + why;
    return false;
  }
  const uint64_t limit = uint64_t(double(cfg_.cache.size_bytes) * kPinShare);
  // A pin of the same root made again replaces the old one.
  Cache::Pin old;
  const bool again = cache_->GetPin(key, &old);
  uint64_t held = cache_->pin_totals().size;
  uint64_t adds = cache_->UnpinnedSize(pin.objects);
  uint64_t total = 0;
  for (const Cache::PinnedObject &o : pin.objects) total += o.size;
  if (held + adds > limit) {
    *error = "pin of " + path + " refused: its files take " + Human(total) +
             " (" + Human(adds) + " not pinned yet) and pins hold " +
             Human(held) + " already; pins may take at most " + Human(limit) +
             " (90% of Cache_Size " + Human(cfg_.cache.size_bytes) + ")";
    return false;
  }
  if (!cache_->AddPin(pin)) {
    *error = "pin of " + path +
             " not made: the cache store refused it "
             "(see the log)";
    return false;
  }
  TreeWalk::Counts c = walk.counts();
  Cache::PinTotals t = cache_->pin_totals();
  *summary = std::string(again ? "pinned again " : "pinned ") + path + ": " +
             Plural(pin.objects.size(), "object", "objects") + ", " +
             Human(total) + " of files" +
             (c.skipped ? "; " + std::to_string(c.skipped) +
                              " skipped (the remote refused them: not "
                              "pinned; last: " +
                              c.last_skip + ")"
                        : "") +
             "; pins hold " + Human(t.size) + " of at most " + Human(limit) +
             ", " + Human(t.cached) + " of it cached (nachectl warm --data " +
             "fetches the rest)";
  NACHE_LOG(kLogEvent, "NACHE_ADMIN", "%s", summary->c_str());
  return true;
}

bool Core::AdminUnpin(const std::string &path_in, std::string *summary,
                      std::string *error) {
  std::string path = path_in;
  // By the path it was pinned as first: a pinned tree removed at the
  // remote since no longer resolves.
  std::string norm = path;
  Key key = kNoKey;
  Attrs attrs;
  std::string resolve_error;
  {
    std::vector<Cache::PinSummary> pins = cache_->PinList();
    std::string probe = path;
    // (Normalised like AdminResolve does, without the lookups.)
    std::string n;
    std::stringstream in(probe);
    for (std::string part; std::getline(in, part, '/');)
      if (!part.empty() && part != ".") n += "/" + part;
    norm = n.empty() ? "/" : n;
    for (const Cache::PinSummary &p : pins)
      if (p.path == norm) key = p.root;
  }
  if (key == kNoKey && !AdminResolve(&path, &key, &attrs, &resolve_error)) {
    *error = norm + " is not pinned (" + resolve_error + ")";
    return false;
  }
  Cache::Pin pin;
  if (!cache_->GetPin(key, &pin)) {
    Key holder = kNoKey;
    Cache::Pin outer;
    if (cache_->Pinned(key, &holder) && cache_->GetPin(holder, &outer)) {
      *error = norm + " is not pinned by itself: it is part of the pin of " +
               outer.path + " (nachectl unpin " + outer.path + ")";
    } else {
      *error = norm + " is not pinned";
    }
    return false;
  }
  if (!cache_->RemovePin(key)) {
    *error = "unpin of " + norm +
             " failed: the cache store refused it "
             "(see the log)";
    return false;
  }
  *summary = "unpinned " + pin.path + " (" +
             Plural(pin.objects.size(), "object", "objects") +
             "): its data may be evicted again";
  NACHE_LOG(kLogEvent, "NACHE_ADMIN", "%s", summary->c_str());
  return true;
}

bool Core::AdminEvict(const std::string &path_in, bool unpin,
                      std::string *summary, std::string *error) {
  std::string path = path_in;
  Key top;
  Attrs attrs;
  if (!AdminResolve(&path, &top, &attrs, error)) return false;
  std::unordered_map<Key, bool> memo;
  std::string unpinned;
  if (unpin) {
    for (const Cache::PinSummary &p : cache_->PinList()) {
      if (!Below(p.root, top, &memo)) continue;
      if (!cache_->RemovePin(p.root)) {
        *error = "evict of " + path + ": the unpin of " + p.path +
                 " failed (the cache store refused it; see the log)";
        return false;
      }
      unpinned += (unpinned.empty() ? "" : ", ") + p.path;
    }
  }
  uint64_t evicted = 0, freed = 0, dirty = 0, pinned = 0, busy = 0;
  for (Key k : cache_->CachedKeys()) {
    if (AdminStopping()) break;
    if (!Below(k, top, &memo)) continue;
    // What the write-back log names stays as it is: not at the remote
    // yet, or removed or moved here and not there yet.
    LocalNames::Entry e;
    if (LocalNamespace() && (namespace_->names().IsRemovedKey(k) ||
                             namespace_->names().Get(k, &e))) {
      dirty++;
      continue;
    }
    uint64_t bytes = 0;
    switch (cache_->Evict(k, &bytes)) {
      case Cache::EvictOutcome::kEvicted:
        evicted++;
        freed += bytes;
        break;
      case Cache::EvictOutcome::kDirty: dirty++; break;
      case Cache::EvictOutcome::kPinned: pinned++; break;
      case Cache::EvictOutcome::kInUse: busy++; break;
    }
  }
  std::string kept;
  if (dirty)
    kept += "; " + Plural(dirty, "object", "objects") +
            " kept: not yet at the remote (nachectl flush " + path + " first)";
  if (pinned)
    kept += "; " + Plural(pinned, "object", "objects") +
            " kept: pinned (nachectl unpin, or evict --unpin)";
  if (busy)
    kept += "; " + Plural(busy, "object", "objects") +
            " kept: in use (delegated, or an operation under way)";
  *summary = "evicted " + path + ": " + Plural(evicted, "object", "objects") +
             ", " + Human(freed) + " of data" +
             (unpinned.empty() ? "" : " (unpinned first: " + unpinned + ")") +
             kept;
  NACHE_LOG(kLogEvent, "NACHE_ADMIN", "%s", summary->c_str());
  return true;
}

bool Core::AdminFlushPath(const std::string &path_in, std::vector<Key> *objects,
                          std::string *summary, std::string *error) {
  std::string path = path_in;
  if (!flusher_) {
    *error = "export " + std::to_string(cfg_.export_id) +
             " is not write-back (Write_Policy): nothing to flush";
    return false;
  }
  Key top;
  Attrs attrs;
  if (!AdminResolve(&path, &top, &attrs, error)) return false;
  std::unordered_map<Key, bool> memo;
  objects->clear();
  uint64_t bytes = 0;
  for (Key k : cache_->DirtyFiles(std::chrono::milliseconds(0), SIZE_MAX)) {
    if (!Below(k, top, &memo)) continue;
    objects->push_back(k);
    uint64_t b = 0;
    cache_->DirtyOf(k, &b);
    bytes += b;
  }
  if (!objects->empty()) flusher_->Request(*objects);
  *summary = objects->empty()
                 ? "nothing dirty at or below " + path
                 : "flushing " + path + ": " + Human(bytes) + " in " +
                       Plural(objects->size(), "object", "objects");
  return true;
}

void Core::AdminDirtyAmong(const std::vector<Key> &objects, uint64_t *bytes,
                           uint64_t *count) {
  *bytes = *count = 0;
  for (Key k : objects) {
    uint64_t b = 0;
    if (!cache_->DirtyOf(k, &b)) continue;
    *bytes += b;
    (*count)++;
  }
}

}  // namespace nache
