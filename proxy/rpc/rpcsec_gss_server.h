// RPCSEC_GSS version 1, the server's side (RFC 2203), for the calls a peer
// makes to us: the NFSv4.0 callback service, which a Kerberos remote calls
// back under the flavour and principal of our SETCLIENTID. It makes
// contexts (RPCSEC_GSS_INIT, _CONTINUE_INIT), checks each data call's
// credential, verifier and sequence number, opens its arguments and seals
// its results per service, and destroys contexts (RPCSEC_GSS_DESTROY).
//
// The GSS-API mechanism is behind GssAcceptor (context acceptance, token
// by token) and rpcsec_gss.h's GssContext (per-message calls), so that
// this file is only the RPC protocol: gss_krb5.h implements them with MIT
// Kerberos, the unit tests with a fake.
//
// Nothing of the peer's is trusted: every length is bounded (the
// transport's bounded reader), the contexts kept are at most
// max_contexts (the oldest goes), and only a context whose initiator is
// the allowed principal is kept: any other is refused and counted.
//
// Thread safety: none for the contexts; one thread (the callback
// service's) owns a GssServer and every transport that uses it. The
// counters may be read from any thread.
#pragma once

#include <atomic>
#include <bitset>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "rpc/rpc_transport.h"
#include "rpc/rpcsec_gss.h"

namespace nache {
namespace rpc {

// Context acceptance (GSS_Accept_sec_context), one per context made.
class GssAcceptor {
 public:
  enum class Step { kContinue, kComplete, kFailed };
  virtual ~GssAcceptor() = default;
  // in: the initiator's token. *out: the token to send back (may be
  // empty once complete). kFailed: *err says why.
  virtual Step Next(const std::string &in, std::string *out,
                    std::string *err) = 0;
  // Once Next said kComplete: the initiator's principal
  // ("nfs/files.example.org@EXAMPLE.ORG"), and the context (moved out,
  // once).
  virtual std::string peer() const = 0;
  virtual std::unique_ptr<GssContext> TakeContext() = 0;
};

// Whether principal is allowed, as "allowed" names it: a full principal
// ("nfs/host@REALM": that one), or a host-based service ("nfs@host": the
// principal service/host in any realm our KDC vouches for). Host names
// compare without regard to case.
bool PrincipalAllowed(const std::string &allowed, const std::string &principal);

struct GssServerOptions {
  // A new acceptor per context (from nache's keytab); must be set.
  std::function<std::unique_ptr<GssAcceptor>()> new_acceptor;
  // The one principal whose contexts are kept (PrincipalAllowed).
  std::string allowed_principal;
  // The weakest service a data call may use: a weaker one is refused
  // (AUTH_ERROR, AUTH_TOOWEAK).
  GssService min_service = GssService::kNone;
  // Contexts kept at once, made or being made; one more evicts the oldest.
  size_t max_contexts = 16;
  // A context refused for its principal (after the log line).
  std::function<void(const std::string &principal)> on_refused_principal;
  // A context made with the allowed principal.
  std::function<void()> on_established;
  // A line for the log (WARN): a context refused, and why.
  std::function<void(const std::string &line)> log;
};

class GssServer : public PeerSecurity {
 public:
  // The sequence window we grant (RFC 2203 5.2.3.1).
  static constexpr uint32_t kWindow = 128;

  explicit GssServer(GssServerOptions o);
  Verdict Open(const Call &c, XdrIn *args, std::string *plain,
               std::string *results, Reply *reply) override;
  bool Seal(const Reply &reply, const std::string &results,
            std::string *out) override;

  // Contexts kept (made or being made); the owning thread's only.
  size_t contexts() const { return contexts_.size(); }
  // Contexts made with the allowed principal.
  uint64_t established() const { return established_.load(); }
  // Contexts refused for their principal.
  uint64_t refused_principals() const { return refused_principals_.load(); }
  // Calls answered AUTH_ERROR (any reason), and calls dropped unanswered
  // (a sequence number replayed or below the window).
  uint64_t refused_calls() const { return refused_calls_.load(); }
  uint64_t dropped_calls() const { return dropped_calls_.load(); }

 private:
  struct Context {
    std::unique_ptr<GssAcceptor> acceptor;  // while being made
    std::unique_ptr<GssContext> gss;        // once made
    std::string principal;                  // the initiator's, once made
    uint32_t seq_max = 0;                   // the highest sequence number seen
    // Bit i: seq_max - i was seen (RFC 2203 5.3.3.1's window).
    std::bitset<kWindow> seen;
  };
  Verdict Init(const Call &c, uint32_t proc, const std::string &handle,
               XdrIn *args, std::string *results, Reply *reply);
  Verdict Data(const Call &c, uint32_t proc, uint32_t seq, uint32_t service,
               const std::string &handle, XdrIn *args, std::string *plain,
               Reply *reply);
  // Opens integrity or privacy arguments in place; false: GARBAGE_ARGS.
  bool OpenArgs(Context *ctx, uint32_t seq, uint32_t service, XdrIn *args,
                std::string *plain);
  // Whether seq is new within the window (and notes it seen).
  static bool Fresh(Context *ctx, uint32_t seq);
  Verdict Deny(Reply *reply, uint32_t auth_stat);
  Context *Find(const std::string &handle, uint64_t *id);

  const GssServerOptions opts_;
  // By id, the handle's 8 bytes: oldest first, which eviction relies on.
  std::map<uint64_t, Context> contexts_;
  uint64_t next_id_;  // the next context's id (random start)
  std::atomic<uint64_t> established_{0};
  std::atomic<uint64_t> refused_principals_{0};
  std::atomic<uint64_t> refused_calls_{0};
  std::atomic<uint64_t> dropped_calls_{0};
};

}  // namespace rpc
}  // namespace nache
