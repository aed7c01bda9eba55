// RPCSEC_GSS (RFC 2203) on the wire, with a fake mechanism whose MICs and
// wrap tokens the test can compute and forge: the credential and verifier
// of a data call, integrity and privacy of arguments and results, replies
// that must be refused (a wrong verifier, a MIC that does not check, the
// sequence number of another call), a refused context, sequence numbers
// running out; then one upstream connection establishing its context with
// a peer the test plays (RPCSEC_GSS_INIT, CONTINUE_INIT) and making a new
// one when the server says the old one is gone.
#include "rpc/rpcsec_gss.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "fake_gss.h"
#include "rpc/gss_krb5.h"
#include "rpc/rpc_transport.h"
#include "rpc/xdr.h"
#include "tcp_peer.h"
#include "upstream/connection.h"

namespace nache {
namespace rpc {
namespace {

constexpr uint32_t kNfsProg = 100003;

constexpr char kKey = 0x5a;

std::string U32s(std::initializer_list<uint32_t> v) {
  std::string s;
  XdrOut x(&s);
  for (uint32_t u : v) x.U32(u);
  return s;
}

// What the peer read of one call under RPCSEC_GSS.
struct GssCall {
  uint32_t xid = 0, proc = 0;
  uint32_t cred_flavor = 0, version = 0, gss_proc = 0, seq = 0, service = 0;
  std::string handle;
  uint32_t verf_flavor = 0;
  std::string verf;
  std::string header;  // from the XID through the credential
  std::string args;    // the rest of the record
};

bool ParseGssCall(const std::string &rec, GssCall *c) {
  XdrIn in(rec.data(), rec.size());
  uint32_t type, rpcvers, prog, vers;
  std::string cred;
  if (!in.U32(&c->xid) || !in.U32(&type) || !in.U32(&rpcvers) ||
      !in.U32(&prog) || !in.U32(&vers) || !in.U32(&c->proc) ||
      !in.U32(&c->cred_flavor) || !in.Opaque(&cred, 400))
    return false;
  c->header = rec.substr(0, rec.size() - in.left());
  XdrIn cr(cred.data(), cred.size());
  if (!cr.U32(&c->version) || !cr.U32(&c->gss_proc) || !cr.U32(&c->seq) ||
      !cr.U32(&c->service) || !cr.Opaque(&c->handle, 1024))
    return false;
  if (!in.U32(&c->verf_flavor) || !in.Opaque(&c->verf, 400)) return false;
  c->args = rec.substr(rec.size() - in.left());
  return true;
}

// An accepted SUCCESS reply with an RPCSEC_GSS verifier and results.
std::string GssReply(uint32_t xid, const std::string &verf,
                     const std::string &results) {
  std::string b;
  XdrOut x(&b);
  x.U32(xid);
  x.U32(1);  // REPLY
  x.U32(0);  // accepted
  x.U32(kAuthRpcsecGss);
  x.Opaque(verf);
  x.U32(0);  // SUCCESS
  return b + results;
}

// A denied reply: AUTH_ERROR with an RPCSEC_GSS status (the server no
// longer has the context).
std::string AuthErrorReply(uint32_t xid, uint32_t gss_stat) {
  std::string b;
  XdrOut x(&b);
  x.U32(xid);
  x.U32(1);  // REPLY
  x.U32(1);  // denied
  x.U32(1);  // AUTH_ERROR
  x.U32(gss_stat);
  return b;
}

std::string Opaque(const std::string &s) {
  std::string b;
  XdrOut(&b).Opaque(s);
  return b;
}

class RpcsecGssTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    t_.reset(new Transport(sv[0]));
    peer_ = sv[1];
  }
  void TearDown() override {
    t_.reset();
    close(peer_);
  }
  void Use(GssService service) {
    gss_ = std::make_shared<RpcsecGss>(std::make_unique<FakeContext>(kKey),
                                       "H1", 128, service);
  }
  struct Outcome {
    bool done = false;
    ReplyStatus status = ReplyStatus::kOk;
    std::string text;
  };
  // Calls with an XDR string as the arguments.
  void CallWith(const std::string &arg, Outcome *o) {
    uint32_t xid = 0;
    ASSERT_TRUE(t_->Call(
        kNfsProg, 4, 1, gss_,
        [arg](std::string *rec) {
          XdrOut(rec).Opaque(arg);
          return true;
        },
        [o](ReplyStatus st, XdrIn *results) {
          o->done = true;
          o->status = st;
          if (results) results->Opaque(&o->text, 1 << 20);
        },
        &xid));
  }
  void Service() {
    for (int i = 0; i < 20; i++) {
      pollfd p{t_->fd(), t_->WantEvents(), 0};
      poll(&p, 1, 10);
      t_->Service(p.revents);
    }
  }
  std::string PeerRead() {
    Service();
    std::string m(4, '\0');
    EXPECT_EQ(read(peer_, &m[0], 4), 4);
    uint32_t marker = 0;
    XdrIn(m.data(), 4).U32(&marker);
    std::string rec(marker & 0x7fffffffu, '\0');
    size_t got = 0;
    while (got < rec.size()) {
      ssize_t r = read(peer_, &rec[got], rec.size() - got);
      if (r <= 0) break;
      got += size_t(r);
    }
    return rec;
  }
  void PeerWrite(const std::string &body) {
    std::string r;
    XdrOut(&r).U32(0x80000000u | uint32_t(body.size()));
    r += body;
    ASSERT_EQ(write(peer_, r.data(), r.size()), ssize_t(r.size()));
    Service();
  }

