// The core's side of upstream delegations (see core.h): the callback
// service's handler, grants recorded from OPEN replies, and returns (after a
// CB_RECALL, or before an operation of ours the server would otherwise
// answer with a recall of our own delegation and NFS4ERR_DELAY).
//
// Recalls are served on the recall thread: the callback thread only queues
// them (it must answer CB_RECALL at once), and Ganesha's worker threads
// never wait for a recall to finish.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include "core/core.h"
#include "util/log.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
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

// Answers the server's callbacks from the core's state. Runs on the
// callback service's thread: nothing here may block on the upstream.
class Core::CallbackGlue : public callback::CallbackHandler {
 public:
  explicit CallbackGlue(Core *core) : core_(core) {}

  void OnContact() override {
    if (!core_->cb_contact_.exchange(true))
      NACHE_LOG(kLogEvent, kComponent,
                "the upstream server reached our callback service: "
                "delegations are possible");
  }

  uint32_t OnRecall(const StateId &sid, bool truncate, const Fh &fh) override {
    (void)truncate;  // a hint only: the data is revalidated after the return
    core_->metrics_->CountRecall();
    Key key = core_->handles_->Find(fh);
    if (key == kNoKey) return upstream::kNfs4ErrBadhandle;
    if (core_->delegs_->BeginReturn(key, &sid)) {
      core_->QueueRecall(key);
      return upstream::kNfs4Ok;
    }
    HeldDelegation d;
    if (core_->delegs_->Find(key, &d) &&
        memcmp(d.stateid.other, sid.other, sizeof(sid.other)) == 0)
      return upstream::kNfs4Ok;  // already being returned
    // Not (yet) ours: the recall may have overtaken the OPEN reply that
    // grants it; the server retries (RFC 7530 10.2.1).
    return upstream::kNfs4ErrBadStateid;
  }

  uint32_t OnGetattr(const Fh &fh, uint64_t *change, uint64_t *size) override {
    Key key = core_->handles_->Find(fh);
    upstream::Attrs a;
    if (key == kNoKey || !core_->cache_->KnownAttrs(key, &a))
      return upstream::kNfs4ErrBadhandle;
    // Write-through: every acknowledged write is already upstream, so our
    // view is the last attributes the server gave us.
    *change = a.change;
    *size = a.size;
    return upstream::kNfs4Ok;
  }

 private:
  Core *core_;  // owns us
};

bool Core::StartCallbackService(std::string *uaddr, std::string *err) {
  delegs_.reset(new DelegationTable());
  cache_->SetLeaseClock([this] {
    return up_ ? up_->lease_valid_until() : std::chrono::steady_clock::now();
  });
  if (cfg_.serve_stale) cache_->SetStaleOk([this] { return ServingStale(); });
  if (cfg_.minor_version >= 1) {
    // NFSv4.1: the server calls us on the connections we open; no port of
    // ours to reach (Callback_Address and Callback_Port are not used).
    cb_glue_.reset(new CallbackGlue(this));
    back_channel_.reset(new callback::BackChannel(cb_glue_.get(), 0x40000000));
    NACHE_LOG(kLogEvent, kComponent,
              "NFSv4.1 upstream: callbacks come on our own connections (the "
              "session's back channel)");
    return true;
  }
  if (cfg_.callback_address.empty() || cfg_.callback_port == 0) {
    NACHE_LOG(kLogEvent, kComponent,
              "no Callback_Address: running without delegations");
    return true;
  }
  callback::CallbackOptions o;
  o.address = cfg_.callback_address;
  o.port = uint16_t(cfg_.callback_port);
  o.allowed_peers = AddressesOf(cfg_.upstream_server);
  if (o.allowed_peers.empty()) {
    // A name that does not resolve now (DNS down at boot): accept nobody
    // rather than everybody; the server's opens just carry no delegation.
    NACHE_LOG(kLogWarn, kComponent,
              "cannot resolve %s: the callback service accepts no one, so "
              "no delegations",
              cfg_.upstream_server.c_str());
    o.allowed_peers.push_back("0.0.0.0");
  }
  cb_glue_.reset(new CallbackGlue(this));
  cb_server_ = callback::CallbackServer::Start(o, cb_glue_.get(), err);
  if (!cb_server_) return false;
  *uaddr = cb_server_->uaddr();
  NACHE_LOG(kLogEvent, kComponent,
            "callback service on %s:%u (universal address %s)",
            cfg_.callback_address.c_str(), unsigned(cb_server_->port()),
            uaddr->c_str());
  return true;
}

