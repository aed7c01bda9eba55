// The NFSv4.0 callback service (callback/callback_server.h) over loopback
// TCP, called by a client on our RPC transport (cb_client.h, CB_COMPOUND
// encoded by libnfs' XDR) and by raw bytes no client would send: CB_NULL,
// CB_RECALL, CB_GETATTR, op errors, illegal ops, garbage arguments,
// hostile and truncated credentials, RPC-level errors, misbehaving
// connections, the connection bound, peer filtering and Stop(); and, for a
// Kerberos remote, RPCSEC_GSS only (the mechanism a fake, fake_gss.h).
// Only the handler and the mechanism are fakes.
#include "callback/callback_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
// libnfs.h first: the other libnfs headers use what it defines.
// clang-format off
#include <nfsc/libnfs.h>
// clang-format on

#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-zdr.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cb_client.h"
#include "fake_gss.h"
#include "rpc/xdr.h"

namespace nache {
namespace callback {
namespace {

using cb_client::Args;
using cb_client::Client;
using cb_client::Clock;
using cb_client::Reply;
using cb_client::WaitFor;
using upstream::Fh;
using upstream::StateId;

struct Recall {
  StateId sid;
  bool truncate;
  Fh fh;
};

class FakeHandler : public CallbackHandler {
 public:
  void OnContact() override { contacts++; }
  uint32_t OnRecall(const StateId &sid, bool truncate, const Fh &fh) override {
    std::lock_guard<std::mutex> lk(mu);
    recalls.push_back({sid, truncate, fh});
    return recall_status;
  }
  uint32_t OnGetattr(const Fh &fh, uint64_t *change, uint64_t *size) override {
    std::lock_guard<std::mutex> lk(mu);
    getattrs.push_back(fh);
    *change = 0x0102030405060708ull;
    *size = 4096 + 17;
    return getattr_status;
  }

  std::atomic<int> contacts{0};
  std::atomic<uint32_t> recall_status{upstream::kNfs4Ok};
  std::atomic<uint32_t> getattr_status{upstream::kNfs4Ok};
  std::mutex mu;
  std::vector<Recall> recalls;  // under mu
  std::vector<Fh> getattrs;     // under mu
};

std::string Be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[i] = char(v & 0xff);
  return s;
}

StateId TestStateId() {
  StateId sid;
  sid.seqid = 7;
  const uint8_t other[12] = {0x00, 0xff, 0x10, 0x20, 0x30, 0x40,
                             0x50, 0x60, 0x70, 0x80, 0x90, 0x00};
  memcpy(sid.other, other, sizeof(other));
  return sid;
}

// A raw TCP connection to the service, for bytes no client would send: whole
// records out, whole records in.
class RawConn {
 public:
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
  }
  bool Connect(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return fd_ >= 0 &&
           connect(fd_, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0;
  }
  // Sends bytes as they are (a marker included, or not).
  bool SendBytes(const std::string &b) {
    for (size_t off = 0; off < b.size();) {
      ssize_t n = send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  // Sends body as one record (one last fragment).
  bool Send(const std::string &body) {
    std::string r;
    rpc::XdrOut(&r).U32(0x80000000u | uint32_t(body.size()));
    return SendBytes(r + body);
  }
  // The next whole record from the server; false when the connection ended
  // first (*closed: by the server) or nothing came for 5 s.
  bool Next(std::string *rec, bool *closed = nullptr) {
    if (closed) *closed = false;
    rec->clear();
    for (bool last = false; !last;) {
      std::string m;
      if (!Read(4, &m, closed)) return false;
      uint32_t marker;
      rpc::XdrIn(m.data(), 4).U32(&marker);
      last = marker & 0x80000000u;
      std::string frag;
      if (!Read(marker & 0x7fffffffu, &frag, closed)) return false;
      *rec += frag;
    }
    return true;
  }
  // True when the server closes the connection within 5 s (records that
  // come first are skipped).
  bool WaitClosed() {
    std::string rec;
    bool closed = false;
    while (Next(&rec, &closed)) {
    }
    return closed;
  }

 private:
  bool Read(size_t n, std::string *out, bool *closed) {
    while (buf_.size() < n) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 5000) != 1) return false;
      char b[4096];
      ssize_t got = recv(fd_, b, sizeof b, 0);
      if (got <= 0) {
        if (closed) *closed = true;
        return false;
      }
      buf_.append(b, size_t(got));
    }
    *out = buf_.substr(0, n);
    buf_.erase(0, n);
    return true;
  }
  int fd_ = -1;
  std::string buf_;  // received, not yet returned
};

// An RPC call header (RFC 5531) with AUTH_NONE credential and verifier.
std::string CallHeader(uint32_t xid, uint32_t prog, uint32_t vers,
                       uint32_t proc) {
  std::string b;
  rpc::XdrOut x(&b);
  for (uint32_t v : {xid, 0u, 2u, prog, vers, proc, 0u, 0u, 0u, 0u}) x.U32(v);
  return b;
}

// An accepted reply as the server sent it.
struct RpcReply {
  uint32_t xid = 0;
  uint32_t accept_stat = ~0u;  // SUCCESS 0, PROG_UNAVAIL 1, ...
  std::vector<uint32_t> rest;  // the words after accept_stat
};

bool ParseAccepted(const std::string &rec, RpcReply *r) {
  rpc::XdrIn in(rec.data(), rec.size());
  uint32_t type, stat, flavor;
  const char *verf;
  uint32_t verf_len;
  if (!in.U32(&r->xid) || !in.U32(&type) || type != 1 || !in.U32(&stat) ||
      stat != 0 || !in.U32(&flavor) || !in.Opaque(&verf, &verf_len, 400) ||
      !in.U32(&r->accept_stat))
    return false;
  uint32_t w;
  while (in.U32(&w)) r->rest.push_back(w);
  return true;
}

constexpr uint32_t kGarbageArgs = 4;

class CallbackServerTest : public ::testing::Test {
 protected:
  bool StartServer(std::vector<std::string> allowed = {}) {
    CallbackOptions o;
    o.address = "127.0.0.1";
    o.allowed_peers = std::move(allowed);
    std::string err;
    server_ = CallbackServer::Start(o, &handler_, &err);
    EXPECT_NE(server_, nullptr) << err;
    return server_ != nullptr;
  }

