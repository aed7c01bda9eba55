// Upstream's failure handling against loopback sockets (no NFS server): calls
// time out instead of hanging, a held call expires, Shutdown completes what
// is pending. The happy paths run against real Ganesha in
// tests/integration/upstream_write_1mib_test.sh.
#include "upstream/upstream.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "rpc/xdr.h"
#include "tcp_peer.h"

namespace nache {
namespace upstream {
namespace {

UpstreamOptions Options(int port) {
  UpstreamOptions o;
  o.server = "127.0.0.1";
  o.port = port;
  o.connections = 2;
  o.call_timeout_ms = 300;
  o.connect_timeout_ms = 300;
  o.client_id = "nache-unit-test";
  return o;
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

TEST(UpstreamTest, SilentServerNeverBecomesReady) {
  SilentServer server;
  auto up = Upstream::Create(Options(server.port()));
  EXPECT_FALSE(up->WaitReady(500));
  EXPECT_NE(up->state(), UpstreamState::kReady);
  up->Shutdown();
}

// Issue 15 defect 6: NFSv4.1's EXCHANGE_ID unanswered times out (and is
// tried again), where its timeout used to crash the connection's loop.
TEST(UpstreamTest, V41SessionSetUpAgainstASilentServerTimesOut) {
  SilentServer server;
  UpstreamOptions o = Options(server.port());
  o.minor_version = 1;
  auto up = Upstream::Create(o);
  // Three call timeouts: EXCHANGE_ID has timed out at least once.
  EXPECT_FALSE(up->WaitReady(3 * o.call_timeout_ms));
  EXPECT_NE(up->state(), UpstreamState::kReady);
  up->Shutdown();
}

// What a COMPOUND call asks: its minor version and first operation.
bool CompoundAsks(const std::string &rec, uint32_t *xid, uint32_t *minor,
                  uint32_t *first_op) {
  rpc::XdrIn in(rec.data(), rec.size());
  uint32_t u;
  std::string body, tag;
  return in.U32(xid) && in.U32(&u) && in.U32(&u) && in.U32(&u) && in.U32(&u) &&
         in.U32(&u) && in.U32(&u) && in.Opaque(&body, 400) && in.U32(&u) &&
         in.Opaque(&body, 400) && in.Opaque(&tag, 1024) && in.U32(minor) &&
         in.U32(&u) && u >= 1 && in.U32(first_op);
}

// Issue 19: NFSv4.1 is the default, and a server that speaks only NFSv4.0
// refuses EXCHANGE_ID's COMPOUND whole (NFS4ERR_MINOR_VERS_MISMATCH):
// nache then goes on in NFSv4.0, with SETCLIENTID.
TEST(UpstreamTest, AServerWithoutNfsV41GetsNfsV40) {
  Peer server;
  UpstreamOptions o = Options(server.port());
  o.connections = 1;
  o.call_timeout_ms = 2000;
  o.minor_version = 1;
  auto up = Upstream::Create(o);
  ASSERT_TRUE(server.Accept());
  uint32_t xid = 0, minor = 9, op = 0;
  ASSERT_TRUE(CompoundAsks(server.ReadRecord(), &xid, &minor, &op));
  EXPECT_EQ(minor, 1u);
  EXPECT_EQ(op, 42u);  // EXCHANGE_ID
  std::string reply;
  rpc::XdrOut x(&reply);
  for (uint32_t v : {xid, 1u, 0u, 0u, 0u, 0u}) x.U32(v);  // accepted
  x.U32(kNfs4ErrMinorVersMismatch);
  x.Opaque(std::string("exchange_id"));
  x.U32(0);  // no results
  server.WriteRecord(reply);
  ASSERT_TRUE(CompoundAsks(server.ReadRecord(), &xid, &minor, &op));
  EXPECT_EQ(minor, 0u);
  EXPECT_EQ(op, 35u);  // SETCLIENTID
  EXPECT_EQ(up->minor_version(), 0u);
  up->Shutdown();
}

// A scripted NFSv4.1 server on a Peer: answers EXCHANGE_ID,
// CREATE_SESSION, DESTROY_SESSION and SEQUENCE-led COMPOUNDs (every
// operation after SEQUENCE succeeds, GETATTR with no attributes), and
// refuses the SEQUENCE of a session it lost with NFS4ERR_BADSESSION.
class Server41 {
 public:
  explicit Server41(Peer *peer) : peer_(peer) {}
  // The server forgets the current session (keeps the client id, unless
  // lose_clientid: then its next EXCHANGE_ID gives a new one).
  void LoseSession(bool lose_clientid) {
    std::lock_guard<std::mutex> g(mu_);
    session_lost_ = true;
    if (lose_clientid) clientid_++, confirmed_ = false;
  }
  int count(uint32_t op) {
    std::lock_guard<std::mutex> g(mu_);
    return counts_[op];
  }
  // Answers calls until the peer closes.
  void Serve() {
    for (;;) {
      std::string rec = peer_->ReadRecord();
      if (rec.empty()) return;
      std::string reply;
      if (!Answer(rec, &reply)) return;
      peer_->WriteRecord(reply);
    }
  }

 private:
  static constexpr uint32_t kOpGetattr = 9, kOpExchangeId = 42,
                            kOpCreateSession = 43, kOpDestroySession = 44,
                            kOpSequence = 53;
  bool Answer(const std::string &rec, std::string *out) {
    rpc::XdrIn in(rec.data(), rec.size());
    uint32_t xid, u, minor, nops, op;
    std::string body, tag;
    if (!(in.U32(&xid) && in.U32(&u) && in.U32(&u) && in.U32(&u) &&
          in.U32(&u) && in.U32(&u) && in.U32(&u) && in.Opaque(&body, 400) &&
          in.U32(&u) && in.Opaque(&body, 400) && in.Opaque(&tag, 1024) &&
          in.U32(&minor) && in.U32(&nops) && nops >= 1 && in.U32(&op)))
      return false;
    rpc::XdrOut x(out);
    for (uint32_t v : {xid, 1u, 0u, 0u, 0u, 0u}) x.U32(v);  // accepted
    std::lock_guard<std::mutex> g(mu_);
    counts_[op]++;
    std::string sid(16, char('A' + sessions_));
    auto attrs = [&x] {
      for (uint32_t v : {0u, 1u << 20, 1u << 20, 8192u, 16u, 4u, 0u}) x.U32(v);
    };
    switch (op) {
      case kOpExchangeId:
        x.U32(0), x.Opaque(tag), x.U32(1), x.U32(op), x.U32(0);
        x.U64(clientid_), x.U32(1);
        x.U32(confirmed_ ? 0x80000000u : 0u);
        x.U32(0);  // SP4_NONE
        x.U64(0), x.Opaque(std::string("srv")), x.Opaque(std::string("s"));
        x.U32(0);  // no implementation id
        return true;
      case kOpCreateSession:
        sessions_++, session_lost_ = false, confirmed_ = true;
        sid = std::string(16, char('A' + sessions_));
        x.U32(0), x.Opaque(tag), x.U32(1), x.U32(op), x.U32(0);
        x.Fixed(sid.data(), sid.size());
        x.U32(1), x.U32(0);
        attrs();
        attrs();
        return true;
      case kOpDestroySession:
        x.U32(0), x.Opaque(tag), x.U32(1), x.U32(op), x.U32(0);
        return true;
      case kOpSequence: {
        std::string got(16, '\0');
        uint32_t seq, slot, highest, cachethis;
        if (!(in.Fixed(&got[0], 16) && in.U32(&seq) && in.U32(&slot) &&
              in.U32(&highest) && in.U32(&cachethis)))
          return false;
        if (session_lost_ || got != sid) {
          x.U32(kNfs4ErrBadSession), x.Opaque(tag), x.U32(1);
          x.U32(op), x.U32(kNfs4ErrBadSession);
          return true;
        }
        x.U32(0), x.Opaque(tag), x.U32(nops);
        x.U32(op), x.U32(0), x.Fixed(sid.data(), 16);
        for (uint32_t v : {seq, slot, 3u, 3u, 0u}) x.U32(v);
        // The other operations succeed. Only those this test and the
        // state thread send are known here (NextOp): PUTROOTFH, the
        // lease time's GETATTR, RECLAIM_COMPLETE.
        for (uint32_t i = 1; i < nops; i++) {
          uint32_t next = NextOp(&in);
          x.U32(next), x.U32(0);
          if (next == kOpGetattr) x.U32(0), x.U32(0);  // no attributes
        }
        return true;
      }
      default: return false;
    }
  }
  // The next operation's number, its arguments skipped (PUTROOTFH: none;
  // GETATTR: a bitmap; RECLAIM_COMPLETE: a bool).
  static uint32_t NextOp(rpc::XdrIn *in) {
    uint32_t op = 0, n = 0, w;
    in->U32(&op);
    if (op == kOpGetattr && in->U32(&n))
      for (uint32_t i = 0; i < n; i++) in->U32(&w);
    if (op == 58) in->U32(&w);  // RECLAIM_COMPLETE's one_fs
    return op;
  }

  Peer *peer_;
  std::mutex mu_;
  uint64_t clientid_ = 0x4100;
  bool confirmed_ = false;
  bool session_lost_ = false;
  int sessions_ = 0;
  std::map<uint32_t, int> counts_;
};

// Issue 19: NFSv4.1, the server loses our session but keeps the client
// id (EXCHANGE_ID says CONFIRMED): the call that met BADSESSION fails
// retryably (kDisconnected: the office's client retries), a new session
// is made, and the retry succeeds on it, with no new client id, so
// nothing is reclaimed (on_new_clientid is not called again). When the
// client id is gone too, it is a new one.
TEST(UpstreamTest, ALostSessionWithTheClientIdKeptNeedsNoReclaim) {
  for (bool lose_clientid : {false, true}) {
    SCOPED_TRACE(lose_clientid);
    Peer peer;
    Server41 server(&peer);
    UpstreamOptions o = Options(peer.port());
    o.connections = 1;
    o.call_timeout_ms = 5000;
    o.minor_version = 1;
    std::atomic<int> new_ids{0};
    o.on_new_clientid = [&new_ids](uint64_t) { new_ids++; };
    auto up = Upstream::Create(o);
    ASSERT_TRUE(peer.Accept());
    std::thread serve([&server] { server.Serve(); });
    ASSERT_TRUE(up->WaitReady(5000));
    EXPECT_EQ(new_ids.load(), 1);
    server.LoseSession(lose_clientid);
    Compound c;
    c.SetTag("after_loss").Putrootfh();
    CompoundReply reply;
    EXPECT_EQ(up->Call(c, Creds(), &reply), CallStatus::kDisconnected);
    // Retried as a client does, until the new session takes it (a retry
    // sent before the recovery began meets BADSESSION too).
    CallStatus st = CallStatus::kDisconnected;
    for (int i = 0; i < 500 && st != CallStatus::kOk; i++) {
      Compound again;
      again.SetTag("retry").Putrootfh();
      st = up->Call(again, Creds(), &reply);
      if (st != CallStatus::kOk)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(st, CallStatus::kOk);
    EXPECT_EQ(reply.status, kNfs4Ok);
    EXPECT_EQ(server.count(43), 2) << "a second CREATE_SESSION";
    EXPECT_EQ(new_ids.load(), lose_clientid ? 2 : 1);
    EXPECT_EQ(up->epoch(), lose_clientid ? 1u : 0u);
    up->Shutdown();
    EXPECT_EQ(server.count(44), 1) << "DESTROY_SESSION at shutdown";
    serve.join();
  }
}

TEST(UpstreamTest, CallWithoutClientIdTimesOut) {
  SilentServer server;
  auto up = Upstream::Create(Options(server.port()));
  Compound c;
  c.SetTag("getattr").Putrootfh().Getattr(kAttrType);
  CompoundReply reply;
  auto start = std::chrono::steady_clock::now();
  // Held (no client id yet) until its call timeout passes.
  EXPECT_EQ(up->Call(c, Creds(), &reply), CallStatus::kTimeout);
  double took = SecondsSince(start);
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 5.0);
}

TEST(UpstreamTest, UnreachableServerFailsWithoutHanging) {
  int port;
  {
    SilentServer closed;  // a port that was free a moment ago
    port = closed.port();
  }
  auto up = Upstream::Create(Options(port));
  Compound c;
  c.Putrootfh();
  CompoundReply reply;
  CallStatus st = up->Call(c, Creds(), &reply);
  EXPECT_TRUE(st == CallStatus::kTimeout || st == CallStatus::kDisconnected)
      << CallStatusName(st);
  EXPECT_EQ(up->clientid(), 0u);
}

TEST(UpstreamTest, ShutdownCompletesPendingCalls) {
  SilentServer server;
  UpstreamOptions o = Options(server.port());
  o.call_timeout_ms = 60000;  // only Shutdown can end this call
  auto up = Upstream::Create(o);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  CallStatus status = CallStatus::kOk;
  Compound c;
  c.Putrootfh();
  up->CallAsync(std::move(c), Creds(), [&](CallStatus s, CompoundReply &&) {
    std::lock_guard<std::mutex> lk(mu);
    status = s;
    done = true;
    cv.notify_all();
  });
  up->Shutdown();
  std::unique_lock<std::mutex> lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(5), [&] { return done; }));
  EXPECT_EQ(status, CallStatus::kShutdown);

  // After Shutdown calls complete at once.
  Compound again;
  again.Putrootfh();
  CompoundReply reply;
  EXPECT_EQ(up->Call(again, Creds(), &reply), CallStatus::kShutdown);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