  std::unique_ptr<Transport> t_;
  int peer_ = -1;
  std::shared_ptr<RpcsecGss> gss_;
};

TEST_F(RpcsecGssTest, ADataCallCarriesTheContextAndAVerifierOfItsHeader) {
  Use(GssService::kNone);
  Outcome o;
  CallWith("hello", &o);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(PeerRead(), &c));
  EXPECT_EQ(c.cred_flavor, kAuthRpcsecGss);
  EXPECT_EQ(c.version, 1u);
  EXPECT_EQ(c.gss_proc, uint32_t(GssProc::kData));
  EXPECT_EQ(c.seq, 1u);
  EXPECT_EQ(c.service, uint32_t(GssService::kNone));
  EXPECT_EQ(c.handle, "H1");
  EXPECT_EQ(c.verf_flavor, kAuthRpcsecGss);
  EXPECT_EQ(c.verf, FakeContext::Mic(kKey, c.header));
  EXPECT_EQ(c.args, Opaque("hello"));  // as they are: no service
  // The reply's verifier is the MIC of the sequence number.
  PeerWrite(GssReply(c.xid, FakeContext::Mic(kKey, U32s({1})), Opaque("ok")));
  ASSERT_TRUE(o.done);
  EXPECT_EQ(o.status, ReplyStatus::kOk);
  EXPECT_EQ(o.text, "ok");
  // The next call takes the next number.
  Outcome o2;
  CallWith("again", &o2);
  ASSERT_TRUE(ParseGssCall(PeerRead(), &c));
  EXPECT_EQ(c.seq, 2u);
}

TEST_F(RpcsecGssTest, AReplyWhoseVerifierIsNotTheMicOfItsCallIsRefused) {
  Use(GssService::kNone);
  Outcome o;
  CallWith("hello", &o);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(PeerRead(), &c));
  // The MIC of another sequence number: a reply to some other call.
  PeerWrite(GssReply(c.xid, FakeContext::Mic(kKey, U32s({7})), Opaque("ok")));
  ASSERT_TRUE(o.done);
  EXPECT_EQ(o.status, ReplyStatus::kBadReply);
}

TEST_F(RpcsecGssTest, IntegrityChecksumsTheSequenceNumberAndTheArguments) {
  Use(GssService::kIntegrity);
  Outcome o;
  CallWith("payload", &o);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(PeerRead(), &c));
  EXPECT_EQ(c.service, uint32_t(GssService::kIntegrity));
  XdrIn in(c.args.data(), c.args.size());
  std::string body, mic;
  ASSERT_TRUE(in.Opaque(&body, 1 << 20));
  ASSERT_TRUE(in.Opaque(&mic, 400));
  EXPECT_EQ(body, U32s({c.seq}) + Opaque("payload"));
  EXPECT_EQ(mic, FakeContext::Mic(kKey, body));
  // Results the same way, with the call's number in front.
  std::string rbody = U32s({c.seq}) + Opaque("result");
  PeerWrite(GssReply(c.xid, FakeContext::Mic(kKey, U32s({c.seq})),
                     Opaque(rbody) + Opaque(FakeContext::Mic(kKey, rbody))));
  ASSERT_TRUE(o.done);
  EXPECT_EQ(o.status, ReplyStatus::kOk);
  EXPECT_EQ(o.text, "result");
}

