// The C API of the core (nache.h): thin wrappers that convert arguments and
// call Core. No logic lives here.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "admin/admin_server.h"
#include "core/convert.h"
#include "core/core.h"
#include "nache/nache.h"
#include "store/reply_sync.h"
#include "store/store.h"
#include "upstream/idmap.h"
#include "upstream/owners.h"
#include "util/log.h"
#include "util/recent_errors.h"
#include "util/round_trips.h"

using nache::AttrsFromC;
using nache::AttrsToC;
using nache::Core;
using nache::CredsFromC;
using nache::metrics::LocalOp;
namespace upstream = nache::upstream;

struct nache_core {
  std::unique_ptr<Core> core;
};

namespace {

bool Fail(char *err, size_t errlen, const char *param, const char *why) {
  if (err && errlen) snprintf(err, errlen, "%s: %s", param, why);
  return false;
}

// Which parameter a failed listen on address:port is about: an address
// that is not on this host is Metrics_Address's fault; anything else (in
// use, privileged) the port's. civetweb's own message does not say.
const char *ListenFaultParam(const char *address, uint32_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "Metrics_Port";
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, address, &a.sin_addr);
  int rc = bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
  int saved = errno;
  close(fd);
  return rc != 0 && saved == EADDRNOTAVAIL ? "Metrics_Address" : "Metrics_Port";
}

// The admin socket's server (nache_admin_start); null when not serving.
// Plain pointers with no destructor: nache_admin_stop runs from the FSAL's
// unload, after static destructors at exit would already have destroyed
// a static owner (a double delete that crashed every clean stop).
std::mutex *const admin_mu = new std::mutex;  // guards admin_server
nache::admin::AdminServer *admin_server = nullptr;

// Cache_Dir claims of the exports of this process (nache_cache_dir_claim).
struct CacheDirClaim {
  std::string dir;          // the directory, normalised (CanonicalDir)
  std::string export_name;  // for messages
};
std::mutex claims_mu;                      // guards claims
std::map<uint32_t, CacheDirClaim> claims;  // by export id

// dir as one spelling: resolved (symlinks, "..") when it exists, else
// without repeated and trailing slashes and "." components.
std::string CanonicalDir(const char *dir) {
  char resolved[PATH_MAX];
  if (realpath(dir, resolved) != nullptr) return resolved;
  std::string out;
  for (const char *p = dir; *p;) {
    while (*p == '/') p++;
    const char *e = p;
    while (*e && *e != '/') e++;
    std::string part(p, e);
    if (!part.empty() && part != ".") out += "/" + part;
    p = e;
  }
  return out.empty() ? "/" : out;
}

// One C API call, in nache_local_ops_total (an atomic add); its round
// trips in nache_local_op_round_trips_total; and, when it succeeds without
// the calling thread waiting for the upstream, in
// nache_local_ops_without_upstream_total (round_trips.h). Its time, and
// the upstream's part of it, in nache_local_op_seconds_total and
// nache_local_op_upstream_seconds_total.
class LocalCall {
 public:
  LocalCall(struct nache_core *core, LocalOp op)
      : metrics_(core->core->metrics()),
        op_(op),
        waits_before_(nache::UpstreamWaitsOnThisThread()),
        wait_ns_before_(nache::UpstreamWaitNsOnThisThread()),
        start_(std::chrono::steady_clock::now()) {
    metrics_->CountLocal(op);
  }
  LocalCall(const LocalCall &) = delete;
  LocalCall &operator=(const LocalCall &) = delete;
  // The call's status, once what it wrote to be durable before the answer
  // is (the ReplySync); a store that could not sync turns success into the
  // store's failure (NOSPC on a full cache disk, else IO). Returns it.
  uint32_t Done(uint32_t status) {
    if (nache::Store *failed = durable_.Finish())
      if (status == 0)
        status = failed->no_space() ? nache::upstream::kNfs4ErrNospc
                                    : nache::upstream::kNfs4ErrIo;
    const uint64_t trips = nache::UpstreamWaitsOnThisThread() - waits_before_;
    metrics_->CountRoundTrips(op_, trips);
    if (status == 0 && trips == 0) metrics_->CountWithoutUpstream(op_);
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start_;
    metrics_->CountLocalTime(
        op_, took.count(),
        double(nache::UpstreamWaitNsOnThisThread() - wait_ns_before_) / 1e9);
    return status;
  }

