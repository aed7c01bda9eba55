// IdMapper and its libnfsidmap backend (see idmap.h).
#include "upstream/idmap.h"

// (nfsidmap.h declares C functions without saying so.)
extern "C" {
#include <nfsidmap.h>
}

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <vector>

#include "util/log.h"

namespace nache {
namespace upstream {
namespace {

constexpr const char *kComponent = "NACHE_IDMAP";
// Longest name we take from libnfsidmap ("user@domain"), as the longest
// owner string we accept from the wire (attrs.cc).
constexpr size_t kMaxName = 1024;

// libnfsidmap's messages (a name outside our domain, a plugin it cannot
// load) go to our log instead of syslog.
void LogFromLibNfsIdmap(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  nache_log(kLogInfo, kComponent, "libnfsidmap: %s", msg);
}

// libnfsidmap's one configuration per process: the idmapd.conf it reads at
// its first lookup (it keeps the pointer: the bytes live here for good).
struct LibNfsIdmapState {
  Mutex mu{"idmap_libnfsidmap"};
  std::string conf_path GUARDED_BY(mu);  // "" : libnfsidmap's default
  // conf_path as given to it, once started.
  std::vector<char> c_path GUARDED_BY(mu);
  enum class State { kNotStarted, kReady, kFailed };
  State state GUARDED_BY(mu) = State::kNotStarted;
};

LibNfsIdmapState &LibNfsIdmap() {
  static LibNfsIdmapState *s = new LibNfsIdmapState();
  return *s;
}

// libnfsidmap's translation methods are plugins (nsswitch.so, static.so)
// that take libnfsidmap's own symbols from the global scope. Ganesha loads
// our FSAL, and with it libnfsidmap, RTLD_LOCAL: the methods would not
// load. Its symbols are made global here (the library is loaded already).
void MakeLibNfsIdmapGlobal() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&nfs4_init_name_mapping), &info) == 0 ||
      info.dli_fname == nullptr)
    return;
  // (The handle is kept: the library stays for the process's life.)
  if (dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) == nullptr)
    nache_log(kLogWarn, kComponent, "cannot make %s global: %s", info.dli_fname,
              dlerror());
}

// Starts libnfsidmap if not yet done; whether it is usable.
bool StartLibNfsIdmap() {
  LibNfsIdmapState &s = LibNfsIdmap();
  MutexLock g(&s.mu);
  if (s.state != LibNfsIdmapState::State::kNotStarted)
    return s.state == LibNfsIdmapState::State::kReady;
  nfs4_set_debug(0, LogFromLibNfsIdmap);
  MakeLibNfsIdmapGlobal();
  s.c_path.assign(s.conf_path.begin(), s.conf_path.end());
  s.c_path.push_back('\0');
  const char *shown =
      s.conf_path.empty() ? "/etc/idmapd.conf (default)" : s.c_path.data();
  if (nfs4_init_name_mapping(s.conf_path.empty() ? nullptr : s.c_path.data()) !=
      0) {
    nache_log(kLogCrit, kComponent,
              "libnfsidmap cannot start from %s (a translation Method it "
              "cannot load?): every owner name from the remote shows as "
              "nobody",
              shown);
    s.state = LibNfsIdmapState::State::kFailed;
    return false;
  }
  char domain[NFS4_MAX_DOMAIN_LEN] = "";
  nfs4_get_default_domain(nullptr, domain, sizeof(domain));
  nache_log(kLogEvent, kComponent,
            "owner names are mapped by libnfsidmap from %s, NFSv4 domain "
            "'%s'",
            shown, domain);
  s.state = LibNfsIdmapState::State::kReady;
  return true;
}

// libnfsidmap's lookups. Not thread-safe (IdMapper serialises them).
class LibNfsIdmapBackend : public IdmapBackend {
 public:
  bool NameToId(IdKind kind, const std::string &name, uint32_t *id) override {
    if (!StartLibNfsIdmap()) return false;
    std::vector<char> arg(name.begin(), name.end());
    arg.push_back('\0');
    if (kind == IdKind::kUser) {
      uid_t uid;
      if (nfs4_name_to_uid(arg.data(), &uid) != 0) return false;
      *id = uint32_t(uid);
    } else {
      gid_t gid;
      if (nfs4_name_to_gid(arg.data(), &gid) != 0) return false;
      *id = uint32_t(gid);
    }
    return true;
  }

