// CoreConfigFromC: the C API's struct nache_config as a CoreConfig (the one
// conversion; nache_core_open_validated and the unit tests use it).
#include "core/core_config.h"

#include <cstring>

namespace nache {

CoreConfig CoreConfigFromC(const struct nache_config &cfg) {
  CoreConfig c;
  if (cfg.upstream_server) c.upstream_server = cfg.upstream_server;
  c.upstream_port = cfg.upstream_port;
  if (cfg.upstream_path) c.upstream_path = cfg.upstream_path;
  c.connections = cfg.connections;
  if (cfg.callback_address) c.callback_address = cfg.callback_address;
  c.callback_port = cfg.callback_port;
  if (cfg.cache_dir) c.cache_dir = cfg.cache_dir;
  c.call_timeout_ms = cfg.call_timeout_ms;
  c.max_io_size = cfg.max_io_size;
  c.export_id = cfg.export_id;
  if (cfg.cache_size) nache_parse_size(cfg.cache_size, &c.cache.size_bytes);
  c.cache.block_size = cfg.block_size;
  c.cache.max_objects = cfg.cache_objects;
  c.cache.attr_timeout_ms = cfg.attr_timeout_s * 1000;
  c.readahead_max = cfg.readahead_max;
  c.open_linger_ms = cfg.open_linger_s * 1000;
  c.minor_version = cfg.minor_version;
  if (cfg.write_behind_max)
    nache_parse_size(cfg.write_behind_max, &c.write_behind_max);
  c.write_back = cfg.write_policy != nullptr &&
                 strcmp(cfg.write_policy, "write_back") == 0;
  c.single_writer = cfg.single_writer;
  if (cfg.upstream_owner_format != nullptr)
    upstream::ParseOwnerFormat(cfg.upstream_owner_format, &c.owner_format);
  c.serve_stale = cfg.serve_stale;
  c.gss = cfg.upstream_sec != nullptr &&
          rpc::ParseGssService(cfg.upstream_sec, &c.gss_service);
  c.gss_per_user = c.gss && cfg.upstream_identity != nullptr &&
                   strcmp(cfg.upstream_identity, "user") == 0;
  // Per user, the remote answers ACCESS for the caller itself (but for
  // root, whose calls go as the machine, as before).
  c.remote_sees_machine = c.gss && !c.gss_per_user;
  if (c.gss) {
    if (cfg.upstream_keytab) c.gss_keytab = cfg.upstream_keytab;
    if (cfg.upstream_principal) c.gss_principal = cfg.upstream_principal;
    if (cfg.upstream_client_principal)
      c.gss_client_principal = cfg.upstream_client_principal;
  }
  c.flush_age_ms = cfg.flush_age_s * 1000;
  c.cache_reset_if_corrupt = cfg.cache_reset_if_corrupt;
  c.cache_reset_on_upstream_change = cfg.cache_reset_on_upstream_change;
  c.dirty_max = c.cache.size_bytes / 4;
  if (cfg.dirty_max != nullptr && cfg.dirty_max[0] != '\0')
    nache_parse_size(cfg.dirty_max, &c.dirty_max);
  return c;
}

}  // namespace nache
