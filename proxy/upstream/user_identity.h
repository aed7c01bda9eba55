// Upstream_Identity = user: whom each caller is at the remote. A caller's
// uid is a name through the same id mapping nache uses for owners
// (IdMapper: uid 1000 is "alice@example.org"), the name's user part a
// principal in the realm of nache's own principal (alice@EXAMPLE.ORG),
// and that principal's credentials come by constrained delegation on
// nache's keytab credentials (gss_krb5.h, Impersonate: S4U2Self and
// S4U2Proxy). They are kept per uid until shortly before their tickets
// end; a refusal (no name, a principal the KDC does not know or will not
// let nache act for) is kept for a short while, logged once per while,
// naming the user; a KDC out of reach is not kept (the next call asks
// again).
//
// Thread safety: Get is thread-safe. Lock contract: mu_ guards the table
// and nothing else, and is never held across a name lookup or a KDC
// exchange: a miss asks both on the caller's thread, unlocked (two callers
// missing the same uid at once both ask; the later answer is kept), so a
// hit never waits for a miss.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "rpc/gss_krb5.h"
#include "upstream/upstream.h"
#include "util/mutex.h"

namespace nache {
namespace upstream {

class UserIdentities {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Options {
    size_t max_users = 1024;  // uids kept (least recently used go first)
    // How long a refusal is kept before the KDC is asked again.
    std::chrono::seconds refused_ttl{30};
    // Credentials are made anew this long before their tickets end.
    std::chrono::seconds renew_before{300};
    std::function<TimePoint()> now = std::chrono::steady_clock::now;
  };
  // uid_to_name: the id mapping ("alice@example.org"); false: no name.
  UserIdentities(
      std::shared_ptr<rpc::KrbCredentials> machine,
      std::function<bool(uint32_t uid, std::string *name)> uid_to_name,
      Options options);

  // The caller's principal and credentials, or why not (may wait for the
  // name lookup and the KDC on a miss: never call under a lock).
  UpstreamOptions::UserIdentity Get(const Creds &cr) EXCLUDES(mu_);

  // The principal of a name ("alice@example.org" -> "alice@REALM").
  std::string PrincipalOf(const std::string &name) const;

 private:
  struct Entry {
    UpstreamOptions::UserIdentity id;
    TimePoint until;                    // used until then
    std::list<uint32_t>::iterator lru;  // in lru_
  };
  UpstreamOptions::UserIdentity Make(uint32_t uid, TimePoint now,
                                     TimePoint *until);

  const std::shared_ptr<rpc::KrbCredentials> machine_;
  const std::function<bool(uint32_t, std::string *)> uid_to_name_;
  const Options options_;
  const std::string realm_;  // of nache's principal ("" : the default)

  Mutex mu_;
  std::unordered_map<uint32_t, Entry> users_ GUARDED_BY(mu_);
  std::list<uint32_t> lru_ GUARDED_BY(mu_);  // most recently used first
};

}  // namespace upstream
}  // namespace nache
