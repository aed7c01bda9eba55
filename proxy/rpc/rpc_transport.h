// ONC RPC version 2 (RFC 5531) over one connected TCP stream, in both
// directions: our calls, their replies matched by XID; and calls from the
// peer on the same stream (the NFSv4.1 back channel: the server calls us on
// the connection we opened), handed to a handler whose reply goes back on
// it. Record marking with fragments reassembled (RFC 5531 section 11).
//
// Why our own: libnfs 4.0.0's client context drops a CALL record it
// receives (it takes every record for a reply), and its server context
// takes every record for a call (proxy/upstream/NFSV41.md). libnfs stays
// the XDR of NFSv4.0's operations; this is only the envelope.
//
// It owns no thread and never blocks: the owner's event loop polls fd() for
// WantEvents() and calls Service(revents). Timeouts are the owner's
// (Cancel). Thread safety: none; one thread (the loop's) calls everything,
// and the callbacks run on it, inside Service or FailAll.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "rpc/xdr.h"

namespace nache {
namespace rpc {

// AUTH_SYS (RFC 5531 appendix A).
struct AuthSys {
  uint32_t stamp = 0;
  std::string machine;  // at most 255 bytes
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> gids;  // at most 16 are sent
};

// How a call ended.
enum class ReplyStatus {
  kOk,            // accepted, SUCCESS: the results follow
  kProgUnavail,   // accepted, PROG_UNAVAIL
  kProgMismatch,  // accepted, PROG_MISMATCH
  kProcUnavail,   // accepted, PROC_UNAVAIL
  kGarbageArgs,   // accepted, GARBAGE_ARGS
  kSystemErr,     // accepted, SYSTEM_ERR
  kRpcMismatch,   // denied, RPC_MISMATCH
  kAuthError,     // denied, AUTH_ERROR (a handler's: AUTH_TOOWEAK)
  kBadReply,      // the reply to it did not parse
  kDisconnected,  // the transport failed or closed before a reply came
};
const char *ReplyStatusName(ReplyStatus s);

// The first XID of a new transport: 32 random bits (the kernel's, else a
// hash of the clocks and the process), so that a restarted proxy, or a new
// connection, does not repeat XIDs a server's duplicate request cache may
// still hold with another call's reply.
uint32_t InitialXid();

// RPCSEC_GSS's flavour number (RFC 2203; rpcsec_gss.h).
constexpr uint32_t kAuthRpcsecGss = 6;

// A call the peer made to us.
struct PeerCall {
  uint32_t xid = 0;
  uint32_t prog = 0, vers = 0, proc = 0;
  uint32_t cred_flavor = 0;  // AUTH_NONE 0, AUTH_SYS 1, ...
};

// The server's side of a call's security beyond AUTH_NONE and AUTH_SYS
// (RPCSEC_GSS, rpcsec_gss_server.h): it checks a call's credential and
// verifier, opens its arguments, answers what is its own business (a
// context's creation and destruction), and seals the results. Used on the
// transport's thread only; Open and Seal of one call run in one Service.
class PeerSecurity {
 public:
  enum class Verdict {
    kServe,        // the handler serves the call, *args are its arguments
    kAnswered,     // *results are the reply's; the handler is not asked
    kGarbageArgs,  // GARBAGE_ARGS (arguments that do not open)
    kDrop,         // no reply at all (RFC 2203 5.3.3.1: a replayed call)
    kDenied,       // MSG_DENIED, AUTH_ERROR with reply->auth_stat
  };
  // What the transport read of the call; pointers into its record.
  struct Call {
    const PeerCall *call = nullptr;
    const char *header = nullptr;  // from the XID through the credential
    size_t header_len = 0;
    const char *cred = nullptr;  // the credential's body
    uint32_t cred_len = 0;
    uint32_t verf_flavor = 0;
    const char *verf = nullptr;  // the verifier's body
    uint32_t verf_len = 0;
  };
  // The reply Open decided on: its verifier, and what Seal needs.
  struct Reply {
    uint32_t verf_flavor = 0;  // AUTH_NONE unless Open says otherwise
    std::string verf;          // the verifier's body
    uint32_t auth_stat = 0;    // kDenied's
    uint64_t context = 0;      // the security's own: whose call this is
    uint32_t seq = 0;          // and its sequence number
    uint32_t service = 0;      // and how its results are sealed
  };
  virtual ~PeerSecurity() = default;
  // *plain: storage for unwrapped arguments (*args then reads from it).
  virtual Verdict Open(const Call &c, XdrIn *args, std::string *plain,
                       std::string *results, Reply *reply) = 0;
  // After the handler succeeded: its results, sealed, appended to *out.
  // False: they cannot be (the reply is SYSTEM_ERR).
  virtual bool Seal(const Reply &reply, const std::string &results,
                    std::string *out) = 0;
};

// Appends a call's arguments to its record; false: nothing to send.
using EncodeFn = std::function<bool(std::string *record)>;

// A call's security beyond AUTH_NONE and AUTH_SYS (RPCSEC_GSS,
// rpcsec_gss.h): its credential and verifier, what it does to the
// arguments and to the results. Used on the transport's thread only.
class CallSecurity {
 public:
  virtual ~CallSecurity() = default;
  // Appends the credential and the verifier to rec, whose RPC header
  // starts (at its XID) at offset hdr. *seq: what OpenReply needs to match
  // the reply to this call.
  virtual bool PutCredVerf(std::string *rec, size_t hdr, uint32_t *seq) = 0;
  // Appends the arguments encode makes, as they are or wrapped.
  virtual bool PutArgs(uint32_t seq, const EncodeFn &encode,
                       std::string *rec) = 0;
  // Checks the reply's verifier and, when the results are wrapped,
  // unwraps them into *plain and points *results at it. False: the reply
  // is not the server's answer to this call (kBadReply).
  virtual bool OpenReply(uint32_t seq, uint32_t verf_flavor, const char *verf,
                         uint32_t verf_len, XdrIn *results,
                         std::string *plain) = 0;
  // The server refused the credential: AUTH_ERROR with this auth_stat.
  virtual void Refused(uint32_t auth_stat) {}
};

class Transport {
 public:
  // The reply to one of our calls. results: the procedure's results (kOk
  // only, else null), valid during the call only.
  using ReplyFn = std::function<void(ReplyStatus, XdrIn *results)>;
  // Serves a call from the peer: appends the procedure's results to
  // *results and returns kOk; or appends the lowest and the highest version
  // of the program it serves (two XDR unsigned ints, RFC 5531's
  // mismatch_info) and returns kProgMismatch; or returns kProgUnavail,
  // kProcUnavail, kGarbageArgs or kSystemErr (nothing appended), or
  // kAuthError (refused: AUTH_ERROR, AUTH_TOOWEAK, for a call whose
  // flavour the service does not accept). args: the arguments. A call
  // whose header (credential, verifier) does not parse is answered
  // GARBAGE_ARGS without the handler. An RPCSEC_GSS call goes through the
  // PeerSecurity first, and without one is refused (AUTH_BADCRED).
  using CallHandler = std::function<ReplyStatus(const PeerCall &, XdrIn *args,
                                                std::string *results)>;

