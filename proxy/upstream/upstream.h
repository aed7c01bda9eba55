// The upstream NFSv4 client: a pool of connections to one remote server
// sharing one client id (NFSv4.0: SETCLIENTID/SETCLIENTID_CONFIRM, RENEW,
// a callback service of our own; NFSv4.1: EXCHANGE_ID, one session with
// its back channel on our own connections, SEQUENCE), a lease renewal
// timer, and reconnection with backoff.
//
// Threading: every connection's socket and RPC transport are owned by
// exactly one event-loop thread. Call() may be used from any
// thread: it marshals the compound onto a connection's loop (eventfd wake-up)
// and waits for the reply. Callbacks of CallAsync run on a loop thread and
// must not block.
//
// Failure model: a lost connection fails its in-flight calls with
// kDisconnected (never resent blindly: a COMPOUND may not be idempotent); the
// connection reconnects with exponential backoff (100 ms .. 5 s). When the
// server reports NFS4ERR_STALE_CLIENTID / NFS4ERR_EXPIRED (NFSv4.1: a lost
// session or client id) the client id is re-established once and the
// epoch() increments, so owners of open/lock state know to reclaim it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rpc/rpc_transport.h"
#include "rpc/rpcsec_gss.h"
#include "upstream/compound.h"
#include "upstream/owners.h"
#include "upstream/types.h"

namespace nache {
namespace upstream {

struct UpstreamOptions {
  std::string server;  // host name or address of the remote
  int port = 2049;
  int connections = 2;          // size of the connection pool (>= 1)
  int call_timeout_ms = 30000;  // a call without a reply fails kTimeout
  int connect_timeout_ms = 5000;
  // NFSv4 client identity: the id string must be stable across restarts of
  // this proxy (the server uses it to purge our previous incarnation's
  // state); the verifier changes on every start.
  std::string client_id;
  // Callback address advertised in SETCLIENTID (r_netid "tcp", r_addr
  // "a.b.c.d.p1.p2"); empty: advertise none (no delegations).
  std::string callback_netid = "tcp";
  std::string callback_uaddr;
  uint32_t callback_program = 0x40000000;
  uint32_t callback_ident = 1;
  // Machine name put in AUTH_SYS credentials.
  std::string auth_machine = "nache";
  // RPCSEC_GSS (Upstream_Sec = krb5, krb5i or krb5p): each connection, as
  // it comes up, establishes a context with an initiator from this
  // factory, and every call goes under it with gss_service; empty:
  // AUTH_SYS with the caller's identity.
  std::function<std::unique_ptr<rpc::GssInitiator>()> gss_initiator;
  rpc::GssService gss_service = rpc::GssService::kNone;
  // Upstream_Identity = user (with gss_initiator): each call not made as
  // root (uid 0) goes under an RPCSEC_GSS context of the caller's own
  // principal instead of the machine's, with these credentials; called on
  // the caller's thread before the call is handed to a connection (it may
  // wait for the KDC there, never under a lock of ours). Calls as root,
  // which is how nache makes every call of its own, stay on the machine
  // context: state set-up and upkeep (SETCLIENTID and its CONFIRM, RENEW,
  // EXCHANGE_ID, CREATE_SESSION, BIND_CONN_TO_SESSION, SEQUENCE alone,
  // DESTROY_*), delegation returns, reclaims, CLOSE and OPEN_DOWNGRADE,
  // and warm-ups. That is allowed: under NFSv4.0 the server ties a client
  // id to the principal that set it (RFC 7530 16.33.5: SETCLIENTID_CONFIRM
  // and RENEW from the same one, the machine's here), while opens, locks
  // and delegations belong to the client id, not to a principal; under
  // NFSv4.1 nache asks for no state protection (SP4_NONE, RFC 8881 18.35),
  // so any principal may use the client id's state, and the session's
  // upkeep under the machine's is what RFC 8881 2.10.8.3 describes.
  // Empty: every call under the machine context.
  struct UserIdentity {
    std::string principal;                       // "alice@EXAMPLE.ORG"
    std::shared_ptr<rpc::GssCredentials> creds;  // null: none to be had
    std::string error;                           // why not, naming the user
    bool transient = false;  // the KDC was not reached: retryable
  };
  std::function<UserIdentity(const Creds &)> user_identity;
  size_t user_contexts_max = 64;  // users' contexts kept per connection
  // owner and owner_group strings in attributes, both ways (owners.h);
  // null: numeric, and names from the remote map to nobody.
  std::shared_ptr<OwnerCodec> owners;
  // NFSv4 minor version: 0 (SETCLIENTID, RENEW, a callback service of our
  // own), 1 (EXCHANGE_ID, a session, SEQUENCE in every COMPOUND, the back
  // channel on our own connections, served by back_channel) or 2 (the same
  // with NFSv4.2's operations; 1 when the server refuses 4.2).
  uint32_t minor_version = 0;
  std::function<rpc::ReplyStatus(const rpc::PeerCall &, rpc::XdrIn *,
                                 std::string *)>
      back_channel;
  // NFSv4.1: called with each new session's id and the number of its
  // back-channel slots once CREATE_SESSION succeeded, on the loop thread
  // of the connection it came on, before that connection reads anything
  // more (a callback on the new session comes after). The back channel's
  // slot table belongs to the session: it starts afresh
  // (callback::BackChannel::SetSession).
  std::function<void(const std::array<uint8_t, 16> &session,
                     uint32_t back_slots)>
      on_new_session;
  // Called on the state thread each time a client id is confirmed (the
  // first time and after every re-establishment), before held calls are
  // released: state of the previous id (opens, delegations) is gone.
  std::function<void(uint64_t epoch)> on_new_clientid;
};

// Connection state, for logs and metrics.
enum class UpstreamState { kConnecting, kReady, kDown };

class Upstream {
 public:
  using Callback = std::function<void(CallStatus, CompoundReply &&)>;

