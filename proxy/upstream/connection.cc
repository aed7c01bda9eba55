// The event loop of one upstream connection (see connection.h).
#include "upstream/connection.h"

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "upstream/libnfs_compat.h"
#include "util/log.h"

namespace nache {
namespace upstream {
namespace {

const char *const kComponent = "NACHE_UPSTREAM";
// AUTH_SYS carries at most 16 supplementary groups (RFC 5531).
constexpr size_t kMaxAuthGroups = 16;
// Upper bound of one poll() wait: a backstop only, every timer we own is
// computed exactly.
constexpr int kMaxPollMs = 1000;

// libnfs reports RPC-level failures of a reply (the connection is fine) with
// these messages; anything else is the transport failing under it.
bool IsReplyLevelError(const std::string &msg) {
  static const char *const kPrefixes[] = {
      "Server responded", "RPC Packet not accepted", "Message rejected",
      "Unknown rpc response"};
  for (const char *p : kPrefixes) {
    if (msg.compare(0, std::strlen(p), p) == 0) return true;
  }
  return false;
}

bool SameCreds(const Creds &a, const Creds &b) {
  return a.uid == b.uid && a.gid == b.gid && a.groups == b.groups;
}

// libnfs' last error text; it may have none.
std::string RpcError(struct rpc_context *rpc) {
  const char *e = rpc != nullptr ? rpc_get_error(rpc) : nullptr;
  return e != nullptr ? e : "no error text";
}

int64_t MsUntil(Clock::time_point now, Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - now)
      .count();
}

}  // namespace

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
    std::lock_guard<std::mutex> lk(mu_);
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
    std::lock_guard<std::mutex> lk(mu_);
    left.swap(submitted_);
  }
  for (auto &call : left) Complete(call.get(), CallStatus::kShutdown, {});
}

void Connection::Submit(std::unique_ptr<PendingCall> call) {
  load_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lk(mu_);
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
      std::lock_guard<std::mutex> lk(mu_);
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
    if (rpc_ != nullptr && rpc_get_fd(rpc_) >= 0) {
      fds[1] = {rpc_get_fd(rpc_), short(rpc_which_events(rpc_)), 0};
      nfds = 2;
    }
    int rc = poll(fds, nfds, PollTimeoutMs(Clock::now()));
    if (rc < 0 && errno != EINTR) {
      nache_log(kLogCrit, kComponent, "connection %d: poll failed: %s",
                index_, std::strerror(errno));
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
    DrainSubmissions();
    if (rc > 0 && nfds == 2 && fds[1].revents != 0 && rpc_ != nullptr) {
      ServiceSocket(fds[1].revents);
    }
  }
  Disconnect("shutting down", CallStatus::kShutdown);
  phase_ = Phase::kIdle;
}

void Connection::StartConnect() {
  rpc_ = rpc_init_context();
  if (rpc_ == nullptr) {
    Disconnect("rpc_init_context failed", CallStatus::kDisconnected);
    return;
  }
  have_auth_ = false;
  phase_ = Phase::kConnecting;
  phase_deadline_ =
      Clock::now() + std::chrono::milliseconds(opts_.connect_timeout_ms);
  // libnfs resolves the name synchronously here (getaddrinfo); with an
  // address, as configured in practice, this does not block.
  if (rpc_connect_async(rpc_, opts_.server.c_str(), opts_.port,
                        &Connection::ConnectCb, this) != 0) {
    Disconnect("connect failed: " + RpcError(rpc_),
               CallStatus::kDisconnected);
  }
}

void Connection::ConnectCb(struct rpc_context *rpc, int status, void *data,
                           void *private_data) {
  auto *self = static_cast<Connection *>(private_data);
  self->OnConnect(status, status == RPC_STATUS_SUCCESS
                              ? nullptr
                              : static_cast<const char *>(data));
}

