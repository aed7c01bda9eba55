// NFSv4 owner names <-> local ids: libnfsidmap behind one lock and a cache.
//
// The remote may name owners "alice@example.org" (Linux knfsd with
// nfs4_disable_idmapping=N, most servers with Kerberos or a directory). We
// map them as the Linux NFS client does, with libnfsidmap and an
// idmapd.conf (its domain, its translation methods). libnfsidmap is not
// documented thread-safe, does NSS lookups (files, LDAP, sssd: possibly
// slow) and keeps one configuration per process, so:
//  - IdMapper serialises every call into its backend behind one mutex,
//  - and caches answers, bounded, each with an expiry; a name or id with no
//    mapping is cached too, for a shorter time (so that a user added to the
//    directory is seen soon, and a flood of unknown names costs one lookup
//    per name per negative expiry).
// There is one mapper per process (GlobalIdMapper); libnfsidmap reads its
// idmapd.conf (Idmapd_Conf, ConfigureLibNfsIdmap) at the first lookup, so
// a remote that only ever sends numeric owners never touches it.
//
// This file knows names and ids only; which strings are numeric owners and
// which format goes out to the remote is owners.h's business.
//
// Thread safety: every method of IdMapper is thread-safe. Lock contract:
// cache_mu_ guards the cache and is never held across a backend call;
// backend_mu_ is held across each backend call and nothing else; the two
// are never held together. A cache hit therefore never waits for an NSS
// lookup in progress. (libnfsidmap's one-time start takes a lock of its
// own, inside backend_mu_; ConfigureLibNfsIdmap takes only that one.)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "util/mutex.h"

namespace nache {
namespace upstream {

// Whether a name or id is a user's (owner) or a group's (owner_group).
enum class IdKind { kUser, kGroup };

// The lookups themselves. Implementations need not be thread-safe:
// IdMapper calls one at a time.
class IdmapBackend {
 public:
  virtual ~IdmapBackend() = default;
  // name ("alice@example.org") to its id; false when it maps to none.
  virtual bool NameToId(IdKind kind, const std::string &name, uint32_t *id) = 0;
  // id to its name ("alice@example.org"); false when it has none.
  virtual bool IdToName(IdKind kind, uint32_t id, std::string *name) = 0;
};

// libnfsidmap's lookups (nfs4_name_to_uid, nfs4_uid_to_name and their
// group twins). libnfsidmap has one configuration per process: it reads
// the idmapd.conf ConfigureLibNfsIdmap named at the first lookup. Its state
// is global too: only one IdMapper per process may use such a backend
// (GlobalIdMapper's; a test may make its own instead). Unlike
// nfs4_owner_to_uid, a name with no mapping is reported as such, not
// turned into nobody: the caller must know (Attrs' kAttrOwnerUnmapped).
std::unique_ptr<IdmapBackend> NewLibNfsIdmapBackend();
// Names the idmapd.conf libnfsidmap reads at its first lookup ("" : its
// default, /etc/idmapd.conf when it exists). Fails, saying why, once it
// has read another.
bool ConfigureLibNfsIdmap(const std::string &conf_path, std::string *why);

class IdMapper {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Options {
    size_t max_entries = 4096;  // names and ids cached, both directions
    // How long an answer is used: a mapping, and the absence of one.
    std::chrono::seconds found_ttl{600};
    std::chrono::seconds missing_ttl{30};
    // The clock (tests step it).
    std::function<TimePoint()> now = std::chrono::steady_clock::now;
  };

  IdMapper(std::unique_ptr<IdmapBackend> backend, Options options);

  // name to id; false (and *id untouched) when it maps to none.
  bool NameToId(IdKind kind, const std::string &name, uint32_t *id)
      EXCLUDES(backend_mu_, cache_mu_);
  // id to name; false when it has none.
  bool IdToName(IdKind kind, uint32_t id, std::string *name)
      EXCLUDES(backend_mu_, cache_mu_);
  // Answers in the cache now (expired ones included until replaced).
  size_t CachedEntries() const EXCLUDES(cache_mu_);

 private:
  // One answer. The key says which question: direction, kind, and the
  // name or the id in decimal.
  struct Entry {
    bool found = false;
    uint32_t id = 0;
    std::string name;
    TimePoint expires;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  static std::string Key(char direction, IdKind kind, const std::string &q);
  // The cached answer to key, fresh only; true when there is one.
  bool Cached(const std::string &key, Entry *out) EXCLUDES(cache_mu_);
  void Remember(const std::string &key, Entry e) EXCLUDES(cache_mu_);
  // Asks the backend (backend_mu_ taken here).
  Entry AskNameToId(IdKind kind, const std::string &name)
      EXCLUDES(backend_mu_, cache_mu_);
  Entry AskIdToName(IdKind kind, uint32_t id) EXCLUDES(backend_mu_, cache_mu_);

  const Options options_;
  // (Never held together.)
  Mutex backend_mu_{"idmap_backend"};  // held across each backend call
  std::unique_ptr<IdmapBackend> backend_ PT_GUARDED_BY(backend_mu_);
  mutable Mutex cache_mu_{"idmap_cache"};
  std::unordered_map<std::string, Entry> cache_ GUARDED_BY(cache_mu_);
  // Keys, most recently used first.
  std::list<std::string> lru_ GUARDED_BY(cache_mu_);
};

// The process-wide mapper over libnfsidmap, shared by every export (made
// at the first call).
IdMapper *GlobalIdMapper();

}  // namespace upstream
}  // namespace nache