  // fd: a connected stream socket; the transport makes it non-blocking and
  // closes it when destroyed. A record (all fragments) longer than
  // max_record (at most 2^31 - 1) ends the connection, checked on each
  // fragment's header before its bytes are read or buffered; a call or a
  // reply of ours longer than it is not sent.
  explicit Transport(int fd, size_t max_record = 16u << 20);
  ~Transport();  // FailAll, then closes the socket
  Transport(const Transport &) = delete;
  Transport &operator=(const Transport &) = delete;

  int fd() const { return fd_; }
  // Backpressure on a peer that calls without reading the replies: while
  // more than max bytes wait to be sent, no more is read or parsed
  // (WantEvents asks no POLLIN); it resumes as the socket takes them.
  // 0, the default: no bound.
  void set_max_queued(size_t max) { max_queued_ = max; }
  // Calls from the peer go to h; without one they are answered
  // PROG_UNAVAIL.
  void SetCallHandler(CallHandler h) { handler_ = std::move(h); }
  // RPCSEC_GSS calls from the peer go through sec (not owned: it outlives
  // the transport, and may be shared by transports of one thread).
  void SetPeerSecurity(PeerSecurity *sec) { peer_security_ = sec; }

  // Queues a call (prog, vers, proc) with XDR-encoded args, as auth (null:
  // AUTH_NONE); done runs once with the outcome. Returns the call's XID.
  uint32_t Call(uint32_t prog, uint32_t vers, uint32_t proc,
                const AuthSys *auth, const std::string &args, ReplyFn done);
  // The same, the arguments appended to the record by encode (no copy of a
  // large WRITE's data). When encode returns false or the record would be
  // longer than max_record, nothing is queued, done is dropped unrun, and
  // Call returns false (the first form then returns XID 0).
  using EncodeFn = rpc::EncodeFn;
  bool Call(uint32_t prog, uint32_t vers, uint32_t proc, const AuthSys *auth,
            const EncodeFn &encode, ReplyFn done, uint32_t *xid);
  // The same under sec (RPCSEC_GSS), which seals the call and opens its
  // reply; kept alive until the reply. A reply sec does not accept is
  // kBadReply; a refusal of the credential is kAuthError, after
  // sec->Refused.
  bool Call(uint32_t prog, uint32_t vers, uint32_t proc,
            std::shared_ptr<CallSecurity> sec, const EncodeFn &encode,
            ReplyFn done, uint32_t *xid);
  // Forgets a pending call (timed out): a late reply is dropped, and done
  // never runs. False when xid is not pending.
  bool Cancel(uint32_t xid);

