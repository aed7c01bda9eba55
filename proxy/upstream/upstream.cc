// The Upstream implementation: dispatch over the connection pool, the NFSv4
// client id (NFSv4.0: SETCLIENTID / SETCLIENTID_CONFIRM; NFSv4.1:
// EXCHANGE_ID / CREATE_SESSION, the session's connections bound to its
// back channel), lease renewal and client id recovery. The per-connection
// event loops live in connection.cc.
//
// Threads: each Connection runs its loop thread; one state thread here
// establishes the client id, renews the lease every lease/3 and re-establishes
// the id when a reply says it is stale. Calls made before a client id exists
// (at start-up and during recovery) are held here, not sent, until it does or
// their call timeout passes.
#include "upstream/upstream.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "rpc/xdr.h"
#include "upstream/connection.h"
#include "upstream/nfs41.h"
#include "util/log.h"

namespace nache {
namespace upstream {
namespace {

const char *const kComponent = "NACHE_UPSTREAM";
constexpr uint32_t kDefaultLeaseSeconds = 90;
// DESTROY_SESSION at shutdown waits at most this long for its reply.
constexpr int kDestroySessionTimeoutMs = 2000;

Verifier RandomVerifier() {
  std::random_device rd;
  Verifier v(8, '\0');
  for (char &c : v) c = char(rd() & 0xff);
  return v;
}

std::string Hex(const std::string &bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

bool IsClientidLost(uint32_t status) {
  return status == kNfs4ErrStaleClientid || status == kNfs4ErrExpired;
}

// A blocking call's wait for its completion, which runs on a loop thread
// (and may still be unwinding there after Wait has returned: shared).
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  CallStatus status = CallStatus::kOk;

  // The completion: stores the reply into *reply (unless null).
  static Upstream::Callback Completion(std::shared_ptr<Waiter> w,
                                       CompoundReply *reply) {
    return [w, reply](CallStatus s, CompoundReply &&r) {
      std::lock_guard<std::mutex> lk(w->mu);
      if (reply) *reply = std::move(r);
      w->status = s;
      w->done = true;
      w->cv.notify_all();
    };
  }
  // Unbounded on purpose: the loop always completes a call (reply,
  // timeout, disconnect or shutdown), and returning earlier would leave it
  // writing READ data into a buffer the caller may have freed.
  CallStatus Wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [this] { return done; });
    return status;
  }
};

class UpstreamImpl final : public Upstream, public ConnectionListener {
 public:
  explicit UpstreamImpl(const UpstreamOptions &opts);
  ~UpstreamImpl() override { Shutdown(); }

  void Start();

  bool WaitReady(int timeout_ms) override;
  CallStatus Call(Compound &c, const Creds &creds,
                  CompoundReply *reply) override;
  void CallAsync(Compound c, const Creds &creds, Callback cb) override;
  uint64_t clientid() const override { return clientid_.load(); }
  uint64_t epoch() const override {
    uint64_t g = generation_.load();
    return g > 0 ? g - 1 : 0;
  }
  UpstreamState state() const override;
  uint32_t lease_time() const override { return lease_time_.load(); }
  Clock::time_point lease_valid_until() const override {
    return Clock::time_point(Clock::duration(lease_until_.load()));
  }
  bool callback_path_down() const override { return cb_path_down_.load(); }
  uint32_t minor_version() const override { return minor_.load(); }
  uint32_t max_operations() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return session_ && session_->max_ops > 1 ? session_->max_ops - 1 : 0;
  }
  void RestartClient(const char *why) override;
  void Shutdown() override;

  void OnConnectionUp(int index) override;
  void OnConnectionDown(int index) override;
  std::shared_ptr<Session41> CurrentSession() override {
    std::lock_guard<std::mutex> lk(mu_);
    return session_;
  }
  bool Sessions() const override { return minor_.load() >= 1; }
  void OnSequence(Session41 &s, const nfs41::SequenceRes &r,
                  Clock::time_point sent) override;
  void OnSlotFreed() override {
    // Not on every reply: only a loop with calls waiting needs waking.
    for (auto &c : conns_)
      if (c->waiting_for_slot()) c->Wake();
  }
  void ReclaimDone() override;