  FakeHandler handler_;
  std::unique_ptr<CallbackServer> server_;  // stopped before handler_ goes
};

TEST_F(CallbackServerTest, NullRepliesAndCountsAsContact) {
  ASSERT_TRUE(StartServer());
  const uint16_t port = server_->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ(server_->uaddr(), "127.0.0.1." + std::to_string(port >> 8) + "." +
                                  std::to_string(port & 0xff));
  // Two connections at once: the server may reconnect before the old one
  // is gone.
  Client a, b;
  ASSERT_TRUE(a.Connect(port));
  ASSERT_TRUE(b.Connect(port));
  Reply *ra = a.Send(CB_NULL, nullptr);
  Reply *rb = b.Send(CB_NULL, nullptr);
  ASSERT_TRUE(b.Wait(rb));
  ASSERT_TRUE(a.Wait(ra));
  EXPECT_EQ(ra->status, RPC_STATUS_SUCCESS) << ra->error;
  EXPECT_EQ(rb->status, RPC_STATUS_SUCCESS) << rb->error;
  EXPECT_EQ(handler_.contacts.load(), 2);
  EXPECT_EQ(server_->calls(), 2u);
  EXPECT_EQ(server_->rejected(), 0u);
}

TEST_F(CallbackServerTest, RecallHandsTheExactArguments) {
  ASSERT_TRUE(StartServer());
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));
  const std::string fh("\x01\x00\x02\xff\x03\x00\x04\x05\x06\x07\x08\x09\x0a",
                       13);  // odd length: XDR padding
  Args args;
  args.tag = "recall-tag";
  args.Recall(TestStateId(), true, fh);
  Reply *r = c.Call(CB_COMPOUND, args.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4_OK));
  EXPECT_EQ(r->tag, "recall-tag");
  ASSERT_EQ(r->ops.size(), 1u);
  EXPECT_EQ(r->ops[0].resop, uint32_t(OP_CB_RECALL));
  EXPECT_EQ(r->ops[0].status, uint32_t(NFS4_OK));
  std::lock_guard<std::mutex> lk(handler_.mu);
  ASSERT_EQ(handler_.recalls.size(), 1u);
  EXPECT_TRUE(handler_.recalls[0].sid == TestStateId());
  EXPECT_EQ(handler_.recalls[0].sid.seqid, 7u);
  EXPECT_TRUE(handler_.recalls[0].truncate);
  EXPECT_EQ(handler_.recalls[0].fh, fh);
  EXPECT_EQ(handler_.contacts.load(), 1);
}

