// The NFSv4.0 callback service (callback/callback_server.h) over loopback
// TCP, called by a real libnfs client context: CB_NULL, CB_RECALL,
// CB_GETATTR, op errors, illegal ops, garbage arguments, peer filtering and
// Stop(). Only the handler is a fake.
#include "callback/callback_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-zdr.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cb_client.h"

namespace nache {
namespace callback {
namespace {

using cb_client::Args;
using cb_client::Clock;
using cb_client::Client;
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
  uint32_t OnRecall(const StateId &sid, bool truncate,
                    const Fh &fh) override {
    std::lock_guard<std::mutex> lk(mu);
    recalls.push_back({sid, truncate, fh});
    return recall_status;
  }
  uint32_t OnGetattr(const Fh &fh, uint64_t *change,
                     uint64_t *size) override {
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
  illegal.Recall(TestStateId(), false, "fh").Illegal().Recall(StateId(),
                                                               false, "x");
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

}  // namespace
}  // namespace callback
}  // namespace nache