 private:
  std::unique_ptr<PendingCall> NewCall(Compound *c,
                                       std::unique_ptr<Compound> owned,
                                       const Creds &creds, Callback cb);
  // Sends a user call now, or holds it while there is no client id.
  void Dispatch(std::unique_ptr<PendingCall> call);
  // Sends with the current client id, bypassing the hold.
  void Send(std::unique_ptr<PendingCall> call, bool watch_clientid);
  Connection *PickConnection();
  // A blocking call with root credentials that bypasses the hold (the state
  // thread's own SETCLIENTID, RENEW, ...).
  CallStatus CallInternal(Compound &c, CompoundReply *reply);
  // The same for a COMPOUND of one NFSv4.1 session operation that takes no
  // SEQUENCE (EXCHANGE_ID, CREATE_SESSION, BIND_CONN_TO_SESSION), on
  // connection index: encode_op appends the operation, decode_op reads its
  // result (kDecodeError when it cannot).
  // minor is the COMPOUND's minor version; *refused (when not null) is set
  // when the server refused the whole COMPOUND with
  // NFS4ERR_MINOR_VERS_MISMATCH (a server without that minor version).
  CallStatus SessionOp(int index, const char *tag, uint32_t minor,
                       const std::function<void(rpc::XdrOut *)> &encode_op,
                       const std::function<bool(rpc::XdrIn *)> &decode_op,
                       bool *refused = nullptr, int timeout_ms = 0);
  // At shutdown, NFSv4.1: DESTROY_SESSION, so that the server frees the
  // session's slots and reply cache now rather than when the lease ends.
  void DestroySession();
  void TriggerRecovery(uint64_t generation);

  void StateLoop();
  // Waits on cv_ until pred() or deadline, expiring held calls meanwhile.
  // Returns pred(). lk holds mu_.
  template <typename Pred>
  bool WaitLocked(std::unique_lock<std::mutex> &lk, Clock::time_point deadline,
                  Pred pred);
  // *new_id: the server gave a new client id (the old one's state is
  // gone), not the same one again (NFSv4.1, a new session only).
  bool EstablishClientId(bool *new_id);
  // *v40: the server refused NFSv4.1 itself (MINOR_VERS_MISMATCH):
  // minor_ is 0 now, and the caller goes on with SETCLIENTID.
  bool EstablishSession(bool *new_id, bool *v40);
  bool BindConnection(int index);
  void FetchLeaseTime();
  // Returns false when the client id is gone and must be re-established.
  bool RenewLease();
  // Records a successful lease-renewing request sent at sent.
  void NoteLeaseRenewed(Clock::time_point sent);

  const UpstreamOptions opts_;  // as given to Create
  Verifier verifier_;           // SETCLIENTID verifier (state thread)
  std::string id_string_;       // the id sent (state thread only)
  std::vector<std::unique_ptr<Connection>> conns_;  // fixed after Start
  std::thread state_thread_;                        // StateLoop

  mutable std::mutex mu_;            // guards the fields below it
  std::condition_variable cv_;       // any change of them
  bool stopping_ = false;            // Shutdown started
  bool client_ready_ = false;        // a confirmed client id is in use
  bool recovery_requested_ = false;  // a reply said the id is stale
  // RestartClient: the next id is established under a new verifier.
  bool new_verifier_ = false;
  // A connection came back while the id was in use: the server may have
  // restarted, so the id is checked now rather than at the next renewal
  // (its grace period for our reclaims is short).
  bool check_now_ = false;
  std::deque<std::unique_ptr<PendingCall>> held_;  // waiting for a client id
  std::shared_ptr<Session41> session_;  // NFSv4.1: the current session
  std::vector<int> bind_pending_;       // NFSv4.1: connections to bind

  std::atomic<uint64_t> clientid_{0};       // current confirmed client id
  std::atomic<uint64_t> generation_{0};     // client ids established so far
  std::atomic<uint32_t> lease_time_{0};     // seconds, from the server
  std::atomic<Clock::rep> lease_until_{0};  // lease_valid_until()
  std::atomic<bool> cb_path_down_{false};   // callback_path_down()
  // minor_version(): as configured until a session says otherwise (an
  // NFSv4.2 configuration on a server without 4.2 falls back to 4.1).
  std::atomic<uint32_t> minor_{0};
  std::atomic<int> connected_count_{0};  // connections up now
  std::atomic<bool> ever_ready_{false};  // a client id was established once
  std::once_flag shutdown_once_;         // Shutdown runs once
};

UpstreamImpl::UpstreamImpl(const UpstreamOptions &opts)
    : opts_(opts), verifier_(RandomVerifier()), id_string_(opts.client_id) {
  minor_.store(opts_.minor_version);
  int n = std::max(1, opts_.connections);
  for (int i = 0; i < n; i++) {
    conns_.push_back(std::make_unique<Connection>(i, opts_, this));
  }
}

void UpstreamImpl::Start() {
  for (auto &c : conns_) c->Start();
  state_thread_ = std::thread([this] { StateLoop(); });
}

