// See user_identity.h.
#include "upstream/user_identity.h"

#include "util/log.h"

namespace nache {
namespace upstream {
namespace {

const char *const kComponent = "NACHE_UPSTREAM";

std::string RealmOf(const std::string &principal) {
  size_t at = principal.rfind('@');
  return at == std::string::npos ? "" : principal.substr(at + 1);
}

}  // namespace

UserIdentities::UserIdentities(
    std::shared_ptr<rpc::KrbCredentials> machine,
    std::function<bool(uint32_t, std::string *)> uid_to_name, Options options)
    : machine_(std::move(machine)),
      uid_to_name_(std::move(uid_to_name)),
      options_(std::move(options)),
      realm_(RealmOf(machine_->principal())) {}

std::string UserIdentities::PrincipalOf(const std::string &name) const {
  std::string user = name.substr(0, name.find('@'));
  return realm_.empty() ? user : user + "@" + realm_;
}

UpstreamOptions::UserIdentity UserIdentities::Get(const Creds &cr) {
  const TimePoint now = options_.now();
  {
    MutexLock lk(&mu_);
    auto it = users_.find(cr.uid);
    if (it != users_.end() && now < it->second.until) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.id;
    }
  }
  TimePoint until;
  UpstreamOptions::UserIdentity id = Make(cr.uid, now, &until);
  if (id.transient) return id;  // not kept: the next call asks again
  MutexLock lk(&mu_);
  auto it = users_.find(cr.uid);
  if (it == users_.end()) {
    if (users_.size() >= std::max<size_t>(options_.max_users, 1)) {
      users_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(cr.uid);
    it = users_.emplace(cr.uid, Entry{}).first;
    it->second.lru = lru_.begin();
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  it->second.id = id;
  it->second.until = until;
  return id;
}

UpstreamOptions::UserIdentity UserIdentities::Make(uint32_t uid, TimePoint now,
                                                   TimePoint *until) {
  UpstreamOptions::UserIdentity id;
  *until = now + options_.refused_ttl;
  std::string name;
  if (!uid_to_name_(uid, &name)) {
    id.error = "uid " + std::to_string(uid) + " has no name";
  } else {
    id.principal = PrincipalOf(name);
    rpc::KrbError err;
    std::shared_ptr<rpc::KrbCredentials> creds =
        machine_->Impersonate(id.principal, &err);
    if (creds) {
      id.creds = creds;
      // Before the tickets end (at most a day: a bound on how long a
      // user's removal from the directory goes unseen).
      TimePoint end = creds->expires();
      TimePoint renew = end == TimePoint::max() ? now + std::chrono::hours(24)
                                                : end - options_.renew_before;
      *until = std::max(now + std::chrono::seconds(1), renew);
      return id;
    }
    id.error = err.message;
    id.transient = err.transient;
  }
  nache_log(kLogWarn, kComponent,
            "no upstream identity for uid %u%s%s%s: %s; its calls %s", uid,
            id.principal.empty() ? "" : " (", id.principal.c_str(),
            id.principal.empty() ? "" : ")", id.error.c_str(),
            id.transient ? "fail retryably (NFS4ERR_DELAY)"
                         : "are refused (NFS4ERR_ACCESS)");
  return id;
}

}  // namespace upstream
}  // namespace nache