  virtual ~Upstream() = default;

  // Creates the client and starts its loop threads. Does not block on the
  // network: the pool connects in the background.
  static std::unique_ptr<Upstream> Create(const UpstreamOptions &opts);

  // Waits up to timeout_ms for a connection and a confirmed client id (not
  // one a reply has just shown lost: then for its replacement). Returns
  // true when ready.
  virtual bool WaitReady(int timeout_ms) = 0;

  // Sends one COMPOUND with the caller's credentials and waits for the reply.
  // Thread-safe. Fills a zero clientid in OPEN/LOCK/LOCKT/RENEW args with
  // the current client id. Returns the transport outcome; reply->status has
  // the NFS status when kOk.
  virtual CallStatus Call(Compound &c, const Creds &creds,
                          CompoundReply *reply) = 0;

  // Asynchronous form: the Compound is moved in; cb runs on a loop thread.
  virtual void CallAsync(Compound c, const Creds &creds, Callback cb) = 0;

  virtual uint64_t clientid() const = 0;
  // Increments each time the client id is (re-)established after the first.
  virtual uint64_t epoch() const = 0;
  virtual UpstreamState state() const = 0;
  // Lease time (seconds) reported by the server.
  virtual uint32_t lease_time() const = 0;
  // Until when our lease is known to hold: the send time of the last
  // successful SETCLIENTID_CONFIRM or RENEW plus 9/10 of the lease (the
  // server starts counting no earlier than it receives the request).
  // Delegations may be trusted only before it.
  virtual std::chrono::steady_clock::time_point lease_valid_until() const = 0;
  // The last RENEW answered NFS4ERR_CB_PATH_DOWN: the server cannot reach
  // our callback service, so it will grant no delegations.
  virtual bool callback_path_down() const = 0;
  // The minor version COMPOUNDs go out with: as configured until a
  // session is made, then the session's (2 falls back to 1 on a server
  // without NFSv4.2). NFSv4.2's operations need 2.
  virtual uint32_t minor_version() const { return 0; }
  // Operations a COMPOUND of ours may carry (the SEQUENCE that the upstream
  // adds on a session not counted): on NFSv4.1 what the server granted
  // for the current session, less one; 0 when no session bounds it
  // (NFSv4.0, or no session yet). Builders of long COMPOUNDs (batches of
  // REMOVEs or creates) cut them to it: a server refuses a longer one.
  virtual uint32_t max_operations() const { return 0; }

  // Gives up the client id and all its state at the server: the next id
  // is established under a new verifier, so the server treats us as a
  // restarted client and drops the old id's opens, locks, delegations and
  // replay caches (RFC 7530 16.33.5). For an NFSv4.0 open-owner whose
  // request may or may not have been executed and cannot be resent any
  // more: its seqid is unknown, and only a new client id makes it known
  // again. on_new_clientid runs as after any new id.
  virtual void RestartClient(const char *why) = 0;

  // Stops the loops; in-flight calls complete with kShutdown.
  virtual void Shutdown() = 0;
  // The owner has reclaimed what it could after a new client id (NFSv4.1:
  // RECLAIM_COMPLETE is sent, and the server ends our grace).
  virtual void ReclaimDone() {}
};

}  // namespace upstream
}  // namespace nache