void Core::NoteGrant(Key key, const upstream::Delegation &d) {
  if (d.type == DelegationType::kNone) return;
  delegs_->Grant(key, d.type, d.stateid, up_->epoch());
  cache_->SetDelegated(key, true);
  metrics_->CountDelegationGranted(d.type == DelegationType::kWrite);
  NACHE_LOG(kLogDebug, kComponent, "%s delegation on %llu",
            d.type == DelegationType::kWrite ? "write" : "read",
            (unsigned long long)key);
  // Granted, but wanted back already (RFC 7530 16.16.5, "recall").
  if (d.recall && delegs_->BeginReturn(key, &d.stateid)) QueueRecall(key);
}

bool Core::Delegated(Key key) {
  return delegs_->Usable(key, up_->epoch()) &&
         std::chrono::steady_clock::now() < up_->lease_valid_until();
}

bool Core::DelegationCovers(Key key, uint32_t access, uint32_t deny,
                            StateId *sid) {
  return std::chrono::steady_clock::now() < up_->lease_valid_until() &&
         delegs_->Covers(key, up_->epoch(), access, deny, sid);
}

void Core::ReturnIfReadDelegated(Key key) {
  HeldDelegation d;
  if (key == kNoKey || !delegs_->Find(key, &d)) return;
  if (d.type != DelegationType::kRead || d.returning) return;
  if (delegs_->BeginReturn(key, nullptr)) ReturnDelegation(key, false);
}

uint32_t Core::AcquireLocalDelegation(Key key, bool write) {
  // Under local_mu_, so that a return that starts after this check sees
  // the count (ReturnDelegation reads it after BeginReturn).
  MutexLock g(&local_mu_);
  uint32_t access = upstream::kShareAccessRead |
                    (write ? uint32_t(upstream::kShareAccessWrite) : 0u);
  if (!DelegationCovers(key, access, 0, nullptr))
    return upstream::kNfs4ErrDelay;
  local_delegs_[key]++;
  return upstream::kNfs4Ok;
}

void Core::ReleaseLocalDelegation(Key key) {
  {
    MutexLock g(&local_mu_);
    auto it = local_delegs_.find(key);
    if (it == local_delegs_.end()) return;
    if (--it->second <= 0) local_delegs_.erase(it);
  }
  local_cv_.SignalAll();
}

int Core::LocalDelegsLocked(Key key) const {
  auto it = local_delegs_.find(key);
  return it == local_delegs_.end() ? 0 : it->second;
}

uint64_t Core::LocalDelegations() {
  MutexLock g(&local_mu_);
  uint64_t n = 0;
  for (auto &kv : local_delegs_) n += uint64_t(kv.second);
  return n;
}

void Core::SetLocalRecall(std::function<void(Key)> recall) {
  MutexLock g(&local_mu_);
  local_recall_ = std::move(recall);
}

void Core::SetAttrsStale(std::function<void(Key)> stale) {
  MutexLock g(&local_mu_);
  attrs_stale_ = std::move(stale);
}

void Core::RecallLocalDelegations(Key key) {
  MutexLock g(&local_mu_);
  const int n = LocalDelegsLocked(key);
  if (n == 0) return;
  if (local_recall_) local_recall_(key);
  // The remote revokes our delegation if we take longer than its lease;
  // a local client that does not answer is left to Ganesha, which revokes
  // its delegation after its own lease.
  auto limit =
      std::chrono::seconds(std::max<uint32_t>(up_->lease_time(), 2) / 2);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool all = true;
  while (all && LocalDelegsLocked(key) > 0)
    all = local_cv_.WaitUntil(deadline) || LocalDelegsLocked(key) == 0;
  NACHE_LOG(all ? kLogDebug : kLogWarn, kComponent,
            "%d local delegation(s) on %llu %s", n, (unsigned long long)key,
            all ? "returned" : "not returned in time; returning ours anyway");
}