TEST_F(CallbackServerTest, GetattrReturnsOnlyWhatWasAsked) {
  ASSERT_TRUE(StartServer());
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));
  const std::string change = Be64(0x0102030405060708ull), size = Be64(4113);

  Args both;
  both.Getattr("fh-1", (1u << 3) | (1u << 4));
  Reply *r = c.Call(CB_COMPOUND, both.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4_OK));
  ASSERT_EQ(r->ops.size(), 1u);
  EXPECT_EQ(r->ops[0].resop, uint32_t(OP_CB_GETATTR));
  EXPECT_EQ(r->ops[0].mask, std::vector<uint32_t>{0x18});
  EXPECT_EQ(r->ops[0].vals, change + size);

  Args size_only;  // and a type (bit 1) we do not serve
  size_only.Getattr("fh-2", (1u << 4) | (1u << 1));
  r = c.Call(CB_COMPOUND, size_only.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->ops.size(), 1u);
  EXPECT_EQ(r->ops[0].mask, std::vector<uint32_t>{0x10});
  EXPECT_EQ(r->ops[0].vals, size);

  handler_.getattr_status = upstream::kNfs4ErrBadhandle;
  Args unknown;
  unknown.Getattr("fh-3", 0x18);
  r = c.Call(CB_COMPOUND, unknown.Get());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4ERR_BADHANDLE));
  ASSERT_EQ(r->ops.size(), 1u);
  EXPECT_EQ(r->ops[0].status, uint32_t(NFS4ERR_BADHANDLE));
  EXPECT_TRUE(r->ops[0].mask.empty());

  std::lock_guard<std::mutex> lk(handler_.mu);
  EXPECT_EQ(handler_.getattrs, (std::vector<Fh>{"fh-1", "fh-2", "fh-3"}));
}

TEST_F(CallbackServerTest, FailingRecallIsTheCompoundStatusAndStopsIt) {
  ASSERT_TRUE(StartServer());
  handler_.recall_status = upstream::kNfs4ErrBadhandle;
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));
  Args args;
  args.Recall(TestStateId(), false, "fh").Getattr("fh", 0x18);
  Reply *r = c.Call(CB_COMPOUND, args.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4ERR_BADHANDLE));
  ASSERT_EQ(r->ops.size(), 1u);  // the GETATTR was not evaluated
  EXPECT_EQ(r->ops[0].status, uint32_t(NFS4ERR_BADHANDLE));
  std::lock_guard<std::mutex> lk(handler_.mu);
  EXPECT_EQ(handler_.recalls.size(), 1u);
  EXPECT_FALSE(handler_.recalls[0].truncate);
  EXPECT_TRUE(handler_.getattrs.empty());
}

TEST_F(CallbackServerTest, IllegalOpMinorVersionAndForeignIdent) {
  ASSERT_TRUE(StartServer());
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));

  Args illegal;
  illegal.Recall(TestStateId(), false, "fh")
      .Illegal()
      .Recall(StateId(), false, "x");
  Reply *r = c.Call(CB_COMPOUND, illegal.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4ERR_OP_ILLEGAL));
  ASSERT_EQ(r->ops.size(), 2u);
  EXPECT_EQ(r->ops[0].status, uint32_t(NFS4_OK));
  EXPECT_EQ(r->ops[1].resop, uint32_t(OP_CB_ILLEGAL));
  EXPECT_EQ(r->ops[1].status, uint32_t(NFS4ERR_OP_ILLEGAL));

  Args v1;
  v1.minorversion = 1;
  v1.Recall(TestStateId(), false, "fh");
  r = c.Call(CB_COMPOUND, v1.Get());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4ERR_MINOR_VERS_MISMATCH));
  EXPECT_TRUE(r->ops.empty());

  Args foreign;
  foreign.ident = 99;
  foreign.Recall(TestStateId(), false, "fh");
  r = c.Call(CB_COMPOUND, foreign.Get());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, uint32_t(NFS4ERR_BAD_STATEID));
  ASSERT_EQ(r->ops.size(), 1u);

  std::lock_guard<std::mutex> lk(handler_.mu);
  EXPECT_EQ(handler_.recalls.size(), 1u);  // only the first compound's
  EXPECT_EQ(server_->calls(), 3u);
}