TEST_F(RpcsecGssTest, IntegrityRefusesResultsThatDoNotCheckOrAreAnotherCalls) {
  Use(GssService::kIntegrity);
  for (int variant = 0; variant < 2; variant++) {
    Outcome o;
    CallWith("payload", &o);
    GssCall c;
    ASSERT_TRUE(ParseGssCall(PeerRead(), &c));
    // 0: a body changed on the way (its MIC is the original's); 1: a
    // body that checks but answers another sequence number.
    std::string good = U32s({c.seq}) + Opaque("result");
    std::string body = variant == 0 ? U32s({c.seq}) + Opaque("tampered")
                                    : U32s({c.seq + 100}) + Opaque("result");
    std::string mic = FakeContext::Mic(kKey, variant == 0 ? good : body);
    PeerWrite(GssReply(c.xid, FakeContext::Mic(kKey, U32s({c.seq})),
                       Opaque(body) + Opaque(mic)));
    ASSERT_TRUE(o.done) << variant;
    EXPECT_EQ(o.status, ReplyStatus::kBadReply) << variant;
  }
}

TEST_F(RpcsecGssTest, PrivacyNeverSendsTheArgumentsInClear) {
  Use(GssService::kPrivacy);
  Outcome o;
  const std::string marker = "SECRET-FILE-BYTES";
  CallWith(marker, &o);
  std::string rec = PeerRead();
  EXPECT_EQ(rec.find(marker), std::string::npos);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(rec, &c));
  XdrIn in(c.args.data(), c.args.size());
  std::string token;
  ASSERT_TRUE(in.Opaque(&token, 1 << 20));
  EXPECT_EQ(token, FakeContext::WrapWith(kKey, U32s({c.seq}) + Opaque(marker)));
  PeerWrite(GssReply(
      c.xid, FakeContext::Mic(kKey, U32s({c.seq})),
      Opaque(FakeContext::WrapWith(kKey, U32s({c.seq}) + Opaque("back")))));
  ASSERT_TRUE(o.done);
  EXPECT_EQ(o.status, ReplyStatus::kOk);
  EXPECT_EQ(o.text, "back");
}

TEST_F(RpcsecGssTest, ARefusedContextIsAnAuthErrorAndExpiresIt) {
  Use(GssService::kNone);
  Outcome o;
  CallWith("x", &o);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(PeerRead(), &c));
  const std::string b = AuthErrorReply(c.xid, kRpcsecGssCtxProblem);
  EXPECT_FALSE(gss_->expired());
  PeerWrite(b);
  ASSERT_TRUE(o.done);
  EXPECT_EQ(o.status, ReplyStatus::kAuthError);
  EXPECT_TRUE(gss_->expired());
  // No call goes out under an expired context.
  uint32_t xid;
  EXPECT_FALSE(t_->Call(
      kNfsProg, 4, 1, gss_, [](std::string *) { return true; },
      [](ReplyStatus, XdrIn *) {}, &xid));
}

TEST(RpcsecGssInit, AnInitResultClaimingAHugeHandleOrTokenDoesNotDecode) {
  for (uint32_t handle_len : {8u, 1u << 20}) {
    std::string b;
    XdrOut x(&b);
    x.U32(handle_len);
    b.append(std::min<uint32_t>(handle_len, 8), 'h');
    x.U32(0);
    x.U32(0);
    x.U32(128);
    x.Opaque(std::string("tok"));
    XdrIn in(b.data(), b.size());
    GssInitRes r;
    EXPECT_EQ(DecodeGssInitRes(&in, &r), handle_len == 8) << handle_len;
  }
}

TEST(RpcsecGssParse, OnlyTheThreeKerberosFlavoursParse) {
  GssService s;
  EXPECT_TRUE(ParseGssService("krb5", &s));
  EXPECT_EQ(s, GssService::kNone);
  EXPECT_TRUE(ParseGssService("krb5i", &s));
  EXPECT_EQ(s, GssService::kIntegrity);
  EXPECT_TRUE(ParseGssService("krb5p", &s));
  EXPECT_EQ(s, GssService::kPrivacy);
  EXPECT_FALSE(ParseGssService("sys", &s));
  EXPECT_FALSE(ParseGssService("krb5x", &s));
}

