// RPCSEC_GSS's server side (rpcsec_gss_server.h) behind our own RPC
// transport, with the fake mechanism (fake_gss.h), the peer played with our
// client side's classes (rpcsec_gss.h) writing records by hand: the
// context handshake (INIT, CONTINUE_INIT, the window's MIC as verifier),
// a data call with each service, DESTROY; and what must be refused: a
// replayed or too-old sequence number (dropped, no reply), a verifier that
// does not check, an unknown handle, a principal other than the remote's,
// a service weaker than asked, hostile lengths and credentials; contexts
// beyond the bound evict the oldest.
#include "rpc/rpcsec_gss_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "fake_gss.h"
#include "rpc/rpc_transport.h"
#include "rpc/rpcsec_gss.h"
#include "rpc/xdr.h"

namespace nache {
namespace rpc {
namespace {

constexpr uint32_t kProg = 0x40000000;
constexpr char kKey = 0x33;
const char *const kRemote = "nfs/files.example.org@EXAMPLE.ORG";
constexpr uint32_t kAuthBadCred = 1, kAuthTooWeak = 5;
constexpr uint32_t kGarbageArgs = 4;

// A reply as the peer reads it.
struct Reply {
  bool accepted = false;
  uint32_t xid = 0;
  uint32_t auth_stat = 0;  // denied
  uint32_t verf_flavor = 0, accept_stat = 0;
  std::string verf;
  std::string results;  // the rest of the record
};

bool ParseReply(const std::string &rec, Reply *r) {
  XdrIn in(rec.data(), rec.size());
  uint32_t type, stat, what;
  if (!in.U32(&r->xid) || !in.U32(&type) || type != 1 || !in.U32(&stat))
    return false;
  if (stat == 1) return in.U32(&what) && what == 1 && in.U32(&r->auth_stat);
  r->accepted = true;
  if (!in.U32(&r->verf_flavor) || !in.Opaque(&r->verf, 400) ||
      !in.U32(&r->accept_stat))
    return false;
  r->results.assign(in.pos(), in.left());
  return true;
}

std::string SeqBytes(uint32_t seq) {
  std::string s;
  XdrOut(&s).U32(seq);
  return s;
}

class GssServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(GssServerOptions()); }
  void TearDown() override {
    t_.reset();
    if (peer_ >= 0) close(peer_);
  }
  // The server side with o (the fake acceptor, the remote's principal
  // allowed, unless o says otherwise), serving an echo handler.
  void Start(GssServerOptions o) {
    t_.reset();
    if (peer_ >= 0) close(peer_);
    if (!o.new_acceptor) {
      o.new_acceptor = [this] {
        return std::unique_ptr<GssAcceptor>(new FakeAcceptor(initiator_, kKey));
      };
    }
    if (o.allowed_principal.empty())
      o.allowed_principal = "nfs@files.example.org";
    o.on_refused_principal = [this](const std::string &p) { refused_ = p; };
    server_.reset(new GssServer(o));
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    t_.reset(new Transport(sv[0], 64 * 1024));
    peer_ = sv[1];
    t_->SetPeerSecurity(server_.get());
    t_->SetCallHandler(
        [this](const PeerCall &c, XdrIn *args, std::string *res) {
          std::string s;
          if (!args->Opaque(&s, 1024) || args->left() != 0)
            return ReplyStatus::kGarbageArgs;
          served_++;
          last_flavor_ = c.cred_flavor;
          XdrOut(res).Opaque("echo:" + s);
          return ReplyStatus::kOk;
        });
  }