TEST_F(CallbackServerTest, GarbageArgumentsAreRefusedAndTheLinkSurvives) {
  ASSERT_TRUE(StartServer());
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));
  // A bitmap count whose byte size wraps 32 bits (libnfs' own decoder would
  // write past its allocation): the count is the second-last word.
  Args huge_bitmap;
  huge_bitmap.Getattr("fh", 0x18);
  Reply *r = c.Send(CB_COMPOUND, huge_bitmap.Get(), [](char *p, uint32_t n) {
    const uint32_t count = htonl(0x40000001);
    memcpy(p + n - 8, &count, 4);
  });
  ASSERT_TRUE(c.Wait(r));
  EXPECT_EQ(r->status, RPC_STATUS_ERROR);
  EXPECT_NE(r->error.find("garbage"), std::string::npos) << r->error;
  // A filehandle length far beyond the record (8-byte fh: length at -12).
  Args huge_fh;
  huge_fh.Recall(TestStateId(), false, "12345678");
  r = c.Send(CB_COMPOUND, huge_fh.Get(), [](char *p, uint32_t n) {
    const uint32_t len = htonl(0xfffffff0);
    memcpy(p + n - 12, &len, 4);
  });
  ASSERT_TRUE(c.Wait(r));
  EXPECT_EQ(r->status, RPC_STATUS_ERROR);
  // The connection still serves.
  r = c.Call(CB_NULL, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, RPC_STATUS_SUCCESS);
  std::lock_guard<std::mutex> lk(handler_.mu);
  EXPECT_TRUE(handler_.recalls.empty());
  EXPECT_TRUE(handler_.getattrs.empty());
}

TEST_F(CallbackServerTest, PeerNotAllowedIsClosedAtAccept) {
  ASSERT_TRUE(StartServer({"127.0.0.2"}));
  Client c;
  if (c.Connect(server_->port())) {  // the kernel may complete it first
    Reply *r = c.Send(CB_NULL, nullptr);
    ASSERT_NE(r, nullptr);
    c.Wait(r);
    EXPECT_TRUE(c.dead() || r->done) << "the server did not close";
    EXPECT_FALSE(r->done && r->status == RPC_STATUS_SUCCESS);
  }
  EXPECT_TRUE(WaitFor([this] { return server_->rejected() == 1; }));
  EXPECT_EQ(handler_.contacts.load(), 0);
  EXPECT_EQ(server_->calls(), 0u);
}

// Issue 15: a credential claiming 0x80000000 bytes (the length libnfs 4.0.0's
// RPC server read past its buffer with, taking the daemon down) is refused,
// and the service goes on answering.
TEST_F(CallbackServerTest, AHugeCredentialLengthIsRefusedAndTheServiceLives) {
  ASSERT_TRUE(StartServer());
  {
    RawConn raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    std::string call;
    rpc::XdrOut x(&call);
    // CB_NULL, AUTH_SYS credential of 0x80000000 bytes; 64 bytes follow.
    for (uint32_t v : {1u, 0u, 2u, 0x40000000u, 1u, 0u, 1u, 0x80000000u})
      x.U32(v);
    call.append(64, '\0');
    ASSERT_TRUE(raw.Send(call));
    std::string rec;
    bool closed = false;
    // A credential that cannot be decoded is GARBAGE_ARGS, as Linux's RPC
    // server answers it.
    ASSERT_TRUE(raw.Next(&rec, &closed)) << "closed: " << closed;
    RpcReply r;
    ASSERT_TRUE(ParseAccepted(rec, &r));
    EXPECT_EQ(r.xid, 1u);
    EXPECT_EQ(r.accept_stat, kGarbageArgs);
  }
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));
  Reply *r = c.Call(CB_NULL, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  EXPECT_EQ(handler_.contacts.load(), 1) << "the refused call is no contact";
  EXPECT_EQ(server_->calls(), 1u);
}