void Connection::OnConnect(int status, const char *error) {
  if (tearing_down_ || phase_ != Phase::kConnecting) return;
  if (status != RPC_STATUS_SUCCESS) {
    // Disconnect() runs from ServiceSocket once rpc_service returns: the
    // context must not be destroyed inside its own callback.
    phase_ = Phase::kBackoff;
    phase_deadline_ = Clock::now();
    nache_log(kLogInfo, kComponent, "connection %d: connect to %s:%d failed: %s",
              index_, opts_.server.c_str(), opts_.port,
              error != nullptr ? error : "unknown error");
    return;
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
    std::lock_guard<std::mutex> lk(mu_);
    batch.swap(submitted_);
  }
  for (auto &call : batch) Send(std::move(call));
}

void Connection::Send(std::unique_ptr<PendingCall> call) {
  if (call->has_preset) {
    Complete(call.get(), call->preset, {});
    return;
  }
  if (phase_ != Phase::kUp) {
    Complete(call.get(), CallStatus::kDisconnected, {});
    return;
  }
  if (Clock::now() >= call->deadline) {
    Complete(call.get(), CallStatus::kTimeout, {});
    return;
  }
  ApplyCreds(call->creds);
  PendingCall *p = call.get();
  p->conn = this;
  p->sent_at = Clock::now();
  int rc = nache_compat_queue_compound(rpc_, &Connection::ReplyCb, p,
                                       p->compound->Args(),
                                       p->compound->EncodedSizeHint());
  if (rc != NACHE_COMPAT_OK) {
    char why[256] = "";
    if (rc == NACHE_COMPAT_ELAYOUT) nache_compat_selfcheck(why, sizeof(why));
    nache_log(kLogMajor, kComponent,
              "connection %d: cannot send compound '%s' (%zu ops, hint %zu "
              "bytes): compat error %d %s",
              index_, p->compound->tag().c_str(), p->compound->size(),
              p->compound->EncodedSizeHint(), rc, why);
    Complete(p, CallStatus::kEncodeError, {});
    return;
  }
  // libnfs now holds p until ReplyCb or the context's destruction.
  in_libnfs_.insert(call.release());
}

void Connection::ApplyCreds(const Creds &creds) {
  if (have_auth_ && SameCreds(creds, last_creds_)) return;
  std::vector<uint32_t> groups(
      creds.groups.begin(),
      creds.groups.begin() + std::min(creds.groups.size(), kMaxAuthGroups));
  // rpc_set_auth() destroys the context's previous AUTH (libnfs 4.0.0), and
  // the PDU encodes the credential at allocation: so this must run right
  // before each allocation, on the loop thread.
  rpc_set_auth(rpc_, libnfs_authunix_create(opts_.auth_machine.c_str(),
                                            creds.uid, creds.gid,
                                            uint32_t(groups.size()),
                                            groups.data()));
  last_creds_ = creds;
  have_auth_ = true;
}

void Connection::ServiceSocket(int revents) {
  int rc = rpc_service(rpc_, revents);
  if (phase_ == Phase::kBackoff) {  // the connect callback reported failure
    Disconnect("connect failed", CallStatus::kDisconnected);
    return;
  }
  if (rc < 0 || rpc_get_fd(rpc_) < 0) {
    Disconnect("connection lost: " + RpcError(rpc_),
               CallStatus::kDisconnected);
    return;
  }
  if (phase_ == Phase::kConnecting) return;
  ClassifyFailedRpcs();
}

void Connection::ReplyCb(struct rpc_context *rpc, int status, void *data,
                         void *private_data) {
  auto *call = static_cast<PendingCall *>(private_data);
  call->conn->OnReply(call, status, data);
}

