// Internal to upstream/: one TCP connection to the upstream server, driven by
// its own event-loop thread.
//
// The loop thread owns the socket and its RPC transport (rpc/) outright: it
// connects (non-blocking, from a reserved port when it may, with a connect
// timeout), encodes every call (libnfs' XDR for the COMPOUND, our own RPC
// header with the call's AUTH_SYS credential, or under the connection's
// RPCSEC_GSS context, made as it connects), polls the socket and an
// eventfd, decodes replies, times calls out, and on failure drops the
// transport, fails what was in flight with kDisconnected, and reconnects
// with exponential backoff (100 ms .. 5 s). It never resends: a COMPOUND
// may not be idempotent.
//
// Other threads only call Submit() (a mutex-protected queue plus an eventfd
// wake-up) and read the atomics behind connected() and load().
//
// Upstream_Identity = user (UpstreamOptions::user_identity): a call made
// for a user carries that user's credentials (PendingCall::user_creds),
// got on the caller's thread, where the KDC was asked for everything
// (gss_krb5.h, Impersonate: S4U2Self and S4U2Proxy). The loop then makes
// the user's context on this connection at the user's first call without
// blocking: the mechanism's steps are local (the service ticket is in the
// user's credentials), and the RPCSEC_GSS_INIT exchange is an ordinary
// call whose reply continues it; the user's calls wait in its
// UserContext meanwhile, and other users' calls go on. No lock is taken
// for any of it (loop thread only). At most user_contexts_max contexts
// are kept per connection, the least recently used idle one dropped
// first. A user context the server refuses (RPCSEC_GSS_CREDPROBLEM or
// CTXPROBLEM: expired, or the server forgot it) is dropped, its call
// fails retryably and the next call makes a new one; the machine context
// and the connection stay. Calls as root (uid 0), which is how nache makes
// all of its own, go under the machine context (upstream.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "upstream/compound.h"
#include "upstream/session41.h"
#include "upstream/types.h"
#include "upstream/upstream.h"
#include "util/mutex.h"

