// Upstream delegations and the local ones under them (see delegations.h).
#include "delegations/delegations.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "nache/nache.h"
#include "util/log.h"

namespace nache {

using upstream::DelegationType;
using upstream::Fh;
using upstream::StateId;

namespace {

const char *const kComponent = "NACHE_DELEG";

// The IPv4 addresses of host (the upstream server's name or address): the
// only peers the callback service accepts.
std::vector<std::string> AddressesOf(const std::string &host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo *a = res; a != nullptr; a = a->ai_next) {
    char buf[INET_ADDRSTRLEN];
    auto *sin = reinterpret_cast<sockaddr_in *>(a->ai_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)))
      out.push_back(buf);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

// Answers the server's callbacks. Runs on the callback service's thread
// (or an upstream connection's, NFSv4.1): nothing here may block on the
// upstream.
class Delegations::Glue : public callback::CallbackHandler {
 public:
  explicit Glue(Delegations *d) : d_(d) {}

  void OnContact() override {
    if (!d_->cb_contact_.exchange(true))
      NACHE_LOG(kLogEvent, kComponent,
                "the upstream server reached our callback service: "
                "delegations are possible");
  }

  uint32_t OnRecall(const StateId &sid, bool truncate, const Fh &fh) override {
    (void)truncate;  // a hint only: the data is revalidated after the return
    d_->metrics_->CountRecall();
    Key key = d_->host_->KeyOf(fh);
    if (key == kNoKey) return upstream::kNfs4ErrBadhandle;
    if (d_->table_.BeginReturn(key, &sid)) {
      d_->QueueRecall(key);
      return upstream::kNfs4Ok;
    }
    HeldDelegation d;
    if (d_->table_.Find(key, &d) &&
        memcmp(d.stateid.other, sid.other, sizeof(sid.other)) == 0)
      return upstream::kNfs4Ok;  // already being returned
    // Not (yet) ours: the recall may have overtaken the OPEN reply that
    // grants it; the server retries (RFC 7530 10.2.1).
    return upstream::kNfs4ErrBadStateid;
  }

  uint32_t OnGetattr(const Fh &fh, uint64_t *change, uint64_t *size) override {
    Key key = d_->host_->KeyOf(fh);
    upstream::Attrs a;
    if (key == kNoKey || !d_->host_->KnownAttrs(key, &a))
      return upstream::kNfs4ErrBadhandle;
    // Write-through: every acknowledged write is already upstream, so our
    // view is the last attributes the server gave us.
    *change = a.change;
    *size = a.size;
    return upstream::kNfs4Ok;
  }