  // The call header up to the procedure; the record starts at its XID.
  static std::string Header(uint32_t xid, uint32_t proc) {
    std::string rec;
    XdrOut x(&rec);
    for (uint32_t v : {xid, 0u, 2u, kProg, 1u, proc}) x.U32(v);
    return rec;
  }
  // Sends a record; true when a reply came (into *r), false when none.
  bool Exchange(const std::string &rec, Reply *r) {
    std::string m;
    XdrOut(&m).U32(0x80000000u | uint32_t(rec.size()));
    m += rec;
    EXPECT_EQ(write(peer_, m.data(), m.size()), ssize_t(m.size()));
    // The transport serves a whole record in one Service: what it replies
    // is on the socket when Service returns.
    pollfd p{t_->fd(), POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 5000), 1);
    EXPECT_TRUE(t_->Service(p.revents)) << t_->error();
    char mark[4];
    if (recv(peer_, mark, 4, MSG_DONTWAIT) != 4) return false;
    uint32_t len = 0;
    XdrIn(mark, 4).U32(&len);
    std::string body(len & 0x7fffffffu, '\0');
    EXPECT_EQ(recv(peer_, &body[0], body.size(), MSG_WAITALL),
              ssize_t(body.size()));
    EXPECT_TRUE(ParseReply(body, r));
    return true;
  }
  // Appends a credential of our making (gss_proc, seq, service, handle)
  // and its verifier, the fake MIC of the header, to rec.
  static void PutCredVerf(std::string *rec, uint32_t gss_proc, uint32_t seq,
                          GssService service, const std::string &handle) {
    std::string cred;
    XdrOut c(&cred);
    for (uint32_t v : {1u, gss_proc, seq, uint32_t(service)}) c.U32(v);
    c.Opaque(handle);
    XdrOut x(rec);
    x.U32(kAuthRpcsecGss);
    x.Opaque(cred);
    const std::string mic = FakeContext::Mic(kKey, *rec);
    x.U32(kAuthRpcsecGss);
    x.Opaque(mic);
  }
  // Sends rec, which must be refused: AUTH_ERROR with auth_stat.
  void ExpectDenied(const std::string &rec, uint32_t auth_stat) {
    Reply r;
    ASSERT_TRUE(Exchange(rec, &r));
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(r.auth_stat, auth_stat);
  }
  // One context-creation call: handle empty for INIT.
  Reply Init(const std::string &handle, const std::string &token,
             GssInitRes *res) {
    std::string rec = Header(++xid_, 0);
    GssInitCall call(handle);
    uint32_t seq;
    EXPECT_TRUE(call.PutCredVerf(&rec, 0, &seq));
    XdrOut(&rec).Opaque(token);
    Reply r;
    EXPECT_TRUE(Exchange(rec, &r));
    if (r.accepted) {
      XdrIn in(r.results.data(), r.results.size());
      EXPECT_TRUE(DecodeGssInitRes(&in, res));
    }
    return r;
  }
  // The whole handshake; the client's context for service.
  std::unique_ptr<RpcsecGss> Establish(GssService service) {
    GssInitRes res;
    Reply r = Init("", "tok1", &res);
    EXPECT_TRUE(r.accepted);
    EXPECT_EQ(res.major, kGssContinueNeeded);
    EXPECT_EQ(res.token, "srv1");
    EXPECT_EQ(r.verf_flavor, 0u) << "no context yet: AUTH_NONE";
    const std::string handle = res.handle;
    r = Init(handle, "tok2", &res);
    EXPECT_TRUE(r.accepted);
    EXPECT_EQ(res.major, kGssComplete);
    EXPECT_EQ(res.handle, handle);
    EXPECT_EQ(res.token, "srv2");
    EXPECT_EQ(res.window, GssServer::kWindow);
    auto gss = std::make_unique<RpcsecGss>(std::make_unique<FakeContext>(kKey),
                                           res.handle, res.window, service);
    EXPECT_EQ(r.verf_flavor, kAuthRpcsecGss);
    EXPECT_TRUE(gss->CheckWindowVerifier(r.verf)) << "the window's MIC";
    return gss;
  }
  // A data call's record under gss, the argument an XDR string.
  std::string DataCall(RpcsecGss *gss, const std::string &arg, uint32_t *seq,
                       uint32_t proc = 1) {
    std::string rec = Header(++xid_, proc);
    EXPECT_TRUE(gss->PutCredVerf(&rec, 0, seq));
    EXPECT_TRUE(gss->PutArgs(
        *seq,
        [&arg](std::string *r) {
          XdrOut(r).Opaque(arg);
          return true;
        },
        &rec));
    return rec;
  }
  // The echoed string of a data call's reply, opened by the client side.
  std::string Opened(RpcsecGss *gss, uint32_t seq, const Reply &r) {
    XdrIn results(r.results.data(), r.results.size());
    std::string plain, text;
    if (!gss->OpenReply(seq, r.verf_flavor, r.verf.data(),
                        uint32_t(r.verf.size()), &results, &plain) ||
        !results.Opaque(&text, 1024))
      return "(reply does not open)";
    return text;
  }

  std::unique_ptr<GssServer> server_;
  std::unique_ptr<Transport> t_;
  int peer_ = -1;
  uint32_t xid_ = 100;
  std::string initiator_ = kRemote;  // whom the fake acceptor says called
  std::string refused_;              // on_refused_principal's argument
  int served_ = 0;                   // calls the handler served
  uint32_t last_flavor_ = 0;
};

TEST_F(GssServerTest, TheHandshakeGivesAHandleAndTheWindowsMic) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kNone);
  EXPECT_EQ(server_->contexts(), 1u);
  EXPECT_EQ(server_->established(), 1u);
  EXPECT_EQ(served_, 0) << "context creation is not the handler's";
}

