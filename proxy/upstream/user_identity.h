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
// A miss is made on a thread of its own (one per uid at a time: callers
// missing the same uid wait for the same one), and a caller waits for it
// at most Options::wait: a KDC slower than that (or a name lookup) must
// not hold a Ganesha worker for ever. The caller then gets a retryable
// answer (transient: NFS4ERR_DELAY), the wait is counted (on_wait_expired)
// and logged, and the making goes on: its answer is kept for the retry.
//
// Thread safety: Get is thread-safe. Lock contract: mu_ guards the table,
// the makings under way and the makers' threads, and is never held
// across a name lookup or a KDC exchange (the maker runs them unlocked),
// so a hit never waits for a miss. The destructor joins the makers: it
// may wait for the KDC (up to the library's own timeout).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

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
    // How long a caller waits for its credentials to be made (the
    // upstream call timeout); then NFS4ERR_DELAY.
    std::chrono::milliseconds wait{30000};
    // Called (on the caller's thread) each time a wait ends so.
    std::function<void()> on_wait_expired;
  };
  // uid_to_name: the id mapping ("alice@example.org"); false: no name.
  UserIdentities(
      std::shared_ptr<rpc::KrbCredentials> machine,
      std::function<bool(uint32_t uid, std::string *name)> uid_to_name,
      Options options);
  ~UserIdentities();  // joins the makers
  UserIdentities(const UserIdentities &) = delete;
  UserIdentities &operator=(const UserIdentities &) = delete;

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
  // One uid's credentials being made, by its maker thread.
  struct Making {
    bool done = false;                 // guarded by mu_
    UpstreamOptions::UserIdentity id;  // once done; guarded by mu_
  };
  UpstreamOptions::UserIdentity Make(uint32_t uid, TimePoint now,
                                     TimePoint *until);
  // The maker thread of m: makes uid's credentials, keeps them, wakes
  // the waiters.
  void RunMaker(uint32_t uid, std::shared_ptr<Making> m) EXCLUDES(mu_);
  // Keeps id for uid until until.
  void Keep(uint32_t uid, const UpstreamOptions::UserIdentity &id,
            TimePoint until) REQUIRES(mu_);
  // Joins the makers that are done (all of them when all is set).
  void ReapMakers(bool all) EXCLUDES(mu_);

  const std::shared_ptr<rpc::KrbCredentials> machine_;
  const std::function<bool(uint32_t, std::string *)> uid_to_name_;
  const Options options_;
  const std::string realm_;  // of nache's principal ("" : the default)

  Mutex mu_{"user_identity"};
  std::unordered_map<uint32_t, Entry> users_ GUARDED_BY(mu_);
  std::list<uint32_t> lru_ GUARDED_BY(mu_);  // most recently used first
  CondVar made_{&mu_};                       // a Making is done
  // Makings under way, by uid.
  std::unordered_map<uint32_t, std::shared_ptr<Making>> making_ GUARDED_BY(mu_);
  // The makers' threads (joined once done, or at destruction), each with
  // its Making.
  std::list<std::pair<std::thread, std::shared_ptr<Making>>> makers_
      GUARDED_BY(mu_);
};

}  // namespace upstream
}  // namespace nache
