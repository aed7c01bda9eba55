// See rpc_transport.h.
#include "rpc/rpc_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace nache {
namespace rpc {

namespace {

// RFC 5531's numbers.
constexpr uint32_t kRpcVersion = 2;
constexpr uint32_t kMsgCall = 0, kMsgReply = 1;
constexpr uint32_t kMsgAccepted = 0, kMsgDenied = 1;
constexpr uint32_t kAuthNone = 0, kAuthSys = 1;
constexpr uint32_t kAuthBadCred = 1, kAuthTooWeak = 5;  // auth_stat
constexpr uint32_t kMaxAuthBytes = 400;
constexpr uint32_t kAcceptSuccess = 0, kAcceptProgUnavail = 1,
                   kAcceptProgMismatch = 2, kAcceptProcUnavail = 3,
                   kAcceptGarbageArgs = 4, kAcceptSystemErr = 5;
constexpr uint32_t kRejectRpcMismatch = 0, kRejectAuthError = 1;
constexpr uint32_t kLastFragment = 0x80000000u;
constexpr size_t kReadChunk = 256 * 1024;

uint32_t AcceptStatOf(ReplyStatus s) {
  switch (s) {
    case ReplyStatus::kOk: return kAcceptSuccess;
    case ReplyStatus::kProgUnavail: return kAcceptProgUnavail;
    case ReplyStatus::kProgMismatch: return kAcceptProgMismatch;
    case ReplyStatus::kProcUnavail: return kAcceptProcUnavail;
    case ReplyStatus::kGarbageArgs: return kAcceptGarbageArgs;
    default: return kAcceptSystemErr;
  }
}

void PutAuthSys(XdrOut *x, const AuthSys &a) {
  std::string body;
  XdrOut b(&body);
  b.U32(a.stamp);
  b.Opaque(a.machine.data(), std::min<size_t>(a.machine.size(), 255));
  b.U32(a.uid);
  b.U32(a.gid);
  size_t n = std::min<size_t>(a.gids.size(), 16);
  b.U32(uint32_t(n));
  for (size_t i = 0; i < n; i++) b.U32(a.gids[i]);
  x->U32(kAuthSys);
  x->Opaque(body);
}

// The call header up to its procedure number.
size_t PutCallHeader(XdrOut *x, uint32_t xid, uint32_t prog, uint32_t vers,
                     uint32_t proc) {
  const size_t hdr = x->pos();
  x->U32(xid);
  x->U32(kMsgCall);
  x->U32(kRpcVersion);
  x->U32(prog);
  x->U32(vers);
  x->U32(proc);
  return hdr;
}

// MSG_DENIED, AUTH_ERROR with auth_stat.
void PutDenied(XdrOut *x, uint32_t auth_stat) {
  x->U32(kMsgDenied);
  x->U32(kRejectAuthError);
  x->U32(auth_stat);
}

// An accepted reply's status and, for a success and PROG_MISMATCH, what
// the handler made of it (the verifier is written already). A success too
// large to send is SYSTEM_ERR; a PROG_MISMATCH without its two versions
// is too.
void PutAccepted(XdrOut *x, ReplyStatus *st, const std::string &results,
                 size_t max_record) {
  // (The record so far, its marker, the status and the results.)
  if (*st == ReplyStatus::kOk && x->pos() + results.size() > max_record)
    *st = ReplyStatus::kSystemErr;
  if (*st == ReplyStatus::kProgMismatch && results.size() != 8)
    *st = ReplyStatus::kSystemErr;
  x->U32(AcceptStatOf(*st));
  if (*st == ReplyStatus::kOk || *st == ReplyStatus::kProgMismatch)
    x->Raw(results);
}

// SplitMix64's finalizer: every input bit reaches every output bit.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint32_t InitialXid() {
  uint32_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == ssize_t(sizeof r)) return r;
  // No entropy yet (early boot): the clocks, the process and a counter,
  // mixed; unsigned throughout.
  static std::atomic<uint64_t> counter{0};
  timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  uint64_t h =
      Mix64(uint64_t(rt.tv_sec) * 1000000000ull + uint64_t(rt.tv_nsec));
  h = Mix64(h ^
            (uint64_t(mono.tv_sec) * 1000000000ull + uint64_t(mono.tv_nsec)));
  h = Mix64(h ^ (uint64_t(uint32_t(getpid())) << 32) ^ counter.fetch_add(1));
  return uint32_t(h ^ (h >> 32));
}