// A CB_NULL call's header up to its credential (program 0x40000000,
// version 1, procedure 0).
std::string CallHeader(uint32_t xid) {
  std::string b;
  rpc::XdrOut x(&b);
  for (uint32_t v : {xid, 0u, 2u, 0x40000000u, 1u, 0u}) x.U32(v);
  return b;
}

// A record that ends inside the credential or the verifier is GARBAGE_ARGS
// for that call; the connection goes on serving.
TEST_F(CallbackServerTest, ATruncatedCredentialOrVerifierIsGarbage) {
  ASSERT_TRUE(StartServer());
  RawConn raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  std::string cut_cred = CallHeader(10);  // AUTH_SYS of 20 bytes, 8 sent
  rpc::XdrOut(&cut_cred).U32(1);
  rpc::XdrOut(&cut_cred).U32(20);
  cut_cred.append(8, '\x01');
  std::string no_verf_len = CallHeader(11);  // verifier flavor, then nothing
  for (uint32_t v : {0u, 0u, 0u}) rpc::XdrOut(&no_verf_len).U32(v);
  std::string cut_verf = CallHeader(12);  // a verifier of 8 bytes, 4 sent
  for (uint32_t v : {0u, 0u, 0u, 8u, 7u}) rpc::XdrOut(&cut_verf).U32(v);
  // A verifier of 0xfffffff0 bytes, 4 sent: a bound check computing where
  // it ends in 32 bits wraps (libnfs 4.0.0's did).
  std::string wrap_verf = CallHeader(14);
  for (uint32_t v : {0u, 0u, 0u, 0xfffffff0u, 7u})
    rpc::XdrOut(&wrap_verf).U32(v);
  for (const std::string &call : {cut_cred, no_verf_len, cut_verf, wrap_verf}) {
    ASSERT_TRUE(raw.Send(call));
    std::string rec;
    ASSERT_TRUE(raw.Next(&rec));
    RpcReply r;
    ASSERT_TRUE(ParseAccepted(rec, &r));
    uint32_t xid;
    rpc::XdrIn(call.data(), 4).U32(&xid);
    EXPECT_EQ(r.xid, xid);
    EXPECT_EQ(r.accept_stat, kGarbageArgs) << "xid " << xid;
  }
  ASSERT_TRUE(raw.Send(CallHeader(13, 0x40000000, 1, 0)));
  std::string rec;
  ASSERT_TRUE(raw.Next(&rec));
  RpcReply r;
  ASSERT_TRUE(ParseAccepted(rec, &r));
  EXPECT_EQ(r.xid, 13u);
  EXPECT_EQ(r.accept_stat, 0u);
  EXPECT_EQ(handler_.contacts.load(), 1);
}

// The RPC-level errors, as RFC 5531 has a server answer them.
TEST_F(CallbackServerTest, OtherProgramsVersionsAndProceduresAreRpcErrors) {
  ASSERT_TRUE(StartServer());
  RawConn raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  struct Case {
    uint32_t prog, vers, proc, accept_stat;
    std::vector<uint32_t> rest;
  };
  const Case cases[] = {
      {0x40000001, 1, 0, 1, {}},      // PROG_UNAVAIL
      {0x40000000, 2, 0, 2, {1, 1}},  // PROG_MISMATCH: we serve 1 to 1
      {0x40000000, 1, 2, 3, {}},      // PROC_UNAVAIL
      {0x40000000, 1, 1, 4, {}},      // CB_COMPOUND without arguments
  };
  uint32_t xid = 20;
  for (const Case &c : cases) {
    ASSERT_TRUE(raw.Send(CallHeader(xid, c.prog, c.vers, c.proc)));
    std::string rec;
    ASSERT_TRUE(raw.Next(&rec)) << "xid " << xid;
    RpcReply r;
    ASSERT_TRUE(ParseAccepted(rec, &r)) << "xid " << xid;
    EXPECT_EQ(r.xid, xid);
    EXPECT_EQ(r.accept_stat, c.accept_stat) << "xid " << xid;
    EXPECT_EQ(r.rest, c.rest) << "xid " << xid;
    xid++;
  }
  std::lock_guard<std::mutex> lk(handler_.mu);
  EXPECT_TRUE(handler_.recalls.empty());
}