void Connection::OnReply(PendingCall *call, int status, void *data) {
  in_libnfs_.erase(call);
  std::unique_ptr<PendingCall> owner(call);
  if (call->completed) return;  // timed out or failed earlier
  if (status == RPC_STATUS_SUCCESS) {
    last_reply_ = Clock::now();
    CompoundReply reply;
    if (!call->compound->Decode(static_cast<COMPOUND4res *>(data), &reply)) {
      nache_log(kLogMajor, kComponent,
                "connection %d: reply to '%s' does not match its request",
                index_, call->compound->tag().c_str());
      Complete(call, CallStatus::kDecodeError, {});
      return;
    }
    Complete(call, CallStatus::kOk, std::move(reply));
    return;
  }
  // Whether this is the server rejecting one call or the transport failing
  // under all of them is only known once rpc_service() returns.
  call->rpc_error = (status == RPC_STATUS_ERROR && data != nullptr)
                        ? static_cast<const char *>(data)
                        : "cancelled";
  failed_rpcs_.push_back(std::move(owner));
}

void Connection::ClassifyFailedRpcs() {
  bool transport_failed = false;
  std::string why;
  std::vector<std::unique_ptr<PendingCall>> failed;
  failed.swap(failed_rpcs_);
  for (auto &call : failed) {
    if (IsReplyLevelError(call->rpc_error)) {
      last_reply_ = Clock::now();
      nache_log(kLogMajor, kComponent, "connection %d: compound '%s': %s",
                index_, call->compound->tag().c_str(),
                call->rpc_error.c_str());
      Complete(call.get(), CallStatus::kDecodeError, {});
    } else {
      transport_failed = true;
      why = call->rpc_error;
      Complete(call.get(), CallStatus::kDisconnected, {});
    }
  }
  if (transport_failed) Disconnect("rpc failure: " + why, CallStatus::kDisconnected);
}

void Connection::ExpireCalls(Clock::time_point now) {
  bool stalled = false;
  for (PendingCall *call : in_libnfs_) {
    if (call->completed || now < call->deadline) continue;
    nache_log(kLogWarn, kComponent,
              "connection %d: compound '%s' timed out after %d ms", index_,
              call->compound->tag().c_str(), opts_.call_timeout_ms);
    // Nothing at all came back since this call went out: the connection is
    // presumed dead (a silent peer never resets TCP).
    if (last_reply_ < call->sent_at) stalled = true;
    Complete(call, CallStatus::kTimeout, {});
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
  for (const PendingCall *call : in_libnfs_) {
    if (!call->completed) {
      wait = std::min(wait, MsUntil(now, call->deadline) + 1);
    }
  }
  return int(std::max<int64_t>(wait, 0));
}

void Connection::Disconnect(const std::string &why, CallStatus status) {
  bool was_up = phase_ == Phase::kUp;
  if (rpc_ != nullptr) {
    if (was_up || !in_libnfs_.empty()) {
      nache_log(status == CallStatus::kShutdown ? kLogInfo : kLogWarn,
                kComponent,
                "connection %d: %s; failing %zu call(s) in flight", index_,
                why.c_str(), in_libnfs_.size());
    }
    tearing_down_ = true;
    for (PendingCall *call : in_libnfs_) {
      if (!call->completed) Complete(call, status, {});
    }
    for (auto &call : failed_rpcs_) Complete(call.get(), status, {});
    failed_rpcs_.clear();
    // libnfs may call ReplyCb (cancelled) for PDUs it still holds; those
    // are completed already and just get deleted. Whatever it does not call
    // back for is deleted below.
    rpc_destroy_context(rpc_);
    rpc_ = nullptr;
    for (PendingCall *call : in_libnfs_) delete call;
    in_libnfs_.clear();
    tearing_down_ = false;
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
  Upstream::Callback done = std::move(call->done);
  // The Compound is not needed any more (libnfs encoded it at send time);
  // free CallAsync's copy now rather than when libnfs lets go of the call.
  call->owned.reset();
  call->compound = nullptr;
  if (done) done(status, std::move(reply));
}

}  // namespace upstream
}  // namespace nache