bool UpstreamImpl::WaitReady(int timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  // Not while a recovery is asked for: the client id (or session) is known
  // lost until the state thread has a new one, and a caller woken now
  // would only meet the same error again.
  return cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [this] {
    return stopping_ || (client_ready_ && !recovery_requested_ &&
                         connected_count_.load() > 0);
  }) && !stopping_;
}

UpstreamState UpstreamImpl::state() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (connected_count_.load() == 0) {
    return ever_ready_.load() ? UpstreamState::kDown
                              : UpstreamState::kConnecting;
  }
  return client_ready_ ? UpstreamState::kReady : UpstreamState::kConnecting;
}

std::unique_ptr<PendingCall> UpstreamImpl::NewCall(
    Compound *c, std::unique_ptr<Compound> owned, const Creds &creds,
    Callback cb) {
  auto call = std::make_unique<PendingCall>();
  call->compound = c;
  call->owned = std::move(owned);
  call->creds = creds;
  call->done = std::move(cb);
  call->deadline =
      Clock::now() + std::chrono::milliseconds(opts_.call_timeout_ms);
  if (opts_.user_identity && creds.uid != 0 && !creds.as_machine) {
    // Here, on the caller's thread: this may wait for the KDC, at most
    // the call timeout (user_identity.h), then fails retryably.
    UpstreamOptions::UserIdentity id = opts_.user_identity(creds);
    if (id.creds) {
      call->user = std::move(id.principal);
      call->user_creds = std::move(id.creds);
    } else {
      // Not sent: a KDC out of reach is retryable (NFS4ERR_DELAY), a
      // refusal is the user's (NFS4ERR_ACCESS). user_identity logged it.
      call->has_preset = true;
      call->preset = id.transient ? CallStatus::kDisconnected : CallStatus::kOk;
      call->preset_nfs = kNfs4ErrAccess;
    }
  }
  return call;
}

CallStatus UpstreamImpl::Call(Compound &c, const Creds &creds,
                              CompoundReply *reply) {
  auto w = std::make_shared<Waiter>();
  Dispatch(NewCall(&c, nullptr, creds, Waiter::Completion(w, reply)));
  return w->Wait();
}

void UpstreamImpl::CallAsync(Compound c, const Creds &creds, Callback cb) {
  auto owned = std::make_unique<Compound>(std::move(c));
  Compound *raw = owned.get();
  Dispatch(NewCall(raw, std::move(owned), creds, std::move(cb)));
}

void UpstreamImpl::Dispatch(std::unique_ptr<PendingCall> call) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stopping_ && !client_ready_) {
      held_.push_back(std::move(call));
      cv_.notify_all();  // the state thread tracks held deadlines
      return;
    }
  }
  Send(std::move(call), true);
}

void UpstreamImpl::Send(std::unique_ptr<PendingCall> call,
                        bool watch_clientid) {
  call->compound->FillClientid(clientid_.load());
  if (watch_clientid) {
    uint64_t generation = generation_.load();
    Callback inner = std::move(call->done);
    call->done = [this, generation, inner](CallStatus s, CompoundReply &&r) {
      if (s == CallStatus::kOk && IsClientidLost(r.status)) {
        TriggerRecovery(generation);
      }
      inner(s, std::move(r));
    };
  }
  Connection *conn = PickConnection();
  if (conn == nullptr) {
    // Still completed on a loop thread, as CallAsync promises.
    conn = conns_[0].get();
    call->has_preset = true;
    call->preset = CallStatus::kDisconnected;
  }
  conn->Submit(std::move(call));
}

Connection *UpstreamImpl::PickConnection() {
  Connection *best = nullptr;
  for (auto &c : conns_) {
    if (c->connected() && (best == nullptr || c->load() < best->load())) {
      best = c.get();
    }
  }
  return best;
}

CallStatus UpstreamImpl::CallInternal(Compound &c, CompoundReply *reply) {
  auto w = std::make_shared<Waiter>();
  Send(NewCall(&c, nullptr, Creds(), Waiter::Completion(w, reply)), false);
  return w->Wait();
}

void UpstreamImpl::TriggerRecovery(uint64_t generation) {
  std::lock_guard<std::mutex> lk(mu_);
  // Only the first report against the current id counts: replies to calls
  // sent with an older id, or arriving while recovery runs, are the same
  // event.
  if (generation != generation_.load() || !client_ready_ ||
      recovery_requested_) {
    return;
  }
  nache_log(kLogEvent, kComponent,
            "client id %016llx is stale or expired; re-establishing",
            (unsigned long long)clientid_.load());
  recovery_requested_ = true;
  cv_.notify_all();
}

