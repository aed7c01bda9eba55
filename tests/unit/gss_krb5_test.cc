// MIT's mechanism behind gss_krb5.h, without a KDC: a keytab written here
// (MIT's file format, version 0x502, one AES key of our own) for a realm
// whose KDC is a closed port on loopback, and in the export's memory
// credential cache a TGT of that principal (made up: the library only
// looks at its names and times until it uses it), so that the keytab's
// credentials are had without the KDC, as they are once nache has run a
// while. What can be proved so: the credentials say whose they are, and
// an impersonation that cannot be had fails with a message naming the
// user and giving the library's reason, marked transient when the KDC was
// not reached. (The KDC's own refusals, and the delegated tickets, are
// proved in the lab: tests/integration/krb5_s4u_test.sh.)
#include "rpc/gss_krb5.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <krb5/krb5.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace nache {
namespace rpc {
namespace {

constexpr char kRealm[] = "UNIT.NACHE.TEST";

void Put16(std::string *out, uint16_t v) {
  out->push_back(char(v >> 8));
  out->push_back(char(v));
}
void Put32(std::string *out, uint32_t v) {
  Put16(out, uint16_t(v >> 16));
  Put16(out, uint16_t(v));
}
void PutCounted(std::string *out, const std::string &s) {
  Put16(out, uint16_t(s.size()));
  out->append(s);
}

// A keytab file holding one entry: components@kRealm, key version 1,
// aes256-cts-hmac-sha1-96 (enctype 18) with a fixed key.
std::string KeytabBytes(const std::vector<std::string> &components) {
  std::string entry;
  Put16(&entry, uint16_t(components.size()));
  PutCounted(&entry, kRealm);
  for (const std::string &c : components) PutCounted(&entry, c);
  Put32(&entry, 1);           // KRB5_NT_PRINCIPAL
  Put32(&entry, 1700000000);  // timestamp
  entry.push_back(1);         // key version
  Put16(&entry, 18);          // enctype
  PutCounted(&entry, std::string(32, '\x5a'));
  std::string file("\x05\x02", 2);
  Put32(&file, uint32_t(entry.size()));
  return file + entry;
}

constexpr char kCcache[] = "nache-unit-impersonate";

// DER: tag, length, content.
std::string Der(uint8_t tag, const std::string &content) {
  std::string out(1, char(tag));
  if (content.size() < 128) {
    out.push_back(char(content.size()));
  } else {
    out.push_back(char(0x82));
    out.push_back(char(content.size() >> 8));
    out.push_back(char(content.size()));
  }
  return out + content;
}
std::string DerInt(uint8_t v) { return Der(0x02, std::string(1, char(v))); }

// A Ticket (RFC 4120 5.3) for krbtgt/kRealm whose encrypted part is
// made up: well-formed enough to be sent, never decrypted here.
std::string MadeUpTgt() {
  std::string sname = Der(
      0x30, Der(0xa0, DerInt(2)) +
                Der(0xa1, Der(0x30, Der(0x1b, "krbtgt") + Der(0x1b, kRealm))));
  std::string enc =
      Der(0x30, Der(0xa0, DerInt(18)) + Der(0xa1, DerInt(1)) +
                    Der(0xa2, Der(0x04, std::string(48, '\x44'))));
  return Der(0x61,
             Der(0x30, Der(0xa0, DerInt(5)) + Der(0xa1, Der(0x1b, kRealm)) +
                           Der(0xa2, sname) + Der(0xa3, enc)));
}

// Puts a TGT of nfs/nache.unit.test@kRealm, valid for an hour, into the
// memory cache kCcache. False with a message on failure.
bool StoreMadeUpTgt(std::string *why) {
  krb5_context ctx;
  if (krb5_init_context(&ctx) != 0) {
    *why = "krb5_init_context";
    return false;
  }
  krb5_ccache cc = nullptr;
  krb5_principal me = nullptr, tgs = nullptr;
  krb5_creds creds;
  memset(&creds, 0, sizeof(creds));
  char key[32];
  memset(key, 0x33, sizeof(key));
  std::string ticket = MadeUpTgt();
  krb5_error_code code =
      krb5_cc_resolve(ctx, (std::string("MEMORY:") + kCcache).c_str(), &cc);
  if (!code)
    code = krb5_build_principal(ctx, &me, strlen(kRealm), kRealm, "nfs",
                                "nache.unit.test", nullptr);
  if (!code)
    code = krb5_build_principal(ctx, &tgs, strlen(kRealm), kRealm, "krbtgt",
                                kRealm, nullptr);
  if (!code) code = krb5_cc_initialize(ctx, cc, me);
  if (!code) {
    creds.client = me;
    creds.server = tgs;
    creds.keyblock.enctype = 18;
    creds.keyblock.length = sizeof(key);
    creds.keyblock.contents = reinterpret_cast<krb5_octet *>(key);
    creds.times.authtime = creds.times.starttime = time(nullptr) - 60;
    creds.times.endtime = time(nullptr) + 3600;
    creds.ticket_flags = 0x40000000 | 0x00400000;  // forwardable, initial
    creds.ticket.length = ticket.size();
    creds.ticket.data = &ticket[0];
    code = krb5_cc_store_cred(ctx, cc, &creds);
  }
  if (code) *why = krb5_get_error_message(ctx, code);
  if (me) krb5_free_principal(ctx, me);
  if (tgs) krb5_free_principal(ctx, tgs);
  if (cc) krb5_cc_close(ctx, cc);
  krb5_free_context(ctx);
  return code == 0;
}

class KrbImpersonateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nache-gss-krb5-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    keytab_ = dir_ + "/nache.keytab";
    std::ofstream(keytab_, std::ios::binary)
        << KeytabBytes({"nfs", "nache.unit.test"});
    // The realm's KDC: port 1 of loopback, where nothing listens (a
    // connection is refused at once, no timeout to wait for).
    std::ofstream(dir_ + "/krb5.conf")
        << "[libdefaults]\n default_realm = " << kRealm
        << "\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
        << " kdc_timeout = 1000\n max_retries = 1\n"
        << "[realms]\n " << kRealm << " = {\n  kdc = 127.0.0.1:1\n }\n";
    const char *old = getenv("KRB5_CONFIG");
    had_config_ = old != nullptr;
    if (had_config_) old_config_ = old;
    setenv("KRB5_CONFIG", (dir_ + "/krb5.conf").c_str(), 1);
    std::string why;
    ASSERT_TRUE(StoreMadeUpTgt(&why)) << why;
  }
  void TearDown() override {
    if (had_config_)
      setenv("KRB5_CONFIG", old_config_.c_str(), 1);
    else
      unsetenv("KRB5_CONFIG");
    unlink(keytab_.c_str());
    unlink((dir_ + "/krb5.conf").c_str());
    rmdir(dir_.c_str());
  }
  std::shared_ptr<KrbCredentials> Machine() {
    KrbOptions o;
    o.keytab = keytab_;
    o.service = std::string("nfs/remote.unit.test@") + kRealm;
    o.ccache_name = kCcache;
    std::string err;
    auto c = KrbCredentials::Acquire(o, &err);
    EXPECT_NE(c, nullptr) << err;
    return c;
  }