const char *ReplyStatusName(ReplyStatus s) {
  switch (s) {
    case ReplyStatus::kOk: return "ok";
    case ReplyStatus::kProgUnavail: return "program unavailable";
    case ReplyStatus::kProgMismatch: return "program version mismatch";
    case ReplyStatus::kProcUnavail: return "procedure unavailable";
    case ReplyStatus::kGarbageArgs: return "garbage arguments";
    case ReplyStatus::kSystemErr: return "system error";
    case ReplyStatus::kRpcMismatch: return "RPC version mismatch";
    case ReplyStatus::kAuthError: return "authentication error";
    case ReplyStatus::kBadReply: return "malformed reply";
    case ReplyStatus::kDisconnected: return "disconnected";
  }
  return "?";
}

Transport::Transport(int fd, size_t max_record)
    // A fragment's length has 31 bits: no record of ours may need more.
    : fd_(fd), max_record_(std::min<size_t>(max_record, 0x7fffffffu)) {
  int fl = fcntl(fd_, F_GETFL);
  if (fl >= 0) fcntl(fd_, F_SETFL, fl | O_NONBLOCK);
  next_xid_ = InitialXid();
}

Transport::~Transport() {
  FailAll();
  if (fd_ >= 0) close(fd_);
}

uint32_t Transport::Call(uint32_t prog, uint32_t vers, uint32_t proc,
                         const AuthSys *auth, const std::string &args,
                         ReplyFn done) {
  uint32_t xid = 0;
  Call(
      prog, vers, proc, auth,
      [&args](std::string *rec) {
        rec->append(args);
        return true;
      },
      std::move(done), &xid);
  return xid;
}

uint32_t Transport::NextXid() {
  uint32_t xid = next_xid_++;
  // (0 is never used: the first form of Call returns it for "not sent".)
  while (xid == 0 || pending_.count(xid)) xid = next_xid_++;
  return xid;
}

bool Transport::Call(uint32_t prog, uint32_t vers, uint32_t proc,
                     const AuthSys *auth, const EncodeFn &encode, ReplyFn done,
                     uint32_t *xid_out) {
  uint32_t xid = NextXid();
  std::string rec;
  rec.append(4, '\0');  // the marker, filled by Queue
  XdrOut x(&rec);
  PutCallHeader(&x, xid, prog, vers, proc);
  if (auth) {
    PutAuthSys(&x, *auth);
  } else {
    x.U32(kAuthNone);
    x.U32(0);
  }
  x.U32(kAuthNone);  // verifier
  x.U32(0);
  if (!encode(&rec)) return false;
  Pending p;
  p.done = std::move(done);
  if (!Queue(xid, std::move(rec), std::move(p))) return false;
  if (xid_out) *xid_out = xid;
  return true;
}

bool Transport::Call(uint32_t prog, uint32_t vers, uint32_t proc,
                     std::shared_ptr<CallSecurity> sec, const EncodeFn &encode,
                     ReplyFn done, uint32_t *xid_out) {
  uint32_t xid = NextXid();
  std::string rec;
  rec.append(4, '\0');
  XdrOut x(&rec);
  const size_t hdr = PutCallHeader(&x, xid, prog, vers, proc);
  Pending p;
  if (!sec->PutCredVerf(&rec, hdr, &p.seq) ||
      !sec->PutArgs(p.seq, encode, &rec))
    return false;
  p.done = std::move(done);
  p.sec = std::move(sec);
  if (!Queue(xid, std::move(rec), std::move(p))) return false;
  if (xid_out) *xid_out = xid;
  return true;
}

bool Transport::Queue(uint32_t xid, std::string rec, Pending p) {
  // The peer bounds what it takes as we do: a record over our own bound
  // (or over what one fragment can say) is refused here, not sent.
  if (rec.size() - 4 > max_record_) return false;
  XdrOut(&rec).PatchU32(0, kLastFragment | uint32_t(rec.size() - 4));
  pending_.emplace(xid, std::move(p));
  out_bytes_ += rec.size();
  out_.push_back(std::move(rec));
  return true;
}

bool Transport::Cancel(uint32_t xid) { return pending_.erase(xid) != 0; }

short Transport::WantEvents() const {
  return short((Throttled() ? 0 : POLLIN) | (out_.empty() ? 0 : POLLOUT));
}

size_t Transport::queued_bytes() const { return out_bytes_ - out_off_; }

void Transport::FailAll() {
  std::unordered_map<uint32_t, Pending> failed;
  failed.swap(pending_);
  for (auto &kv : failed) kv.second.done(ReplyStatus::kDisconnected, nullptr);
}

bool Transport::Fail(const std::string &why) {
  if (error_.empty()) error_ = why;
  return false;
}