 private:
  Delegations *d_;  // owns us
};

Delegations::Delegations(Host *host, metrics::ExportMetrics *metrics)
    : host_(host), metrics_(metrics), glue_(new Glue(this)) {}

Delegations::~Delegations() { StopCallbacks(); }

bool Delegations::StartCallbacks(const CallbackConfig &cfg, std::string *uaddr,
                                 std::string *err) {
  if (cfg.minor_version >= 1) {
    // NFSv4.1: the server calls us on the connections we open; no port of
    // ours to reach (Callback_Address and Callback_Port are not used).
    back_channel_.reset(new callback::BackChannel(glue_.get(), 0x40000000));
    NACHE_LOG(kLogEvent, kComponent,
              "NFSv4.1 upstream: callbacks come on our own connections (the "
              "session's back channel)");
    return true;
  }
  if (cfg.address.empty() || cfg.port == 0) {
    NACHE_LOG(kLogEvent, kComponent,
              "no Callback_Address: running without delegations");
    return true;
  }
  callback::CallbackOptions o;
  o.address = cfg.address;
  o.port = uint16_t(cfg.port);
  o.allowed_peers = AddressesOf(cfg.upstream_server);
  if (o.allowed_peers.empty()) {
    // A name that does not resolve now (DNS down at boot): accept nobody
    // rather than everybody; the server's opens just carry no delegation.
    NACHE_LOG(kLogWarn, kComponent,
              "cannot resolve %s: the callback service accepts no one, so "
              "no delegations",
              cfg.upstream_server.c_str());
    o.allowed_peers.push_back("0.0.0.0");
  }
  o.gss = cfg.gss;
  cb_server_ = callback::CallbackServer::Start(o, glue_.get(), err);
  if (!cb_server_) return false;
  *uaddr = cb_server_->uaddr();
  NACHE_LOG(kLogEvent, kComponent,
            "callback service on %s:%u (universal address %s)",
            cfg.address.c_str(), unsigned(cb_server_->port()), uaddr->c_str());
  return true;
}

void Delegations::StartRecalls() {
  recall_thread_ = std::thread([this] { RecallLoop(); });
}

void Delegations::StopCallbacks() {
  // No more recalls; those queued are still answered with a DELEGRETURN.
  if (cb_server_) cb_server_->Stop();
  if (recall_thread_.joinable()) {
    {
      MutexLock g(&recall_mu_);
      recall_stop_ = true;
    }
    recall_cv_.SignalAll();
    recall_thread_.join();
  }
}

void Delegations::NoteGrant(Key key, const upstream::Delegation &d) {
  if (d.type == DelegationType::kNone) return;
  table_.Grant(key, d.type, d.stateid, host_->Epoch());
  host_->SetDelegated(key, true);
  metrics_->CountDelegationGranted(d.type == DelegationType::kWrite);
  NACHE_LOG(kLogDebug, kComponent, "%s delegation on %llu",
            d.type == DelegationType::kWrite ? "write" : "read",
            (unsigned long long)key);
  // Granted, but wanted back already (RFC 7530 16.16.5, "recall").
  if (d.recall && table_.BeginReturn(key, &d.stateid)) QueueRecall(key);
}

bool Delegations::Delegated(Key key) const {
  return table_.Usable(key, host_->Epoch()) &&
         std::chrono::steady_clock::now() < host_->LeaseValidUntil();
}

bool Delegations::Covers(Key key, uint32_t access, uint32_t deny,
                         StateId *sid) const {
  return std::chrono::steady_clock::now() < host_->LeaseValidUntil() &&
         table_.Covers(key, host_->Epoch(), access, deny, sid);
}

bool Delegations::CoversFlush(Key key, StateId *sid) const {
  return Covers(key, upstream::kShareAccessWrite, 0, sid) ||
         (std::chrono::steady_clock::now() < host_->LeaseValidUntil() &&
          table_.ReturnFlushCovers(key, host_->Epoch(), sid));
}

uint32_t Delegations::ReturnFlush(Key key,
                                  const std::function<uint32_t()> &flush) {
  table_.SetReturnFlush(key, true);
  const uint32_t st = flush();
  table_.SetReturnFlush(key, false);
  return st;
}

size_t Delegations::Count(DelegationType type) const {
  return table_.Count(type);
}

void Delegations::ReturnIfReadDelegated(Key key) {
  HeldDelegation d;
  if (BeginOwnReturn(key, &d)) EndOwnReturn(key, d, false, 0);
}

uint32_t Delegations::AcquireLocal(Key key, bool write) {
  // Under local_mu_, so that a return that starts after this check sees
  // the count (Return reads it after BeginReturn).
  MutexLock g(&local_mu_);
  uint32_t access = upstream::kShareAccessRead |
                    (write ? uint32_t(upstream::kShareAccessWrite) : 0u);
  if (!Covers(key, access, 0, nullptr)) return upstream::kNfs4ErrDelay;
  local_delegs_[key]++;
  return upstream::kNfs4Ok;
}

void Delegations::ReleaseLocal(Key key) {
  {
    MutexLock g(&local_mu_);
    auto it = local_delegs_.find(key);
    if (it == local_delegs_.end()) return;
    if (--it->second <= 0) local_delegs_.erase(it);
  }
  local_cv_.SignalAll();
}

int Delegations::LocalOnLocked(Key key) const {
  auto it = local_delegs_.find(key);
  return it == local_delegs_.end() ? 0 : it->second;
}

uint64_t Delegations::LocalCount() {
  MutexLock g(&local_mu_);
  uint64_t n = 0;
  for (auto &kv : local_delegs_) n += uint64_t(kv.second);
  return n;
}

bool Delegations::HasLocal(Key key) {
  MutexLock g(&local_mu_);
  return local_delegs_.count(key) != 0;
}

void Delegations::SetLocalRecall(std::function<void(Key)> recall) {
  MutexLock g(&local_mu_);
  local_recall_ = std::move(recall);
}

void Delegations::SetAttrsStale(std::function<void(Key)> stale) {
  MutexLock g(&local_mu_);
  attrs_stale_ = std::move(stale);
}

void Delegations::RecallLocal(Key key) {
  MutexLock g(&local_mu_);
  const int n = LocalOnLocked(key);
  if (n == 0) return;
  if (local_recall_) local_recall_(key);
  // The remote revokes our delegation if we take longer than its lease;
  // a local client that does not answer is left to Ganesha, which revokes
  // its delegation after its own lease.
  auto limit =
      std::chrono::seconds(std::max<uint32_t>(host_->LeaseTime(), 2) / 2);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool all = true;
  while (all && LocalOnLocked(key) > 0)
    all = local_cv_.WaitUntil(deadline) || LocalOnLocked(key) == 0;
  NACHE_LOG(all ? kLogDebug : kLogWarn, kComponent,
            "%d local delegation(s) on %llu %s", n, (unsigned long long)key,
            all ? "returned" : "not returned in time; returning ours anyway");
}

void Delegations::Return(Key key, bool recalled) {
  HeldDelegation d;
  if (!table_.Find(key, &d)) return;
  BeforeDelegReturn(key, d);
  AfterDelegReturn(key, d, recalled, host_->SendReturn(key, d));
}

bool Delegations::BeginOwnReturn(Key key, HeldDelegation *d) {
  if (key == kNoKey || !table_.Find(key, d)) return false;
  if (d->type != DelegationType::kRead || d->returning) return false;
  if (!table_.BeginReturn(key, nullptr) || !table_.Find(key, d)) return false;
  BeforeDelegReturn(key, *d);
  return true;
}

void Delegations::EndOwnReturn(Key key, const HeldDelegation &d, bool reached,
                               uint32_t status) {
  AfterDelegReturn(key, d, false, reached ? status : host_->SendReturn(key, d));
}

void Delegations::BeforeDelegReturn(Key key, const HeldDelegation &d) {
  // First the delegations Ganesha granted our clients on the file: they
  // may hold cached data or opens only our delegation vouches for.
  RecallLocal(key);
  host_->SetDelegated(key, false);
  // Queued writes, unflushed data, and the opens and locks granted here
  // under the delegation reach the server before it goes.
  host_->BeforeReturn(key, d);
}

void Delegations::AfterDelegReturn(Key key, const HeldDelegation &d,
                                   bool recalled, uint32_t st) {
  // What the delegation vouched for (attributes, the ACCESS answers kept
  // with them, data) is checked again at its next use, however recently
  // it was validated, here and in Ganesha's attribute cache above us: a
  // server recalls before a change (Linux breaks the delegation in
  // notify_change, so a chmod or an ACL set there waits for our
  // DELEGRETURN), and a reader that change revokes must be denied at once
  // rather than at the end of an attribute window. Only after the
  // DELEGRETURN: a revalidation before it would see the old file.
  host_->ExpireAttrs(key);
  std::function<void(Key)> stale;
  {
    MutexLock g(&local_mu_);
    stale = attrs_stale_;
  }
  if (stale) stale(key);
  table_.Forget(key, d.stateid);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - d.since)
          .count();
  metrics_->ObserveDelegationReturn(recalled, secs);
  NACHE_LOG(st ? kLogInfo : kLogDebug, kComponent,
            "delegation on %llu returned (%s) in %.3f s: %s",
            (unsigned long long)key, recalled ? "recall" : "own conflict", secs,
            nache_status_name(st));
}

