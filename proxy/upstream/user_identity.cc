// See user_identity.h.
#include "upstream/user_identity.h"

#include <algorithm>
#include <iterator>
#include <utility>

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

UserIdentities::~UserIdentities() { ReapMakers(true); }

UpstreamOptions::UserIdentity UserIdentities::Get(const Creds &cr) {
  const TimePoint now = options_.now();
  std::shared_ptr<Making> m;
  bool start = false;
  {
    MutexLock lk(&mu_);
    auto it = users_.find(cr.uid);
    if (it != users_.end() && now < it->second.until) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.id;
    }
    std::shared_ptr<Making> &slot = making_[cr.uid];
    if (!slot) {
      slot = std::make_shared<Making>();
      start = true;
    }
    m = slot;
  }
  if (start) {
    ReapMakers(false);
    MutexLock lk(&mu_);
    makers_.emplace_back(
        std::thread([this, uid = cr.uid, m] { RunMaker(uid, m); }), m);
  }
  // (A real clock: the wait bounds a worker's time, whatever now says.)
  const auto deadline = std::chrono::steady_clock::now() + options_.wait;
  MutexLock lk(&mu_);
  while (!m->done) {
    if (!made_.WaitUntil(deadline) && !m->done) {
      lk.Unlock();
      if (options_.on_wait_expired) options_.on_wait_expired();
      UpstreamOptions::UserIdentity id;
      id.transient = true;
      id.error = "credentials of uid " + std::to_string(cr.uid) +
                 " not made within " + std::to_string(options_.wait.count()) +
                 " ms (the KDC is slow or out of reach); still asked";
      nache_log(kLogWarn, kComponent,
                "no upstream identity for uid %u yet: %s; its call fails "
                "retryably (NFS4ERR_DELAY)",
                cr.uid, id.error.c_str());
      return id;
    }
  }
  return m->id;
}

void UserIdentities::RunMaker(uint32_t uid, std::shared_ptr<Making> m) {
  TimePoint until;
  UpstreamOptions::UserIdentity id = Make(uid, options_.now(), &until);
  MutexLock lk(&mu_);
  // A KDC out of reach is not kept: the next call asks again.
  if (!id.transient) Keep(uid, id, until);
  auto it = making_.find(uid);
  if (it != making_.end() && it->second == m) making_.erase(it);
  m->id = std::move(id);
  m->done = true;
  made_.SignalAll();
}

void UserIdentities::Keep(uint32_t uid, const UpstreamOptions::UserIdentity &id,
                          TimePoint until) {
  auto it = users_.find(uid);
  if (it == users_.end()) {
    if (users_.size() >= std::max<size_t>(options_.max_users, 1)) {
      users_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(uid);
    it = users_.emplace(uid, Entry{}).first;
    it->second.lru = lru_.begin();
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  it->second.id = id;
  it->second.until = until;
}

void UserIdentities::ReapMakers(bool all) {
  std::list<std::pair<std::thread, std::shared_ptr<Making>>> ended;
  {
    MutexLock lk(&mu_);
    for (auto it = makers_.begin(); it != makers_.end();) {
      auto next = std::next(it);
      if (all || it->second->done) ended.splice(ended.end(), makers_, it);
      it = next;
    }
  }
  // Unlocked: a maker takes mu_ before it ends.
  for (auto &t : ended) t.first.join();
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