void UpstreamImpl::RestartClient(const char *why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (new_verifier_) return;  // already asked for, not yet done
  nache_log(kLogWarn, kComponent,
            "giving up client id %016llx and its state at the server: %s",
            (unsigned long long)clientid_.load(), why);
  new_verifier_ = true;
  // (While no id is in use, the state thread is establishing one: it
  // reads the flag before its next SETCLIENTID or EXCHANGE_ID.)
  if (client_ready_) recovery_requested_ = true;
  cv_.notify_all();
}

void UpstreamImpl::OnConnectionUp(int index) {
  connected_count_.fetch_add(1);
  std::lock_guard<std::mutex> lk(mu_);
  if (client_ready_) check_now_ = true;
  // NFSv4.1: the session's back channel may have been on the connection
  // that dropped; every new connection offers itself for it.
  if (session_) bind_pending_.push_back(index);
  cv_.notify_all();
}

void UpstreamImpl::OnConnectionDown(int index) {
  connected_count_.fetch_sub(1);
  std::lock_guard<std::mutex> lk(mu_);
  cv_.notify_all();
}

template <typename Pred>
bool UpstreamImpl::WaitLocked(std::unique_lock<std::mutex> &lk,
                              Clock::time_point deadline, Pred pred) {
  for (;;) {
    if (pred()) return true;
    Clock::time_point now = Clock::now();
    // Held calls past their deadline fail kTimeout, completed on a loop
    // thread like every other call (see Send's preset).
    std::vector<std::unique_ptr<PendingCall>> expired;
    Clock::time_point next = deadline;
    for (auto it = held_.begin(); it != held_.end();) {
      if ((*it)->deadline <= now) {
        expired.push_back(std::move(*it));
        it = held_.erase(it);
      } else {
        next = std::min(next, (*it)->deadline);
        ++it;
      }
    }
    if (!expired.empty()) {
      lk.unlock();
      for (auto &call : expired) {
        call->has_preset = true;
        call->preset = CallStatus::kTimeout;
        conns_[0]->Submit(std::move(call));
      }
      lk.lock();
      continue;
    }
    if (now >= deadline) return pred();
    cv_.wait_until(lk, next);
  }
}

void UpstreamImpl::StateLoop() {
  int retry_ms = kMinBackoffMs;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // Wait for a connection to establish the client id over.
    WaitLocked(lk, Clock::now() + std::chrono::hours(1),
               [this] { return stopping_ || connected_count_.load() > 0; });
    if (stopping_) return;
    if (new_verifier_) {
      verifier_ = RandomVerifier();
      new_verifier_ = false;
    }
    lk.unlock();
    Clock::time_point sent = Clock::now();
    bool new_id = true;
    bool ok = EstablishClientId(&new_id);
    if (ok) {
      FetchLeaseTime();
      NoteLeaseRenewed(sent);
      if (new_id && opts_.on_new_clientid) opts_.on_new_clientid(epoch());
      // NFSv4.1: with nothing to reclaim (our first client id), the server
      // is told so at once; otherwise once the owner has reclaimed.
      if (new_id && Sessions() && epoch() == 0) ReclaimDone();
    }
    lk.lock();
    if (stopping_) return;
    if (!ok) {
      WaitLocked(lk, Clock::now() + std::chrono::milliseconds(retry_ms),
                 [this] { return stopping_; });
      retry_ms = std::min(retry_ms * 2, kMaxBackoffMs);
      continue;
    }
    retry_ms = kMinBackoffMs;
    client_ready_ = true;
    ever_ready_ = true;
    recovery_requested_ = false;
    std::deque<std::unique_ptr<PendingCall>> held;
    held.swap(held_);
    cv_.notify_all();
    lk.unlock();
    for (auto &call : held) Send(std::move(call), true);
    lk.lock();

    // Renew every lease/3 until the id is lost or we stop.
    for (;;) {
      uint32_t lease = std::max<uint32_t>(lease_time_.load(), 3);
      Clock::time_point next_renew =
          Clock::now() + std::chrono::milliseconds(lease * 1000 / 3);
      WaitLocked(lk, next_renew, [this] {
        return stopping_ || recovery_requested_ || check_now_;
      });
      if (stopping_) return;
      if (recovery_requested_) break;
      check_now_ = false;
      std::vector<int> bind;
      bind.swap(bind_pending_);
      lk.unlock();
      for (int index : bind) BindConnection(index);
      bool alive = RenewLease();
      lk.lock();
      if (!alive) break;
    }
    client_ready_ = false;
    recovery_requested_ = false;
  }
}

