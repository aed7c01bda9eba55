// The Kerberos V5 GSS-API mechanism (MIT's libgssapi_krb5) behind
// rpcsec_gss.h's GssInitiator and GssContext: nache's own principal, its
// keys from a keytab, its tickets in a memory credential cache of its own
// (never the process's default cache, never a file), renewed by the
// library from the keytab as they expire.
//
// Thread safety: a KrbCredentials is shared by the connections of one
// export (MIT's credential handles may be used from several threads);
// each initiator and context belongs to one connection's loop thread.
#pragma once

#include <memory>
#include <string>

#include "rpc/rpcsec_gss.h"

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
  // Name of the memory credential cache (unique per export).
  std::string ccache_name;
};

class KrbCredentials {
 public:
  // Acquires the initiator credentials (reads the keytab; talks to the
  // KDC later, at the first context). Null with *err when the keytab or
  // the names are unusable.
  static std::shared_ptr<KrbCredentials> Acquire(const KrbOptions &o,
                                                 std::string *err);
  virtual ~KrbCredentials() = default;
  // A new context establishment with the server, on these credentials.
  virtual std::unique_ptr<GssInitiator> NewInitiator() = 0;
};

}  // namespace rpc
}  // namespace nache
