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
#include <mutex>

#include "rpc/xdr.h"
#include "tcp_peer.h"

namespace nache {
namespace upstream {
namespace {

// A TCP port on 127.0.0.1 that completes handshakes (the kernel backlog)
// but never reads or answers: the server that hangs.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

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
