// The NFSv4.0 callback service (see callback_server.h).
//
// Owns the listening socket, the accepted connections with their libnfs
// server contexts, the decoding of CB_COMPOUND arguments and the encoding of
// the replies. It must not block on anything but poll() (the handler answers
// from memory), never calls the upstream, and never keeps a pointer into a
// call past its reply.
//
// libnfs 4.0.0 facts this file is built around:
//  - Service procedures get no user pointer: a thread_local names the server
//    whose loop is running.
//  - The decode buffer (decode_buf_size bytes) and whatever its decoders
//    allocate live on the call's decode stream, freed with it as soon as the
//    service procedure returns (zdr_free() is a no-op); the buffer is neither
//    zeroed nor 8-byte aligned (malloc + 12).
//  - Its XDR decoders trust the peer's lengths: zdr_array computes count *
//    size in 32 bits and then decodes count elements into the (wrapped)
//    allocation, and zdr_bytes ignores its maximum and its bound check wraps.
//  - rpc_destroy_context() does not free the endpoint rpc_register_service()
//    allocated: 32 bytes are lost per accepted connection.
// So CB_COMPOUND arguments are decoded here, by a bounded reader, into a
// thread_local struct (we ask libnfs for no decode buffer); strings point
// into the receive buffer and are copied before the handler sees them. This
// also lets an unknown op code get NFS4ERR_OP_ILLEGAL where libnfs' decoder
// would fail the whole call with GARBAGE_ARGS.
#include "callback/callback_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rpc/xdr.h"
#include "util/log.h"