namespace nache {
namespace rpc {
class Transport;
enum class ReplyStatus;
class XdrIn;
class RpcsecGss;
class GssCredentials;
class GssInitCall;
}  // namespace rpc
namespace upstream {

// The one retry policy of the upstream client: reconnects and client-id
// re-establishment back off exponentially between these bounds.
constexpr int kMinBackoffMs = 100;
constexpr int kMaxBackoffMs = 5000;

using Clock = std::chrono::steady_clock;

class Connection;

// One call on its way through a connection. Created by the caller's thread,
// then owned by the connection: by its submit queue, then by its loop thread
// (in_flight_ once sent, until its reply, its timeout or the end of the
// transport).
struct PendingCall {
  Compound *compound = nullptr;         // the operations (owned or caller's)
  std::unique_ptr<Compound> owned;      // CallAsync's moved-in Compound
  Creds creds;                          // AUTH_SYS identity of this call
  Upstream::Callback done;              // completion; runs exactly once
  Clock::time_point deadline;           // completes kTimeout after this
  bool has_preset = false;              // complete with preset, never send
  CallStatus preset = CallStatus::kOk;  // the status to complete with
  uint32_t preset_nfs = 0;              // with kOk: the reply's NFS status
  // Upstream_Identity = user: the caller's principal and the credentials
  // its context is made on (null: the connection's machine context, or
  // AUTH_SYS). Set on the caller's thread (UpstreamOptions::user_identity).
  std::string user;
  std::shared_ptr<rpc::GssCredentials> user_creds;
  // Instead of a Compound (null then): a COMPOUND the caller encodes
  // whole, sent as is (NFSv4.1 session set-up: EXCHANGE_ID,
  // CREATE_SESSION, BIND_CONN_TO_SESSION, which take no SEQUENCE);
  // raw_reply reads the reply's XDR before done runs with kOk.
  std::function<bool(std::string *)> raw_encode;
  std::function<void(rpc::XdrIn *)> raw_reply;
  const char *raw_tag = "raw";  // its name in logs (static storage)
  // Loop thread only:
  bool completed = false;     // done has run
  Clock::time_point sent_at;  // when it was handed to the transport
  uint32_t xid = 0;           // its RPC XID once sent
  // NFSv4.1: the session and slot it goes out on, once it has one.
  std::shared_ptr<Session41> session;
  SlotTable::Slot slot;
  // The user context it was sent under (counts it in flight there).
  std::shared_ptr<struct UserContext> user_ctx;
  // NFSv4.1: this call is a probe (SEQUENCE alone) settling an uncertain
  // slot, and after is the call that waits for it: sent once the probe is
  // answered, failed with the probe's status when it is not.
  std::unique_ptr<PendingCall> after;
};

// Upstream_Identity = user: one user's RPCSEC_GSS context on one
// connection, made on the connection's first call as that user and used
// by its later ones. Loop thread only.
struct UserContext {
  std::string principal;  // "alice@EXAMPLE.ORG"
  // The context, once made (null while it is being made).
  std::shared_ptr<rpc::RpcsecGss> gss;
  // While it is being made: the mechanism's side, the handle the server
  // gave, round trips so far, the INIT call's XID and deadline, and
  // whether the mechanism's side is complete.
  std::unique_ptr<rpc::GssInitiator> init;
  std::string handle;
  int rounds = 0;
  uint32_t init_xid = 0;
  Clock::time_point init_deadline;
  bool init_complete = false;
  // Calls waiting for it to be made, in order.
  std::deque<std::unique_ptr<PendingCall>> waiting;
  size_t in_flight = 0;  // calls sent under gss, not yet completed
  std::list<std::string>::iterator lru;  // in Connection::user_lru_
};

// For logs: the COMPOUND's tag, or the session operation's name (a raw
// call has no Compound, and a completed call has none left).
const char *CallTag(const PendingCall &call);

// Told about connection state changes, on the connection's loop thread.
class ConnectionListener {
 public:
  virtual ~ConnectionListener() = default;
  virtual void OnConnectionUp(int index) = 0;
  virtual void OnConnectionDown(int index) = 0;
  // NFSv4.1: the session calls go out on (null: none yet).
  virtual std::shared_ptr<Session41> CurrentSession() { return nullptr; }
  // Calls go on a session (NFSv4.1 and later), with SEQUENCE: as
  // configured, until the server turns out to speak only NFSv4.0.
  virtual bool Sessions() const { return false; }
  // NFSv4.1: a SEQUENCE result of session s came back for a call sent at
  // sent (its lease, its status flags, a lost session).
  virtual void OnSequence(Session41 &s, const nfs41::SequenceRes &r,
                          Clock::time_point sent) {}
  // NFSv4.1: a slot was given back; connections waiting for one go on.
  virtual void OnSlotFreed() {}
};

class Connection {
 public:
  Connection(int index, const UpstreamOptions &opts,
             ConnectionListener *listener);
  ~Connection();  // Stop()s if still running
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;

  // Starts the loop thread, which connects in the background.
  void Start();
  // Stops the loop: everything queued or in flight completes kShutdown.
  // Must not be called from a loop thread (it joins).
  void Stop();

  // Hands a call to the loop. Thread-safe. The call completes on the loop
  // thread (with kDisconnected if the connection is not up when the loop
  // picks it up), or inline with kShutdown once the connection is stopped.
  void Submit(std::unique_ptr<PendingCall> call);

  // Wakes the loop (a slot became free).
  void Wake();
  // Some of its calls wait for a free slot (NFSv4.1): only then does a
  // freed slot need to wake it.
  bool waiting_for_slot() const {
    return waiting_for_slot_.load(std::memory_order_acquire);
  }

  int index() const { return index_; }
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // Calls submitted and not yet completed (for least-loaded dispatch).
  int load() const { return load_.load(std::memory_order_relaxed); }

 private:
  enum class Phase { kIdle, kConnecting, kUp, kBackoff };

