// A libnfs client context calling an NFSv4.0 callback service (program
// 0x40000000) over loopback TCP, for tests: builds CB_COMPOUND arguments
// (Args), sends CB_NULL / CB_COMPOUND and copies the replies out (Client).
// Shared by callback_server_test.cc and core_delegations_test.cc.
#pragma once

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-zdr.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "upstream/types.h"

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
namespace cb_client {

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
inline bool WaitFor(const std::function<bool()> &cond) {
  const auto end = Clock::now() + kDeadline;
  while (!cond()) {
    if (Clock::now() > end) return false;
    poll(nullptr, 0, 1);
  }
  return true;
}

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

}  // namespace cb_client
}  // namespace nache