// ---- One upstream connection making its context with a played server.

// Two rounds, as Kerberos with mutual authentication: our token "T1"; the
// server's "S1" completes it.
class FakeInitiator : public GssInitiator {
 public:
  explicit FakeInitiator(char key) : key_(key) {}
  Step Next(const std::string &in, std::string *out,
            std::string *err) override {
    if (in.empty()) {
      *out = "T1";
      return Step::kContinue;
    }
    out->clear();
    if (in != "S1") {
      *err = "unexpected server token";
      return Step::kFailed;
    }
    return Step::kComplete;
  }
  std::unique_ptr<GssContext> TakeContext() override {
    return std::make_unique<FakeContext>(key_);
  }

 private:
  char key_;
};

struct Done {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  upstream::CallStatus status = upstream::CallStatus::kOk;
  bool Wait() {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(5), [this] { return done; });
  }
};

class NoListener : public upstream::ConnectionListener {
 public:
  void OnConnectionUp(int) override {}
  void OnConnectionDown(int) override {}
};

class GssConnectionTest : public ::testing::Test {
 protected:
  void Start() {
    opts_.server = "127.0.0.1";
    opts_.port = peer_.port();
    opts_.call_timeout_ms = 3000;
    opts_.connect_timeout_ms = 2000;
    opts_.gss_service = GssService::kIntegrity;
    opts_.gss_initiator = [this] {
      inits_++;
      return std::unique_ptr<GssInitiator>(new FakeInitiator(kKey));
    };
    conn_.reset(new upstream::Connection(0, opts_, &listener_));
    conn_->Start();
  }
  // Plays the server's side of the context creation on the next
  // connection: our INIT with "T1" is answered COMPLETE with "S1", handle
  // h, a window of 64 and the MIC of the window as the verifier.
  void ServeInit(const std::string &h) {
    ASSERT_TRUE(peer_.Accept());
    GssCall c;
    ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
    EXPECT_EQ(c.proc, 0u);  // NULL
    EXPECT_EQ(c.gss_proc, uint32_t(GssProc::kInit));
    EXPECT_EQ(c.args, Opaque("T1"));
    EXPECT_EQ(c.verf_flavor, 0u);
    std::string res = Opaque(h) + U32s({kGssComplete, 0, 64}) + Opaque("S1");
    peer_.WriteRecord(GssReply(c.xid, FakeContext::Mic(kKey, U32s({64})), res));
  }
  void Submit(const std::shared_ptr<Done> &d, const std::string &user = "",
              std::shared_ptr<GssCredentials> creds = nullptr) {
    auto call = std::make_unique<upstream::PendingCall>();
    call->user = user;
    call->user_creds = std::move(creds);
    call->owned = std::make_unique<upstream::Compound>();
    call->owned->SetTag("t");
    call->compound = call->owned.get();
    call->deadline = upstream::Clock::now() + std::chrono::seconds(3);
    call->done = [d](upstream::CallStatus st, upstream::CompoundReply &&) {
      std::lock_guard<std::mutex> g(d->mu);
      d->done = true;
      d->status = st;
      d->cv.notify_all();
    };
    conn_->Submit(std::move(call));
  }

  Peer peer_;
  NoListener listener_;
  upstream::UpstreamOptions opts_;
  int inits_ = 0;  // (the loop thread only, read once it is stopped)
  std::unique_ptr<upstream::Connection> conn_;
};

TEST_F(GssConnectionTest, CallsGoUnderTheContextMadeAsTheConnectionComesUp) {
  Start();
  ServeInit("ctx-1");
  auto d = std::make_shared<Done>();
  Submit(d);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  EXPECT_EQ(c.gss_proc, uint32_t(GssProc::kData));
  EXPECT_EQ(c.handle, "ctx-1");
  EXPECT_EQ(c.service, uint32_t(GssService::kIntegrity));
  EXPECT_EQ(c.verf, FakeContext::Mic(kKey, c.header));
  // An empty COMPOUND reply (status, tag, no results), wrapped.
  std::string body = U32s({c.seq, 0}) + Opaque("t") + U32s({0});
  peer_.WriteRecord(
      GssReply(c.xid, FakeContext::Mic(kKey, U32s({c.seq})),
               Opaque(body) + Opaque(FakeContext::Mic(kKey, body))));
  ASSERT_TRUE(d->Wait());
  EXPECT_EQ(d->status, upstream::CallStatus::kOk);
}