bool UpstreamImpl::EstablishClientId(bool *new_id) {
  *new_id = true;
  if (Sessions()) {
    bool v40 = false;
    if (EstablishSession(new_id, &v40)) return true;
    if (!v40) return false;
    // The server speaks no NFSv4.1: NFSv4.0 from now on (minor_ is 0).
  }
  // Without a callback address we still have to give one: an unroutable
  // one means the server never recalls, i.e. never grants delegations.
  std::string uaddr =
      opts_.callback_uaddr.empty() ? "0.0.0.0.0.0" : opts_.callback_uaddr;
  for (int attempt = 0; attempt < 2; attempt++) {
    Compound sc;
    sc.SetTag("setclientid")
        .Setclientid(verifier_, id_string_, opts_.callback_program,
                     opts_.callback_netid, uaddr, opts_.callback_ident);
    CompoundReply reply;
    CallStatus st = CallInternal(sc, &reply);
    if (st != CallStatus::kOk) {
      nache_log(kLogWarn, kComponent, "SETCLIENTID: %s", CallStatusName(st));
      return false;
    }
    const OpResult *res = reply.Find(Op::kSetclientid);
    if (reply.status == kNfs4ErrClidInuse && attempt == 0) {
      // Another client (a different principal or address) holds our id:
      // most likely a second proxy configured with the same client_id.
      // Carry on under a unique id rather than fail; our previous
      // incarnation's state then just expires on the server.
      std::string fallback = opts_.client_id + "/" + Hex(verifier_);
      nache_log(kLogMajor, kComponent,
                "SETCLIENTID: client id '%s' is in use by %s; using '%s' "
                "(check that each proxy has its own client_id)",
                id_string_.c_str(), res != nullptr ? res->data.c_str() : "?",
                fallback.c_str());
      id_string_ = fallback;
      continue;
    }
    if (reply.status != kNfs4Ok || res == nullptr) {
      nache_log(kLogMajor, kComponent, "SETCLIENTID failed: nfs status %u",
                reply.status);
      return false;
    }
    Compound confirm;
    confirm.SetTag("setclientid_confirm")
        .SetclientidConfirm(res->clientid, res->verifier);
    CompoundReply creply;
    st = CallInternal(confirm, &creply);
    if (st != CallStatus::kOk || creply.status != kNfs4Ok) {
      nache_log(kLogMajor, kComponent,
                "SETCLIENTID_CONFIRM failed: %s, nfs status %u",
                CallStatusName(st), creply.status);
      return false;
    }
    clientid_.store(res->clientid);
    uint64_t generation = generation_.fetch_add(1) + 1;
    nache_log(kLogEvent, kComponent,
              "client id %016llx confirmed with %s:%d (epoch %llu)",
              (unsigned long long)res->clientid, opts_.server.c_str(),
              opts_.port, (unsigned long long)(generation - 1));
    return true;
  }
  return false;
}

void UpstreamImpl::FetchLeaseTime() {
  Compound c;
  c.SetTag("lease_time").Putrootfh().Getattr(kAttrLeaseTime);
  CompoundReply reply;
  CallStatus st = CallInternal(c, &reply);
  const OpResult *res = reply.Find(Op::kGetattr);
  if (st == CallStatus::kOk && reply.status == kNfs4Ok && res != nullptr &&
      (res->attrs.mask & kAttrLeaseTime) && res->attrs.lease_time > 0) {
    lease_time_.store(res->attrs.lease_time);
    return;
  }
  if (lease_time_.load() == 0) lease_time_.store(kDefaultLeaseSeconds);
  nache_log(kLogWarn, kComponent,
            "cannot read the lease time (%s, nfs status %u); assuming %u s",
            CallStatusName(st), reply.status, lease_time_.load());
}

void UpstreamImpl::NoteLeaseRenewed(Clock::time_point sent) {
  uint32_t lease = std::max<uint32_t>(lease_time_.load(), 1);
  lease_until_.store((sent + std::chrono::milliseconds(lease * 900))
                         .time_since_epoch()
                         .count());
}

bool UpstreamImpl::RenewLease() {
  Clock::time_point sent = Clock::now();
  Compound c;
  if (Sessions()) {
    // A SEQUENCE alone renews the lease (OnSequence notes it, and a lost
    // session or client id).
    c.SetTag("sequence");
    CompoundReply reply;
    CallStatus st = CallInternal(c, &reply);
    if (st == CallStatus::kOk && IsClientidLost(reply.status)) return false;
    return true;
  }
  c.SetTag("renew").Renew(clientid_.load());
  CompoundReply reply;
  CallStatus st = CallInternal(c, &reply);
  if (st != CallStatus::kOk) {
    // Transport trouble: the connection reconnects by itself, and the next
    // renewal (or any call) tells whether the id survived.
    nache_log(kLogInfo, kComponent, "RENEW: %s", CallStatusName(st));
    return true;
  }
  if (IsClientidLost(reply.status)) {
    nache_log(kLogEvent, kComponent,
              "RENEW: client id %016llx lost (nfs status %u); "
              "re-establishing",
              (unsigned long long)clientid_.load(), reply.status);
    return false;
  }
  if (reply.status == kNfs4ErrCbPathDown) {
    // The lease is renewed; only the callback path is down.
    if (!cb_path_down_.exchange(true))
      nache_log(kLogWarn, kComponent,
                "RENEW: the server reports our callback path down: no "
                "delegations until it can reach the callback service");
    NoteLeaseRenewed(sent);
  } else if (reply.status != kNfs4Ok) {
    nache_log(kLogWarn, kComponent, "RENEW: nfs status %u", reply.status);
  } else {
    if (cb_path_down_.exchange(false))
      nache_log(kLogEvent, kComponent, "RENEW: callback path up again");
    NoteLeaseRenewed(sent);
  }
  return true;
}

