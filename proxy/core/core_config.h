// The configuration of one export's core (CoreConfig), and its conversion
// from the C API's struct nache_config (CoreConfigFromC).
//
// The defaults are written once, as nache.h's NACHE_DEFAULT_* (the FSAL's
// config table uses them too): CoreConfig's member defaults are computed
// from those macros at compile time, so a default CoreConfig is what
// CoreConfigFromC makes of nache_config_defaults. core_config_test holds
// the two equal field by field; a field added here goes into
// CoreConfigFromC and that test as well.
//
// Thread safety: a CoreConfig is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/cache.h"
#include "nache/nache.h"
#include "rpc/rpcsec_gss.h"
#include "upstream/owners.h"
#include "upstream/upstream.h"

namespace nache {
namespace metrics {
class Metrics;
}  // namespace metrics

// NACHE_DEFAULT_* read at compile time, for CoreConfig's member defaults.
namespace config_defaults {

// Whether a and b are the same text.
constexpr bool Same(const char *a, const char *b) {
  for (; *a != '\0' && *a == *b; a++, b++) {
  }
  return *a == *b;
}

// A size as nache_parse_size reads the defaults: decimal digits, then
// K, M, G or T (powers of 1024). (The defaults need no more; the test
// compares the results with nache_parse_size's.)
constexpr uint64_t Size(const char *s) {
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + uint64_t(*s - '0');
  switch (*s) {
    case 'K':
    case 'k': return v << 10;
    case 'M':
    case 'm': return v << 20;
    case 'G':
    case 'g': return v << 30;
    case 'T':
    case 't': return v << 40;
    default: return v;
  }
}

// Cache_Size, Block_Size, Cache_Objects and Attr_Timeout.
inline CacheOptions Cache() {
  CacheOptions c;
  c.size_bytes = Size(NACHE_DEFAULT_CACHE_SIZE);
  c.block_size = NACHE_DEFAULT_BLOCK_SIZE;
  c.max_objects = NACHE_DEFAULT_CACHE_OBJECTS;
  c.attr_timeout_ms = NACHE_DEFAULT_ATTR_TIMEOUT_S * 1000;
  return c;
}

// Dirty_Max: "" is a quarter of Cache_Size.
constexpr uint64_t DirtyMax() {
  return Same(NACHE_DEFAULT_DIRTY_MAX, "") ? Size(NACHE_DEFAULT_CACHE_SIZE) / 4
                                           : Size(NACHE_DEFAULT_DIRTY_MAX);
}

// The defaults CoreConfig writes as a value of its own type, checked here
// against their text.
static_assert(Same(NACHE_DEFAULT_OWNER_FORMAT, "auto"),
              "CoreConfig::owner_format's default is kAuto");
static_assert(Same(NACHE_DEFAULT_UPSTREAM_SEC, "sys"),
              "CoreConfig::gss's default is false (AUTH_SYS)");
static_assert(Same(NACHE_DEFAULT_UPSTREAM_IDENTITY, "machine"),
              "CoreConfig::gss_per_user's default is false");

}  // namespace config_defaults

struct CoreConfig {
  std::string upstream_server;
  uint32_t upstream_port = NACHE_DEFAULT_UPSTREAM_PORT;
  std::string upstream_path = NACHE_DEFAULT_UPSTREAM_PATH;
  uint32_t connections = NACHE_DEFAULT_CONNECTIONS;
  std::string callback_address;
  uint32_t callback_port = 0;
  std::string cache_dir;
  uint32_t call_timeout_ms = NACHE_DEFAULT_UPSTREAM_TIMEOUT_MS;
  uint32_t max_io_size = NACHE_DEFAULT_MAX_IO_SIZE;
  uint32_t export_id = 0;
  // size bound, block size, attr window
  CacheOptions cache = config_defaults::Cache();
  // readahead window bound (bytes)
  uint32_t readahead_max = NACHE_DEFAULT_READAHEAD_MAX;
  // upstream CLOSE delay after last close
  uint32_t open_linger_ms = NACHE_DEFAULT_OPEN_LINGER_S * 1000;
  // Upstream NFSv4 minor version: 0, or 1 (sessions; the back channel on
  // our own connections instead of a callback service), or 2 (as 1, with
  // NFSv4.2's ALLOCATE, DEALLOCATE, SEEK and extended attributes; 1 when
  // the remote refuses 4.2).
  uint32_t minor_version = NACHE_DEFAULT_MINOR_VERSION;
  // queued UNSTABLE bytes (0: off)
  uint64_t write_behind_max =
      config_defaults::Size(NACHE_DEFAULT_WRITE_BEHIND_MAX);
  // Write-back (proxy/writeback/DESIGN.md): file data stays local (durable
  // in the store) and is flushed later, for files under our write
  // delegation, or all files when single_writer.
  bool write_back =
      config_defaults::Same(NACHE_DEFAULT_WRITE_POLICY, "write_back");
  bool single_writer = false;
  // While the remote is unreachable (Disconnected()), answer from the
  // cache whatever its age, and grant opens locally (README, "Disconnected
  // operation").
  bool serve_stale = false;
  // flush a file's data after this
  uint32_t flush_age_ms = NACHE_DEFAULT_FLUSH_AGE_S * 1000;
  // bound on unflushed data (bytes)
  uint64_t dirty_max = config_defaults::DirtyMax();
  // Cache_Reset_If_Corrupt, Cache_Reset_On_Upstream_Change (store.h).
  bool cache_reset_if_corrupt = false;
  bool cache_reset_on_upstream_change = false;
  // owner and owner_group strings sent to the remote (Upstream_Owner_Format,
  // upstream/owners.h); names are mapped by the process-wide IdMapper.
  upstream::OwnerFormat owner_format = upstream::OwnerFormat::kAuto;
  // Upstream_Sec krb5, krb5i, krb5p (gss; false: AUTH_SYS): RPCSEC_GSS as
  // our principal (gss_client_principal, empty: the keytab's first) from
  // gss_keytab, to the remote's gss_principal (empty: nfs@server).
  bool gss = false;
  rpc::GssService gss_service = rpc::GssService::kNone;
  std::string gss_keytab, gss_principal, gss_client_principal;
  // Upstream_Identity = user (with gss): each caller's calls under its own
  // principal, by constrained delegation (upstream/user_identity.h).
  bool gss_per_user = false;
  // The remote sees nache's own identity on every call, not the caller's
  // (set with gss): its ACCESS answers are not the caller's, so what the
  // caller may is what both the remote and the mode bits allow.
  bool remote_sees_machine = false;
  // Registry the export reports to; null: the process-wide one.
  metrics::Metrics *metrics = nullptr;
  // Makes the upstream client; empty: upstream::Upstream::Create. Unit
  // tests put a scripted upstream here.
  std::function<std::unique_ptr<upstream::Upstream>(
      const upstream::UpstreamOptions &)>
      make_upstream;
};

// cfg as a CoreConfig (seconds to milliseconds, sizes parsed, names to
// their values). A field cfg leaves NULL keeps its default; a size that
// does not parse too (nache_config_validate refuses both first).
CoreConfig CoreConfigFromC(const struct nache_config &cfg);

}  // namespace nache