  bool IdToName(IdKind kind, uint32_t id, std::string *name) override {
    if (!StartLibNfsIdmap()) return false;
    char buf[kMaxName] = "";
    // A null domain: the one idmapd.conf names (or libnfsidmap derives).
    int rc = kind == IdKind::kUser
                 ? nfs4_uid_to_name(uid_t(id), nullptr, buf, sizeof(buf))
                 : nfs4_gid_to_name(gid_t(id), nullptr, buf, sizeof(buf));
    if (rc != 0 || buf[0] == '\0') return false;
    name->assign(buf);
    return true;
  }
};

Mutex global_mu{"idmap_global"};
// Made at the first use.
std::unique_ptr<IdMapper> global_mapper GUARDED_BY(global_mu);

}  // namespace

bool ConfigureLibNfsIdmap(const std::string &conf_path, std::string *why) {
  LibNfsIdmapState &s = LibNfsIdmap();
  MutexLock g(&s.mu);
  if (s.state != LibNfsIdmapState::State::kNotStarted &&
      conf_path != s.conf_path) {
    *why = "libnfsidmap reads " +
           (s.conf_path.empty() ? std::string("its default") : s.conf_path) +
           " already (one configuration per process)";
    return false;
  }
  s.conf_path = conf_path;
  return true;
}

std::unique_ptr<IdmapBackend> NewLibNfsIdmapBackend() {
  return std::unique_ptr<IdmapBackend>(new LibNfsIdmapBackend());
}

IdMapper::IdMapper(std::unique_ptr<IdmapBackend> backend, Options options)
    : options_(std::move(options)), backend_(std::move(backend)) {}

bool IdMapper::NameToId(IdKind kind, const std::string &name, uint32_t *id) {
  const std::string key = Key('n', kind, name);
  Entry e;
  if (!Cached(key, &e)) {
    e = AskNameToId(kind, name);
    Remember(key, e);
  }
  if (e.found) *id = e.id;
  return e.found;
}

bool IdMapper::IdToName(IdKind kind, uint32_t id, std::string *name) {
  const std::string key = Key('i', kind, std::to_string(id));
  Entry e;
  if (!Cached(key, &e)) {
    e = AskIdToName(kind, id);
    Remember(key, e);
  }
  if (e.found) *name = e.name;
  return e.found;
}

size_t IdMapper::CachedEntries() const {
  MutexLock g(&cache_mu_);
  return cache_.size();
}

std::string IdMapper::Key(char direction, IdKind kind, const std::string &q) {
  std::string key(1, direction);
  key += kind == IdKind::kUser ? 'u' : 'g';
  return key + q;
}

bool IdMapper::Cached(const std::string &key, Entry *out) {
  MutexLock g(&cache_mu_);
  auto it = cache_.find(key);
  if (it == cache_.end() || options_.now() >= it->second.expires) return false;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  *out = it->second;
  return true;
}

void IdMapper::Remember(const std::string &key, Entry e) {
  MutexLock g(&cache_mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    e.lru = it->second.lru;
    lru_.splice(lru_.begin(), lru_, e.lru);
    it->second = std::move(e);
    return;
  }
  if (options_.max_entries == 0) return;
  while (cache_.size() >= options_.max_entries) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  e.lru = lru_.begin();
  cache_.emplace(key, std::move(e));
}

IdMapper::Entry IdMapper::AskNameToId(IdKind kind, const std::string &name) {
  Entry e;
  {
    MutexLock g(&backend_mu_);
    e.found = backend_->NameToId(kind, name, &e.id);
  }
  e.expires =
      options_.now() + (e.found ? options_.found_ttl : options_.missing_ttl);
  if (!e.found)
    nache_log(kLogEvent, kComponent,
              "%s '%s' maps to no local %s: shown as nobody (65534), which "
              "gets no owner or group rights from it",
              kind == IdKind::kUser ? "owner" : "owner_group", name.c_str(),
              kind == IdKind::kUser ? "user" : "group");
  return e;
}

IdMapper::Entry IdMapper::AskIdToName(IdKind kind, uint32_t id) {
  Entry e;
  {
    MutexLock g(&backend_mu_);
    e.found = backend_->IdToName(kind, id, &e.name);
  }
  e.expires =
      options_.now() + (e.found ? options_.found_ttl : options_.missing_ttl);
  return e;
}

IdMapper *GlobalIdMapper() {
  MutexLock g(&global_mu);
  if (!global_mapper)
    global_mapper.reset(
        new IdMapper(NewLibNfsIdmapBackend(), IdMapper::Options()));
  return global_mapper.get();
}

}  // namespace upstream
}  // namespace nache
