// The event loop of one upstream connection (see connection.h).
#include "upstream/connection.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rpc/rpc_transport.h"
#include "rpc/rpcsec_gss.h"
#include "rpc/tcp_connect.h"
#include "upstream/nfs41.h"
#include "util/log.h"

namespace nache {
namespace upstream {
namespace {

const char *const kComponent = "NACHE_UPSTREAM";
// NFS's program, version 4 and its COMPOUND procedure (RFC 7530).
constexpr uint32_t kNfsProgram = 100003, kNfsV4 = 4, kNfsProcCompound = 1;
// Upper bound of one poll() wait: a backstop only, every timer we own is
// computed exactly.
constexpr int kMaxPollMs = 1000;
// RPCSEC_GSS context creation: round trips at most (Kerberos needs one).
constexpr int kMaxGssRounds = 4;
int64_t MsUntil(Clock::time_point now, Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count();
}

}  // namespace

const char *CallTag(const PendingCall &call) {
  return call.compound ? call.compound->tag().c_str() : call.raw_tag;
}

Connection::Connection(int index, const UpstreamOptions &opts,
                       ConnectionListener *listener)
    : index_(index), opts_(opts), listener_(listener) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

Connection::~Connection() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Connection::Start() {
  if (wake_fd_ < 0) {
    nache_log(kLogMajor, kComponent, "connection %d: eventfd failed: %s",
              index_, std::strerror(errno));
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Connection::Stop() {
  {
    MutexLock lk(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  // Without a loop (never started, or it has exited) nothing else will
  // complete what is still queued.
  std::deque<std::unique_ptr<PendingCall>> left;
  {
    MutexLock lk(&mu_);
    left.swap(submitted_);
  }
  for (auto &call : left) Complete(call.get(), CallStatus::kShutdown, {});
}

void Connection::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void Connection::Submit(std::unique_ptr<PendingCall> call) {
  load_.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lk(&mu_);
    if (!stopping_) {
      submitted_.push_back(std::move(call));
      call = nullptr;
    }
  }
  if (call != nullptr) {
    Complete(call.get(), CallStatus::kShutdown, {});
    return;
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void Connection::Loop() {
  for (;;) {
    {
      MutexLock lk(&mu_);
      if (stopping_) break;
    }
    Clock::time_point now = Clock::now();
    if (phase_ == Phase::kIdle ||
        (phase_ == Phase::kBackoff && now >= phase_deadline_)) {
      StartConnect();
    } else if (phase_ == Phase::kConnecting && now >= phase_deadline_) {
      Disconnect("connect timed out", CallStatus::kDisconnected);
    }
    ExpireCalls(now);

    struct pollfd fds[2];
    fds[0] = {wake_fd_, POLLIN, 0};
    int nfds = 1;
    if (transport_) {
      fds[1] = {transport_->fd(), transport_->WantEvents(), 0};
      nfds = 2;
    } else if (connect_fd_ >= 0) {
      fds[1] = {connect_fd_, POLLOUT, 0};
      nfds = 2;
    }
    int rc = poll(fds, nfds, PollTimeoutMs(Clock::now()));
    if (rc < 0 && errno != EINTR) {
      nache_log(kLogCrit, kComponent, "connection %d: poll failed: %s", index_,
                std::strerror(errno));
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
    if (rc > 0 && nfds == 2 && fds[1].revents != 0 && connect_fd_ >= 0)
      OnConnectable();
    RetrySlotWaiters();
    DrainSubmissions();
    if (rc > 0 && nfds == 2 && fds[1].revents != 0 && transport_)
      ServiceSocket(fds[1].revents);
    else if (transport_)
      ServiceSocket(0);  // send what DrainSubmissions queued
  }
  Disconnect("shutting down", CallStatus::kShutdown);
  phase_ = Phase::kIdle;
}

void Connection::StartConnect() {
  std::string error;
  phase_ = Phase::kConnecting;
  phase_deadline_ =
      Clock::now() + std::chrono::milliseconds(opts_.connect_timeout_ms);
  // A name is resolved here, synchronously; with an address, as configured
  // in practice, this does not block.
  connect_fd_ = rpc::StartConnect(opts_.server, opts_.port, &error);
  if (connect_fd_ < 0) {
    nache_log(kLogInfo, kComponent,
              "connection %d: connect to %s:%d failed: %s", index_,
              opts_.server.c_str(), opts_.port, error.c_str());
    Disconnect("connect failed", CallStatus::kDisconnected);
  }
}

void Connection::OnConnectable() {
  int err = rpc::ConnectResult(connect_fd_);
  if (err == EINPROGRESS) return;
  if (err != 0) {
    nache_log(kLogInfo, kComponent,
              "connection %d: connect to %s:%d failed: %s", index_,
              opts_.server.c_str(), opts_.port, std::strerror(err));
    Disconnect("connect failed", CallStatus::kDisconnected);
    return;
  }
  transport_.reset(new rpc::Transport(connect_fd_));
  connect_fd_ = -1;
  if (opts_.back_channel) transport_->SetCallHandler(opts_.back_channel);
  gss_.reset();
  if (opts_.gss_initiator) {
    std::string why;
    if (!EstablishGss(&why)) {
      // As a failed connect: retried with backoff; calls fail retryably.
      nache_log(kLogWarn, kComponent,
                "connection %d: no RPCSEC_GSS context with %s:%d: %s", index_,
                opts_.server.c_str(), opts_.port, why.c_str());
      Disconnect("security context not established", CallStatus::kDisconnected);
      return;
    }
    nache_log(kLogInfo, kComponent,
              "connection %d: RPCSEC_GSS context (%s, window %u)", index_,
              rpc::GssServiceName(gss_->service()), gss_->window());
  }
  phase_ = Phase::kUp;
  backoff_ms_ = kMinBackoffMs;
  last_reply_ = Clock::now();
  connected_.store(true, std::memory_order_release);
  nache_log(kLogEvent, kComponent, "connection %d: connected to %s:%d", index_,
            opts_.server.c_str(), opts_.port);
  listener_->OnConnectionUp(index_);
}

void Connection::DrainSubmissions() {
  std::deque<std::unique_ptr<PendingCall>> batch;
  {
    MutexLock lk(&mu_);
    batch.swap(submitted_);
  }
  for (auto &call : batch) Send(std::move(call));
}

void Connection::Send(std::unique_ptr<PendingCall> call) {
  // (A call sent again after SEQ_MISORDERED holds its slot: not sent, the
  // slot keeps the sequence id the server expects.)
  if (call->has_preset || phase_ != Phase::kUp ||
      Clock::now() >= call->deadline) {
    ReleaseSlot(call.get(), SlotTable::Outcome::kNotDone);
    if (call->has_preset && call->preset == CallStatus::kOk) {
      CompoundReply reply;
      reply.status = call->preset_nfs;
      Complete(call.get(), CallStatus::kOk, std::move(reply));
      return;
    }
    Complete(call.get(),
             call->has_preset       ? call->preset
             : phase_ != Phase::kUp ? CallStatus::kDisconnected
                                    : CallStatus::kTimeout,
             {});
    return;
  }
  PendingCall *p = call.get();
  if (p->user_ctx) {  // sent before (SEQ_MISORDERED): counted anew below
    p->user_ctx->in_flight--;
    p->user_ctx.reset();
  }
  std::shared_ptr<rpc::CallSecurity> sec = gss_;
  if (p->user_creds) {
    std::shared_ptr<UserContext> uc = UserContextFor(p);
    if (!uc) {
      ReleaseSlot(p, SlotTable::Outcome::kNotDone);
      return;  // completed
    }
    if (!uc->gss) {
      // Being made: the call waits for it, without a slot.
      ReleaseSlot(p, SlotTable::Outcome::kNotDone);
      p->session.reset();
      uc->waiting.push_back(std::move(call));
      return;
    }
    if (!p->session && uc->in_flight >= uc->gss->window()) {
      slot_wait_.push_back(std::move(call));  // as for the machine's, below
      return;
    }
    sec = uc->gss;
    p->user_ctx = uc;
    uc->in_flight++;
  } else if (gss_ && gss_->expired()) {
    // Refused or used up: not sent; ServiceSocket reconnects with a new
    // context, and the caller retries.
    ReleaseSlot(p, SlotTable::Outcome::kNotDone);
    Complete(p, CallStatus::kDisconnected, {});
    return;
  }
  if (gss_ && !p->user_creds && !p->session &&
      in_flight_.size() >= gss_->window()) {
    // More calls in flight than the context's sequence window would have
    // the server drop the oldest unanswered: wait for replies.
    slot_wait_.push_back(std::move(call));  // RetrySlotWaiters
    return;
  }
  nfs41::SequenceArgs seq;
  const bool sequenced = !p->raw_encode && listener_->Sessions();
  if (sequenced) {
    if (!p->session) {
      std::shared_ptr<Session41> session = listener_->CurrentSession();
      if (!session) {
        Complete(p, CallStatus::kDisconnected, {});
        return;
      }
      if (!session->slots.Acquire(&p->slot)) {
        waiting_for_slot_.store(true, std::memory_order_release);
        // A slot freed between the try and the flag woke no one: again.
        if (!session->slots.Acquire(&p->slot)) {
          slot_wait_.push_back(std::move(call));  // RetrySlotWaiters
          return;
        }
      }
      p->session = std::move(session);
      if (p->slot.probe) {
        SendProbe(std::move(call));
        return;
      }
    }
    seq.sessionid = p->session->id;
    seq.sequenceid = p->slot.sequenceid;
    seq.slotid = p->slot.slotid;
    seq.highest_slotid = p->slot.highest_slotid;
  }
  p->sent_at = Clock::now();
  rpc::AuthSys auth;
  auth.stamp = uint32_t(time(nullptr));
  auth.machine = opts_.auth_machine;
  auth.uid = p->creds.uid;
  auth.gid = p->creds.gid;
  auth.gids = p->creds.groups;  // the transport sends the first 16
  Compound *compound = p->compound;
  OwnerCodec *owners = opts_.owners.get();
  const uint32_t minor = sequenced ? p->session->minor : 0;
  rpc::Transport::EncodeFn encode =
      p->raw_encode
          ? p->raw_encode
          : rpc::Transport::EncodeFn(
                [compound, sequenced, seq, owners, minor](std::string *rec) {
                  return compound->EncodeWire(rec, sequenced ? &seq : nullptr,
                                              owners, minor);
                });
  auto on_reply = [this, p](rpc::ReplyStatus st, rpc::XdrIn *results) {
    OnReply(p, st, results);
  };
  bool queued = sec ? transport_->Call(kNfsProgram, kNfsV4, kNfsProcCompound,
                                       sec, encode, on_reply, &p->xid)
                    : transport_->Call(kNfsProgram, kNfsV4, kNfsProcCompound,
                                       &auth, encode, on_reply, &p->xid);
  if (!queued) {
    nache_log(kLogMajor, kComponent,
              "connection %d: cannot encode compound '%s' (%zu ops, hint %zu "
              "bytes)",
              index_, CallTag(*p), compound ? compound->size() : 0,
              compound ? compound->EncodedSizeHint() : 0);
    ReleaseSlot(p, SlotTable::Outcome::kNotDone);
    Complete(p, CallStatus::kEncodeError, {});
    return;
  }
  in_flight_.insert(call.release());
}

bool Connection::ReleaseSlot(PendingCall *call, SlotTable::Outcome outcome) {
  if (!call->session) return false;
  SlotTable::Slot retry;
  if (call->session->slots.Release(call->slot, outcome, &retry)) {
    call->slot = retry;
    return true;
  }
  call->session.reset();
  listener_->OnSlotFreed();
  return false;
}

void Connection::SendProbe(std::unique_ptr<PendingCall> call) {
  // A COMPOUND of SEQUENCE alone: executed or answered from the server's
  // reply cache, it changes nothing, and its answer tells which sequence
  // id the slot is at (slot_table.h).
  auto probe = std::make_unique<PendingCall>();
  probe->owned = std::make_unique<Compound>();
  probe->owned->SetTag("slot_probe");
  probe->compound = probe->owned.get();
  probe->deadline = call->deadline;
  probe->session = std::move(call->session);
  probe->slot = call->slot;
  call->slot = SlotTable::Slot();
  probe->after = std::move(call);
  // Complete() counts every call down once.
  load_.fetch_add(1, std::memory_order_relaxed);
  Send(std::move(probe));
}

void Connection::Requeue(std::unique_ptr<PendingCall> call) {
  call->session.reset();
  slot_wait_.push_front(std::move(call));
  Wake();  // RetrySlotWaiters on the next turn, not after poll's timeout
}

void Connection::RetrySlotWaiters() {
  // (Cleared before the sends, which set it again when they must wait.)
  waiting_for_slot_.store(false, std::memory_order_release);
  if (slot_wait_.empty()) return;
  std::deque<std::unique_ptr<PendingCall>> waiting;
  waiting.swap(slot_wait_);
  while (!waiting.empty()) {
    std::unique_ptr<PendingCall> call = std::move(waiting.front());
    waiting.pop_front();
    Send(std::move(call));
    if (!slot_wait_.empty()) {
      // Still none free: the rest wait on, in order.
      for (auto &c : waiting) slot_wait_.push_back(std::move(c));
      return;
    }
  }
}

void Connection::ServiceSocket(int revents) {
  if (!transport_->Service(short(revents))) {
    Disconnect("connection lost: " + transport_->error(),
               CallStatus::kDisconnected);
  } else if (gss_ && gss_->expired()) {
    // (Here, not in OnReply: the transport is not torn down under its own
    // Service.)
    Disconnect("RPCSEC_GSS context refused by the server or used up",
               CallStatus::kDisconnected);
  }
}

bool Connection::GssInitRoundTrip(const std::string &handle,
                                  const std::string &token,
                                  Clock::time_point deadline,
                                  rpc::GssInitRes *res, std::string *verf,
                                  std::string *why) {
  auto call = std::make_shared<rpc::GssInitCall>(handle);
  bool answered = false, decoded = false;
  rpc::ReplyStatus status = rpc::ReplyStatus::kDisconnected;
  uint32_t xid = 0;
  bool queued = transport_->Call(
      kNfsProgram, kNfsV4, 0 /* NULL */, call,
      [&token](std::string *rec) {
        rpc::XdrOut(rec).Opaque(token);
        return true;
      },
      [&](rpc::ReplyStatus st, rpc::XdrIn *results) {
        answered = true;
        status = st;
        decoded =
            st == rpc::ReplyStatus::kOk && rpc::DecodeGssInitRes(results, res);
      },
      &xid);
  if (!queued) {
    *why = "the token does not fit in a record";
    return false;
  }
  while (!answered) {
    int64_t left = MsUntil(Clock::now(), deadline);
    if (left <= 0) {
      transport_->Cancel(xid);
      *why = "no answer within the call timeout";
      return false;
    }
    struct pollfd pfd[2] = {{transport_->fd(), transport_->WantEvents(), 0},
                            {wake_fd_, POLLIN, 0}};
    int rc = poll(pfd, 2, int(std::min<int64_t>(left, kMaxPollMs)));
    if (rc < 0 && errno != EINTR) {
      *why = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (rc > 0 && (pfd[1].revents & POLLIN)) {
      // A submission (sent once the context is made) or Stop.
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
      MutexLock lk(&mu_);
      if (stopping_) {
        *why = "shutting down";
        return false;
      }
    }
    if (!transport_->Service(rc > 0 ? pfd[0].revents : 0)) {
      *why = "connection lost: " + transport_->error();
      return false;
    }
  }
  if (status != rpc::ReplyStatus::kOk) {
    *why = std::string("the server answered: ") + rpc::ReplyStatusName(status);
    return false;
  }
  if (!decoded) {
    *why = "malformed rpc_gss_init_res";
    return false;
  }
  *verf = call->verifier();
  return true;
}

bool Connection::EstablishGss(std::string *why) {
  std::unique_ptr<rpc::GssInitiator> init = opts_.gss_initiator();
  if (!init) {
    *why = "no credentials";
    return false;
  }
  std::string out, handle, verf;
  rpc::GssInitRes res;
  bool server_done = false;
  rpc::GssInitiator::Step step = init->Next("", &out, why);
  for (int round = 0;; round++) {
    if (step == rpc::GssInitiator::Step::kFailed) return false;
    if (step == rpc::GssInitiator::Step::kComplete && server_done) break;
    if (out.empty() || round == kMaxGssRounds) {
      *why = out.empty() ? "the mechanism has nothing to send"
                         : "too many round trips";
      return false;
    }
    Clock::time_point deadline =
        Clock::now() + std::chrono::milliseconds(opts_.call_timeout_ms);
    if (!GssInitRoundTrip(handle, out, deadline, &res, &verf, why))
      return false;
    if (res.major != rpc::kGssComplete &&
        res.major != rpc::kGssContinueNeeded) {
      *why = "the server refused the context (GSS major " +
             std::to_string(res.major) + ", minor " +
             std::to_string(res.minor) + ")";
      return false;
    }
    handle = res.handle;
    server_done = res.major == rpc::kGssComplete;
    if (step == rpc::GssInitiator::Step::kComplete) {
      if (server_done) break;
      *why = "the server wants more after the context is complete";
      return false;
    }
    step = init->Next(res.token, &out, why);
  }
  if (handle.empty() || res.window == 0) {
    *why = "the server gave no context handle or a window of 0";
    return false;
  }
  auto gss = std::make_shared<rpc::RpcsecGss>(init->TakeContext(), handle,
                                              res.window, opts_.gss_service);
  if (!gss->CheckWindowVerifier(verf)) {
    *why = "the server's verifier of the window does not check";
    return false;
  }
  gss_ = std::move(gss);
  return true;
}

std::shared_ptr<UserContext> Connection::UserContextFor(PendingCall *call) {
  auto it = user_ctx_.find(call->user);
  if (it != user_ctx_.end()) {
    std::shared_ptr<UserContext> uc = it->second;
    if (!uc->gss || !uc->gss->expired()) {
      user_lru_.splice(user_lru_.begin(), user_lru_, uc->lru);
      return uc;
    }
    // Refused by a reply, or its sequence numbers used up: a new one.
    DropUserContext(uc);
  }
  // Beyond the bound, the least recently used idle context goes (the
  // server forgets it when it expires).
  if (user_ctx_.size() >= std::max<size_t>(opts_.user_contexts_max, 1)) {
    for (auto lit = user_lru_.rbegin(); lit != user_lru_.rend(); ++lit) {
      std::shared_ptr<UserContext> old = user_ctx_[*lit];
      if (old->gss && old->in_flight == 0 && old->waiting.empty()) {
        DropUserContext(old);
        break;
      }
    }
  }
  auto uc = std::make_shared<UserContext>();
  uc->principal = call->user;
  uc->init = call->user_creds->NewInitiator();
  std::string token, why;
  // Local: the user's service ticket came with the credentials
  // (gss_krb5.h, Impersonate).
  rpc::GssInitiator::Step step = uc->init ? uc->init->Next("", &token, &why)
                                          : rpc::GssInitiator::Step::kFailed;
  if (step == rpc::GssInitiator::Step::kFailed || token.empty()) {
    nache_log(kLogWarn, kComponent,
              "connection %d: no RPCSEC_GSS context for %s with %s:%d: %s",
              index_, call->user.c_str(), opts_.server.c_str(), opts_.port,
              why.empty() ? "the mechanism has nothing to send" : why.c_str());
    CompleteRefused(call);
    return nullptr;
  }
  uc->init_complete = step == rpc::GssInitiator::Step::kComplete;
  user_lru_.push_front(uc->principal);
  uc->lru = user_lru_.begin();
  user_ctx_[uc->principal] = uc;
  if (!SendUserInit(uc, token)) {
    CompleteRefused(call);
    return nullptr;
  }
  return uc;
}

bool Connection::SendUserInit(const std::shared_ptr<UserContext> &uc,
                              const std::string &token) {
  auto init = std::make_shared<rpc::GssInitCall>(uc->handle);
  std::weak_ptr<UserContext> weak = uc;
  uc->rounds++;
  uc->init_deadline =
      Clock::now() + std::chrono::milliseconds(opts_.call_timeout_ms);
  bool queued = transport_->Call(
      kNfsProgram, kNfsV4, 0 /* NULL */, init,
      [token](std::string *rec) {
        rpc::XdrOut(rec).Opaque(token);
        return true;
      },
      [this, weak, init](rpc::ReplyStatus st, rpc::XdrIn *results) {
        OnUserInitReply(weak, init, st, results);
      },
      &uc->init_xid);
  if (!queued)
    UserContextFailed(uc, "the token does not fit in a record", false);
  return queued;
}

void Connection::OnUserInitReply(const std::weak_ptr<UserContext> &weak,
                                 const std::shared_ptr<rpc::GssInitCall> &call,
                                 rpc::ReplyStatus status, rpc::XdrIn *results) {
  std::shared_ptr<UserContext> uc = weak.lock();
  // Gone (dropped, or the transport's end: Disconnect fails its calls).
  if (!uc || status == rpc::ReplyStatus::kDisconnected) return;
  auto it = user_ctx_.find(uc->principal);
  if (it == user_ctx_.end() || it->second != uc) return;
  rpc::GssInitRes res;
  if (status != rpc::ReplyStatus::kOk) {
    UserContextFailed(
        uc, std::string("the server answered: ") + rpc::ReplyStatusName(status),
        false);
    return;
  }
  if (!rpc::DecodeGssInitRes(results, &res)) {
    UserContextFailed(uc, "malformed rpc_gss_init_res", false);
    return;
  }
  if (res.major != rpc::kGssComplete && res.major != rpc::kGssContinueNeeded) {
    UserContextFailed(uc,
                      "the server refused the context (GSS major " +
                          std::to_string(res.major) + ", minor " +
                          std::to_string(res.minor) + ")",
                      false);
    return;
  }
  uc->handle = res.handle;
  const bool server_done = res.major == rpc::kGssComplete;
  if (!uc->init_complete) {
    std::string out, why;
    rpc::GssInitiator::Step step = uc->init->Next(res.token, &out, &why);
    if (step == rpc::GssInitiator::Step::kFailed) {
      UserContextFailed(uc, why, false);
      return;
    }
    uc->init_complete = step == rpc::GssInitiator::Step::kComplete;
    if (!server_done || !uc->init_complete) {
      if (out.empty() || uc->rounds >= kMaxGssRounds) {
        UserContextFailed(uc,
                          out.empty() ? "the mechanism has nothing to send"
                                      : "too many round trips",
                          false);
        return;
      }
      SendUserInit(uc, out);
      return;
    }
  } else if (!server_done) {
    UserContextFailed(uc, "the server wants more after the context is complete",
                      false);
    return;
  }
  if (uc->handle.empty() || res.window == 0) {
    UserContextFailed(uc, "the server gave no context handle or a window of 0",
                      false);
    return;
  }
  auto gss = std::make_shared<rpc::RpcsecGss>(
      uc->init->TakeContext(), uc->handle, res.window, opts_.gss_service);
  if (!gss->CheckWindowVerifier(call->verifier())) {
    UserContextFailed(uc, "the server's verifier of the window does not check",
                      false);
    return;
  }
  uc->gss = std::move(gss);
  uc->init.reset();
  UserContextReady(uc);
}

void Connection::UserContextReady(const std::shared_ptr<UserContext> &uc) {
  nache_log(kLogEvent, kComponent,
            "connection %d: RPCSEC_GSS context (%s, window %u) for %s with "
            "%s:%d",
            index_, rpc::GssServiceName(opts_.gss_service), uc->gss->window(),
            uc->principal.c_str(), opts_.server.c_str(), opts_.port);
  std::deque<std::unique_ptr<PendingCall>> waiting;
  waiting.swap(uc->waiting);
  for (auto &call : waiting) Send(std::move(call));
}

void Connection::UserContextFailed(const std::shared_ptr<UserContext> &uc,
                                   const std::string &why, bool retry) {
  nache_log(kLogWarn, kComponent,
            "connection %d: no RPCSEC_GSS context for %s with %s:%d: %s%s",
            index_, uc->principal.c_str(), opts_.server.c_str(), opts_.port,
            why.c_str(),
            retry ? " (the calls fail retryably)"
                  : " (the user's calls are refused: NFS4ERR_ACCESS)");
  std::deque<std::unique_ptr<PendingCall>> waiting;
  waiting.swap(uc->waiting);
  DropUserContext(uc);
  for (auto &call : waiting) {
    if (retry)
      Complete(call.get(), CallStatus::kDisconnected, {});
    else
      CompleteRefused(call.get());
  }
}

void Connection::DropUserContext(const std::shared_ptr<UserContext> &uc) {
  auto it = user_ctx_.find(uc->principal);
  if (it == user_ctx_.end() || it->second != uc) return;
  user_lru_.erase(uc->lru);
  user_ctx_.erase(it);
  // Calls still waiting for it (an eviction never picks such a one, a
  // refusal hands them on first) would be lost: sent again, they make a
  // new context.
  std::deque<std::unique_ptr<PendingCall>> waiting;
  waiting.swap(uc->waiting);
  for (auto &call : waiting) Requeue(std::move(call));
}

void Connection::CompleteRefused(PendingCall *call) {
  CompoundReply reply;
  reply.status = kNfs4ErrAccess;
  Complete(call, CallStatus::kOk, std::move(reply));
}

void Connection::OnReply(PendingCall *call, rpc::ReplyStatus status,
                         rpc::XdrIn *results) {
  if (in_flight_.erase(call) == 0) return;
  std::unique_ptr<PendingCall> owner(call);
  if (call->completed) {  // failed earlier (Disconnect)
    ReleaseSlot(call, SlotTable::Outcome::kLost);
    return;
  }
  if (status == rpc::ReplyStatus::kDisconnected) {
    ReleaseSlot(call, SlotTable::Outcome::kLost);
    Complete(call, CallStatus::kDisconnected, {});
    return;
  }
  last_reply_ = Clock::now();
  if (status == rpc::ReplyStatus::kAuthError && call->user_ctx &&
      call->user_ctx->gss->expired()) {
    // The user's context is gone at the server (expired with the user's
    // ticket, or the server restarted): the call was not executed. The
    // caller retries, and its call makes a new context; the connection
    // and the other contexts stay.
    nache_log(kLogInfo, kComponent,
              "connection %d: RPCSEC_GSS context for %s refused by the "
              "server; a new one at the next call",
              index_, call->user_ctx->principal.c_str());
    DropUserContext(call->user_ctx);
    ReleaseSlot(call, SlotTable::Outcome::kNotDone);
    Complete(call, CallStatus::kDisconnected, {});
    return;
  }
  if (status == rpc::ReplyStatus::kAuthError && gss_ && gss_->expired()) {
    // Our context is gone at the server (expired, or the server
    // restarted): the call was not executed; the caller retries on the
    // new context the reconnect makes (ServiceSocket).
    ReleaseSlot(call, SlotTable::Outcome::kNotDone);
    Complete(call, CallStatus::kDisconnected, {});
    return;
  }
  if (status != rpc::ReplyStatus::kOk) {
    nache_log(kLogMajor, kComponent,
              "connection %d: compound '%s': the server answered: %s", index_,
              CallTag(*call), rpc::ReplyStatusName(status));
    ReleaseSlot(call, SlotTable::Outcome::kNotDone);
    Complete(call, CallStatus::kDecodeError, {});
    return;
  }
  if (call->raw_reply) {
    call->raw_reply(results);
    Complete(call, CallStatus::kOk, {});
    return;
  }
  CompoundReply reply;
  nfs41::SequenceRes seq;
  seq.status = UINT32_MAX;  // not decoded
  bool ok = call->compound->DecodeWire(results->pos(), results->left(), &reply,
                                       call->session ? &seq : nullptr,
                                       opts_.owners.get());
  if (call->session) {
    SlotTable::Outcome outcome =
        seq.status == UINT32_MAX              ? SlotTable::Outcome::kLost
        : seq.status == kNfs4Ok               ? SlotTable::Outcome::kDone
        : seq.status == kNfs4ErrSeqMisordered ? SlotTable::Outcome::kMisordered
                                              : SlotTable::Outcome::kNotDone;
    std::shared_ptr<Session41> session = call->session;
    if (seq.status != UINT32_MAX)
      listener_->OnSequence(*session, seq, call->sent_at);
    const bool probe = call->slot.probe;
    if (ReleaseSlot(call, outcome)) {
      // A probe refused SEQ_MISORDERED: again at once, one id lower.
      Send(std::move(owner));
      return;
    }
    if (seq.status == kNfs4ErrSeqMisordered && !probe) {
      // Not executed, and the slot is now settled by a probe first: the
      // call goes again (bounded by its deadline).
      Requeue(std::move(owner));
      return;
    }
    if (seq.status == kNfs4ErrBadSession || seq.status == kNfs4ErrDeadSession ||
        seq.status == kNfs4ErrConnNotBoundToSession) {
      // Not executed; a new session is on its way (OnSequence): the
      // caller retries.
      Complete(call, CallStatus::kDisconnected, {});
      return;
    }
  }
  if (!ok) {
    nache_log(kLogMajor, kComponent,
              "connection %d: the reply to '%s' does not decode or does not "
              "match its request",
              index_, CallTag(*call));
    Complete(call, CallStatus::kDecodeError, {});
    return;
  }
  if (reply.status == kNfs4ErrBadowner && opts_.owners)
    opts_.owners->NoteOwnerRefused();
  Complete(call, CallStatus::kOk, std::move(reply));
}

void Connection::ExpireCalls(Clock::time_point now) {
  bool stalled = false;
  std::vector<PendingCall *> expired;
  for (PendingCall *call : in_flight_)
    if (!call->completed && now >= call->deadline) expired.push_back(call);
  for (PendingCall *call : expired) {
    nache_log(kLogWarn, kComponent,
              "connection %d: compound '%s' timed out after %d ms", index_,
              CallTag(*call), opts_.call_timeout_ms);
    // Nothing at all came back since this call went out: the connection is
    // presumed dead (a silent peer never resets TCP).
    if (last_reply_ < call->sent_at) stalled = true;
    // A late reply is dropped by the transport from now on.
    if (transport_) transport_->Cancel(call->xid);
    in_flight_.erase(call);
    ReleaseSlot(call, SlotTable::Outcome::kLost);
    Complete(call, CallStatus::kTimeout, {});
    delete call;
  }
  for (auto it = slot_wait_.begin(); it != slot_wait_.end();) {
    if (now >= (*it)->deadline) {
      Complete(it->get(), CallStatus::kTimeout, {});
      it = slot_wait_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<std::shared_ptr<UserContext>> late;
  for (auto &entry : user_ctx_) {
    UserContext &uc = *entry.second;
    if (!uc.gss && now >= uc.init_deadline) late.push_back(entry.second);
    for (auto it = uc.waiting.begin(); it != uc.waiting.end();) {
      if (now >= (*it)->deadline) {
        Complete(it->get(), CallStatus::kTimeout, {});
        it = uc.waiting.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto &uc : late) {
    if (transport_) transport_->Cancel(uc->init_xid);
    UserContextFailed(uc, "no answer within the call timeout", true);
  }
  if (stalled) {
    Disconnect("no reply within the call timeout", CallStatus::kDisconnected);
  }
}

int Connection::PollTimeoutMs(Clock::time_point now) const {
  int64_t wait = kMaxPollMs;
  if (phase_ == Phase::kConnecting || phase_ == Phase::kBackoff) {
    wait = std::min(wait, MsUntil(now, phase_deadline_) + 1);
  }
  for (const auto &call : slot_wait_)
    wait = std::min(wait, MsUntil(now, call->deadline) + 1);
  for (const PendingCall *call : in_flight_) {
    if (!call->completed) {
      wait = std::min(wait, MsUntil(now, call->deadline) + 1);
    }
  }
  for (const auto &entry : user_ctx_) {
    const UserContext &uc = *entry.second;
    if (!uc.gss) wait = std::min(wait, MsUntil(now, uc.init_deadline) + 1);
    for (const auto &call : uc.waiting)
      wait = std::min(wait, MsUntil(now, call->deadline) + 1);
  }
  return int(std::max<int64_t>(wait, 0));
}

void Connection::Disconnect(const std::string &why, CallStatus status) {
  bool was_up = phase_ == Phase::kUp;
  if (was_up || !in_flight_.empty()) {
    nache_log(status == CallStatus::kShutdown ? kLogInfo : kLogWarn, kComponent,
              "connection %d: %s; failing %zu call(s) in flight", index_,
              why.c_str(), in_flight_.size());
  }
  for (PendingCall *call : in_flight_) Complete(call, status, {});
  for (auto &call : slot_wait_) Complete(call.get(), status, {});
  slot_wait_.clear();
  // Users' contexts are the transport's: made anew on the next one.
  for (auto &entry : user_ctx_)
    for (auto &call : entry.second->waiting) Complete(call.get(), status, {});
  user_ctx_.clear();
  user_lru_.clear();
  // The transport's end runs the reply callback of each call it still
  // holds (kDisconnected), which deletes it; none is left after that.
  transport_.reset();
  gss_.reset();
  for (PendingCall *call : in_flight_) delete call;
  in_flight_.clear();
  if (connect_fd_ >= 0) {
    close(connect_fd_);
    connect_fd_ = -1;
  }
  connected_.store(false, std::memory_order_release);
  if (was_up) listener_->OnConnectionDown(index_);
  phase_ = Phase::kBackoff;
  phase_deadline_ = Clock::now() + std::chrono::milliseconds(backoff_ms_);
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
}

void Connection::Complete(PendingCall *call, CallStatus status,
                          CompoundReply &&reply) {
  if (call->completed) return;
  call->completed = true;
  load_.fetch_sub(1, std::memory_order_relaxed);
  if (call->user_ctx) {
    call->user_ctx->in_flight--;
    call->user_ctx.reset();
  }
  Upstream::Callback done = std::move(call->done);
  // The Compound is not needed any more (encoded at send time); free
  // CallAsync's copy now rather than when the call itself is deleted.
  call->owned.reset();
  call->compound = nullptr;
  if (done) done(status, std::move(reply));
  if (!call->after) return;
  // A probe: answered (whatever the answer), the call behind it goes on;
  // not answered (timeout, connection lost, shutdown), it fails the same
  // way, never sent.
  std::unique_ptr<PendingCall> after = std::move(call->after);
  if (status == CallStatus::kOk || status == CallStatus::kDecodeError)
    Requeue(std::move(after));
  else
    Complete(after.get(), status, {});
}

}  // namespace upstream
}  // namespace nache
