// The Kerberos V5 GSS-API mechanism (MIT's libgssapi_krb5) behind
// rpcsec_gss.h's GssInitiator and GssContext: nache's own principal, its
// keys from a keytab, its tickets in a memory credential cache of its own
// (never the process's default cache, never a file), renewed by the
// library from the keytab as they expire; and, on them, credentials of a
// named user by constrained delegation (S4U2Self, then S4U2Proxy to the
// server: MIT's gss_acquire_cred_impersonate_name), so that the server
// sees that user.
//
// Thread safety: a KrbCredentials is shared by the connections of one
// export (MIT's credential handles may be used from several threads);
// each initiator and context belongs to one connection's loop thread.
// Acquire and Impersonate talk to the KDC (blocking, up to the library's
// KDC timeout): never call them under a lock another thread waits for,
// nor on a loop thread. NewInitiator does too while the keytab's first
// ticket is still to be had (Acquire deferred it): on a loop thread that
// is one more blocking step of the connection's set-up, which blocks for
// its context anyway.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "rpc/rpcsec_gss.h"
#include "rpc/rpcsec_gss_server.h"

namespace nache {
namespace rpc {

struct KrbOptions {
  std::string keytab;  // the client keytab (absolute path)
  // The principal to be, as in the keytab ("nfs/box.example.org@REALM");
  // empty: the keytab's first.
  std::string client_principal;
  // The server's: "nfs@host" (a host-based service name) or a full
  // principal "nfs/host@REALM" (a '/' in it says which).
  std::string service;
  // Name of the memory credential cache (unique per export): nache's own
  // tickets, and the users' (each impersonation keeps the S4U2Self and
  // S4U2Proxy tickets of its user in a memory cache the library makes for
  // it, gone with the credentials).
  std::string ccache_name;
};

// Why an impersonation failed.
struct KrbError {
  std::string message;  // names the user and gives the library's reason
  // The KDC could not be reached (or did not answer): trying again later
  // may succeed. False: the KDC (or the library) refused, e.g. a user it
  // does not know, or a principal not allowed to delegate to the server.
  bool transient = false;
};

class KrbCredentials : public GssCredentials {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Acquires the initiator credentials: reads the keytab and gets a
  // first ticket from the KDC (MIT does at once). A KDC out of reach does
  // not fail it (a branch box may boot while the WAN is down): *deferred
  // (when given) then says why, and the credentials are got at their
  // first use instead (NewInitiator, Impersonate: each try talks to the
  // KDC, and fails, transiently, while it stays out of reach). Null with
  // *err when the keytab or the names are unusable, or the KDC refuses.
  static std::shared_ptr<KrbCredentials> Acquire(
      const KrbOptions &o, std::string *err, std::string *deferred = nullptr);
  ~KrbCredentials() override = default;
  // A new context establishment with the server, on these credentials.
  std::unique_ptr<GssInitiator> NewInitiator() override = 0;
  // The principal these credentials are ("nfs/box.example.org@REALM", or
  // the impersonated user's); empty when the library cannot say.
  virtual std::string principal() const = 0;
  // Credentials of user (a principal, "alice@EXAMPLE.ORG") by constrained
  // delegation on these (the keytab's): S4U2Self now, and S4U2Proxy to the
  // server now too (a first context token, thrown away), so that the
  // service ticket is in the user's cache and contexts made later on a
  // loop thread ask the KDC nothing while it lasts. The KDC must allow
  // this principal both (ok_to_auth_as_delegate, and delegation to the
  // server's principal: config/README.md). Null with *err on failure.
  // Not on impersonated credentials.
  virtual std::shared_ptr<KrbCredentials> Impersonate(const std::string &user,
                                                      KrbError *err) = 0;
  // Until when contexts can be made on these credentials: the user's
  // tickets' end for impersonated ones (then impersonate again),
  // TimePoint::max() for the keytab's (the library renews them).
  virtual TimePoint expires() const = 0;
};

// nache's keys from its keytab, as an acceptor: the contexts a peer makes
// with us (the remote calling our NFSv4.0 callback service back under
// RPCSEC_GSS: rpcsec_gss_server.h). No KDC is asked: accepting needs only
// the keys (and the replay cache MIT keeps, as Ganesha's own acceptor
// does). Thread safety: NewAcceptor may be called from any thread; each
// acceptor, and its context, belongs to the thread that drives it.
class KrbAcceptorCredentials {
 public:
  // keytab: absolute path. principal: ours ("nfs/box.example.org@REALM"),
  // the only one whose tickets are taken; empty: any the keytab holds.
  // Null with *err when the keytab or the name is unusable.
  static std::shared_ptr<KrbAcceptorCredentials> Acquire(
      const std::string &keytab, const std::string &principal,
      std::string *err);
  virtual ~KrbAcceptorCredentials() = default;
  virtual std::unique_ptr<GssAcceptor> NewAcceptor() = 0;
};

}  // namespace rpc
}  // namespace nache