  std::string dir_, keytab_, old_config_;
  bool had_config_ = false;
};

TEST_F(KrbImpersonateTest, TheKeytabsCredentialsNameTheirPrincipal) {
  auto machine = Machine();
  ASSERT_NE(machine, nullptr);
  EXPECT_EQ(machine->principal(), std::string("nfs/nache.unit.test@") + kRealm);
  EXPECT_EQ(machine->expires(), KrbCredentials::TimePoint::max());
}

TEST_F(KrbImpersonateTest, AUserWhoseTicketCannotBeHadIsNamedWithTheReason) {
  auto machine = Machine();
  ASSERT_NE(machine, nullptr);
  KrbError err;
  const std::string alice = std::string("alice@") + kRealm;
  EXPECT_EQ(machine->Impersonate(alice, &err), nullptr);
  // Whose credentials, by which step, and the library's own words.
  EXPECT_NE(err.message.find("credentials for " + alice), std::string::npos)
      << err.message;
  EXPECT_NE(err.message.find("S4U2Self"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("KDC"), std::string::npos) << err.message;
  EXPECT_TRUE(err.transient) << err.message;
}

TEST_F(KrbImpersonateTest, AMalformedUserNameIsRefusedNamingIt) {
  auto machine = Machine();
  ASSERT_NE(machine, nullptr);
  KrbError err;
  EXPECT_EQ(machine->Impersonate("alice@A@B", &err), nullptr);
  EXPECT_NE(err.message.find("alice@A@B"), std::string::npos) << err.message;
  EXPECT_FALSE(err.transient);
}

// A branch box booting while the WAN is down: no ticket in the cache yet
// and the KDC out of reach. The keytab's credentials are had anyway (the
// export starts), naming the keytab's principal and saying why they are
// deferred; each use tries the KDC again and fails, retryably, while it
// stays away. (Before: Acquire failed, and the export was refused.)
TEST_F(KrbImpersonateTest, AKdcOutOfReachAtStartDefersTheKeytabsTicket) {
  KrbOptions o;
  o.keytab = keytab_;
  o.service = std::string("nfs/remote.unit.test@") + kRealm;
  o.ccache_name = "nache-unit-no-kdc-yet";  // empty: no ticket had yet
  std::string err;
  auto machine = KrbCredentials::Acquire(o, &err);
  ASSERT_NE(machine, nullptr) << err;
  EXPECT_EQ(machine->principal(), std::string("nfs/nache.unit.test@") + kRealm);
  std::unique_ptr<GssInitiator> init = machine->NewInitiator();
  ASSERT_NE(init, nullptr);
  std::string token, why;
  EXPECT_EQ(init->Next("", &token, &why), GssInitiator::Step::kFailed);
  EXPECT_NE(why.find("KDC"), std::string::npos) << why;
  KrbError kerr;
  EXPECT_EQ(machine->Impersonate(std::string("alice@") + kRealm, &kerr),
            nullptr);
  EXPECT_TRUE(kerr.transient) << kerr.message;
}

// A KDC that refuses every request with the error code given (a
// KRB-ERROR, RFC 4120 5.9.1), over UDP on a loopback port of its own: what
// nache meets when its keytab's principal has no right to act for users.
class RefusingKdc {
 public:
  explicit RefusingKdc(uint8_t code) : code_(code) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) ||
        getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &len))
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RefusingKdc() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    // (A datagram to itself wakes recvfrom where shutdown does not.)
    if (port_) {
      int w = socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port_);
      sendto(w, "", 0, 0, reinterpret_cast<sockaddr *>(&a), sizeof(a));
      close(w);
    }
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  uint16_t port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    char buf[8192];
    while (!stop_) {
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      ssize_t n = recvfrom(fd_, buf, sizeof(buf), 0,
                           reinterpret_cast<sockaddr *>(&from), &len);
      if (n <= 0 || stop_) continue;
      requests_++;
      std::string e = Error();
      sendto(fd_, e.data(), e.size(), 0, reinterpret_cast<sockaddr *>(&from),
             len);
    }
  }
  std::string Error() const {
    char now[32];
    time_t t = time(nullptr);
    strftime(now, sizeof(now), "%Y%m%d%H%M%SZ", gmtime(&t));
    std::string sname =
        Der(0x30,
            Der(0xa0, DerInt(2)) +
                Der(0xa1, Der(0x30, Der(0x1b, "krbtgt") + Der(0x1b, kRealm))));
    return Der(0x7e,
               Der(0x30, Der(0xa0, DerInt(5)) + Der(0xa1, DerInt(30)) +
                             Der(0xa4, Der(0x18, now)) + Der(0xa5, DerInt(0)) +
                             Der(0xa6, DerInt(code_)) +
                             Der(0xa9, Der(0x1b, kRealm)) + Der(0xaa, sname)));
  }

  const uint8_t code_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// nache's keytab principal without the right to act for users: the KDC
