// A client of an NFSv4.0 callback service (program 0x40000000) over
// loopback TCP, for tests: builds CB_COMPOUND arguments (Args, libnfs'
// XDR), sends CB_NULL / CB_COMPOUND on our RPC transport and copies the
// replies out (Client). Shared by callback_server_test.cc and
// core_delegations_test.cc.
#pragma once

// libnfs.h first: the other libnfs headers use what it defines.
// clang-format off
#include <nfsc/libnfs.h>
// clang-format on

#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-zdr.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "rpc/rpc_transport.h"
#include "rpc/tcp_connect.h"
#include "upstream/types.h"

namespace nache {
namespace cb_client {

using upstream::Fh;
using upstream::StateId;
using Clock = std::chrono::steady_clock;

constexpr int kProgram = 0x40000000;
constexpr auto kDeadline = std::chrono::seconds(5);

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
  int status = -1;    // RPC_STATUS_SUCCESS, or RPC_STATUS_ERROR
  std::string error;  // what went wrong (rpc::ReplyStatusName)
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

// A client of the callback program on our RPC transport, driven by poll().
class Client {
 public:
  // Destroying the transport fails what is in flight, into replies_.
  ~Client() = default;

  bool Connect(uint16_t port) {
    std::string error;
    int fd = rpc::StartConnect("127.0.0.1", port, &error);
    if (fd < 0) return false;
    pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 5000) != 1 || rpc::ConnectResult(fd) != 0) {
      close(fd);
      return false;
    }
    t_.reset(new rpc::Transport(fd));
    return true;
  }

  // Queues CB_NULL (args null) or CB_COMPOUND; patch may then edit the
  // encoded arguments (start, length) to make garbage.
  Reply *Send(int proc, CB_COMPOUND4args *args,
              const std::function<void(char *, uint32_t)> &patch = nullptr) {
    if (!t_) return nullptr;
    replies_.emplace_back();
    Reply *r = &replies_.back();
    r->proc = proc;
    auto encode = [&](std::string *rec) {
      if (args == nullptr) return true;
      const size_t at = rec->size(), room = 1 << 20;
      rec->resize(at + room);
      ZDR z;
      zdrmem_create(&z, &(*rec)[at], room, ZDR_ENCODE);
      bool ok = zdr_CB_COMPOUND4args(&z, args);
      rec->resize(at + (ok ? zdr_getpos(&z) : 0));
      zdr_destroy(&z);
      if (ok && patch) patch(&(*rec)[at], uint32_t(rec->size() - at));
      return ok;
    };
    uint32_t xid;
    if (!t_->Call(
            kProgram, 1, proc, nullptr, encode,
            [r](rpc::ReplyStatus st, rpc::XdrIn *results) {
              Done(r, st, results);
            },
            &xid))
      return nullptr;
    t_->Service(0);  // out at once
    return r;
  }

  // Drives the transport until r completes; false on deadline or a dead
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
      if (dead_ || !t_) return false;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - Clock::now())
                          .count();
      if (ms <= 0) return false;
      pollfd p = {t_->fd(), t_->WantEvents(), 0};
      const int n = poll(&p, 1, int(ms));
      if (n > 0 && !t_->Service(p.revents)) {
        dead_ = true;
        t_->FailAll();
      }
    }
    return true;
  }
  static void Done(Reply *r, rpc::ReplyStatus st, rpc::XdrIn *results) {
    r->done = true;
    r->status =
        st == rpc::ReplyStatus::kOk ? RPC_STATUS_SUCCESS : RPC_STATUS_ERROR;
    if (st != rpc::ReplyStatus::kOk) r->error = rpc::ReplyStatusName(st);
    if (st != rpc::ReplyStatus::kOk || r->proc != CB_COMPOUND) return;
    ZDR z;
    zdrmem_create(&z, const_cast<char *>(results->pos()),
                  uint32_t(results->left()), ZDR_DECODE);
    CB_COMPOUND4res res;
    memset(&res, 0, sizeof res);
    if (!zdr_CB_COMPOUND4res(&z, &res)) {
      r->status = RPC_STATUS_ERROR;
      r->error = "reply does not decode";
      zdr_destroy(&z);
      return;
    }
    r->nfs_status = res.status;
    r->tag.assign(res.tag.utf8string_val, res.tag.utf8string_len);
    for (u_int i = 0; i < res.resarray.resarray_len; ++i) {
      // libnfs 4.0.0 decodes arrays into 4-byte aligned memory: copy.
      nfs_cb_resop4 o;
      memcpy(&o, res.resarray.resarray_val + i, sizeof(o));
      Reply::Op op{o.resop, 0, {}, {}};
      if (o.resop == OP_CB_GETATTR) {
        const CB_GETATTR4res &g = o.nfs_cb_resop4_u.opcbgetattr;
        op.status = g.status;
        if (g.status == NFS4_OK) {
          const fattr4 &f = g.CB_GETATTR4res_u.resok4.obj_attributes;
          op.mask.assign(f.attrmask.bitmap4_val,
                         f.attrmask.bitmap4_val + f.attrmask.bitmap4_len);
          op.vals.assign(f.attr_vals.attrlist4_val, f.attr_vals.attrlist4_len);
        }
      } else if (o.resop == OP_CB_RECALL) {
        op.status = o.nfs_cb_resop4_u.opcbrecall.status;
      } else {
        op.status = o.nfs_cb_resop4_u.opcbillegal.status;
      }
      r->ops.push_back(op);
    }
    zdr_destroy(&z);  // what the decode allocated; copied out above
  }

  std::deque<Reply> replies_;  // stable addresses for the callbacks
  // Declared after replies_: destroyed first, failing what is in flight
  // into replies_ while they still exist.
  std::unique_ptr<rpc::Transport> t_;
  bool dead_ = false;  // the connection failed or the server closed it
};

}  // namespace cb_client
}  // namespace nache