// A connection that breaks the protocol is closed alone.
TEST_F(CallbackServerTest, AMisbehavingConnectionIsDroppedOthersServe) {
  ASSERT_TRUE(StartServer());
  Client good;
  ASSERT_TRUE(good.Connect(server_->port()));
  Reply *r = good.Call(CB_NULL, nullptr);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  RawConn huge;  // a record of 2 GiB announced
  ASSERT_TRUE(huge.Connect(server_->port()));
  ASSERT_TRUE(huge.SendBytes(std::string("\x7f\xff\xff\xff", 4)));
  EXPECT_TRUE(huge.WaitClosed());
  RawConn odd;  // a message neither CALL nor REPLY
  ASSERT_TRUE(odd.Connect(server_->port()));
  std::string msg;
  for (uint32_t v : {1u, 5u}) rpc::XdrOut(&msg).U32(v);
  ASSERT_TRUE(odd.Send(msg));
  EXPECT_TRUE(odd.WaitClosed());
  r = good.Call(CB_NULL, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  EXPECT_EQ(server_->calls(), 2u);
}

// At most max_connections at once: one more is closed at accept; once one
// goes, a new one is served.
TEST_F(CallbackServerTest, ConnectionsBeyondTheBoundAreClosed) {
  CallbackOptions o;
  o.address = "127.0.0.1";
  o.max_connections = 2;
  std::string err;
  server_ = CallbackServer::Start(o, &handler_, &err);
  ASSERT_NE(server_, nullptr) << err;
  auto first = std::make_unique<Client>();
  Client second;
  for (Client *c : {first.get(), &second}) {  // served: kept by the server
    ASSERT_TRUE(c->Connect(server_->port()));
    Reply *r = c->Call(CB_NULL, nullptr);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->status, RPC_STATUS_SUCCESS) << r->error;
  }
  RawConn third;
  ASSERT_TRUE(third.Connect(server_->port()));  // the kernel completes it
  // (A send that fails found it closed already.)
  (void)third.Send(CallHeader(1, 0x40000000, 1, 0));
  EXPECT_TRUE(third.WaitClosed()) << "a third connection was kept";
  first.reset();
  // The server sees the first one go, then has room again.
  EXPECT_TRUE(WaitFor([this] {
    Client c;
    if (!c.Connect(server_->port())) return false;
    Reply *r = c.Call(CB_NULL, nullptr);
    return r != nullptr && r->status == RPC_STATUS_SUCCESS;
  }));
  EXPECT_GE(server_->calls(), 3u);
}

TEST_F(CallbackServerTest, StopIsPromptAndIdempotent) {
  ASSERT_TRUE(StartServer());
  Client c;
  ASSERT_TRUE(c.Connect(server_->port()));
  Reply *r = c.Call(CB_NULL, nullptr);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->status, RPC_STATUS_SUCCESS);
  const auto t0 = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  server_->Stop();
  EXPECT_TRUE(c.WaitDead()) << "Stop() left the connection open";
  EXPECT_EQ(server_->calls(), 1u);
}