// refuses its S4U2Self (KDC_ERR_BADOPTION, 13, as MIT's does for a
// delegation it does not allow). The impersonation fails for good (not
// retryable: the caller gets NFS4ERR_ACCESS, and the refusal is kept for
// a while), naming the user, the step and the KDC's reason. (Before,
// only the lab proved a refusal: every unit test met a KDC out of reach.)
TEST_F(KrbImpersonateTest, AKeytabWithoutS4URightsIsRefusedForGood) {
  RefusingKdc kdc(13);
  ASSERT_NE(kdc.port(), 0) << "no loopback UDP port";
  std::ofstream(dir_ + "/krb5.conf")
      << "[libdefaults]\n default_realm = " << kRealm
      << "\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
      << " kdc_timeout = 1000\n max_retries = 1\n"
      << " udp_preference_limit = 65535\n"
      << "[realms]\n " << kRealm << " = {\n  kdc = 127.0.0.1:" << kdc.port()
      << "\n }\n";
  auto machine = Machine();
  ASSERT_NE(machine, nullptr);
  KrbError err;
  const std::string alice = std::string("alice@") + kRealm;
  EXPECT_EQ(machine->Impersonate(alice, &err), nullptr);
  EXPECT_GE(kdc.requests(), 1) << "the KDC was asked";
  EXPECT_NE(err.message.find("credentials for " + alice), std::string::npos)
      << err.message;
  EXPECT_NE(err.message.find("S4U2Self"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("option"), std::string::npos)
      << "the KDC's reason (KDC can't fulfill requested option): "
      << err.message;
  EXPECT_FALSE(err.transient) << err.message;
}

}  // namespace
}  // namespace rpc
}  // namespace nache
