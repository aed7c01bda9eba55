// The core's side of the admin socket (proxy/admin/): what nachectl status
// shows of this export, its flush on demand, and the drain switch. Reads
// what the core keeps anyway (the same sources as the Prometheus gauges and
// counters); adds no state but the drain flag and the last upstream error.
#include <ctime>

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
  if (until == std::chrono::steady_clock::time_point() || lease == 0)
    return -1;
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
  return CallbacksPossible() &&
         (back_channel_ ? !Disconnected() : cb_contact_.load()) &&
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
  s.minor_version = cfg_.minor_version;
  s.state = StateName(up_->state());
  s.connected = !Disconnected();
  s.client_id = up_->clientid();
  s.clientid_epoch = up_->epoch();
  s.lease_age_s = LeaseAge();
  s.lease_time_s = up_->lease_time();
  s.callbacks_configured = CallbacksPossible();
  s.callback_path_up = CallbackPathUp();
  s.cache_bytes = cache_->bytes();
  s.cache_limit = cfg_.cache.size_bytes;
  s.cache_blocks = cache_->blocks();
  s.objects = cache_->objects();
  s.max_objects = cache_->max_objects();
  s.open_files = opens_->size();
  s.delegations_read = delegs_->Count(DelegationType::kRead);
  s.delegations_write = delegs_->Count(DelegationType::kWrite);
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

}  // namespace nache
