// The core's side of delegations and reclaims: Delegations
// (delegations/delegations.h) and Reclaim (delegations/reclaim.h) made with
// their hosts (core_hosts.h), and the C API's local delegation calls,
// forwarded.
#include <chrono>

#include "core/core.h"
#include "core/core_hosts.h"
#include "rpc/gss_krb5.h"
#include "util/log.h"

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
  if (cfg_.gss && cfg_.minor_version == 0 && !cfg_.callback_address.empty() &&
      !CallbackGss(&cc.gss, err))
    return false;
  return delegations_->StartCallbacks(cc, uaddr, err);
}

bool Core::CallbackGss(rpc::GssServerOptions *o, std::string *err) {
  // nache's own keys (the principal of our SETCLIENTID, which the remote
  // calls back as its target), and only the remote's principal may call.
  std::shared_ptr<rpc::KrbAcceptorCredentials> keys =
      rpc::KrbAcceptorCredentials::Acquire(cfg_.gss_keytab,
                                           cfg_.gss_client_principal, err);
  if (!keys) {
    *err = "Upstream_Keytab: " + *err;
    return false;
  }
  o->new_acceptor = [keys] { return keys->NewAcceptor(); };
  o->allowed_principal = cfg_.gss_principal.empty()
                             ? "nfs@" + cfg_.upstream_server
                             : cfg_.gss_principal;
  o->min_service = cfg_.gss_service;
  metrics::ExportMetrics *m = metrics_;
  o->on_refused_principal = [m](const std::string &) {
    m->CountCallbackGssContext(true);
  };
  o->on_established = [m] { m->CountCallbackGssContext(false); };
  o->log = [](const std::string &line) {
    NACHE_LOG(kLogWarn, "NACHE_CALLBACK", "%s", line.c_str());
  };
  return true;
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