TEST_F(GssServerTest, ADataCallWithEachServiceIsServedAndSealed) {
  for (GssService s :
       {GssService::kNone, GssService::kIntegrity, GssService::kPrivacy}) {
    SCOPED_TRACE(GssServiceName(s));
    std::unique_ptr<RpcsecGss> gss = Establish(s);
    uint32_t seq;
    const std::string rec = DataCall(gss.get(), "secret-arg", &seq);
    const bool privacy = s == GssService::kPrivacy;
    EXPECT_EQ(rec.find("secret-arg") == std::string::npos, privacy)
        << "the arguments in clear unless under privacy";
    Reply r;
    ASSERT_TRUE(Exchange(rec, &r));
    ASSERT_TRUE(r.accepted);
    EXPECT_EQ(r.accept_stat, 0u);
    EXPECT_EQ(r.verf, FakeContext::Mic(kKey, SeqBytes(seq)));
    EXPECT_EQ(r.results.find("echo:") == std::string::npos, privacy)
        << "the results in clear unless under privacy";
    EXPECT_EQ(Opened(gss.get(), seq, r), "echo:secret-arg");
    EXPECT_EQ(last_flavor_, kAuthRpcsecGss);
  }
  EXPECT_EQ(served_, 3);
}

TEST_F(GssServerTest, AReplayedOrTooOldSequenceNumberIsDroppedUnanswered) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kIntegrity);
  uint32_t seq1, seq;
  const std::string first = DataCall(gss.get(), "a", &seq1);
  Reply r;
  ASSERT_TRUE(Exchange(first, &r));
  EXPECT_FALSE(Exchange(first, &r)) << "a replay is not answered";
  // Move the window past the first call: it is then below the window.
  for (uint32_t i = 0; i <= GssServer::kWindow; i++)
    ASSERT_TRUE(Exchange(DataCall(gss.get(), "b", &seq), &r));
  EXPECT_FALSE(Exchange(first, &r)) << "below the window";
  EXPECT_EQ(served_, int(GssServer::kWindow) + 2);
  EXPECT_EQ(server_->dropped_calls(), 2u);
  // Within the window, out of order, is served.
  uint32_t later_seq, latest_seq;
  const std::string later = DataCall(gss.get(), "c", &later_seq);
  const std::string latest = DataCall(gss.get(), "d", &latest_seq);
  ASSERT_TRUE(Exchange(latest, &r));
  ASSERT_TRUE(Exchange(later, &r));
  EXPECT_EQ(Opened(gss.get(), later_seq, r), "echo:c");
  EXPECT_NE(seq1, later_seq);
}

TEST_F(GssServerTest, AVerifierThatDoesNotCheckIsRefused) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kNone);
  uint32_t seq;
  std::string rec = DataCall(gss.get(), "a", &seq);
  // The XID is under the verifier's MIC: another one breaks it.
  rec[3] ^= 1;
  ExpectDenied(rec, kRpcsecGssCredProblem);
  EXPECT_EQ(served_, 0);
}

TEST_F(GssServerTest, ArgumentsWhoseChecksumOrSequenceDoNotMatchAreGarbage) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kIntegrity);
  uint32_t seq;
  std::string rec = DataCall(gss.get(), "abcd", &seq);
  rec[rec.find("abcd")] = 'X';  // the body no longer matches its MIC
  Reply r;
  ASSERT_TRUE(Exchange(rec, &r));
  ASSERT_TRUE(r.accepted);
  EXPECT_EQ(r.accept_stat, kGarbageArgs);
  // A privacy body that does not unwrap.
  std::unique_ptr<RpcsecGss> p = Establish(GssService::kPrivacy);
  rec = DataCall(p.get(), "abcd", &seq);
  rec[rec.find("wrap:")] = 'X';
  ASSERT_TRUE(Exchange(rec, &r));
  EXPECT_EQ(r.accept_stat, kGarbageArgs);
  EXPECT_EQ(served_, 0);
}

TEST_F(GssServerTest, AnUnknownHandleIsRefused) {
  RpcsecGss stranger(std::make_unique<FakeContext>(kKey), "12345678", 128,
                     GssService::kNone);
  uint32_t seq;
  ExpectDenied(DataCall(&stranger, "a", &seq), kRpcsecGssCredProblem);
  // CONTINUE_INIT of a handle we never gave, too.
  GssInitRes res;
  Reply r = Init("12345678", "tok2", &res);
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.auth_stat, kRpcsecGssCredProblem);
  EXPECT_EQ(served_, 0);
}