namespace nache {
namespace callback {
namespace {

using upstream::Fh;
using upstream::StateId;

const char *const kComponent = "NACHE_CALLBACK";
constexpr int kCbVersion = 1;          // NFS_CB
constexpr uint32_t kMaxOps = 16;       // ops of one CB_COMPOUND we evaluate
constexpr size_t kMaxConns = 64;       // simultaneous connections we keep

// The server whose Loop() runs on this thread, and the connection being
// serviced (for logs).
thread_local CallbackServer *tls_server = nullptr;
thread_local const char *tls_peer = "?";

// One decoded CB_COMPOUND op. Pointers go into the call's receive buffer.
struct CbOp {
  uint32_t op;          // OP_CB_GETATTR, OP_CB_RECALL, else illegal
  const char *fh;       // the op's nfs_fh4
  uint32_t fh_len;      // <= upstream::kMaxFhSize
  uint32_t attr_word0;  // CB_GETATTR: word 0 of attr_request
  uint32_t seqid;       // CB_RECALL: the stateid...
  uint8_t other[12];    // ...
  uint32_t truncate;    // CB_RECALL: XDR bool
};

// CB_COMPOUND4args as decoded here.
struct CbArgs {
  const char *tag;          // echoed in the reply
  uint32_t tag_len;
  uint32_t minorversion;    // != 0: nothing else decoded
  uint32_t callback_ident;
  bool too_many;            // more than kMaxOps ops: none decoded
  uint32_t nops;            // ops decoded; the last may be an illegal one
  CbOp ops[kMaxOps];
};

// The CB_COMPOUND being served on this thread: filled by DecodeCbCompound()
// right before libnfs calls ServeCompound().
thread_local CbArgs tls_args;

using rpc::XdrIn;

// libnfs decode procedure for CB_COMPOUND4args (see the file comment).
// Returns false (libnfs replies GARBAGE_ARGS) on malformed arguments.
uint32_t DecodeCbCompound(ZDR *zdr, void * /*no buffer*/, ...) {
  CbArgs *a = &tls_args;
  memset(a, 0, sizeof(*a));
  if (zdr->pos < 0 || zdr->pos > zdr->size) return 0;
  XdrIn in(zdr->buf + zdr->pos, size_t(zdr->size - zdr->pos));
  uint32_t count;
  if (!in.Opaque(&a->tag, &a->tag_len, UINT32_MAX) ||
      !in.U32(&a->minorversion) || !in.U32(&a->callback_ident) ||
      !in.U32(&count))
    return 0;
  if (a->minorversion != 0) return 1;  // answered from the header alone
  if (count > kMaxOps) {
    a->too_many = true;
    return 1;
  }
  for (uint32_t i = 0; i < count; ++i) {
    CbOp &op = a->ops[a->nops++];
    if (!in.U32(&op.op)) return 0;
    bool ok;
    if (op.op == OP_CB_GETATTR) {
      ok = in.Opaque(&op.fh, &op.fh_len, upstream::kMaxFhSize) &&
           ReadBitmapWord0(&in, &op.attr_word0);
    } else if (op.op == OP_CB_RECALL) {
      ok = in.U32(&op.seqid) && in.Fixed(op.other, sizeof(op.other)) &&
           in.U32(&op.truncate) &&
           in.Opaque(&op.fh, &op.fh_len, upstream::kMaxFhSize);
    } else {
      return 1;  // NFS4ERR_OP_ILLEGAL ends the compound: the rest is unread
    }
    if (!ok) return 0;
  }
  return 1;
}

}  // namespace

bool ReadBitmapWord0(XdrIn *in, uint32_t *word0) {
  uint32_t n, w = 0;
  if (!in->U32(&n) || n > in->left() / 4) return false;
  *word0 = 0;
  for (uint32_t i = 0; i < n; ++i) {
    (void)in->U32(&w);  // cannot fail: n words are there
    if (i == 0) *word0 = w;
  }
  return true;
}

uint32_t CbGetattrAnswer(uint32_t word0, uint64_t change, uint64_t size,
                         std::string *vals) {
  constexpr uint32_t kChangeBit = 1u << 3;  // FATTR4_CHANGE in word 0
  constexpr uint32_t kSizeBit = 1u << 4;    // FATTR4_SIZE in word 0
  const uint32_t mask = word0 & (kChangeBit | kSizeBit);
  vals->clear();
  rpc::XdrOut x(vals);
  if (mask & kChangeBit) x.U64(change);
  if (mask & kSizeBit) x.U64(size);
  return mask;
}

CallbackServer::CallbackServer(const CallbackOptions &opts,
                               CallbackHandler *handler)
    : opts_(opts), handler_(handler) {}

CallbackServer::~CallbackServer() { Stop(); }

std::unique_ptr<CallbackServer> CallbackServer::Start(
    const CallbackOptions &opts, CallbackHandler *handler, std::string *err) {
  std::string scratch;
  if (err == nullptr) err = &scratch;
  std::unique_ptr<CallbackServer> s(new CallbackServer(opts, handler));
  in_addr addr;
  char text[INET_ADDRSTRLEN];
  if (inet_pton(AF_INET, opts.address.c_str(), &addr) != 1 ||
      inet_ntop(AF_INET, &addr, text, sizeof(text)) == nullptr) {
    *err = "invalid callback address \"" + opts.address + "\" (IPv4 wanted)";
    return nullptr;
  }
  s->address_ = text;
  for (const std::string &peer : opts.allowed_peers) {
    in_addr p;
    if (inet_pton(AF_INET, peer.c_str(), &p) != 1) {
      *err = "invalid allowed callback peer \"" + peer + "\" (IPv4 wanted)";
      return nullptr;
    }
    s->allowed_.push_back(p.s_addr);
  }
  const std::string where = s->address_ + ":" + std::to_string(opts.port);
  s->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         0);
  if (s->listen_fd_ < 0) {
    *err = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  int one = 1;  // a restart must not wait for TIME_WAIT to end
  setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = htons(opts.port);
  socklen_t len = sizeof(sa);
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr *>(&sa), len) != 0) {
    *err = "bind " + where + ": " + std::strerror(errno);
    return nullptr;
  }
  if (listen(s->listen_fd_, 16) != 0 ||
      getsockname(s->listen_fd_, reinterpret_cast<sockaddr *>(&sa), &len)) {
    *err = "listen " + where + ": " + std::strerror(errno);
    return nullptr;
  }
  s->port_ = ntohs(sa.sin_port);
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd_ < 0) {
    *err = std::string("eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  s->thread_ = std::thread([srv = s.get()] { srv->Loop(); });
  nache_log(kLogInfo, kComponent,
            "listening on %s:%u for program 0x%x version %d, %zu allowed "
            "peer(s)",
            s->address_.c_str(), unsigned(s->port_), unsigned(opts.program),
            kCbVersion, s->allowed_.size());
  return s;
}

void CallbackServer::Stop() {
  std::lock_guard<std::mutex> lk(stop_mu_);
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
    nache_log(kLogInfo, kComponent, "stopped (%llu calls served)",
              (unsigned long long)calls());
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

std::string CallbackServer::uaddr() const {
  return address_ + "." + std::to_string(port_ >> 8) + "." +
         std::to_string(port_ & 0xff);
}

bool CallbackServer::Allowed(uint32_t addr) const {
  return allowed_.empty() ||
         std::find(allowed_.begin(), allowed_.end(), addr) != allowed_.end();
}

void CallbackServer::Loop() {
  tls_server = this;
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    for (const Conn &c : conns_)
      fds.push_back({rpc_get_fd(c.rpc), short(rpc_which_events(c.rpc)), 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      nache_log(kLogMajor, kComponent, "poll: %s; the callback service stops",
                std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;  // Stop()
    // Backwards, so that dropping a connection keeps lower indices valid.
    for (size_t i = conns_.size(); i-- > 0;) {
      if (fds[i + 2].revents == 0) continue;
      tls_peer = conns_[i].peer.c_str();
      const int rc = rpc_service(conns_[i].rpc, fds[i + 2].revents);
      tls_peer = "?";
      if (rc == 0) continue;
      const char *why = rpc_get_error(conns_[i].rpc);
      nache_log(kLogInfo, kComponent, "%s: connection closed (%s)",
                conns_[i].peer.c_str(), why != nullptr ? why : "by the peer");
      rpc_destroy_context(conns_[i].rpc);  // closes the socket
      conns_.erase(conns_.begin() + long(i));
    }
    if (fds[1].revents != 0) AcceptAll();
  }
  for (Conn &c : conns_) rpc_destroy_context(c.rpc);
  conns_.clear();
  tls_server = nullptr;
}

void CallbackServer::AcceptAll() {
  // libnfs keeps a pointer to this table in every context.
  static struct service_proc procs[] = {
      {CB_NULL, &CallbackServer::ServeNull, (zdrproc_t)zdr_void, 0},
      {CB_COMPOUND, &CallbackServer::ServeCompound, DecodeCbCompound, 0},
  };
  for (;;) {
    sockaddr_in sa;
    socklen_t len = sizeof(sa);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr *>(&sa),
                           &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        nache_log(kLogWarn, kComponent, "accept: %s", std::strerror(errno));
      return;
    }
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
    const std::string peer =
        std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
    if (sa.sin_family != AF_INET || !Allowed(sa.sin_addr.s_addr)) {
      close(fd);
      rejected_.fetch_add(1);
      nache_log(kLogWarn, kComponent,
                "refused a connection from %s: not an allowed peer",
                peer.c_str());
      continue;
    }
    if (conns_.size() >= kMaxConns) {
      close(fd);
      nache_log(kLogWarn, kComponent,
                "refused a connection from %s: %zu connections already",
                peer.c_str(), conns_.size());
      continue;
    }
    struct rpc_context *rpc = rpc_init_server_context(fd);
    if (rpc == nullptr) {
      close(fd);
      nache_log(kLogWarn, kComponent, "%s: no memory for a context",
                peer.c_str());
      continue;
    }
    if (rpc_register_service(rpc, int(opts_.program), kCbVersion, procs,
                             int(sizeof(procs) / sizeof(procs[0]))) != 0) {
      nache_log(kLogWarn, kComponent, "%s: rpc_register_service: %s",
                peer.c_str(), rpc_get_error(rpc));
      rpc_destroy_context(rpc);
      continue;
    }
    conns_.push_back(Conn{rpc, peer});
    nache_log(kLogInfo, kComponent, "connection from %s", peer.c_str());
  }
}

int CallbackServer::ServeNull(struct rpc_context *rpc, struct rpc_msg *call) {
  CallbackServer *s = tls_server;
  if (s == nullptr) return -1;
  s->calls_.fetch_add(1);
  s->handler_->OnContact();
  return rpc_send_reply(rpc, call, nullptr, (zdrproc_t)zdr_void, 0) == 0 ? 0
                                                                          : -1;
}

int CallbackServer::ServeCompound(struct rpc_context *rpc,
                                  struct rpc_msg *call) {
  CallbackServer *s = tls_server;
  const CbArgs *a = &tls_args;
  if (s == nullptr) return -1;
  s->calls_.fetch_add(1);
  s->handler_->OnContact();

  nfs_cb_resop4 results[kMaxOps];
  uint32_t masks[kMaxOps];     // CB_GETATTR: the bitmap word we return
  std::string vals[kMaxOps];   // CB_GETATTR: change and/or size, XDR
  memset(results, 0, sizeof(results));
  CB_COMPOUND4res res;
  memset(&res, 0, sizeof(res));
  res.tag.utf8string_len = a->tag_len;
  res.tag.utf8string_val = const_cast<char *>(a->tag);
  res.resarray.resarray_val = results;
  uint32_t status = upstream::kNfs4Ok;
  if (a->minorversion != 0) status = upstream::kNfs4ErrMinorVersMismatch;
  if (a->too_many) status = upstream::kNfs4ErrResource;
  const bool ours = a->callback_ident == s->opts_.callback_ident;
  if (!ours)
    nache_log(kLogWarn, kComponent,
              "%s: CB_COMPOUND for callback_ident %u, ours is %u: answered "
              "as holding no such state",
              tls_peer, unsigned(a->callback_ident),
              unsigned(s->opts_.callback_ident));
  // COMPOUND semantics: stop at the first op that fails.
  for (uint32_t i = 0; status == upstream::kNfs4Ok && i < a->nops; ++i) {
    const CbOp &op = a->ops[i];
    nfs_cb_resop4 &r = results[res.resarray.resarray_len++];
    r.resop = op.op;
    if (op.op == OP_CB_RECALL) {
      StateId sid;
      sid.seqid = op.seqid;
      memcpy(sid.other, op.other, sizeof(sid.other));
      status = ours ? s->handler_->OnRecall(sid, op.truncate != 0,
                                            Fh(op.fh, op.fh_len))
                    : upstream::kNfs4ErrBadStateid;
      r.nfs_cb_resop4_u.opcbrecall.status = nfsstat4(status);
      nache_log(kLogDebug, kComponent, "%s: CB_RECALL seqid %u: status %u",
                tls_peer, unsigned(op.seqid), unsigned(status));
    } else if (op.op == OP_CB_GETATTR) {
      uint64_t change = 0, size = 0;
      status = ours ? s->handler_->OnGetattr(Fh(op.fh, op.fh_len), &change,
                                             &size)
                    : upstream::kNfs4ErrBadhandle;
      CB_GETATTR4res &g = r.nfs_cb_resop4_u.opcbgetattr;
      g.status = nfsstat4(status);
      if (status == upstream::kNfs4Ok) {
        masks[i] = CbGetattrAnswer(op.attr_word0, change, size, &vals[i]);
        fattr4 &f = g.CB_GETATTR4res_u.resok4.obj_attributes;
        f.attrmask.bitmap4_len = masks[i] != 0 ? 1 : 0;
        f.attrmask.bitmap4_val = &masks[i];
        f.attr_vals.attrlist4_len = u_int(vals[i].size());
        f.attr_vals.attrlist4_val = &vals[i][0];
      }
    } else {
      status = upstream::kNfs4ErrOpIllegal;
      r.resop = OP_CB_ILLEGAL;
      r.nfs_cb_resop4_u.opcbillegal.status = nfsstat4(status);
      nache_log(kLogWarn, kComponent, "%s: illegal callback op %u", tls_peer,
                unsigned(op.op));
    }
  }
  res.status = nfsstat4(status);  // the last op's, as COMPOUND requires
  // Beyond the 4 KiB libnfs always reserves: the echoed tag and the results.
  const int hint = int(a->tag_len + 64 * res.resarray.resarray_len);
  if (rpc_send_reply(rpc, call, &res, (zdrproc_t)zdr_CB_COMPOUND4res, hint)) {
    nache_log(kLogWarn, kComponent, "%s: cannot send a CB_COMPOUND reply: %s",
              tls_peer, rpc_get_error(rpc));
    return -1;
  }
  return 0;
}

}  // namespace callback
}  // namespace nache
