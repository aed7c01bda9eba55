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

#include "upstream/libnfs_compat.h"

// Exported by libnfs 4.0.0 but declared only in its private header; the
// layout of rpc_pdu we rely on is the one nache_compat_selfcheck() proves.
extern "C" {
struct rpc_pdu;
struct rpc_pdu *rpc_allocate_pdu(struct rpc_context *rpc, int program,
                                 int version, int procedure, rpc_cb cb,
                                 void *private_data, zdrproc_t zdr_decode_fn,
                                 int zdr_bufsize);
int rpc_queue_pdu(struct rpc_context *rpc, struct rpc_pdu *pdu);
void rpc_free_pdu(struct rpc_context *rpc, struct rpc_pdu *pdu);
}

namespace nache {
namespace callback {
namespace {

using upstream::Fh;
using upstream::StateId;
using Clock = std::chrono::steady_clock;

constexpr int kProgram = 0x40000000;
constexpr auto kDeadline = std::chrono::seconds(5);

// The leading members of libnfs 4.0.0's struct rpc_pdu (see libnfs_compat.c).
struct PduPrefix {
  struct rpc_pdu *next;
  uint32_t xid;
  ZDR zdr;
};

// Polls cond until it holds or the deadline passes.
bool WaitFor(const std::function<bool()> &cond) {
  const auto end = Clock::now() + kDeadline;
  while (!cond()) {
    if (Clock::now() > end) return false;
    poll(nullptr, 0, 1);
  }
  return true;
}

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

// What came back for one call.
struct Reply {
  int proc = 0;
  bool done = false;
  int status = -1;    // RPC_STATUS_*
  std::string error;  // libnfs' message on RPC_STATUS_ERROR
  // CB_COMPOUND:
  uint32_t nfs_status = ~0u;
  std::string tag;
  struct Op {
    uint32_t resop, status;
    std::vector<uint32_t> mask;  // CB_GETATTR
    std::string vals;            // CB_GETATTR
  };
  std::vector<Op> ops;
};

// CB_COMPOUND4args with the storage they point to.
class Args {
 public:
  Args &Recall(const StateId &sid, bool truncate, const std::string &fh) {
    nfs_cb_argop4 op;
    memset(&op, 0, sizeof(op));
    op.argop = OP_CB_RECALL;
    CB_RECALL4args &r = op.nfs_cb_argop4_u.opcbrecall;
    r.stateid.seqid = sid.seqid;
    memcpy(r.stateid.other, sid.other, sizeof(sid.other));
    r.truncate = truncate;
    SetFh(&r.fh, fh);
    ops_.push_back(op);
    return *this;
  }
  Args &Getattr(const std::string &fh, uint32_t word0) {
    nfs_cb_argop4 op;
    memset(&op, 0, sizeof(op));
    op.argop = OP_CB_GETATTR;
    CB_GETATTR4args &g = op.nfs_cb_argop4_u.opcbgetattr;
    SetFh(&g.fh, fh);
    words_.push_back(word0);
    g.attr_request.bitmap4_len = 1;
    g.attr_request.bitmap4_val = &words_.back();
    ops_.push_back(op);
    return *this;
  }
  Args &Illegal() {  // the one unknown op code libnfs can encode
    nfs_cb_argop4 op;
    memset(&op, 0, sizeof(op));
    op.argop = OP_CB_ILLEGAL;
    ops_.push_back(op);
    return *this;
  }
  CB_COMPOUND4args *Get() {
    memset(&args_, 0, sizeof(args_));
    args_.tag.utf8string_len = tag.size();
    args_.tag.utf8string_val = &tag[0];
    args_.minorversion = minorversion;
    args_.callback_ident = ident;
    args_.argarray.argarray_len = ops_.size();
    args_.argarray.argarray_val = ops_.data();
    return &args_;
  }

  std::string tag = "cb-test";
  uint32_t minorversion = 0;
  uint32_t ident = 1;

 private:
  void SetFh(nfs_fh4 *f, const std::string &fh) {
    fhs_.push_back(fh);
    f->nfs_fh4_len = fh.size();
    f->nfs_fh4_val = &fhs_.back()[0];
  }
  std::deque<std::string> fhs_;
  std::deque<uint32_t> words_;
  std::vector<nfs_cb_argop4> ops_;
  CB_COMPOUND4args args_;
};

// A libnfs client context calling the callback program, driven by poll().
class Client {
 public:
  Client() : rpc_(rpc_init_context()) {}
  // Destroying the context cancels what is in flight, into replies_.
  ~Client() {
    if (rpc_ != nullptr) rpc_destroy_context(rpc_);
  }

  bool Connect(uint16_t port) {
    if (rpc_ == nullptr ||
        rpc_connect_async(rpc_, "127.0.0.1", port, ConnectCb, this) != 0)
      return false;
    return Drive([this] { return connected_ || connect_failed_; }) &&
           connected_;
  }