TEST_F(GssServerTest, AContextOfAnotherPrincipalIsRefusedAndCounted) {
  initiator_ = "nfs/evil.example.org@EXAMPLE.ORG";
  GssInitRes res;
  Reply r = Init("", "tok1", &res);
  ASSERT_TRUE(r.accepted);
  r = Init(res.handle, "tok2", &res);
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.auth_stat, kAuthBadCred);
  EXPECT_EQ(server_->refused_principals(), 1u);
  EXPECT_EQ(refused_, "nfs/evil.example.org@EXAMPLE.ORG");
  EXPECT_EQ(server_->contexts(), 0u) << "nothing kept of it";
  EXPECT_EQ(server_->established(), 0u);
}

TEST_F(GssServerTest, PrincipalsAllowedAsConfigured) {
  EXPECT_TRUE(PrincipalAllowed("nfs@files.example.org", kRemote));
  EXPECT_TRUE(PrincipalAllowed("nfs@FILES.example.org", kRemote));
  EXPECT_TRUE(PrincipalAllowed(kRemote, kRemote));
  EXPECT_FALSE(PrincipalAllowed(kRemote, "nfs/files.example.org@OTHER.ORG"));
  EXPECT_FALSE(PrincipalAllowed("nfs@files.example.org",
                                "host/files.example.org@EXAMPLE.ORG"));
  EXPECT_FALSE(PrincipalAllowed("nfs@files.example.org",
                                "nfs/files.example.org.evil@EXAMPLE.ORG"));
  EXPECT_FALSE(PrincipalAllowed("nfs@files.example.org", "alice@EXAMPLE.ORG"));
  EXPECT_FALSE(PrincipalAllowed("nfs@files.example.org", ""));
  EXPECT_FALSE(PrincipalAllowed("", kRemote));
}

TEST_F(GssServerTest, AServiceWeakerThanAskedIsRefused) {
  GssServerOptions o;
  o.min_service = GssService::kIntegrity;
  Start(o);
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kNone);
  uint32_t seq;
  ExpectDenied(DataCall(gss.get(), "a", &seq), kAuthTooWeak);
  EXPECT_EQ(served_, 0);
}

TEST_F(GssServerTest, DestroyEndsTheContext) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kIntegrity);
  uint32_t seq;
  Reply r;
  ASSERT_TRUE(Exchange(DataCall(gss.get(), "", &seq, 0), &r));  // a NULL
  // DESTROY: a data call's credential with procedure 3.
  std::string rec = Header(++xid_, 0);
  PutCredVerf(&rec, 3, seq + 1, GssService::kIntegrity, gss->handle());
  ASSERT_TRUE(Exchange(rec, &r));
  ASSERT_TRUE(r.accepted);
  EXPECT_EQ(r.accept_stat, 0u);
  EXPECT_EQ(r.verf, FakeContext::Mic(kKey, SeqBytes(seq + 1)));
  EXPECT_EQ(server_->contexts(), 0u);
  ASSERT_TRUE(Exchange(DataCall(gss.get(), "a", &seq), &r));
  EXPECT_EQ(r.auth_stat, kRpcsecGssCredProblem) << "the handle is gone";
  EXPECT_EQ(served_, 1);
}

TEST_F(GssServerTest, SequenceNumbersAtTheLimitAreAContextProblem) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kNone);
  std::string rec = Header(++xid_, 1);
  PutCredVerf(&rec, 0, kRpcsecGssMaxSeq, GssService::kNone, gss->handle());
  XdrOut(&rec).Opaque("a");
  ExpectDenied(rec, kRpcsecGssCtxProblem);
}

TEST_F(GssServerTest, ContextsBeyondTheBoundEvictTheOldest) {
  GssServerOptions o;
  o.max_contexts = 2;
  Start(o);
  std::unique_ptr<RpcsecGss> a = Establish(GssService::kNone);
  std::unique_ptr<RpcsecGss> b = Establish(GssService::kNone);
  std::unique_ptr<RpcsecGss> c = Establish(GssService::kNone);
  EXPECT_EQ(server_->contexts(), 2u);
  uint32_t seq;
  Reply r;
  ASSERT_TRUE(Exchange(DataCall(a.get(), "a", &seq), &r));
  EXPECT_EQ(r.auth_stat, kRpcsecGssCredProblem) << "the oldest went";
  ASSERT_TRUE(Exchange(DataCall(c.get(), "c", &seq), &r));
  EXPECT_EQ(Opened(c.get(), seq, r), "echo:c");
}

