// The NFSv4.0 callback service (see callback_server.h).
//
// Owns the listening socket, the accepted connections with their RPC
// transports, and the CB_COMPOUND of minor version 0 around the operations
// cb_ops.h serves. It must not block on anything but poll() (the handler
// answers from memory), never calls the upstream, and never keeps a pointer
// into a call past its reply.
//
// Every byte from the peer is read by our bounded reader (rpc/xdr.h): the
// RPC call header and credentials by rpc::Transport, the arguments here.
// libnfs 4.0.0's RPC server, which this service used before, decoded the
// call header itself and trusted its lengths: a credential claiming
// 0x80000000 bytes made it read far outside its buffer (issue 15,
// tests/fuzz/corpus/callback_server/cb-null-cred-length-0x80000000).
//
// What a connection may cost is bounded: a record (all its fragments) of
// at most kMaxRecord bytes, more closes the connection; replies waiting for
// a peer that does not read them, at most kMaxQueued bytes before its calls
// are no longer read (rpc::Transport::set_max_queued); and at most
// max_connections connections.
#include "callback/callback_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace nache {
namespace callback {
namespace {

using rpc::ReplyStatus;
using rpc::XdrIn;
using rpc::XdrOut;

const char *const kComponent = "NACHE_CALLBACK";
constexpr int kCbVersion = 1;  // NFS_CB
// A CB_COMPOUND of kMaxCbOps ops with the largest handles and a tag of
// kMaxCbTag bytes takes under 5 KiB (the server's bitmaps are short).
constexpr size_t kMaxRecord = 64 * 1024;
// Replies waiting for a peer that does not read them.
constexpr size_t kMaxQueued = 256 * 1024;

// One decoded op of a CB_COMPOUND.
struct CbOp {
  uint32_t op = 0;        // kOpCbRecall, kOpCbGetattr, else illegal
  CbRecallArgs recall;    // op == kOpCbRecall
  CbGetattrArgs getattr;  // op == kOpCbGetattr
};

}  // namespace

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
  s->listen_fd_ =
      socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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
  if (opts.gss.new_acceptor) s->gss_.reset(new rpc::GssServer(opts.gss));
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd_ < 0) {
    *err = std::string("eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  {
    MutexLock lk(&s->stop_mu_);  // (no Stop yet: for the analysis)
    s->thread_ = std::thread([srv = s.get()] { srv->Loop(); });
  }
  nache_log(
      kLogInfo, kComponent,
      "listening on %s:%u for program 0x%x version %d, %zu allowed "
      "peer(s), %s",
      s->address_.c_str(), unsigned(s->port_), unsigned(opts.program),
      kCbVersion, s->allowed_.size(),
      s->gss_ ? ("RPCSEC_GSS only, from " + opts.gss.allowed_principal).c_str()
              : "AUTH_SYS or AUTH_NONE");
  return s;
}

void CallbackServer::Stop() {
  MutexLock lk(&stop_mu_);
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
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    for (const Conn &c : conns_)
      fds.push_back({c.rpc->fd(), c.rpc->WantEvents(), 0});
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
      if (conns_[i].rpc->Service(fds[i + 2].revents)) continue;
      nache_log(kLogInfo, kComponent, "%s: connection closed (%s)",
                conns_[i].peer.c_str(), conns_[i].rpc->error().c_str());
      conns_.erase(conns_.begin() + long(i));  // closes the socket
    }
    if (fds[1].revents != 0) AcceptAll();
  }
  conns_.clear();
}

void CallbackServer::AcceptAll() {
  for (;;) {
    sockaddr_in sa;
    socklen_t len = sizeof(sa);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr *>(&sa), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    if (conns_.size() >= opts_.max_connections) {
      close(fd);
      nache_log(kLogWarn, kComponent,
                "refused a connection from %s: %zu connections already",
                peer.c_str(), conns_.size());
      continue;
    }
    Conn c{std::make_unique<rpc::Transport>(fd, kMaxRecord), peer};
    c.rpc->set_max_queued(kMaxQueued);
    c.rpc->SetPeerSecurity(gss_.get());
    c.rpc->SetCallHandler([this, peer](const rpc::PeerCall &call, XdrIn *args,
                                       std::string *results) {
      return Serve(peer, call, args, results);
    });
    conns_.push_back(std::move(c));
    nache_log(kLogInfo, kComponent, "connection from %s", peer.c_str());
  }
}