bool Transport::Service(short revents) {
  if (!error_.empty()) return false;
  if (revents & (POLLERR | POLLNVAL)) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    return Fail(std::string("socket error: ") +
                (err ? strerror(err) : "POLLERR"));
  }
  // Read first: a reply may free the peer to read what we send next.
  if ((revents & (POLLIN | POLLHUP)) && !Throttled() && !ReadAll())
    return false;
  // Writes also when not asked: replies queued while parsing go at once.
  // Parsing paused at max_queued_ resumes as far as the socket took them.
  do {
    if (!Parse() || !WriteAll()) return false;
  } while (parse_paused_ && !Throttled());
  return true;
}

bool Transport::ReadAll() {
  for (;;) {
    if (in_off_ > 0 && in_off_ == in_.size()) {
      in_.clear();
      in_off_ = 0;
    }
    size_t have = in_.size();
    in_.resize(have + kReadChunk);
    ssize_t n = recv(fd_, &in_[have], kReadChunk, MSG_DONTWAIT);
    in_.resize(have + (n > 0 ? size_t(n) : 0));
    if (n > 0) {
      // Parse as we go: a large reply should not sit in the buffer whole
      // twice over.
      if (!Parse()) return false;
      if (parse_paused_) return true;  // backpressure: read no more
      continue;
    }
    if (n == 0) return Fail("connection closed by the peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno == EINTR) continue;
    return Fail(std::string("recv: ") + strerror(errno));
  }
}

bool Transport::WriteAll() {
  while (!out_.empty()) {
    const std::string &r = out_.front();
    ssize_t n = send(fd_, r.data() + out_off_, r.size() - out_off_,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      return Fail(std::string("send: ") + strerror(errno));
    }
    out_off_ += size_t(n);
    if (out_off_ == r.size()) {
      out_bytes_ -= r.size();
      out_.pop_front();
      out_off_ = 0;
    }
  }
  return true;
}

bool Transport::Parse() {
  parse_paused_ = false;
  while (in_.size() - in_off_ >= 4) {
    if (Throttled()) {
      parse_paused_ = true;
      break;
    }
    XdrIn m(in_.data() + in_off_, 4);
    uint32_t marker;
    m.U32(&marker);
    const size_t len = marker & ~kLastFragment;
    if (record_.size() + len > max_record_)
      return Fail("a record of more than " + std::to_string(max_record_) +
                  " bytes");
    if (in_.size() - in_off_ - 4 < len) break;  // the rest is on its way
    const char *frag = in_.data() + in_off_ + 4;
    in_off_ += 4 + len;
    if (!(marker & kLastFragment)) {
      record_.append(frag, len);
      continue;
    }
    bool ok;
    if (record_.empty()) {
      ok = Dispatch(frag, len);
    } else {
      record_.append(frag, len);
      std::string rec;
      rec.swap(record_);
      ok = Dispatch(rec.data(), rec.size());
    }
    if (!ok) return false;
  }
  // Drop what was parsed once it is most of the buffer.
  if (in_off_ > 0 && in_off_ >= in_.size() / 2) {
    in_.erase(0, in_off_);
    in_off_ = 0;
  }
  return true;
}

bool Transport::Dispatch(const char *rec, size_t len) {
  XdrIn in(rec, len);
  uint32_t xid, type;
  if (!in.U32(&xid) || !in.U32(&type))
    return Fail("a record too short for an RPC message");
  if (type == kMsgReply) {
    HandleReply(xid, &in);
    return true;
  }
  if (type == kMsgCall) {
    ServePeerCall(xid, &in);
    return true;
  }
  return Fail("an RPC message of unknown type " + std::to_string(type));
}

void Transport::HandleReply(uint32_t xid, XdrIn *in) {
  auto it = pending_.find(xid);
  if (it == pending_.end()) {
    dropped_replies_++;
    return;
  }
  Pending p = std::move(it->second);
  pending_.erase(it);
  ReplyFn &done = p.done;
  uint32_t stat, flavor, what;
  const char *verf;
  uint32_t verf_len;
  if (!in->U32(&stat)) return done(ReplyStatus::kBadReply, nullptr);
  if (stat == kMsgDenied) {
    if (!in->U32(&what)) return done(ReplyStatus::kBadReply, nullptr);
    if (what == kRejectAuthError) {
      uint32_t auth_stat;
      if (!in->U32(&auth_stat)) return done(ReplyStatus::kBadReply, nullptr);
      if (p.sec) p.sec->Refused(auth_stat);
      return done(ReplyStatus::kAuthError, nullptr);
    }
    return done(what == kRejectRpcMismatch ? ReplyStatus::kRpcMismatch
                                           : ReplyStatus::kBadReply,
                nullptr);
  }
  if (stat != kMsgAccepted || !in->U32(&flavor) ||
      !in->Opaque(&verf, &verf_len, kMaxAuthBytes) || !in->U32(&what))
    return done(ReplyStatus::kBadReply, nullptr);
  switch (what) {
    case kAcceptSuccess: {
      if (!p.sec) return done(ReplyStatus::kOk, in);
      std::string plain;
      XdrIn results = *in;
      if (!p.sec->OpenReply(p.seq, flavor, verf, verf_len, &results, &plain))
        return done(ReplyStatus::kBadReply, nullptr);
      return done(ReplyStatus::kOk, &results);
    }
    case kAcceptProgUnavail: return done(ReplyStatus::kProgUnavail, nullptr);
    case kAcceptProgMismatch: return done(ReplyStatus::kProgMismatch, nullptr);
    case kAcceptProcUnavail: return done(ReplyStatus::kProcUnavail, nullptr);
    case kAcceptGarbageArgs: return done(ReplyStatus::kGarbageArgs, nullptr);
    case kAcceptSystemErr: return done(ReplyStatus::kSystemErr, nullptr);
    default: return done(ReplyStatus::kBadReply, nullptr);
  }
}

void Transport::ServePeerCall(uint32_t xid, XdrIn *in) {
  PeerCall c;
  c.xid = xid;
  PeerSecurity::Call sc;
  sc.call = &c;
  sc.header = in->pos() - 8;  // the XID and the message type, read
  uint32_t rpcvers;
  std::string rec(4, '\0');
  XdrOut x(&rec);
  x.U32(xid);
  x.U32(kMsgReply);
  bool parsed = in->U32(&rpcvers) && in->U32(&c.prog) && in->U32(&c.vers) &&
                in->U32(&c.proc) && in->U32(&c.cred_flavor) &&
                in->Opaque(&sc.cred, &sc.cred_len, kMaxAuthBytes);
  if (parsed) sc.header_len = size_t(in->pos() - sc.header);
  parsed = parsed && in->U32(&sc.verf_flavor) &&
           in->Opaque(&sc.verf, &sc.verf_len, kMaxAuthBytes);
  if (parsed && rpcvers != kRpcVersion) {
    x.U32(kMsgDenied);
    x.U32(kRejectRpcMismatch);
    x.U32(kRpcVersion);
    x.U32(kRpcVersion);
    QueueRecord(std::move(rec));
    return;
  }
  if (parsed && c.cred_flavor == kAuthRpcsecGss) {
    if (ServeSecureCall(sc, in, &rec)) QueueRecord(std::move(rec));
    return;
  }
  ReplyStatus st = ReplyStatus::kGarbageArgs;
  std::string results;
  if (parsed) {
    st = ReplyStatus::kProgUnavail;
    if (handler_) st = handler_(c, in, &results);
  }
  if (st == ReplyStatus::kAuthError) {
    PutDenied(&x, kAuthTooWeak);
  } else {
    x.U32(kMsgAccepted);
    x.U32(kAuthNone);  // our verifier
    x.U32(0);
    PutAccepted(&x, &st, results, max_record_);
  }
  QueueRecord(std::move(rec));
}

bool Transport::ServeSecureCall(const PeerSecurity::Call &c, XdrIn *in,
                                std::string *rec) {
  XdrOut x(rec);
  if (peer_security_ == nullptr) {
    PutDenied(&x, kAuthBadCred);
    return true;
  }
  std::string plain, results;
  PeerSecurity::Reply reply;
  XdrIn args = *in;
  const PeerSecurity::Verdict v =
      peer_security_->Open(c, &args, &plain, &results, &reply);
  if (v == PeerSecurity::Verdict::kDrop) return false;
  if (v == PeerSecurity::Verdict::kDenied) {
    PutDenied(&x, reply.auth_stat);
    return true;
  }
  x.U32(kMsgAccepted);
  x.U32(reply.verf_flavor);
  x.Opaque(reply.verf);
  ReplyStatus st = v == PeerSecurity::Verdict::kGarbageArgs
                       ? ReplyStatus::kGarbageArgs
                       : ReplyStatus::kOk;
  if (v == PeerSecurity::Verdict::kServe) {
    std::string raw;
    st = handler_ ? handler_(*c.call, &args, &raw) : ReplyStatus::kProgUnavail;
    // Only a success's results are sealed (mismatch_info goes as it is).
    if (st == ReplyStatus::kOk && !peer_security_->Seal(reply, raw, &results))
      st = ReplyStatus::kSystemErr;
    if (st == ReplyStatus::kProgMismatch) results = raw;
    if (st == ReplyStatus::kAuthError) st = ReplyStatus::kSystemErr;
  }
  PutAccepted(&x, &st, results, max_record_);
  return true;
}

void Transport::QueueRecord(std::string rec) {
  XdrOut(&rec).PatchU32(0, kLastFragment | uint32_t(rec.size() - 4));
  out_bytes_ += rec.size();
  out_.push_back(std::move(rec));
}

}  // namespace rpc
}  // namespace nache