TEST_F(GssConnectionTest, AContextTheServerNoLongerHasIsMadeAgain) {
  Start();
  ServeInit("ctx-1");
  auto d = std::make_shared<Done>();
  Submit(d);
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  const std::string b = AuthErrorReply(c.xid, kRpcsecGssCredProblem);
  peer_.WriteRecord(b);
  // Not executed: the caller gets a retryable status ...
  ASSERT_TRUE(d->Wait());
  EXPECT_EQ(d->status, upstream::CallStatus::kDisconnected);
  // ... and the connection comes back with a new context, under which
  // the next call goes.
  ServeInit("ctx-2");
  auto d2 = std::make_shared<Done>();
  Submit(d2);
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  EXPECT_EQ(c.handle, "ctx-2");
  EXPECT_EQ(c.seq, 1u);
  conn_->Stop();
  EXPECT_EQ(inits_, 2);
}

TEST_F(GssConnectionTest, AServerWhoseWindowVerifierDoesNotCheckIsNotUsed) {
  Start();
  ASSERT_TRUE(peer_.Accept());
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  std::string res = Opaque("h") + U32s({kGssComplete, 0, 64}) + Opaque("S1");
  // The MIC of another window: not a server holding our context.
  peer_.WriteRecord(GssReply(c.xid, FakeContext::Mic(kKey, U32s({65})), res));
  auto d = std::make_shared<Done>();
  Submit(d);
  ASSERT_TRUE(d->Wait());
  EXPECT_EQ(d->status, upstream::CallStatus::kDisconnected);
  EXPECT_FALSE(conn_->connected());
}

// Upstream_Identity = user: a user's credentials, whose contexts have a
// key of their own.
class FakeUserCreds : public GssCredentials {
 public:
  explicit FakeUserCreds(char key) : key_(key) {}
  std::unique_ptr<GssInitiator> NewInitiator() override {
    return std::make_unique<FakeInitiator>(key_);
  }

 private:
  char key_;
};

constexpr char kAliceKey = 0x41;

// Reads the next call, which must be an RPCSEC_GSS_INIT with "T1", and
// answers it COMPLETE with handle h, window 8, verified with key.
void ServeUserInit(Peer *peer, char key, const std::string &h) {
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer->ReadRecord(), &c));
  EXPECT_EQ(c.proc, 0u);
  EXPECT_EQ(c.gss_proc, uint32_t(GssProc::kInit));
  EXPECT_EQ(c.args, Opaque("T1"));
  std::string res = Opaque(h) + U32s({kGssComplete, 0, 8}) + Opaque("S1");
  peer->WriteRecord(GssReply(c.xid, FakeContext::Mic(key, U32s({8})), res));
}

// Answers data call c with an empty COMPOUND reply under key.
void ServeData(Peer *peer, char key, const GssCall &c) {
  std::string body = U32s({c.seq, 0}) + Opaque("t") + U32s({0});
  peer->WriteRecord(
      GssReply(c.xid, FakeContext::Mic(key, U32s({c.seq})),
               Opaque(body) + Opaque(FakeContext::Mic(key, body))));
}

TEST_F(GssConnectionTest, AUsersCallsGoUnderAContextOfTheirOwnMadeAtTheFirst) {
  Start();
  ServeInit("ctx-m");
  auto alice = std::make_shared<FakeUserCreds>(kAliceKey);
  auto d1 = std::make_shared<Done>();
  Submit(d1, "alice@R", alice);
  // The user's context first, on the connection, without a new one for
  // the connection itself.
  ServeUserInit(&peer_, kAliceKey, "ctx-alice");
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  EXPECT_EQ(c.gss_proc, uint32_t(GssProc::kData));
  EXPECT_EQ(c.handle, "ctx-alice");
  EXPECT_EQ(c.verf, FakeContext::Mic(kAliceKey, c.header));
  ServeData(&peer_, kAliceKey, c);
  ASSERT_TRUE(d1->Wait());
  EXPECT_EQ(d1->status, upstream::CallStatus::kOk);
  // Her next call reuses it; a call of nache's own goes as the machine.
  auto d2 = std::make_shared<Done>();
  Submit(d2, "alice@R", alice);
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  EXPECT_EQ(c.handle, "ctx-alice");
  EXPECT_EQ(c.seq, 2u);
  ServeData(&peer_, kAliceKey, c);
  ASSERT_TRUE(d2->Wait());
  EXPECT_EQ(d2->status, upstream::CallStatus::kOk);
  auto d3 = std::make_shared<Done>();
  Submit(d3);
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  EXPECT_EQ(c.handle, "ctx-m");
  ServeData(&peer_, kKey, c);
  ASSERT_TRUE(d3->Wait());
  EXPECT_EQ(d3->status, upstream::CallStatus::kOk);
  conn_->Stop();
  EXPECT_EQ(inits_, 1);  // the machine's, once
}

