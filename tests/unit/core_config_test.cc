// CoreConfig (core/core_config.h): its defaults are the C API's. A default
// CoreConfig equals CoreConfigFromC of nache_config_defaults field by field,
// so the two cannot drift; and CoreConfigFromC carries each field of a
// config that is not the default.
#include "core/core_config.h"

#include <gtest/gtest.h>

#include "nache/nache.h"

namespace nache {
namespace {

// Every field of CoreConfig (a field added there is added here).
void ExpectSame(const CoreConfig &a, const CoreConfig &b) {
  EXPECT_EQ(a.upstream_server, b.upstream_server);
  EXPECT_EQ(a.upstream_port, b.upstream_port);
  EXPECT_EQ(a.upstream_path, b.upstream_path);
  EXPECT_EQ(a.connections, b.connections);
  EXPECT_EQ(a.callback_address, b.callback_address);
  EXPECT_EQ(a.callback_port, b.callback_port);
  EXPECT_EQ(a.cache_dir, b.cache_dir);
  EXPECT_EQ(a.call_timeout_ms, b.call_timeout_ms);
  EXPECT_EQ(a.max_io_size, b.max_io_size);
  EXPECT_EQ(a.export_id, b.export_id);
  EXPECT_EQ(a.cache.size_bytes, b.cache.size_bytes);
  EXPECT_EQ(a.cache.block_size, b.cache.block_size);
  EXPECT_EQ(a.cache.attr_timeout_ms, b.cache.attr_timeout_ms);
  EXPECT_EQ(a.cache.max_objects, b.cache.max_objects);
  EXPECT_EQ(a.readahead_max, b.readahead_max);
  EXPECT_EQ(a.open_linger_ms, b.open_linger_ms);
  EXPECT_EQ(a.minor_version, b.minor_version);
  EXPECT_EQ(a.write_behind_max, b.write_behind_max);
  EXPECT_EQ(a.write_back, b.write_back);
  EXPECT_EQ(a.single_writer, b.single_writer);
  EXPECT_EQ(a.serve_stale, b.serve_stale);
  EXPECT_EQ(a.flush_age_ms, b.flush_age_ms);
  EXPECT_EQ(a.dirty_max, b.dirty_max);
  EXPECT_EQ(a.cache_reset_if_corrupt, b.cache_reset_if_corrupt);
  EXPECT_EQ(a.cache_reset_on_upstream_change, b.cache_reset_on_upstream_change);
  EXPECT_EQ(int(a.owner_format), int(b.owner_format));
  EXPECT_EQ(a.gss, b.gss);
  EXPECT_EQ(int(a.gss_service), int(b.gss_service));
  EXPECT_EQ(a.gss_keytab, b.gss_keytab);
  EXPECT_EQ(a.gss_principal, b.gss_principal);
  EXPECT_EQ(a.gss_client_principal, b.gss_client_principal);
  EXPECT_EQ(a.gss_per_user, b.gss_per_user);
  EXPECT_EQ(a.remote_sees_machine, b.remote_sees_machine);
  EXPECT_EQ(a.metrics, b.metrics);
  EXPECT_EQ(bool(a.make_upstream), bool(b.make_upstream));
}

TEST(CoreConfigTest, DefaultIsTheCApisDefault) {
  nache_config defaults;
  nache_config_defaults(&defaults);
  const CoreConfig converted = CoreConfigFromC(defaults);
  const CoreConfig constructed;
  ExpectSame(constructed, converted);
  // What the sizes' text says (config_defaults::Size against
  // nache_parse_size).
  uint64_t size = 0;
  ASSERT_TRUE(nache_parse_size(NACHE_DEFAULT_CACHE_SIZE, &size));
  EXPECT_EQ(constructed.cache.size_bytes, size);
  ASSERT_TRUE(nache_parse_size(NACHE_DEFAULT_WRITE_BEHIND_MAX, &size));
  EXPECT_EQ(constructed.write_behind_max, size);
  EXPECT_EQ(constructed.minor_version, uint32_t(NACHE_DEFAULT_MINOR_VERSION));
}

TEST(CoreConfigTest, ConversionCarriesEachField) {
  nache_config c;
  nache_config_defaults(&c);
  c.upstream_server = "10.1.2.3";
  c.upstream_port = 2050;
  c.upstream_path = "/export";
  c.connections = 3;
  c.callback_address = "10.1.2.4";
  c.callback_port = 4000;
  c.cache_dir = "/cache";
  c.call_timeout_ms = 1234;
  c.max_io_size = 65536;
  c.export_id = 9;
  c.cache_size = "1G";
  c.block_size = 4096;
  c.cache_objects = 500;
  c.attr_timeout_s = 7;
  c.readahead_max = 8192;
  c.open_linger_s = 2;
  c.minor_version = 2;
  c.write_behind_max = "0";
  c.write_policy = "write_back";
  c.single_writer = true;
  c.serve_stale = true;
  c.flush_age_s = 11;
  c.dirty_max = "";
  c.cache_reset_if_corrupt = true;
  c.cache_reset_on_upstream_change = true;
  c.upstream_owner_format = "names";
  c.upstream_sec = "krb5p";
  c.upstream_keytab = "/keytab";
  c.upstream_principal = "nfs@remote";
  c.upstream_client_principal = "nache@here";
  c.upstream_identity = "user";

  CoreConfig want;
  want.upstream_server = "10.1.2.3";
  want.upstream_port = 2050;
  want.upstream_path = "/export";
  want.connections = 3;
  want.callback_address = "10.1.2.4";
  want.callback_port = 4000;
  want.cache_dir = "/cache";
  want.call_timeout_ms = 1234;
  want.max_io_size = 65536;
  want.export_id = 9;
  want.cache.size_bytes = 1ull << 30;
  want.cache.block_size = 4096;
  want.cache.max_objects = 500;
  want.cache.attr_timeout_ms = 7000;
  want.readahead_max = 8192;
  want.open_linger_ms = 2000;
  want.minor_version = 2;
  want.write_behind_max = 0;
  want.write_back = true;
  want.single_writer = true;
  want.serve_stale = true;
  want.flush_age_ms = 11000;
  want.dirty_max = 256ull << 20;  // a quarter of Cache_Size
  want.cache_reset_if_corrupt = true;
  want.cache_reset_on_upstream_change = true;
  want.owner_format = upstream::OwnerFormat::kNames;
  want.gss = true;
  want.gss_service = rpc::GssService::kPrivacy;
  want.gss_keytab = "/keytab";
  want.gss_principal = "nfs@remote";
  want.gss_client_principal = "nache@here";
  want.gss_per_user = true;
  want.remote_sees_machine = false;  // per user: the caller's answers
  ExpectSame(CoreConfigFromC(c), want);
}

}  // namespace
}  // namespace nache