void Core::ReturnDelegation(Key key, bool recalled) {
  HeldDelegation d;
  if (!delegs_->Find(key, &d)) return;
  // First the delegations Ganesha granted our clients on the file: they
  // may hold cached data or opens only our delegation vouches for.
  RecallLocalDelegations(key);
  cache_->SetDelegated(key, false);
  // Queued writes and unflushed data reach the server under the delegation.
  if (unstable_writes_) unstable_writes_->Drain(key);
  // (Only a write delegation covers unflushed data; a read one is
  // returned by the flusher itself before it writes, so flushing here
  // would wait for that very flush.)
  if (flusher_ && d.type == DelegationType::kWrite && flusher_->FlushFile(key))
    NACHE_LOG(kLogWarn, kComponent,
              "flush of %llu before returning its delegation failed; its "
              "data stays here and is sent later",
              (unsigned long long)key);
  // Opens we granted locally under the delegation become upstream opens
  // before the delegation goes (RFC 7530 10.4.4). A plain OPEN by name:
  // the server does not treat its delegation holder's read open as a
  // conflict.
  if (d.epoch == up_->epoch()) {
    std::shared_ptr<FileOpen> f = opens_->Get(key);
    {
      MutexLock fg(&f->owner->mu);
      ResetIfStale(f.get());
      uint32_t want_access = f->WantAccess(), want_deny = f->WantDeny();
      bool covered = f->open() && (f->up_access & want_access) == want_access &&
                     (f->up_deny & want_deny) == want_deny;
      if (f->n_local > 0 && !covered) {
        uint32_t st = UpstreamOpenByHandle(f->deleg_creds, f.get(), want_access,
                                           want_deny, nullptr);
        if (st && st != upstream::kNfs4ErrNoent)
          NACHE_LOG(kLogWarn, kComponent,
                    "open of %llu before returning its delegation: %s; "
                    "its local opens continue without upstream state",
                    (unsigned long long)key, nache_status_name(st));
      }
      // Then the locks granted here, on that open.
      Fh lfh;
      if (f->open() && FhOfAny(key, &lfh) == upstream::kNfs4Ok)
        SendLocalLocks(f.get(), lfh);
    }
    opens_->Unpin(f);
  }
  Fh fh;
  uint32_t st = FhOfAny(key, &fh);
  if (st == upstream::kNfs4Ok && d.epoch == up_->epoch()) {
    Compound c;
    c.SetTag("delegreturn").Putfh(fh).DelegReturn(d.stateid);
    CompoundReply rep;
    st = Run(c, Creds(), &rep);
  }
  // What the delegation vouched for (attributes, the ACCESS answers kept
  // with them, data) is checked again at its next use, however recently
  // it was validated, here and in Ganesha's attribute cache above us: a
  // server recalls before a change (Linux breaks the delegation in
  // notify_change, so a chmod or an ACL set there waits for our
  // DELEGRETURN), and a reader that change revokes must be denied at once
  // rather than at the end of an attribute window. Only after the
  // DELEGRETURN: a revalidation before it would see the old file.
  cache_->ExpireAttrs(key);
  std::function<void(Key)> stale;
  {
    MutexLock g(&local_mu_);
    stale = attrs_stale_;
  }
  if (stale) stale(key);
  delegs_->Forget(key, d.stateid);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - d.since)
          .count();
  metrics_->ObserveDelegationReturn(recalled, secs);
  NACHE_LOG(st ? kLogInfo : kLogDebug, kComponent,
            "delegation on %llu returned (%s) in %.3f s: %s",
            (unsigned long long)key, recalled ? "recall" : "own conflict", secs,
            nache_status_name(st));
}

void Core::QueueRecall(Key key) {
  {
    MutexLock g(&recall_mu_);
    recalls_.push_back(key);
  }
  recall_cv_.Signal();
}

void Core::RecallLoop() {
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
      Clock::time_point lease_end = up_->lease_valid_until();
      Clock::time_point now = Clock::now();
      if (lease_end != Clock::time_point() && now >= lease_end &&
          lease_end != lapse_handled) {
        lapse_handled = lease_end;
        g.Unlock();
        NACHE_LOG(kLogWarn, kComponent,
                  "lease not renewed in time: %zu delegation(s) dropped, "
                  "local ones recalled",
                  delegs_->Count(DelegationType::kRead) +
                      delegs_->Count(DelegationType::kWrite));
        DropAllDelegations();
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
    ReturnDelegation(key, true);
    g.Lock();
  }
}

void Core::RecallAllLocal() {
  MutexLock g(&local_mu_);
  if (!local_recall_) return;
  for (auto &kv : local_delegs_) local_recall_(kv.first);
}

std::vector<std::pair<Key, HeldDelegation>> Core::DropAllDelegations() {
  auto gone = delegs_->Clear();
  for (const auto &kv : gone) cache_->SetDelegated(kv.first, false);
  // What Ganesha delegated to our clients under them goes too.
  RecallAllLocal();
  return gone;
}

}  // namespace nache