void Delegations::QueueRecall(Key key) {
  {
    MutexLock g(&recall_mu_);
    recalls_.push_back(key);
  }
  recall_cv_.Signal();
}

void Delegations::RecallLoop() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point lapse_handled{};  // the lease end we reacted to
  MutexLock g(&recall_mu_);
  for (;;) {
    if (recalls_.empty() && !recall_stop_) {
      // Between recalls, watch the lease: once it is no longer known to
      // hold, the server may have revoked our delegations without a recall
      // reaching us (knfsd does so and keeps the client id), so they are
      // forgotten and nothing stays cached under them. One the server
      // still has is recalled like any other: we answer BAD_STATEID, and
      // it revokes it.
      Clock::time_point lease_end = host_->LeaseValidUntil();
      Clock::time_point now = Clock::now();
      if (lease_end != Clock::time_point() && now >= lease_end &&
          lease_end != lapse_handled) {
        lapse_handled = lease_end;
        g.Unlock();
        NACHE_LOG(kLogWarn, kComponent,
                  "lease not renewed in time: %zu delegation(s) dropped, "
                  "local ones recalled",
                  table_.Count(DelegationType::kRead) +
                      table_.Count(DelegationType::kWrite));
        DropAll();
        g.Lock();
        continue;
      }
      Clock::time_point wake = now + std::chrono::seconds(1);
      if (lease_end > now) wake = std::min(wake, lease_end);
      recall_cv_.WaitUntil(wake);
      continue;
    }
    if (recalls_.empty()) return;  // stopping, and nothing left to return
    Key key = recalls_.front();
    recalls_.pop_front();
    g.Unlock();
    Return(key, true);
    g.Lock();
  }
}

void Delegations::RecallAllLocal() {
  MutexLock g(&local_mu_);
  if (!local_recall_) return;
  for (auto &kv : local_delegs_) local_recall_(kv.first);
}

std::vector<std::pair<Key, HeldDelegation>> Delegations::DropAll() {
  auto gone = table_.Clear();
  for (const auto &kv : gone) host_->SetDelegated(kv.first, false);
  // What Ganesha delegated to our clients under them goes too.
  RecallAllLocal();
  return gone;
}

}  // namespace nache