  // Queues CB_NULL (args null) or CB_COMPOUND; patch may then edit the
  // encoded arguments (start, length) to make garbage.
  Reply *Send(int proc, CB_COMPOUND4args *args,
              const std::function<void(char *, uint32_t)> &patch = nullptr) {
    replies_.emplace_back();
    Reply *r = &replies_.back();
    r->proc = proc;
    const bool compound = proc == CB_COMPOUND;
    struct rpc_pdu *pdu = rpc_allocate_pdu(
        rpc_, kProgram, 1, proc, ReplyCb, r,
        compound ? (zdrproc_t)zdr_CB_COMPOUND4res : (zdrproc_t)zdr_void,
        compound ? int(sizeof(CB_COMPOUND4res)) : 0);
    if (pdu == nullptr) return nullptr;
    if (args != nullptr) {
      ZDR *z = &reinterpret_cast<PduPrefix *>(pdu)->zdr;
      const uint32_t start = zdr_getpos(z);
      if (!zdr_CB_COMPOUND4args(z, args)) {
        rpc_free_pdu(rpc_, pdu);
        return nullptr;
      }
      if (patch) patch(z->buf + start, zdr_getpos(z) - start);
    }
    return rpc_queue_pdu(rpc_, pdu) == 0 ? r : nullptr;
  }

  // Drives the context until r completes; false on deadline or a dead
  // connection.
  bool Wait(Reply *r) {
    return r != nullptr && Drive([r] { return r->done; });
  }
  // Sends and waits; the reply, or null.
  Reply *Call(int proc, CB_COMPOUND4args *args) {
    Reply *r = Send(proc, args);
    return Wait(r) ? r : nullptr;
  }
  // Drives until the server has closed the connection.
  bool WaitDead() {
    Drive([] { return false; });
    return dead_;
  }
  bool dead() const { return dead_; }

 private:
  bool Drive(const std::function<bool()> &until) {
    const auto end = Clock::now() + kDeadline;
    while (!until()) {
      if (dead_) return false;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - Clock::now())
                          .count();
      if (ms <= 0) return false;
      pollfd p = {rpc_get_fd(rpc_), short(rpc_which_events(rpc_)), 0};
      const int n = poll(&p, 1, int(ms));
      if (n > 0 && rpc_service(rpc_, p.revents) < 0) dead_ = true;
    }
    return true;
  }
  static void ConnectCb(struct rpc_context *, int status, void *,
                        void *priv) {
    auto *c = static_cast<Client *>(priv);
    if (status == RPC_STATUS_SUCCESS)
      c->connected_ = true;
    else
      c->connect_failed_ = true;
  }
  static void ReplyCb(struct rpc_context *, int status, void *data,
                      void *priv) {
    auto *r = static_cast<Reply *>(priv);
    r->done = true;
    r->status = status;
    if (status == RPC_STATUS_ERROR && data != nullptr)
      r->error = static_cast<const char *>(data);
    if (status != RPC_STATUS_SUCCESS || r->proc != CB_COMPOUND) return;
    // Copy out: libnfs frees the decoded reply when we return.
    const auto *res = static_cast<const CB_COMPOUND4res *>(data);
    r->nfs_status = res->status;
    r->tag.assign(res->tag.utf8string_val, res->tag.utf8string_len);
    for (u_int i = 0; i < res->resarray.resarray_len; ++i) {
      // libnfs 4.0.0 decodes arrays into 4-byte aligned memory: copy.
      nfs_cb_resop4 o;
      memcpy(&o, res->resarray.resarray_val + i, sizeof(o));
      Reply::Op op{o.resop, 0, {}, {}};
      if (o.resop == OP_CB_GETATTR) {
        const CB_GETATTR4res &g = o.nfs_cb_resop4_u.opcbgetattr;
        op.status = g.status;
        if (g.status == NFS4_OK) {
          const fattr4 &f = g.CB_GETATTR4res_u.resok4.obj_attributes;
          op.mask.assign(f.attrmask.bitmap4_val,
                         f.attrmask.bitmap4_val + f.attrmask.bitmap4_len);
          op.vals.assign(f.attr_vals.attrlist4_val,
                         f.attr_vals.attrlist4_len);
        }
      } else if (o.resop == OP_CB_RECALL) {
        op.status = o.nfs_cb_resop4_u.opcbrecall.status;
      } else {
        op.status = o.nfs_cb_resop4_u.opcbillegal.status;
      }
      r->ops.push_back(op);
    }
  }

  std::deque<Reply> replies_;  // stable addresses for libnfs' callbacks
  struct rpc_context *rpc_;    // the client context
  bool connected_ = false;
  bool connect_failed_ = false;
  bool dead_ = false;          // rpc_service() failed: the socket is gone
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
  void SetUp() override {
    char why[256];
    ASSERT_EQ(nache_compat_selfcheck(why, sizeof(why)), NACHE_COMPAT_OK)
        << why;
  }
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
  EXPECT_NE(r->error.find("Garbage"), std::string::npos) << r->error;
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