ReplyStatus CallbackServer::Serve(const std::string &peer,
                                  const rpc::PeerCall &call, XdrIn *args,
                                  std::string *results) {
  const ReplyStatus program = CheckCbProgram(call, opts_.program, results);
  if (program != ReplyStatus::kOk) {
    nache_log(kLogInfo, kComponent, "%s: a call to program 0x%x version %u: %s",
              peer.c_str(), unsigned(call.prog), unsigned(call.vers),
              rpc::ReplyStatusName(program));
    return program;
  }
  // Only the flavour we asked for (our SETCLIENTID's): a Kerberos
  // remote's callbacks come under RPCSEC_GSS, and a call under AUTH_SYS
  // then is not the remote's.
  if (gss_ && call.cred_flavor != rpc::kAuthRpcsecGss) {
    weak_calls_.fetch_add(1);
    nache_log(kLogWarn, kComponent,
              "%s: a call under flavour %u refused: RPCSEC_GSS only",
              peer.c_str(), unsigned(call.cred_flavor));
    return ReplyStatus::kAuthError;
  }
  if (call.proc != kCbProcNull && call.proc != kCbProcCompound)
    return ReplyStatus::kProcUnavail;
  calls_.fetch_add(1);
  handler_->OnContact();
  if (call.proc == kCbProcNull) return ReplyStatus::kOk;
  return ServeCompound(peer, args, results);
}

ReplyStatus CallbackServer::ServeCompound(const std::string &peer, XdrIn *in,
                                          std::string *results) {
  const char *tag;
  uint32_t tag_len, minor, ident, count;
  if (!in->Opaque(&tag, &tag_len, kMaxCbTag) || !in->U32(&minor) ||
      !in->U32(&ident) || !in->U32(&count))
    return ReplyStatus::kGarbageArgs;
  uint32_t status = upstream::kNfs4Ok;
  CbOp ops[kMaxCbOps];
  uint32_t nops = 0;  // decoded; the last may be an illegal one
  if (minor != 0) {
    status = upstream::kNfs4ErrMinorVersMismatch;  // nothing more is read
  } else if (count > kMaxCbOps) {
    status = upstream::kNfs4ErrResource;
  } else {
    // Every op's arguments are read before any is evaluated: arguments
    // that do not parse are GARBAGE_ARGS, and then nothing was done.
    for (uint32_t i = 0; i < count; ++i) {
      CbOp &op = ops[nops++];
      if (!in->U32(&op.op)) return ReplyStatus::kGarbageArgs;
      bool ok;
      if (op.op == kOpCbRecall) {
        ok = ReadCbRecallArgs(in, &op.recall);
      } else if (op.op == kOpCbGetattr) {
        ok = ReadCbGetattrArgs(in, &op.getattr);
      } else {
        break;  // NFS4ERR_OP_ILLEGAL ends the compound: the rest is unread
      }
      if (!ok) return ReplyStatus::kGarbageArgs;
    }
  }
  const bool ours = ident == opts_.callback_ident;
  if (!ours && nops > 0)
    nache_log(kLogWarn, kComponent,
              "%s: CB_COMPOUND for callback_ident %u, ours is %u: answered "
              "as holding no such state",
              peer.c_str(), unsigned(ident), unsigned(opts_.callback_ident));
  std::string res;
  XdrOut o(&res);
  uint32_t done = 0;
  // COMPOUND semantics: stop at the first op that fails.
  for (uint32_t i = 0; status == upstream::kNfs4Ok && i < nops; ++i, ++done) {
    const CbOp &op = ops[i];
    if (op.op == kOpCbRecall) {
      if (ours) {
        status = ServeCbRecall(handler_, op.recall, &o);
      } else {
        status = upstream::kNfs4ErrBadStateid;
        PutCbOpStatus(&o, op.op, status);
      }
      nache_log(kLogDebug, kComponent, "%s: CB_RECALL seqid %u: status %u",
                peer.c_str(), unsigned(op.recall.stateid.seqid),
                unsigned(status));
    } else if (op.op == kOpCbGetattr) {
      if (ours) {
        status = ServeCbGetattr(handler_, op.getattr, &o);
      } else {
        status = upstream::kNfs4ErrBadhandle;
        PutCbOpStatus(&o, op.op, status);
      }
    } else {
      status = upstream::kNfs4ErrOpIllegal;
      PutCbOpStatus(&o, kOpCbIllegal, status);
      nache_log(kLogWarn, kComponent, "%s: illegal callback op %u",
                peer.c_str(), unsigned(op.op));
    }
  }
  PutCbCompoundRes(results, status, tag, tag_len, done, res);
  return ReplyStatus::kOk;
}

}  // namespace callback
}  // namespace nache