CallStatus UpstreamImpl::SessionOp(
    int index, const char *tag, uint32_t minor,
    const std::function<void(rpc::XdrOut *)> &encode_op,
    const std::function<bool(rpc::XdrIn *)> &decode_op, bool *refused,
    int timeout_ms) {
  auto w = std::make_shared<Waiter>();
  bool parsed = false;
  bool mismatch = false;
  auto call = std::make_unique<PendingCall>();
  call->raw_tag = tag;
  call->raw_encode = [tag, minor, encode_op](std::string *out) {
    rpc::XdrOut x(out);
    nfs41::EncodeCompoundHeader(&x, tag, 1, minor);
    encode_op(&x);
    return true;
  };
  // Runs on the loop thread, while we wait.
  call->raw_reply = [&parsed, &mismatch, decode_op](rpc::XdrIn *in) {
    uint32_t status, n;
    if (!nfs41::DecodeCompoundReplyHeader(in, &status, &n)) return;
    mismatch = status == kNfs4ErrMinorVersMismatch && n == 0;
    parsed = n == 1 && decode_op(in);
  };
  call->done = Waiter::Completion(w, nullptr);
  call->deadline =
      Clock::now() + std::chrono::milliseconds(
                         timeout_ms > 0 ? timeout_ms : opts_.call_timeout_ms);
  Connection *conn = conns_[size_t(index)].get();
  if (!conn->connected()) {
    call->has_preset = true;
    call->preset = CallStatus::kDisconnected;
  }
  conn->Submit(std::move(call));
  CallStatus st = w->Wait();
  if (refused) *refused = st == CallStatus::kOk && mismatch;
  return st == CallStatus::kOk && !parsed ? CallStatus::kDecodeError : st;
}