TEST_F(GssConnectionTest, AUsersContextTheServerRefusesIsMadeAgainAlone) {
  Start();
  ServeInit("ctx-m");
  auto alice = std::make_shared<FakeUserCreds>(kAliceKey);
  auto d1 = std::make_shared<Done>();
  Submit(d1, "alice@R", alice);
  ServeUserInit(&peer_, kAliceKey, "ctx-alice-1");
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  const std::string b = AuthErrorReply(c.xid, kRpcsecGssCtxProblem);
  peer_.WriteRecord(b);
  // Not executed, retryable; the connection stays up.
  ASSERT_TRUE(d1->Wait());
  EXPECT_EQ(d1->status, upstream::CallStatus::kDisconnected);
  EXPECT_TRUE(conn_->connected());
  // Her next call makes a new context on the same connection.
  auto d2 = std::make_shared<Done>();
  Submit(d2, "alice@R", alice);
  ServeUserInit(&peer_, kAliceKey, "ctx-alice-2");
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  EXPECT_EQ(c.handle, "ctx-alice-2");
  EXPECT_EQ(c.seq, 1u);
  ServeData(&peer_, kAliceKey, c);
  ASSERT_TRUE(d2->Wait());
  EXPECT_EQ(d2->status, upstream::CallStatus::kOk);
  conn_->Stop();
  EXPECT_EQ(inits_, 1);
}

TEST_F(GssConnectionTest, AUserTheServerRefusesAContextGetsAccessDenied) {
  Start();
  ServeInit("ctx-m");
  auto d = std::make_shared<Done>();
  upstream::CompoundReply got;
  auto call = std::make_unique<upstream::PendingCall>();
  call->owned = std::make_unique<upstream::Compound>();
  call->compound = call->owned.get();
  call->deadline = upstream::Clock::now() + std::chrono::seconds(3);
  call->user = "mallory@R";
  call->user_creds = std::make_shared<FakeUserCreds>(kAliceKey);
  uint32_t nfs_status = 0;
  call->done = [d, &nfs_status](upstream::CallStatus st,
                                upstream::CompoundReply &&r) {
    std::lock_guard<std::mutex> g(d->mu);
    nfs_status = r.status;
    d->done = true;
    d->status = st;
    d->cv.notify_all();
  };
  conn_->Submit(std::move(call));
  GssCall c;
  ASSERT_TRUE(ParseGssCall(peer_.ReadRecord(), &c));
  ASSERT_EQ(c.gss_proc, uint32_t(GssProc::kInit));
  // GSS_S_FAILURE (major 13 << 16) for the user's context.
  std::string res = Opaque("") + U32s({13u << 16, 0, 0}) + Opaque("");
  peer_.WriteRecord(GssReply(c.xid, "", res));
  ASSERT_TRUE(d->Wait());
  EXPECT_EQ(d->status, upstream::CallStatus::kOk);
  std::lock_guard<std::mutex> g(d->mu);
  EXPECT_EQ(nfs_status, upstream::kNfs4ErrAccess);
  EXPECT_TRUE(conn_->connected());
}

// MIT's mechanism: a keytab that is not there is refused when the export
// opens, with a message that names it (Upstream_Keytab), not at the first
// call.
TEST(KrbCredentialsTest, AMissingKeytabIsRefusedNamingIt) {
  KrbOptions o;
  o.keytab = "/nonexistent/nache-test.keytab";
  o.service = "nfs@remote.example";
  o.ccache_name = "nache-unit-test";
  std::string err;
  EXPECT_EQ(KrbCredentials::Acquire(o, &err), nullptr);
  EXPECT_NE(err.find(o.keytab), std::string::npos) << err;
}

}  // namespace
}  // namespace rpc
}  // namespace nache