  // POLLIN, and POLLOUT while bytes wait to be sent.
  short WantEvents() const;
  // Sends and receives what the socket takes and has, running the reply
  // callbacks and the call handler. False once the connection failed, the
  // peer closed it or broke the protocol (error() says which): the owner
  // then destroys the transport.
  bool Service(short revents);
  const std::string &error() const { return error_; }
  // Fails every pending call with kDisconnected.
  void FailAll();

  size_t pending() const { return pending_.size(); }
  size_t queued_bytes() const;
  // Replies that matched no pending call (cancelled, or never ours).
  uint64_t dropped_replies() const { return dropped_replies_; }

 private:
  bool Fail(const std::string &why);
  bool Throttled() const {
    return max_queued_ != 0 && queued_bytes() > max_queued_;
  }
  bool ReadAll();
  bool WriteAll();
  bool Parse();
  bool Dispatch(const char *rec, size_t len);
  void ServePeerCall(uint32_t xid, XdrIn *in);
  // The reply to a peer's call under peer_security_; false: none.
  bool ServeSecureCall(const PeerSecurity::Call &c, XdrIn *in,
                       std::string *rec);
  void HandleReply(uint32_t xid, XdrIn *in);
  void QueueRecord(std::string rec);

  int fd_;
  const size_t max_record_;
  size_t max_queued_ = 0;  // set_max_queued; 0: no bound
  // Parse stopped at max_queued_ with input left in in_.
  bool parse_paused_ = false;
  CallHandler handler_;
  PeerSecurity *peer_security_ = nullptr;  // SetPeerSecurity; not owned
  uint32_t next_xid_;
  // A call waiting for its reply.
  struct Pending {
    ReplyFn done;
    std::shared_ptr<CallSecurity> sec;  // null: AUTH_NONE or AUTH_SYS
    uint32_t seq = 0;                   // sec's, for its reply
  };
  bool Queue(uint32_t xid, std::string rec, Pending p);
  uint32_t NextXid();
  std::unordered_map<uint32_t, Pending> pending_;  // by XID
  // Records to send, each with its 4-byte marker; out_off_: bytes of the
  // first already sent.
  std::deque<std::string> out_;
  size_t out_off_ = 0;
  size_t out_bytes_ = 0;  // the sizes of the records in out_, summed
  // Received bytes not yet parsed start at in_off_; fragments of a record
  // not yet complete are gathered in record_.
  std::string in_;
  size_t in_off_ = 0;
  std::string record_;
  std::string error_;
  uint64_t dropped_replies_ = 0;
};

}  // namespace rpc
}  // namespace nache