bool UpstreamImpl::EstablishSession(bool *new_id, bool *v40) {
  // One connection for both: the session's back channel is bound to the
  // connection CREATE_SESSION comes on.
  int index = -1;
  for (size_t i = 0; i < conns_.size() && index < 0; i++)
    if (conns_[i]->connected()) index = int(i);
  if (index < 0) return false;
  nfs41::ExchangeIdArgs ea;
  std::copy(verifier_.begin(), verifier_.end(), ea.verifier.begin());
  ea.owner = id_string_;
  ea.impl_domain = "nache";
  ea.impl_name = "nache";
  nfs41::ExchangeIdRes er;
  // The configured minor version first; a server without NFSv4.2 refuses
  // the whole COMPOUND, and then 4.1 it is (the 4.2 operations answer
  // NOTSUPP to the office's clients); one without 4.1, 4.0.
  uint32_t minor = std::max<uint32_t>(minor_.load(), 1);
  CallStatus st;
  for (;;) {
    bool refused = false;
    st = SessionOp(
        index, "exchange_id", minor,
        [&ea](rpc::XdrOut *x) { nfs41::EncodeExchangeId(x, ea); },
        [&er](rpc::XdrIn *in) { return nfs41::DecodeExchangeId(in, &er); },
        &refused);
    if (refused && minor == 1) {
      nache_log(kLogEvent, kComponent,
                "EXCHANGE_ID: %s:%d does not speak NFSv4.1; using NFSv4.0 "
                "(delegations only with Callback_Address)",
                opts_.server.c_str(), opts_.port);
      minor_.store(0);
      *v40 = true;
      return false;
    }
    if (!refused) break;
    nache_log(kLogEvent, kComponent,
              "EXCHANGE_ID: %s:%d does not speak NFSv4.%u; using NFSv4.%u",
              opts_.server.c_str(), opts_.port, minor, minor - 1);
    minor--;
  }
  if (st != CallStatus::kOk || er.status != kNfs4Ok) {
    nache_log(kLogMajor, kComponent, "EXCHANGE_ID: %s, nfs status %u%s",
              CallStatusName(st), er.status,
              er.status == kNfs4ErrClidInuse
                  ? " (CLID_INUSE: the server holds our client id under "
                    "another principal until its lease ends)"
                  : "");
    return false;
  }
  nfs41::CreateSessionArgs ca;
  ca.clientid = er.clientid;
  ca.sequenceid = er.sequenceid;
  ca.flags =
      opts_.back_channel ? uint32_t(nfs41::kCreateSessionConnBackChan) : 0u;
  // Fore channel: a 1 MiB WRITE or READ and its headers; 64 requests in
  // flight at most, and 64 operations in a COMPOUND (batches of creates
  // and removes; the server may give fewer of either: max_operations()).
  ca.fore.max_request = ca.fore.max_response = (1u << 20) + 64 * 1024;
  ca.fore.max_response_cached = 8 * 1024;
  ca.fore.max_operations = 64;
  ca.fore.max_requests = 64;
  // Back channel: small calls (CB_RECALL, CB_GETATTR), one at a time.
  ca.back.max_request = ca.back.max_response = 16 * 1024;
  ca.back.max_operations = 8;
  ca.back.max_requests = 1;
  ca.cb_program = opts_.callback_program;
  ca.cb_machine = opts_.auth_machine;
  nfs41::CreateSessionRes cr;
  st = SessionOp(
      index, "create_session", minor,
      [&ca](rpc::XdrOut *x) { nfs41::EncodeCreateSession(x, ca); },
      [this, &cr](rpc::XdrIn *in) {
        bool ok = nfs41::DecodeCreateSession(in, &cr);
        // The back channel learns of the session here, on the loop thread
        // before it reads on: the server may call back on the new session
        // right after this reply, on this connection.
        if (ok && cr.status == kNfs4Ok && opts_.on_new_session)
          opts_.on_new_session(cr.sessionid, cr.back.max_requests);
        return ok;
      });
  if (st != CallStatus::kOk || cr.status != kNfs4Ok) {
    nache_log(kLogMajor, kComponent, "CREATE_SESSION: %s, nfs status %u",
              CallStatusName(st), cr.status);
    return false;
  }
  // The same client id confirmed before: its state lives on, only the
  // session is new.
  *new_id = !(generation_.load() > 0 && er.clientid == clientid_.load() &&
              (er.flags & nfs41::kExchgIdConfirmed));
  auto session = std::make_shared<Session41>(
      cr.sessionid,
      std::max<uint32_t>(1, std::min<uint32_t>(cr.fore.max_requests, 64)),
      minor, std::min<uint32_t>(cr.fore.max_operations, 64));
  minor_.store(minor);
  {
    std::lock_guard<std::mutex> lk(mu_);
    session_ = session;
    bind_pending_.clear();
  }
  clientid_.store(er.clientid);
  uint64_t generation =
      *new_id ? generation_.fetch_add(1) + 1 : generation_.load();
  nache_log(kLogEvent, kComponent,
            "client id %016llx %s with %s:%d (NFSv4.%u, epoch %llu, session "
            "of %u slot(s) and %u operations a COMPOUND%s)",
            (unsigned long long)er.clientid,
            *new_id ? "confirmed" : "kept, new session", opts_.server.c_str(),
            opts_.port, minor, (unsigned long long)(generation - 1),
            session->slots.size(), session->max_ops,
            (cr.flags & nfs41::kCreateSessionConnBackChan)
                ? ", back channel on our connection"
                : ", no back channel");
  // The other connections offer themselves for the back channel too.
  for (size_t i = 0; i < conns_.size(); i++)
    if (int(i) != index && conns_[i]->connected()) BindConnection(int(i));
  return true;
}

bool UpstreamImpl::BindConnection(int index) {
  std::shared_ptr<Session41> session = CurrentSession();
  if (!session || !opts_.back_channel) return false;
  nfs41::BindConnRes br;
  CallStatus st = SessionOp(
      index, "bind_conn", session->minor,
      [&session](rpc::XdrOut *x) {
        nfs41::EncodeBindConnToSession(x, session->id, nfs41::kCdfc4BackOrBoth);
      },
      [&br](rpc::XdrIn *in) {
        return nfs41::DecodeBindConnToSession(in, &br);
      });
  if (st == CallStatus::kOk &&
      (br.status == kNfs4ErrBadSession || br.status == kNfs4ErrDeadSession)) {
    // The server restarted (a new connection after it dropped ours): the
    // session is gone, and its grace period runs now. Recovery at once,
    // not at the next lease renewal, which may come after the grace.
    nache_log(kLogEvent, kComponent,
              "connection %d: the server lost our session "
              "(BIND_CONN_TO_SESSION: nfs status %u)",
              index, br.status);
    TriggerRecovery(generation_.load());
    return false;
  }
  if (st != CallStatus::kOk || br.status != kNfs4Ok) {
    nache_log(kLogInfo, kComponent,
              "connection %d: BIND_CONN_TO_SESSION: %s, nfs status %u", index,
              CallStatusName(st), br.status);
    return false;
  }
  return true;
}

