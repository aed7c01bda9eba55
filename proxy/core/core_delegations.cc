// The core's side of delegations and reclaims: Delegations
// (delegations/delegations.h) and Reclaim (delegations/reclaim.h) made with
// their hosts (core_hosts.h), and the C API's local delegation calls,
// forwarded.
#include <chrono>

#include "core/core.h"
#include "core/core_hosts.h"

namespace nache {

bool Core::StartCallbackService(std::string *uaddr, std::string *err) {
  delegations_host_.reset(new DelegationsHost(this));
  reclaim_host_.reset(new ReclaimHost(this));
  delegations_.reset(new Delegations(delegations_host_.get(), metrics_));
  reclaim_.reset(new Reclaim(reclaim_host_.get(), metrics_));
  cache_->SetLeaseClock([this] {
    return up_ ? up_->lease_valid_until() : std::chrono::steady_clock::now();
  });
  if (cfg_.serve_stale) cache_->SetStaleOk([this] { return ServingStale(); });
  Delegations::CallbackConfig cc;
  cc.minor_version = cfg_.minor_version;
  cc.address = cfg_.callback_address;
  cc.port = cfg_.callback_port;
  cc.upstream_server = cfg_.upstream_server;
  return delegations_->StartCallbacks(cc, uaddr, err);
}

uint32_t Core::AcquireLocalDelegation(Key key, bool write) {
  return delegations_->AcquireLocal(key, write);
}

void Core::ReleaseLocalDelegation(Key key) { delegations_->ReleaseLocal(key); }

uint64_t Core::LocalDelegations() { return delegations_->LocalCount(); }

void Core::SetLocalRecall(std::function<void(Key)> recall) {
  delegations_->SetLocalRecall(std::move(recall));
}

void Core::SetAttrsStale(std::function<void(Key)> stale) {
  delegations_->SetAttrsStale(std::move(stale));
}

}  // namespace nache
