// Config validation: good values pass; each bad value names its parameter.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "nache/nache.h"
#include "temp_dir.h"

namespace {

// The defaults (the FSAL's config table uses the same), plus the two
// parameters that have none.
nache_config Good() {
  nache_config c;
  nache_config_defaults(&c);
  c.upstream_server = "10.1.2.3";
  c.upstream_path = "/export";
  c.cache_dir = "/var/cache/nache/x";
  return c;
}

std::string Error(const nache_config &c) {
  char err[256] = "";
  EXPECT_FALSE(nache_config_validate(&c, err, sizeof(err)));
  return err;
}

// nache_core_open validates for a caller that did not (the FSAL validates
// first and calls nache_core_open_validated): a bad value refuses the
// start and names its parameter, before the store is touched.
TEST(ConfigTest, CoreOpenRefusesABadConfigByName) {
  nache_config c = Good();
  c.open_linger_s = 4000;
  char err[256] = "";
  nache_core *core = nullptr;
  EXPECT_NE(nache_core_open(&c, &core, err, sizeof(err)), 0u);
  EXPECT_EQ(std::string(err).rfind("Open_Linger:", 0), 0u) << err;
  EXPECT_EQ(core, nullptr);
}

TEST(ConfigTest, GoodConfigIsAccepted) {
  nache_config c = Good();
  char err[256] = "";
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  c.callback_address = "192.0.2.7";
  c.callback_port = 4045;
  c.upstream_server = "nfs.example.com";
  c.connections = 64;
  c.max_io_size = 4096;
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
}

TEST(ConfigTest, SizesTakeBinarySuffixes) {
  uint64_t v = 0;
  EXPECT_TRUE(nache_parse_size("512M", &v));
  EXPECT_EQ(v, 512ull << 20);
  EXPECT_TRUE(nache_parse_size("20G", &v));
  EXPECT_EQ(v, 20ull << 30);
  EXPECT_TRUE(nache_parse_size("1t", &v));
  EXPECT_EQ(v, 1ull << 40);
  EXPECT_TRUE(nache_parse_size("123456789", &v));
  EXPECT_EQ(v, 123456789u);
  EXPECT_FALSE(nache_parse_size("20GB", &v));
  EXPECT_FALSE(nache_parse_size(" 1G", &v));
}

TEST(ConfigTest, EachBadValueNamesItsParameter) {
  nache_config c = Good();
  c.upstream_server = nullptr;
  EXPECT_EQ(Error(c).rfind("Upstream_Server:", 0), 0u);
  c = Good();
  c.upstream_server = "has space";
  EXPECT_EQ(Error(c).rfind("Upstream_Server:", 0), 0u);
  c = Good();
  c.upstream_port = 0;
  EXPECT_EQ(Error(c).rfind("Upstream_Port:", 0), 0u);
  c = Good();
  c.upstream_port = 70000;
  EXPECT_EQ(Error(c).rfind("Upstream_Port:", 0), 0u);
  c = Good();
  c.upstream_path = "export";
  EXPECT_EQ(Error(c).rfind("Upstream_Path:", 0), 0u);
  c = Good();
  c.connections = 0;
  EXPECT_EQ(Error(c).rfind("Connections:", 0), 0u);
  c = Good();
  c.connections = 65;
  EXPECT_EQ(Error(c).rfind("Connections:", 0), 0u);
  c = Good();
  c.callback_address = "not-an-ip";
  EXPECT_EQ(Error(c).rfind("Callback_Address:", 0), 0u);
  c = Good();
  c.callback_address = "192.0.2.7";
  c.callback_port = 0;
  EXPECT_EQ(Error(c).rfind("Callback_Port:", 0), 0u);
  c = Good();
  c.cache_dir = "relative/dir";
  EXPECT_EQ(Error(c).rfind("Cache_Dir:", 0), 0u);
  c = Good();
  c.cache_dir = nullptr;
  EXPECT_EQ(Error(c).rfind("Cache_Dir:", 0), 0u);
  c = Good();
  c.call_timeout_ms = 10;
  EXPECT_EQ(Error(c).rfind("Upstream_Timeout:", 0), 0u);
  c = Good();
  c.max_io_size = 5000;
  EXPECT_EQ(Error(c).rfind("Max_IO_Size:", 0), 0u);
  for (const char *bad : {"", "G", "4X", "12", "1.5G", "-1G", "99999999999T"}) {
    c = Good();
    c.cache_size = bad;
    EXPECT_EQ(Error(c).rfind("Cache_Size:", 0), 0u) << bad;
  }
  c = Good();
  c.block_size = 3 << 12;
  EXPECT_EQ(Error(c).rfind("Block_Size:", 0), 0u);
  c = Good();
  c.block_size = 2 << 20;
  EXPECT_EQ(Error(c).rfind("Block_Size:", 0), 0u);
  c = Good();
  c.attr_timeout_s = 3601;
  EXPECT_EQ(Error(c).rfind("Attr_Timeout:", 0), 0u);
  c = Good();
  c.readahead_max = 1u << 30;
  EXPECT_EQ(Error(c).rfind("Readahead_Max:", 0), 0u);
  c = Good();
  c.open_linger_s = 4000;
  EXPECT_EQ(Error(c).rfind("Open_Linger:", 0), 0u);
  c = Good();
  c.minor_version = 3;
  EXPECT_EQ(Error(c).rfind("Upstream_Minor_Version:", 0), 0u);
  c.minor_version = 2;
  char err[256] = "";
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  for (const char *bad : {"", "lots", "17G"}) {
    c = Good();
    c.write_behind_max = bad;
    EXPECT_EQ(Error(c).rfind("Write_Behind_Max:", 0), 0u) << bad;
  }
  c = Good();
  c.max_io_size = 2 << 20;
  EXPECT_EQ(Error(c).rfind("Max_IO_Size:", 0), 0u);
  c = Good();
  c.write_policy = "writeback";
  EXPECT_EQ(Error(c).rfind("Write_Policy:", 0), 0u);
  c = Good();
  c.flush_age_s = 100000;
  EXPECT_EQ(Error(c).rfind("Flush_Age:", 0), 0u);
  for (const char *bad : {"lots", "512K", "5G"}) {  // 5G > Cache_Size 4G
    c = Good();
    c.dirty_max = bad;
    EXPECT_EQ(Error(c).rfind("Dirty_Max:", 0), 0u) << bad;
  }
}

TEST(ConfigTest, CacheObjectsIsDerivedOrAtLeastAThousand) {
  nache_config c = Good();
  char err[256] = "";
  c.cache_objects = 0;  // derived from Cache_Size
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  c.cache_objects = 1000;
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  c.cache_objects = 999;
  EXPECT_NE(Error(c).find("Cache_Objects"), std::string::npos);
}

TEST(ConfigTest, WriteBackSettingsAreAccepted) {
  nache_config c = Good();
  c.write_policy = "write_back";
  c.single_writer = true;
  c.flush_age_s = 30;
  c.dirty_max = "1G";
  char err[256] = "";
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  c.dirty_max = "";  // a quarter of Cache_Size
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
}

TEST(ConfigTest, UpstreamOwnerFormatIsAutoNumericOrNames) {
  nache_config c = Good();
  char err[256] = "";
  for (const char *good : {"auto", "numeric", "names"}) {
    c.upstream_owner_format = good;
    EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << good << err;
  }
  for (const char *bad : {"", "name", "Names", "numeric,names"}) {
    c.upstream_owner_format = bad;
    EXPECT_EQ(Error(c).rfind("Upstream_Owner_Format:", 0), 0u) << bad;
  }
}

// Upstream_Sec: sys, or a Kerberos flavour that needs Upstream_Keytab as
// an absolute path (read when the export opens, not here).
TEST(ConfigTest, UpstreamSecIsSysOrKerberosWithAKeytab) {
  nache_config c = Good();
  char err[256] = "";
  c.upstream_sec = "sys";
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  for (const char *flavor : {"krb5", "krb5i", "krb5p"}) {
    c.upstream_sec = flavor;
    c.upstream_keytab = nullptr;
    EXPECT_EQ(Error(c).rfind("Upstream_Keytab:", 0), 0u) << flavor;
    c.upstream_keytab = "nache.keytab";
    EXPECT_EQ(Error(c).rfind("Upstream_Keytab:", 0), 0u) << flavor;
    c.upstream_keytab = "/etc/nache/nache.keytab";
    EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << flavor << err;
  }
  for (const char *bad : {"", "krb5x", "KRB5", "spkm3"}) {
    c.upstream_sec = bad;
    EXPECT_EQ(Error(c).rfind("Upstream_Sec:", 0), 0u) << bad;
  }
}

// Upstream_Identity: machine (the default) or user, which needs a Kerberos
// Upstream_Sec and sessions upstream; refusals name the parameter.
TEST(ConfigTest, UpstreamIdentityUserNeedsKerberosAndSessions) {
  nache_config c = Good();
  char err[256] = "";
  EXPECT_STREQ(c.upstream_identity, "machine");
  c.upstream_identity = "user";
  c.upstream_sec = "sys";
  EXPECT_EQ(Error(c).rfind("Upstream_Identity:", 0), 0u) << Error(c);
  c.upstream_sec = "krb5p";
  c.upstream_keytab = "/etc/nache/nache.keytab";
  c.minor_version = 0;
  EXPECT_EQ(Error(c).rfind("Upstream_Identity:", 0), 0u) << Error(c);
  c.minor_version = 1;
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  c.upstream_identity = "machine";
  c.minor_version = 0;
  EXPECT_TRUE(nache_config_validate(&c, err, sizeof(err))) << err;
  for (const char *bad : {"", "users", "User", "principal"}) {
    c.upstream_identity = bad;
    EXPECT_EQ(Error(c).rfind("Upstream_Identity:", 0), 0u) << bad;
  }
}

// Idmapd_Conf: unset is libnfsidmap's default; a path set must be an
// absolute path to a readable file, or the daemon refuses to start naming
// it. (Nothing is read from it before the first owner name.)
TEST(ConfigTest, IdmapdConfMustBeAReadableFile) {
  nache::testing_util::TempDir dir;
  const std::string conf = dir.path() + "/idmapd.conf";
  std::ofstream(conf) << "[General]\nDomain = nache.test\n";
  char err[256] = "";
  EXPECT_TRUE(nache_idmap_configure(nullptr, err, sizeof(err))) << err;
  EXPECT_TRUE(nache_idmap_configure("", err, sizeof(err))) << err;
  EXPECT_TRUE(nache_idmap_configure(conf.c_str(), err, sizeof(err))) << err;
  const std::string missing = dir.path() + "/missing.conf";
  for (const std::string &bad :
       {std::string("idmapd.conf"), missing, dir.path()}) {
    err[0] = '\0';
    EXPECT_FALSE(nache_idmap_configure(bad.c_str(), err, sizeof(err))) << bad;
    EXPECT_EQ(std::string(err).rfind("Idmapd_Conf:", 0), 0u) << err;
  }
  EXPECT_NE(std::string(err).find("not a regular file"), std::string::npos)
      << err;
  ASSERT_FALSE(nache_idmap_configure(missing.c_str(), err, sizeof(err)));
  EXPECT_NE(std::string(err).find("No such file"), std::string::npos) << err;
  EXPECT_TRUE(nache_idmap_configure(nullptr, err, sizeof(err))) << err;
}

TEST(ConfigTest, StatusNamesAreReadable) {
  EXPECT_STREQ(nache_status_name(0), "NFS4_OK");
  EXPECT_STREQ(nache_status_name(10008), "NFS4ERR_DELAY");
  EXPECT_STREQ(nache_status_name(4242), "NFS4ERR_4242");
}

// Two exports on one Cache_Dir are refused before either opens the store,
// naming both exports and the parameter; however the path is spelled.
TEST(ConfigTest, TwoExportsOnOneCacheDirAreRefusedNamingBoth) {
  char err[512] = "";
  ASSERT_TRUE(nache_cache_dir_claim(
      101, "Path /, Pseudo /a", "/nonexistent-nache/cache", err, sizeof(err)));
  EXPECT_FALSE(nache_cache_dir_claim(102, "Path /, Pseudo /b",
                                     "/nonexistent-nache//cache/", err,
                                     sizeof(err)));
  std::string e(err);
  EXPECT_EQ(e.find("Cache_Dir: "), 0u) << e;
  EXPECT_NE(e.find("export 101 (Path /, Pseudo /a)"), std::string::npos) << e;
  EXPECT_NE(e.find("export 102 (Path /, Pseudo /b)"), std::string::npos) << e;
  // The same export again (a re-created export) keeps its claim.
  EXPECT_TRUE(nache_cache_dir_claim(
      101, "Path /, Pseudo /a", "/nonexistent-nache/cache", err, sizeof(err)));
  EXPECT_TRUE(nache_cache_dir_claim(
      102, "Path /, Pseudo /b", "/nonexistent-nache/other", err, sizeof(err)));
  nache_cache_dir_release(101);
  EXPECT_TRUE(nache_cache_dir_claim(
      103, "Path /, Pseudo /c", "/nonexistent-nache/cache", err, sizeof(err)));
  nache_cache_dir_release(102);
  nache_cache_dir_release(103);
}

}  // namespace