void UpstreamImpl::OnSequence(Session41 &s, const nfs41::SequenceRes &r,
                              Clock::time_point sent) {
  if (CurrentSession().get() != &s) return;  // an older session's reply
  if (r.status == kNfs4ErrBadSession || r.status == kNfs4ErrDeadSession) {
    nache_log(kLogEvent, kComponent,
              "the server lost our session (nfs status %u)", r.status);
    TriggerRecovery(generation_.load());
    return;
  }
  if (r.status != kNfs4Ok) return;
  NoteLeaseRenewed(sent);
  s.slots.SetTarget(r.target_highest_slotid);
  const uint32_t f = r.status_flags;
  bool down = f & (nfs41::kSeqCbPathDown | nfs41::kSeqCbPathDownSession |
                   nfs41::kSeqBackchannelFault);
  if (down && !cb_path_down_.exchange(true))
    nache_log(kLogWarn, kComponent,
              "SEQUENCE: the server reports our back channel down (flags "
              "0x%x): no delegations until it works",
              f);
  else if (!down && cb_path_down_.exchange(false))
    nache_log(kLogEvent, kComponent, "SEQUENCE: back channel up again");
  if (f &
      (nfs41::kSeqExpiredAllStateRevoked | nfs41::kSeqRestartReclaimNeeded)) {
    nache_log(kLogEvent, kComponent,
              "SEQUENCE: our state is gone at the server (flags 0x%x)", f);
    TriggerRecovery(generation_.load());
  } else if (f & (nfs41::kSeqExpiredSomeStateRevoked |
                  nfs41::kSeqAdminStateRevoked |
                  nfs41::kSeqRecallableStateRevoked)) {
    nache_log(kLogWarn, kComponent,
              "SEQUENCE: the server revoked some of our state (flags 0x%x)", f);
  }
}

void UpstreamImpl::ReclaimDone() {
  if (!Sessions()) return;
  Compound c;
  c.SetTag("reclaim_complete").ReclaimComplete();
  CompoundReply reply;
  CallStatus st = CallInternal(c, &reply);
  // NFS4ERR_COMPLETE_ALREADY (10054): said before, fine.
  if (st != CallStatus::kOk ||
      (reply.status != kNfs4Ok && reply.status != 10054))
    nache_log(kLogWarn, kComponent, "RECLAIM_COMPLETE: %s, nfs status %u",
              CallStatusName(st), reply.status);
}

void UpstreamImpl::DestroySession() {
  std::shared_ptr<Session41> session = CurrentSession();
  int index = -1;
  for (size_t i = 0; i < conns_.size() && index < 0; i++)
    if (conns_[i]->connected()) index = int(i);
  if (!session || index < 0) return;
  // The client id stays: its state ends with the lease, or when our next
  // start's new verifier tells the server we restarted. A short wait: a
  // WAN that is down must not hold up the daemon's exit.
  uint32_t status = kNfs4Ok;
  CallStatus st = SessionOp(
      index, "destroy_session", session->minor,
      [&session](rpc::XdrOut *x) {
        nfs41::EncodeDestroySession(x, session->id);
      },
      [&status](rpc::XdrIn *in) {
        return nfs41::DecodeStatusOnly(in, nfs41::kOpDestroySession, &status);
      },
      nullptr, std::min(opts_.call_timeout_ms, kDestroySessionTimeoutMs));
  nache_log(st == CallStatus::kOk && status == kNfs4Ok ? kLogInfo : kLogWarn,
            kComponent, "DESTROY_SESSION: %s, nfs status %u",
            CallStatusName(st), status);
}

void UpstreamImpl::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    std::deque<std::unique_ptr<PendingCall>> held;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
      held.swap(held_);
      cv_.notify_all();
    }
    // The loops are about to stop, so these complete here.
    for (auto &call : held) {
      Callback done = std::move(call->done);
      if (done) done(CallStatus::kShutdown, CompoundReply());
    }
    DestroySession();
    for (auto &c : conns_) c->Stop();
    if (state_thread_.joinable()) state_thread_.join();
    nache_log(kLogInfo, kComponent, "upstream %s:%d shut down",
              opts_.server.c_str(), opts_.port);
  });
}

}  // namespace

std::unique_ptr<Upstream> Upstream::Create(const UpstreamOptions &opts) {
  auto up = std::make_unique<UpstreamImpl>(opts);
  up->Start();
  return up;
}

}  // namespace upstream
}  // namespace nache