 private:
  nache::metrics::ExportMetrics *metrics_;
  LocalOp op_;
  uint64_t waits_before_;
  uint64_t wait_ns_before_;
  std::chrono::steady_clock::time_point start_;
  // The call's writes that must be on disk before it answers are synced
  // in Done, after the core's locks are released (store/reply_sync.h).
  nache::ReplySync durable_;
};

}  // namespace

extern "C" {

void nache_config_defaults(struct nache_config *cfg) {
  *cfg = nache_config{};
  cfg->upstream_port = NACHE_DEFAULT_UPSTREAM_PORT;
  cfg->upstream_path = NACHE_DEFAULT_UPSTREAM_PATH;
  cfg->connections = NACHE_DEFAULT_CONNECTIONS;
  cfg->call_timeout_ms = NACHE_DEFAULT_UPSTREAM_TIMEOUT_MS;
  cfg->max_io_size = NACHE_DEFAULT_MAX_IO_SIZE;
  cfg->startup_wait_ms = NACHE_DEFAULT_STARTUP_WAIT_MS;
  cfg->cache_size = NACHE_DEFAULT_CACHE_SIZE;
  cfg->block_size = NACHE_DEFAULT_BLOCK_SIZE;
  cfg->cache_objects = NACHE_DEFAULT_CACHE_OBJECTS;
  cfg->attr_timeout_s = NACHE_DEFAULT_ATTR_TIMEOUT_S;
  cfg->readahead_max = NACHE_DEFAULT_READAHEAD_MAX;
  cfg->open_linger_s = NACHE_DEFAULT_OPEN_LINGER_S;
  cfg->minor_version = NACHE_DEFAULT_MINOR_VERSION;
  cfg->write_behind_max = NACHE_DEFAULT_WRITE_BEHIND_MAX;
  cfg->write_policy = NACHE_DEFAULT_WRITE_POLICY;
  cfg->flush_age_s = NACHE_DEFAULT_FLUSH_AGE_S;
  cfg->dirty_max = NACHE_DEFAULT_DIRTY_MAX;
  cfg->upstream_owner_format = NACHE_DEFAULT_OWNER_FORMAT;
  cfg->upstream_sec = NACHE_DEFAULT_UPSTREAM_SEC;
  cfg->upstream_identity = NACHE_DEFAULT_UPSTREAM_IDENTITY;
}

bool nache_config_validate(const struct nache_config *cfg, char *err,
                           size_t errlen) {
  if (cfg->upstream_server == nullptr || cfg->upstream_server[0] == '\0')
    return Fail(err, errlen, "Upstream_Server", "missing (required)");
  if (strlen(cfg->upstream_server) > 255 ||
      strpbrk(cfg->upstream_server, " \t/") != nullptr)
    return Fail(err, errlen, "Upstream_Server", "not a host name or address");
  if (cfg->upstream_port < 1 || cfg->upstream_port > 65535)
    return Fail(err, errlen, "Upstream_Port", "must be 1..65535");
  if (cfg->upstream_path == nullptr || cfg->upstream_path[0] != '/')
    return Fail(err, errlen, "Upstream_Path",
                "must be an absolute path on the remote (e.g. /export)");
  if (cfg->connections < 1 || cfg->connections > 64)
    return Fail(err, errlen, "Connections", "must be 1..64");
  if (cfg->callback_address != nullptr && cfg->callback_address[0] != '\0') {
    struct in_addr a;
    if (inet_pton(AF_INET, cfg->callback_address, &a) != 1)
      return Fail(err, errlen, "Callback_Address",
                  "must be an IPv4 address the remote server can reach");
    if (cfg->callback_port < 1 || cfg->callback_port > 65535)
      return Fail(err, errlen, "Callback_Port",
                  "must be 1..65535 when Callback_Address is set");
  }
  if (cfg->cache_dir == nullptr || cfg->cache_dir[0] != '/')
    return Fail(err, errlen, "Cache_Dir", "missing or not an absolute path");
  if (cfg->call_timeout_ms < 100 || cfg->call_timeout_ms > 600000)
    return Fail(err, errlen, "Upstream_Timeout",
                "must be 100..600000 milliseconds");
  if (cfg->max_io_size < 4096 || cfg->max_io_size > (1u << 20) ||
      cfg->max_io_size % 4096 != 0)
    return Fail(err, errlen, "Max_IO_Size",
                "must be a multiple of 4096 between 4096 and 1048576");
  uint64_t size = 0;
  if (cfg->cache_size == nullptr || !nache_parse_size(cfg->cache_size, &size) ||
      size < (16u << 20))
    return Fail(err, errlen, "Cache_Size",
                "must be a size of at least 16M (e.g. 512M, 20G)");
  if (cfg->block_size < 4096 || cfg->block_size > (1u << 20) ||
      (cfg->block_size & (cfg->block_size - 1)) != 0)
    return Fail(err, errlen, "Block_Size",
                "must be a power of two between 4096 and 1048576");
  if (cfg->cache_objects != 0 && cfg->cache_objects < 1000)
    return Fail(err, errlen, "Cache_Objects",
                "must be 0 (derived from Cache_Size) or at least 1000");
  if (cfg->attr_timeout_s > 3600)
    return Fail(err, errlen, "Attr_Timeout", "must be 0..3600 seconds");
  if (cfg->readahead_max > (256u << 20))
    return Fail(err, errlen, "Readahead_Max",
                "must be 0..268435456 bytes (0 disables readahead)");
  if (cfg->open_linger_s > 3600)
    return Fail(err, errlen, "Open_Linger", "must be 0..3600 seconds");
  if (cfg->minor_version > 2)
    return Fail(err, errlen, "Upstream_Minor_Version", "must be 0, 1 or 2");
  if (cfg->write_behind_max == nullptr ||
      !nache_parse_size(cfg->write_behind_max, &size) || size > (16ull << 30))
    return Fail(err, errlen, "Write_Behind_Max",
                "must be a size up to 16G (0 disables write-behind)");
  if (cfg->write_policy != nullptr &&
      strcmp(cfg->write_policy, "write_through") != 0 &&
      strcmp(cfg->write_policy, "write_back") != 0)
    return Fail(err, errlen, "Write_Policy",
                "must be write_through or write_back");
  if (cfg->flush_age_s > 86400)
    return Fail(err, errlen, "Flush_Age", "must be 0..86400 seconds");
  nache::upstream::OwnerFormat format;
  if (cfg->upstream_owner_format != nullptr &&
      !nache::upstream::ParseOwnerFormat(cfg->upstream_owner_format, &format))
    return Fail(err, errlen, "Upstream_Owner_Format",
                "must be auto, numeric or names");
  nache::rpc::GssService service;
  const bool krb5 = cfg->upstream_sec != nullptr &&
                    nache::rpc::ParseGssService(cfg->upstream_sec, &service);
  if (cfg->upstream_sec != nullptr && !krb5 &&
      strcmp(cfg->upstream_sec, "sys") != 0)
    return Fail(err, errlen, "Upstream_Sec",
                "must be sys, krb5, krb5i or krb5p");
  if (krb5 &&
      (cfg->upstream_keytab == nullptr || cfg->upstream_keytab[0] != '/'))
    return Fail(err, errlen, "Upstream_Keytab",
                "must be the absolute path of the keytab holding nache's "
                "principal (needed by Upstream_Sec = krb5, krb5i, krb5p)");
  const bool per_user = cfg->upstream_identity != nullptr &&
                        strcmp(cfg->upstream_identity, "user") == 0;
  if (cfg->upstream_identity != nullptr && !per_user &&
      strcmp(cfg->upstream_identity, "machine") != 0)
    return Fail(err, errlen, "Upstream_Identity", "must be machine or user");
  if (per_user && !krb5)
    return Fail(err, errlen, "Upstream_Identity",
                "user needs Upstream_Sec = krb5, krb5i or krb5p (a "
                "principal per user; AUTH_SYS already sends each caller's "
                "uid)");
  // A user whose credentials cannot be had gets NFS4ERR_ACCESS for a call
  // never sent; over NFSv4.0 an open or lock owner's seqid would then
  // differ between nache and the remote.
  if (per_user && cfg->minor_version < 1)
    return Fail(err, errlen, "Upstream_Identity",
                "user needs Upstream_Minor_Version = 1 or 2 (sessions)");
  uint64_t cache = 0, dirty = 0;
  nache_parse_size(cfg->cache_size, &cache);
  if (cfg->dirty_max != nullptr && cfg->dirty_max[0] != '\0' &&
      (!nache_parse_size(cfg->dirty_max, &dirty) || dirty < (1u << 20) ||
       dirty > cache))
    return Fail(err, errlen, "Dirty_Max",
                "must be a size from 1M up to Cache_Size (empty: a quarter "
                "of Cache_Size)");
  return true;
}

bool nache_idmap_configure(const char *conf_path, char *err, size_t errlen) {
  const std::string path = conf_path != nullptr ? conf_path : "";
  char why[512];
  if (!path.empty()) {
    if (path[0] != '/')
      return Fail(err, errlen, "Idmapd_Conf",
                  "must be an absolute path (e.g. /etc/idmapd.conf)");
    FILE *f = fopen(path.c_str(), "r");
    struct stat st;
    if (f == nullptr || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
      snprintf(why, sizeof(why), "cannot read %s: %s", path.c_str(),
               f == nullptr ? strerror(errno) : "not a regular file");
      if (f != nullptr) fclose(f);
      return Fail(err, errlen, "Idmapd_Conf", why);
    }
    fclose(f);
  }
  std::string already;
  if (!nache::upstream::ConfigureLibNfsIdmap(path, &already))
    return Fail(err, errlen, "Idmapd_Conf", already.c_str());
  return true;
}

bool nache_cache_dir_claim(uint32_t export_id, const char *export_path,
                           const char *cache_dir, char *err, size_t errlen) {
  std::string dir = CanonicalDir(cache_dir);
  std::lock_guard<std::mutex> g(claims_mu);
  for (const auto &kv : claims) {
    if (kv.first == export_id || kv.second.dir != dir) continue;
    if (err && errlen)
      snprintf(err, errlen,
               "Cache_Dir: %s is also the Cache_Dir of export %u (%s); "
               "export %u (%s) needs a directory of its own (two exports "
               "on one store would mix their caches and unflushed writes)",
               cache_dir, kv.first, kv.second.export_name.c_str(), export_id,
               export_path ? export_path : "?");
    return false;
  }
  claims[export_id] = CacheDirClaim{dir, export_path ? export_path : "?"};
  return true;
}

void nache_cache_dir_release(uint32_t export_id) {
  std::lock_guard<std::mutex> g(claims_mu);
  claims.erase(export_id);
}

bool nache_parse_size(const char *s, uint64_t *out) {
  if (s == nullptr || *s < '0' || *s > '9') return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return false;
  int shift = 0;
  switch (*end) {
    case '\0': break;
    case 'K':
    case 'k':
      shift = 10;
      end++;
      break;
    case 'M':
    case 'm':
      shift = 20;
      end++;
      break;
    case 'G':
    case 'g':
      shift = 30;
      end++;
      break;
    case 'T':
    case 't':
      shift = 40;
      end++;
      break;
    default: return false;
  }
  if (*end != '\0') return false;
  if (shift && v > (UINT64_MAX >> shift)) return false;
  *out = uint64_t(v) << shift;
  return true;
}

uint32_t nache_core_open(const struct nache_config *cfg,
                         struct nache_core **out, char *err, size_t errlen) {
  if (!nache_config_validate(cfg, err, errlen))
    return nache::upstream::kNfs4ErrInval;
  return nache_core_open_validated(cfg, out, err, errlen);
}

uint32_t nache_core_open_validated(const struct nache_config *cfg,
                                   struct nache_core **out, char *err,
                                   size_t errlen) {
  const nache::CoreConfig c = nache::CoreConfigFromC(*cfg);
  std::string why;
  std::unique_ptr<Core> core = Core::Open(c, &why);
  if (!core) {
    // The store's messages name their parameter (Cache_Dir, ...) already,
    // as do the upstream security's (Upstream_Keytab).
    const bool named = why.compare(0, 10, "Cache_Dir:") == 0 ||
                       why.compare(0, 16, "Upstream_Keytab:") == 0;
    if (err && errlen)
      snprintf(err, errlen, "%s%s", named ? "" : "Cache_Dir: ", why.c_str());
    return nache::upstream::kNfs4ErrIo;
  }
  *out = new nache_core{std::move(core)};
  return 0;
}

void nache_core_close(struct nache_core *core) { delete core; }

bool nache_metrics_validate(const char *address, uint32_t port, char *err,
                            size_t errlen) {
  struct in_addr a;
  if (address == nullptr || inet_pton(AF_INET, address, &a) != 1)
    return Fail(err, errlen, "Metrics_Address",
                "must be an IPv4 address of this host (0.0.0.0: all)");
  if (port < 1 || port > 65535)
    return Fail(err, errlen, "Metrics_Port", "must be 1..65535");
  return true;
}

bool nache_metrics_start(const char *address, uint32_t port, char *err,
                         size_t errlen) {
  if (!nache_metrics_validate(address, port, err, errlen)) return false;
  std::string why;
  if (!nache::metrics::Metrics::Global().StartExposer(address, port, &why))
    return Fail(err, errlen, ListenFaultParam(address, port), why.c_str());
  NACHE_LOG(kLogEvent, "NACHE_METRICS",
            "serving metrics on http://%s:%u/metrics", address, port);
  return true;
}

void nache_metrics_stop(void) {
  nache::metrics::Metrics::Global().StopExposer();
}

bool nache_admin_start(const char *socket_path, char *err, size_t errlen) {
  nache::admin::AdminServerOptions o;
  o.socket_path = socket_path ? socket_path : "";
  o.registry = &nache::admin::Registry::Global();
  o.collect = [] { return nache::metrics::Metrics::Global().Collect(); };
  o.recent_errors = [] { return nache::RecentErrors(); };
  std::string why;
  std::lock_guard<std::mutex> g(*admin_mu);
  if (admin_server) return Fail(err, errlen, "Admin_Socket", "already served");
  admin_server = nache::admin::AdminServer::Start(o, &why).release();
  if (!admin_server) return Fail(err, errlen, "Admin_Socket", why.c_str());
  NACHE_LOG(kLogEvent, "NACHE_ADMIN", "nachectl socket: %s", socket_path);
  return true;
}

void nache_admin_stop(void) {
  nache::admin::AdminServer *s;
  {
    std::lock_guard<std::mutex> g(*admin_mu);
    s = admin_server;
    admin_server = nullptr;
  }
  delete s;  // joins its threads, outside admin_mu
}

void nache_set_log_sink(nache_log_sink sink) { nache_log_set_sink(sink); }

void nache_set_log_level(int level) { nache_log_set_level(level); }

uint64_t nache_core_incarnation(const struct nache_core *core) {
  return core->core->incarnation();
}

bool nache_core_wait_ready(struct nache_core *core, int timeout_ms) {
  return core->core->WaitReady(timeout_ms);
}

bool nache_key_known(struct nache_core *core, nache_key key) {
  return core->core->KeyKnown(key);
}

uint32_t nache_root(struct nache_core *core, const struct nache_creds *cr,
                    nache_key *key, struct nache_attrs *attrs) {
  LocalCall call(core, LocalOp::kRoot);
  nache::upstream::Attrs a;
  uint32_t st = core->core->Root(CredsFromC(cr), key, &a);
  if (st == 0 && attrs) AttrsToC(a, *key, attrs);
  return call.Done(st);
}

uint32_t nache_lookup(struct nache_core *core, const struct nache_creds *cr,
                      nache_key dir, const char *name, nache_key *key,
                      struct nache_attrs *attrs) {
  LocalCall call(core, LocalOp::kLookup);
  nache::upstream::Attrs a;
  uint32_t st = core->core->Lookup(CredsFromC(cr), dir, name, key, &a);
  if (st == 0 && attrs) AttrsToC(a, *key, attrs);
  return call.Done(st);
}

uint32_t nache_lookup_parent(struct nache_core *core,
                             const struct nache_creds *cr, nache_key dir,
                             nache_key *key, struct nache_attrs *attrs) {
  LocalCall call(core, LocalOp::kLookupParent);
  nache::upstream::Attrs a;
  uint32_t st = core->core->LookupParent(CredsFromC(cr), dir, key, &a);
  if (st == 0 && attrs) AttrsToC(a, *key, attrs);
  return call.Done(st);
}

uint32_t nache_getattr(struct nache_core *core, const struct nache_creds *cr,
                       nache_key key, struct nache_attrs *attrs) {
  LocalCall call(core, LocalOp::kGetattr);
  nache::upstream::Attrs a;
  uint32_t st = core->core->Getattr(CredsFromC(cr), key, &a);
  if (st == 0 && attrs) AttrsToC(a, key, attrs);
  return call.Done(st);
}

uint32_t nache_setattr(struct nache_core *core, const struct nache_creds *cr,
                       nache_key key, struct nache_open *open,
                       const struct nache_attrs *set,
                       struct nache_attrs *attrs_out) {
  LocalCall call(core, LocalOp::kSetattr);
  nache::upstream::Attrs a;
  uint32_t st =
      core->core->Setattr(CredsFromC(cr), key, open, AttrsFromC(*set), &a);
  if (st == 0 && attrs_out) AttrsToC(a, key, attrs_out);
  return call.Done(st);
}

uint32_t nache_access(struct nache_core *core, const struct nache_creds *cr,
                      nache_key key, uint32_t want, uint32_t *allowed) {
  LocalCall call(core, LocalOp::kAccess);
  return call.Done(core->core->Access(CredsFromC(cr), key, want, allowed));
}

bool nache_caller_owns(struct nache_core *core, const struct nache_creds *cr,
                       nache_key key) {
  return core->core->CallerOwnsKnown(CredsFromC(cr), key);
}

uint32_t nache_readdir(struct nache_core *core, const struct nache_creds *cr,
                       nache_key dir, uint64_t cookie, nache_dirent_cb cb,
                       void *ctx, bool *eof) {
  LocalCall call(core, LocalOp::kReaddir);
  return call.Done(
      core->core->Readdir(CredsFromC(cr), dir, cookie, cb, ctx, eof));
}

namespace {

// The remote's changes of directories during one C API call.
class DirChanges {
 public:
  DirChanges() : scope_(&seen_) {}
  // dir's change into *out, if out (the last one noted; none: not set).
  void Fill(nache_key dir, struct nache_dir_change *out) const {
    if (!out) return;
    *out = nache_dir_change{};
    for (const Core::DirChange &c : seen_) {
      if (c.dir != dir) continue;
      out->set = true;
      out->atomic = c.ci.atomic;
      out->before = c.ci.before;
      out->after = c.ci.after;
    }
  }

 private:
  std::vector<Core::DirChange> seen_;
  Core::DirChangeScope scope_;  // after seen_: ends first
};

}  // namespace

uint32_t nache_create(struct nache_core *core, const struct nache_creds *cr,
                      nache_key dir, const char *name, enum nache_type type,
                      const struct nache_attrs *attrs_in, const char *link_text,
                      nache_key *key, struct nache_attrs *attrs_out,
                      struct nache_dir_change *dir_change) {
  LocalCall call(core, LocalOp::kCreate);
  DirChanges changes;
  nache::upstream::Attrs out;
  nache::upstream::Attrs in;
  if (attrs_in) in = AttrsFromC(*attrs_in);
  uint32_t st = core->core->Create(CredsFromC(cr), dir, name,
                                   nache::upstream::FileType(type), in,
                                   link_text ? link_text : "", key, &out);
  if (st == 0 && attrs_out) AttrsToC(out, *key, attrs_out);
  changes.Fill(dir, dir_change);
  return call.Done(st);
}

uint32_t nache_readlink(struct nache_core *core, const struct nache_creds *cr,
                        nache_key key, char *buf, size_t len) {
  LocalCall call(core, LocalOp::kReadlink);
  std::string text;
  uint32_t st = core->core->Readlink(CredsFromC(cr), key, &text);
  if (st) return call.Done(st);
  if (text.size() + 1 > len)
    return call.Done(nache::upstream::kNfs4ErrNametoolong);
  memcpy(buf, text.c_str(), text.size() + 1);
  return call.Done(0);
}

uint32_t nache_link(struct nache_core *core, const struct nache_creds *cr,
                    nache_key key, nache_key dir, const char *name,
                    struct nache_dir_change *dir_change) {
  LocalCall call(core, LocalOp::kLink);
  DirChanges changes;
  uint32_t st = core->core->Link(CredsFromC(cr), key, dir, name);
  changes.Fill(dir, dir_change);
  return call.Done(st);
}

uint32_t nache_rename(struct nache_core *core, const struct nache_creds *cr,
                      nache_key obj, nache_key olddir, const char *oldname,
                      nache_key newdir, const char *newname,
                      struct nache_dir_change dir_changes[2]) {
  LocalCall call(core, LocalOp::kRename);
  DirChanges changes;
  uint32_t st =
      core->core->Rename(CredsFromC(cr), olddir, oldname, newdir, newname, obj);
  if (dir_changes) {
    changes.Fill(olddir, &dir_changes[0]);
    changes.Fill(newdir, &dir_changes[1]);
  }
  return call.Done(st);
}

uint32_t nache_remove(struct nache_core *core, const struct nache_creds *cr,
                      nache_key obj, nache_key dir, const char *name,
                      struct nache_dir_change *dir_change) {
  LocalCall call(core, LocalOp::kRemove);
  DirChanges changes;
  uint32_t st = core->core->Remove(CredsFromC(cr), dir, name, obj);
  changes.Fill(dir, dir_change);
  return call.Done(st);
}

uint32_t nache_statfs(struct nache_core *core, const struct nache_creds *cr,
                      nache_key key, struct nache_statfs *out) {
  LocalCall call(core, LocalOp::kStatfs);
  nache::upstream::Attrs a;
  uint32_t st = core->core->Statfs(CredsFromC(cr), key, &a);
  if (st) return call.Done(st);
  out->space_total = a.space_total;
  out->space_free = a.space_free;
  out->space_avail = a.space_avail;
  out->files_total = a.files_total;
  out->files_free = a.files_free;
  out->files_avail = a.files_avail;
  return call.Done(0);
}

uint32_t nache_open(struct nache_core *core, const struct nache_creds *cr,
                    nache_key key, const char *name, uint32_t access,
                    uint32_t deny, enum nache_createmode mode,
                    const struct nache_attrs *create_attrs,
                    const uint8_t *verifier, bool truncate,
                    struct nache_open **open, nache_key *new_key,
                    struct nache_attrs *attrs_out, bool *created,
                    struct nache_dir_change *dir_change) {
  LocalCall call(core, LocalOp::kOpen);
  DirChanges changes;
  Core::OpenRequest r;
  r.key = key;
  r.name = name;
  r.access = access;
  r.deny = deny;
  r.mode = mode;
  if (create_attrs) r.create_attrs = AttrsFromC(*create_attrs);
  r.truncate = truncate;
  r.verifier = mode == NACHE_OPEN_EXCLUSIVE ? verifier : nullptr;
  nache::upstream::Attrs a;
  nache_key k = key;
  bool made = false;
  uint32_t st = core->core->OpenFile(CredsFromC(cr), r, open, &k, &a, &made);
  changes.Fill(name ? key : 0, name ? dir_change : nullptr);
  if (st) return call.Done(st);
  if (new_key) *new_key = k;
  if (attrs_out) AttrsToC(a, k, attrs_out);
  if (created) *created = made;
  const uint32_t done = call.Done(0);
  if (done != 0) {
    // Opened, but what it wrote could not be made durable: the client
    // hears an error and will never close this open, so it is closed here
    // (else its share reservation and upstream open would stay forever).
    core->core->CloseFile(*open);
    *open = nullptr;
  }
  return done;
}

uint32_t nache_check_verifier(struct nache_core *core,
                              const struct nache_creds *cr, nache_key key,
                              const uint8_t *verifier) {
  return core->core->CheckCreateVerifier(CredsFromC(cr), key, verifier);
}

uint32_t nache_reopen(struct nache_core *core, const struct nache_creds *cr,
                      struct nache_open *open, uint32_t access, uint32_t deny) {
  LocalCall call(core, LocalOp::kReopen);
  return call.Done(core->core->Reopen(CredsFromC(cr), open, access, deny));
}

uint32_t nache_close(struct nache_core *core, struct nache_open *open) {
  LocalCall call(core, LocalOp::kClose);
  return call.Done(core->core->CloseFile(open));
}

uint32_t nache_read(struct nache_core *core, const struct nache_creds *cr,
                    nache_key key, struct nache_open *open, uint64_t offset,
                    size_t len, void *buf, size_t *nread, bool *eof) {
  LocalCall call(core, LocalOp::kRead);
  return call.Done(core->core->Read(CredsFromC(cr), key, open, offset, len,
                                    static_cast<char *>(buf), nread, eof));
}

uint32_t nache_write(struct nache_core *core, const struct nache_creds *cr,
                     nache_key key, struct nache_open *open, uint64_t offset,
                     size_t len, const void *buf, enum nache_stable_how stable,
                     size_t *nwritten, enum nache_stable_how *committed) {
  LocalCall call(core, LocalOp::kWrite);
  nache::upstream::StableHow given = nache::upstream::StableHow::kFileSync;
  uint32_t st = core->core->Write(
      CredsFromC(cr), key, open, offset, len, static_cast<const char *>(buf),
      nache::upstream::StableHow(stable), nwritten, &given);
  *committed = nache_stable_how(given);
  return call.Done(st);
}

uint32_t nache_commit(struct nache_core *core, const struct nache_creds *cr,
                      nache_key key, uint64_t offset, uint64_t len) {
  LocalCall call(core, LocalOp::kCommit);
  return call.Done(core->core->Commit(CredsFromC(cr), key, offset, len));
}

uint32_t nache_fallocate(struct nache_core *core, const struct nache_creds *cr,
                         nache_key key, struct nache_open *open,
                         uint64_t offset, uint64_t length, bool allocate) {
  LocalCall call(core, LocalOp::kFallocate);
  return call.Done(core->core->Fallocate(CredsFromC(cr), key, open, offset,
                                         length, allocate));
}

uint32_t nache_copy(struct nache_core *core, const struct nache_creds *cr,
                    nache_key src, struct nache_open *src_open,
                    uint64_t src_offset, nache_key dst,
                    struct nache_open *dst_open, uint64_t dst_offset,
                    uint64_t count, uint64_t *copied) {
  LocalCall call(core, LocalOp::kCopy);
  return call.Done(core->core->Copy(CredsFromC(cr), src, src_open, src_offset,
                                    dst, dst_open, dst_offset, count, copied));
}

uint32_t nache_seek(struct nache_core *core, const struct nache_creds *cr,
                    nache_key key, struct nache_open *open, uint64_t offset,
                    bool hole, bool *eof, uint64_t *found) {
  LocalCall call(core, LocalOp::kSeek);
  return call.Done(core->core->Seek(
      CredsFromC(cr), key, open, offset,
      hole ? upstream::SeekWhat::kHole : upstream::SeekWhat::kData, eof,
      found));
}

uint32_t nache_getxattr(struct nache_core *core, const struct nache_creds *cr,
                        nache_key key, const char *name, size_t name_len,
                        void *buf, size_t *len) {
  LocalCall call(core, LocalOp::kXattr);
  std::string value;
  uint32_t st = core->core->GetXattr(CredsFromC(cr), key,
                                     std::string(name, name_len), &value);
  if (st == upstream::kNfs4Ok) {
    // Too small a buffer learns the size it takes (and the call is not a
    // failure of the remote's).
    if (value.size() > *len) st = upstream::kNfs4ErrXattr2big;
    if (st == upstream::kNfs4Ok) std::memcpy(buf, value.data(), value.size());
    *len = value.size();
  }
  return call.Done(st);
}

uint32_t nache_setxattr(struct nache_core *core, const struct nache_creds *cr,
                        nache_key key, enum nache_xattr_option option,
                        const char *name, size_t name_len, const void *value,
                        size_t value_len) {
  LocalCall call(core, LocalOp::kXattr);
  return call.Done(core->core->SetXattr(
      CredsFromC(cr), key, upstream::XattrOption(uint32_t(option)),
      std::string(name, name_len),
      std::string(static_cast<const char *>(value), value_len)));
}

uint32_t nache_removexattr(struct nache_core *core,
                           const struct nache_creds *cr, nache_key key,
                           const char *name, size_t name_len) {
  LocalCall call(core, LocalOp::kXattr);
  return call.Done(core->core->RemoveXattr(CredsFromC(cr), key,
                                           std::string(name, name_len)));
}

uint32_t nache_listxattrs(struct nache_core *core, const struct nache_creds *cr,
                          nache_key key, uint64_t cookie, uint32_t maxcount,
                          nache_xattr_name_cb cb, void *arg,
                          uint64_t *next_cookie, bool *eof) {
  LocalCall call(core, LocalOp::kXattr);
  std::vector<std::string> names;
  uint32_t st = core->core->ListXattrs(CredsFromC(cr), key, cookie, maxcount,
                                       &names, next_cookie, eof);
  if (st == upstream::kNfs4Ok)
    for (const std::string &n : names) cb(arg, n.data(), n.size());
  return call.Done(st);
}

void nache_write_verifier(struct nache_core *core, uint8_t verf[8]) {
  core->core->WriteVerifier(verf);
}

uint32_t nache_lock(struct nache_core *core, const struct nache_creds *cr,
                    nache_key key, struct nache_open *open, const void *owner,
                    size_t owner_len, enum nache_lock_op op, bool write,
                    uint64_t offset, uint64_t length, bool reclaim,
                    struct nache_lock_conflict *conflict) {
  LocalCall call(core, LocalOp::kLock);
  return call.Done(
      core->core->Lock(CredsFromC(cr), key, open,
                       std::string(static_cast<const char *>(owner), owner_len),
                       op, write, offset, length, reclaim, conflict));
}

uint32_t nache_local_deleg_acquire(struct nache_core *core, nache_key key,
                                   bool write) {
  return core->core->AcquireLocalDelegation(key, write);
}

void nache_local_deleg_release(struct nache_core *core, nache_key key) {
  core->core->ReleaseLocalDelegation(key);
}

void nache_set_local_recall(struct nache_core *core, nache_local_recall_fn fn,
                            void *arg) {
  core->core->SetLocalRecall([fn, arg](nache::Key key) { fn(arg, key); });
}

void nache_set_attrs_stale(struct nache_core *core, nache_attrs_stale_fn fn,
                           void *arg) {
  if (fn == nullptr) {
    core->core->SetAttrsStale(nullptr);
    return;
  }
  core->core->SetAttrsStale([fn, arg](nache::Key key) { fn(arg, key); });
}

}  // extern "C"