  void Loop();
  void StartConnect();
  void OnConnectable();
  void DrainSubmissions();
  void Send(std::unique_ptr<PendingCall> call);
  void ServiceSocket(int revents);
  // RPCSEC_GSS: establishes the connection's context on the new
  // transport, blocking the loop (bounded by the call timeout per round
  // trip); false with *why.
  bool EstablishGss(std::string *why);
  // One context-creation call with token, answered (or not) before
  // deadline: the results in *res, the reply's verifier in *verf.
  bool GssInitRoundTrip(const std::string &handle, const std::string &token,
                        Clock::time_point deadline, rpc::GssInitRes *res,
                        std::string *verf, std::string *why);
  void OnReply(PendingCall *call, rpc::ReplyStatus status, rpc::XdrIn *results);
  // Upstream_Identity = user: the context call goes under, made or being
  // made (started here at the user's first call; null when it cannot be
  // started, call then completed).
  std::shared_ptr<UserContext> UserContextFor(PendingCall *call);
  // Sends the next INIT (or CONTINUE_INIT) call of uc with token; false
  // (uc failed) when it cannot.
  bool SendUserInit(const std::shared_ptr<UserContext> &uc,
                    const std::string &token);
  void OnUserInitReply(const std::weak_ptr<UserContext> &weak,
                       const std::shared_ptr<rpc::GssInitCall> &call,
                       rpc::ReplyStatus status, rpc::XdrIn *results);
  // uc is made: its waiting calls go out.
  void UserContextReady(const std::shared_ptr<UserContext> &uc);
  // uc could not be made: forgotten, and its waiting calls fail, with
  // NFS4ERR_ACCESS (refused) or retryably (retry).
  void UserContextFailed(const std::shared_ptr<UserContext> &uc,
                         const std::string &why, bool retry);
  // Forgets uc (the server refused it, or it is evicted).
  void DropUserContext(const std::shared_ptr<UserContext> &uc);
  // Completes call, not sent, with status NFS4ERR_ACCESS.
  void CompleteRefused(PendingCall *call);
  void ExpireCalls(Clock::time_point now);
  // NFSv4.1: gives call's slot back after outcome; true when the call
  // must be sent again at once (on the slot's corrected sequence id).
  bool ReleaseSlot(PendingCall *call, SlotTable::Outcome outcome);
  // NFSv4.1: call got an uncertain slot: sends a probe on it instead, with
  // call waiting behind it.
  void SendProbe(std::unique_ptr<PendingCall> call);
  // Puts a call not sent (or not executed) back at the head of the calls
  // waiting for a slot, to be sent on the next turn of the loop.
  void Requeue(std::unique_ptr<PendingCall> call);
  void RetrySlotWaiters();
  int PollTimeoutMs(Clock::time_point now) const;
  // Drops the transport, completing everything it held with status, and
  // schedules a reconnect after the current backoff.
  void Disconnect(const std::string &why, CallStatus status);
  void Complete(PendingCall *call, CallStatus status, CompoundReply &&reply);

  const int index_;                     // position in the pool, for logs
  const UpstreamOptions opts_;          // server, timeouts, auth machine name
  ConnectionListener *const listener_;  // the Upstream (outlives us)
  int wake_fd_ = -1;                    // eventfd: Submit() and Stop() wake-ups
  std::thread thread_;                  // the loop

  Mutex mu_{"connection"};
  // Not yet seen by the loop.
  std::deque<std::unique_ptr<PendingCall>> submitted_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;  // Stop() was called

  std::atomic<bool> connected_{false};         // phase_ == kUp, for dispatchers
  std::atomic<int> load_{0};                   // submitted and not completed
  std::atomic<bool> waiting_for_slot_{false};  // !slot_wait_.empty()

  // Loop thread only.
  int connect_fd_ = -1;                        // the socket while kConnecting
  std::unique_ptr<rpc::Transport> transport_;  // while kUp
  // RPCSEC_GSS: the context every call of transport_ goes under (null:
  // AUTH_SYS); made anew with each transport.
  std::shared_ptr<rpc::RpcsecGss> gss_;
  Phase phase_ = Phase::kIdle;        // connection state machine
  Clock::time_point phase_deadline_;  // connect timeout / end of backoff
  int backoff_ms_ = 100;              // next reconnect delay
  // Sent and not yet answered: owned here (raw, for the reply callback
  // that names them), deleted at their reply, their timeout (the
  // transport forgets them then) or the transport's end.
  std::unordered_set<PendingCall *> in_flight_;
  // Upstream_Identity = user: users' contexts on transport_, by principal
  // (gone with it), and their principals, most recently used first.
  std::unordered_map<std::string, std::shared_ptr<UserContext>> user_ctx_;
  std::list<std::string> user_lru_;
  // NFSv4.1: calls waiting for a free slot, in order.
  std::deque<std::unique_ptr<PendingCall>> slot_wait_;
  Clock::time_point last_reply_;  // last reply of any kind
};

}  // namespace upstream
}  // namespace nache