TEST_F(CallbackServerTest, StartOnABusyPortNamesIt) {
  ASSERT_TRUE(StartServer());
  CallbackOptions o;
  o.address = "127.0.0.1";
  o.port = server_->port();
  std::string err;
  FakeHandler other;
  EXPECT_EQ(CallbackServer::Start(o, &other, &err), nullptr);
  EXPECT_NE(err.find("bind 127.0.0.1:" + std::to_string(o.port)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("in use"), std::string::npos) << err;
  o.address = "not-an-address";
  EXPECT_EQ(CallbackServer::Start(o, &other, &err), nullptr);
  EXPECT_NE(err.find("not-an-address"), std::string::npos) << err;
}

// A Kerberos remote's service: CB_NULL under a context of the remote's
// principal is served (and is the remote's contact); the same call under
// AUTH_SYS is refused (AUTH_ERROR, AUTH_TOOWEAK) and never reaches the
// handler: only the flavour we asked for.
TEST_F(CallbackServerTest, UnderKerberosOnlyRpcsecGssCallsAreServed) {
  CallbackOptions o;
  o.address = "127.0.0.1";
  o.gss.new_acceptor = [] {
    return std::unique_ptr<rpc::GssAcceptor>(
        new rpc::FakeAcceptor("nfs/files.example.org@EXAMPLE.ORG", 0x21));
  };
  o.gss.allowed_principal = "nfs@files.example.org";
  std::string err;
  server_ = CallbackServer::Start(o, &handler_, &err);
  ASSERT_NE(server_, nullptr) << err;
  ASSERT_NE(server_->gss(), nullptr);
  RawConn raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  auto reply_words = [&raw](std::vector<uint32_t> *w) {
    std::string rec;
    if (!raw.Next(&rec)) return false;
    rpc::XdrIn in(rec.data(), rec.size());
    uint32_t v;
    w->clear();
    while (in.U32(&v)) w->push_back(v);
    return true;
  };
  // CB_NULL under AUTH_SYS: denied, AUTH_ERROR, AUTH_TOOWEAK.
  std::string sys = CallHeader(1);
  {
    rpc::XdrOut x(&sys);
    x.U32(1);  // AUTH_SYS: stamp, machine "m", uid, gid, no gids
    std::string body;
    rpc::XdrOut b(&body);
    b.U32(0);
    b.Opaque("m");
    b.U32(0);
    b.U32(0);
    b.U32(0);
    x.Opaque(body);
    x.U32(0);
    x.U32(0);
  }
  ASSERT_TRUE(raw.Send(sys));
  std::vector<uint32_t> w;
  ASSERT_TRUE(reply_words(&w));
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[2], 1u) << "MSG_DENIED";
  EXPECT_EQ(w[3], 1u) << "AUTH_ERROR";
  EXPECT_EQ(w[4], 5u) << "AUTH_TOOWEAK";
  EXPECT_EQ(handler_.contacts.load(), 0);
  EXPECT_EQ(server_->weak_calls(), 1u);
  // The handshake, then CB_NULL under the context.
  std::string handle;
  for (const char *token : {"tok1", "tok2"}) {
    std::string rec = CallHeader(2);
    rpc::GssInitCall init(handle);
    uint32_t seq;
    ASSERT_TRUE(init.PutCredVerf(&rec, 0, &seq));
    rpc::XdrOut(&rec).Opaque(token);
    ASSERT_TRUE(raw.Send(rec));
    std::string reply;
    ASSERT_TRUE(raw.Next(&reply));
    rpc::XdrIn in(reply.data(), reply.size());
    uint32_t xid, type, stat, flavor, accept;
    std::string verf;
    ASSERT_TRUE(in.U32(&xid) && in.U32(&type) && in.U32(&stat) &&
                in.U32(&flavor) && in.Opaque(&verf, 400) && in.U32(&accept));
    ASSERT_EQ(stat, 0u);
    rpc::GssInitRes res;
    ASSERT_TRUE(rpc::DecodeGssInitRes(&in, &res));
    handle = res.handle;
  }
  rpc::RpcsecGss gss(std::make_unique<rpc::FakeContext>(0x21), handle, 128,
                     rpc::GssService::kNone);
  std::string null = CallHeader(3);
  uint32_t seq;
  ASSERT_TRUE(gss.PutCredVerf(&null, 0, &seq));
  ASSERT_TRUE(raw.Send(null));
  ASSERT_TRUE(reply_words(&w));
  ASSERT_GE(w.size(), 4u);
  EXPECT_EQ(w[2], 0u) << "MSG_ACCEPTED";
  EXPECT_EQ(w[3], rpc::kAuthRpcsecGss) << "the verifier: the MIC of seq";
  EXPECT_EQ(w.back(), 0u) << "SUCCESS";
  EXPECT_EQ(handler_.contacts.load(), 1);
  EXPECT_EQ(server_->gss()->established(), 1u);
}

}  // namespace
}  // namespace callback
}  // namespace nache