TEST_F(GssServerTest, HostileCredentialsAreAuthErrorsNeverServed) {
  std::unique_ptr<RpcsecGss> gss = Establish(GssService::kNone);
  struct Case {
    const char *what;
    std::string cred;
  };
  auto cred = [](std::initializer_list<uint32_t> words,
                 const std::string &tail) {
    std::string s;
    XdrOut x(&s);
    for (uint32_t w : words) x.U32(w);
    return s + tail;
  };
  std::string handle_len_huge;
  XdrOut(&handle_len_huge).U32(0xfffffff0u);
  const Case cases[] = {
      {"empty", ""},
      {"version 2", cred({2, 0, 1, 1}, std::string(4, '\0'))},
      {"a handle longer than the credential",
       cred({1, 0, 1, 1}, handle_len_huge)},
      {"an unknown procedure", cred({1, 9, 1, 1, 0}, "")},
      {"bytes after the handle", cred({1, 0, 1, 1, 0, 7}, "")},
      {"INIT with a handle", cred({1, 1, 0, 1, 4}, "abcd")},
  };
  for (const Case &k : cases) {
    SCOPED_TRACE(k.what);
    std::string rec = Header(++xid_, 0);
    XdrOut x(&rec);
    x.U32(kAuthRpcsecGss);
    x.Opaque(k.cred);
    x.U32(0);
    x.U32(0);
    x.Opaque("tok1");
    ExpectDenied(rec, kAuthBadCred);
  }
  // An INIT token claiming more bytes than the record has.
  std::string rec = Header(++xid_, 0);
  {
    GssInitCall init("");
    uint32_t seq;
    ASSERT_TRUE(init.PutCredVerf(&rec, 0, &seq));
    XdrOut(&rec).U32(0x7fffffffu);
  }
  Reply r;
  ASSERT_TRUE(Exchange(rec, &r));
  EXPECT_FALSE(r.accepted);
  // A data call of the context whose verifier is not RPCSEC_GSS.
  rec = Header(++xid_, 1);
  {
    std::string c;
    XdrOut cw(&c);
    for (uint32_t v : {1u, 0u, 500u, 1u}) cw.U32(v);
    cw.Opaque(gss->handle());
    XdrOut x(&rec);
    x.U32(kAuthRpcsecGss);
    x.Opaque(c);
    x.U32(0);  // AUTH_NONE
    x.U32(0);
    x.Opaque("a");
  }
  ExpectDenied(rec, kRpcsecGssCredProblem);
  // The context still serves its own calls.
  uint32_t seq;
  ASSERT_TRUE(Exchange(DataCall(gss.get(), "a", &seq), &r));
  EXPECT_EQ(Opened(gss.get(), seq, r), "echo:a");
  EXPECT_EQ(served_, 1);
  EXPECT_EQ(server_->contexts(), 1u);
}

TEST_F(GssServerTest, ATokenTheMechanismRefusesIsAFailedInitNoContext) {
  GssInitRes res;
  Reply r = Init("", "not-a-token", &res);
  ASSERT_TRUE(r.accepted);
  EXPECT_NE(res.major, kGssComplete);
  EXPECT_NE(res.major, kGssContinueNeeded);
  EXPECT_TRUE(res.handle.empty());
  EXPECT_EQ(server_->contexts(), 0u);
}

TEST(GssServerTransport, AnRpcsecGssCallWithoutAPeerSecurityIsABadCred) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Transport t(sv[0]);
  int served = 0;
  t.SetCallHandler([&served](const PeerCall &, XdrIn *, std::string *) {
    served++;
    return ReplyStatus::kOk;
  });
  RpcsecGss gss(std::make_unique<FakeContext>(kKey), "H", 128,
                GssService::kNone);
  std::string rec;
  XdrOut x(&rec);
  x.U32(0x80000000u);  // the marker, patched below
  for (uint32_t v : {7u, 0u, 2u, kProg, 1u, 0u}) x.U32(v);
  uint32_t seq;
  ASSERT_TRUE(gss.PutCredVerf(&rec, 4, &seq));
  x.PatchU32(0, 0x80000000u | uint32_t(rec.size() - 4));
  ASSERT_EQ(write(sv[1], rec.data(), rec.size()), ssize_t(rec.size()));
  pollfd p{t.fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_TRUE(t.Service(p.revents));
  std::string reply(64, '\0');
  const ssize_t n = recv(sv[1], &reply[0], reply.size(), MSG_DONTWAIT);
  ASSERT_GT(n, 4);
  Reply r;
  ASSERT_TRUE(ParseReply(reply.substr(4, size_t(n) - 4), &r));
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.auth_stat, kAuthBadCred);
  EXPECT_EQ(served, 0);
  close(sv[1]);
}

}  // namespace
}  // namespace rpc
}  // namespace nache
