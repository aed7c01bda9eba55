// See rpcsec_gss_server.h.
#include "rpc/rpcsec_gss_server.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace nache {
namespace rpc {

namespace {

constexpr uint32_t kGssVersion1 = 1;
constexpr uint32_t kNullProc = 0;
// auth_stat values (RFC 5531) of our refusals.
constexpr uint32_t kAuthBadCred = 1, kAuthTooWeak = 5;
// A GSS-API major status for rpc_gss_init_res: GSS_S_FAILURE.
constexpr uint32_t kGssFailure = 13u << 16;
// Our handles are 8 bytes; a credential's is read up to this many (more
// is no handle of ours, and a credential too long for the transport's
// 400 bytes never reaches us).
constexpr uint32_t kMaxHandle = 64;
// A context-creation token: the callback service's record bound (64 KiB)
// caps it anyway.
constexpr uint32_t kMaxToken = 64 * 1024;
constexpr uint32_t kMaxBody = 0x7fffffffu;

std::string SeqBytes(uint32_t seq) {
  std::string s;
  XdrOut(&s).U32(seq);
  return s;
}

std::string HandleOf(uint64_t id) {
  std::string s;
  XdrOut(&s).U64(id);
  return s;
}

// "svc/host@REALM" (or, allowed_hostbased, "svc@host" with realm "*").
struct PrincipalParts {
  std::string service, host, realm;
};
bool SplitPrincipal(const std::string &p, bool allow_hostbased,
                    PrincipalParts *out) {
  const size_t at = p.rfind('@'), slash = p.find('/');
  if (at == std::string::npos || at == 0 || at + 1 == p.size()) return false;
  if (slash == std::string::npos) {
    if (!allow_hostbased) return false;
    *out = {p.substr(0, at), p.substr(at + 1), "*"};
    return true;
  }
  if (slash == 0 || slash + 1 >= at || p.find('/', slash + 1) < at)
    return false;
  *out = {p.substr(0, slash), p.substr(slash + 1, at - slash - 1),
          p.substr(at + 1)};
  return true;
}

bool SameHost(const std::string &a, const std::string &b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(uint8_t(x)) == std::tolower(uint8_t(y));
         });
}

// rpc_gss_init_res.
void PutInitRes(std::string *out, const std::string &handle, uint32_t major,
                uint32_t window, const std::string &token) {
  XdrOut x(out);
  x.Opaque(handle);
  x.U32(major);
  x.U32(0);  // minor: the mechanism's, not the peer's business
  x.U32(window);
  x.Opaque(token);
}

}  // namespace

bool PrincipalAllowed(const std::string &allowed,
                      const std::string &principal) {
  PrincipalParts a, p;
  if (!SplitPrincipal(allowed, true, &a) ||
      !SplitPrincipal(principal, false, &p))
    return false;
  return a.service == p.service && SameHost(a.host, p.host) &&
         (a.realm == "*" || a.realm == p.realm);
}

GssServer::GssServer(GssServerOptions o)
    : opts_(std::move(o)), next_id_(uint64_t(InitialXid()) << 32) {}

PeerSecurity::Verdict GssServer::Deny(Reply *reply, uint32_t auth_stat) {
  refused_calls_.fetch_add(1);
  reply->auth_stat = auth_stat;
  return Verdict::kDenied;
}

GssServer::Context *GssServer::Find(const std::string &handle, uint64_t *id) {
  XdrIn in(handle.data(), handle.size());
  if (handle.size() != 8 || !in.U64(id)) return nullptr;
  auto it = contexts_.find(*id);
  return it == contexts_.end() ? nullptr : &it->second;
}

PeerSecurity::Verdict GssServer::Open(const Call &c, XdrIn *args,
                                      std::string *plain, std::string *results,
                                      Reply *reply) {
  // rpc_gss_cred_t: version, procedure, sequence number, service, handle.
  XdrIn cred(c.cred, c.cred_len);
  uint32_t version, proc, seq, service;
  std::string handle;
  if (!cred.U32(&version) || version != kGssVersion1 || !cred.U32(&proc) ||
      !cred.U32(&seq) || !cred.U32(&service) ||
      !cred.Opaque(&handle, kMaxHandle) || cred.left() != 0)
    return Deny(reply, kAuthBadCred);
  switch (GssProc(proc)) {
    case GssProc::kInit:
    case GssProc::kContinueInit:
      return Init(c, proc, handle, args, results, reply);
    case GssProc::kData:
    case GssProc::kDestroy: {
      const Verdict v = Data(c, proc, seq, service, handle, args, plain, reply);
      if (v != Verdict::kServe || GssProc(proc) != GssProc::kDestroy) return v;
      // The context goes once its last reply is sealed (void results).
      if (!Seal(*reply, std::string(), results)) results->clear();
      contexts_.erase(reply->context);
      return Verdict::kAnswered;
    }
  }
  return Deny(reply, kAuthBadCred);
}

PeerSecurity::Verdict GssServer::Init(const Call &c, uint32_t proc,
                                      const std::string &handle, XdrIn *args,
                                      std::string *results, Reply *reply) {
  std::string token, out, err;
  // Context creation goes to the NULL procedure (RFC 2203 5.2.2).
  if (c.call->proc != kNullProc || !args->Opaque(&token, kMaxToken))
    return Deny(reply, kAuthBadCred);
  uint64_t id = 0;
  Context *ctx = nullptr;
  if (GssProc(proc) == GssProc::kInit) {
    if (!handle.empty()) return Deny(reply, kAuthBadCred);
    while (!contexts_.empty() && contexts_.size() >= opts_.max_contexts)
      contexts_.erase(contexts_.begin());  // the oldest
    id = next_id_++;
    ctx = &contexts_[id];
    ctx->acceptor = opts_.new_acceptor();
    if (!ctx->acceptor) {
      contexts_.erase(id);
      return Deny(reply, kRpcsecGssCredProblem);
    }
  } else {
    ctx = Find(handle, &id);
    if (ctx == nullptr || !ctx->acceptor)
      return Deny(reply, kRpcsecGssCredProblem);
  }
  const GssAcceptor::Step step = ctx->acceptor->Next(token, &out, &err);
  if (step == GssAcceptor::Step::kFailed) {
    contexts_.erase(id);
    if (opts_.log) opts_.log("RPCSEC_GSS context refused: " + err);
    PutInitRes(results, std::string(), kGssFailure, 0, out);
    return Verdict::kAnswered;
  }
  if (step == GssAcceptor::Step::kContinue) {
    PutInitRes(results, HandleOf(id), kGssContinueNeeded, kWindow, out);
    return Verdict::kAnswered;
  }
  const std::string principal = ctx->acceptor->peer();
  if (!PrincipalAllowed(opts_.allowed_principal, principal)) {
    contexts_.erase(id);
    refused_principals_.fetch_add(1);
    if (opts_.log)
      opts_.log("RPCSEC_GSS context of " + principal + " refused: only " +
                opts_.allowed_principal + " may call us back");
    if (opts_.on_refused_principal) opts_.on_refused_principal(principal);
    return Deny(reply, kAuthBadCred);
  }
  ctx->gss = ctx->acceptor->TakeContext();
  ctx->acceptor.reset();
  ctx->principal = principal;
  // The reply's verifier, the MIC of the window, proves we hold the
  // context (RFC 2203 5.2.3.1).
  if (!ctx->gss || !ctx->gss->GetMic(SeqBytes(kWindow), &reply->verf)) {
    contexts_.erase(id);
    return Deny(reply, kRpcsecGssCredProblem);
  }
  reply->verf_flavor = kAuthRpcsecGss;
  established_.fetch_add(1);
  if (opts_.on_established) opts_.on_established();
  PutInitRes(results, HandleOf(id), kGssComplete, kWindow, out);
  return Verdict::kAnswered;
}

PeerSecurity::Verdict GssServer::Data(const Call &c, uint32_t proc,
                                      uint32_t seq, uint32_t service,
                                      const std::string &handle, XdrIn *args,
                                      std::string *plain, Reply *reply) {
  uint64_t id = 0;
  Context *ctx = Find(handle, &id);
  if (ctx == nullptr || !ctx->gss) return Deny(reply, kRpcsecGssCredProblem);
  // The verifier: the MIC of the header from the XID through the
  // credential (RFC 2203 5.3.1); one that does not check is
  // RPCSEC_GSS_CREDPROBLEM (5.3.3.4.2).
  if (c.verf_flavor != kAuthRpcsecGss ||
      !ctx->gss->VerifyMic(c.header, c.header_len, c.verf, c.verf_len))
    return Deny(reply, kRpcsecGssCredProblem);
  if (seq >= kRpcsecGssMaxSeq) return Deny(reply, kRpcsecGssCtxProblem);
  if (service < uint32_t(GssService::kNone) ||
      service > uint32_t(GssService::kPrivacy))
    return Deny(reply, kAuthBadCred);
  if (service < uint32_t(opts_.min_service)) return Deny(reply, kAuthTooWeak);
  // Below the window, or seen already: silently dropped (5.3.3.1).
  if (!Fresh(ctx, seq)) {
    dropped_calls_.fetch_add(1);
    return Verdict::kDrop;
  }
  if (!ctx->gss->GetMic(SeqBytes(seq), &reply->verf))
    return Deny(reply, kRpcsecGssCtxProblem);
  reply->verf_flavor = kAuthRpcsecGss;
  reply->context = id;
  reply->seq = seq;
  reply->service = service;
  if (GssProc(proc) == GssProc::kData &&
      !OpenArgs(ctx, seq, service, args, plain))
    return Verdict::kGarbageArgs;
  return Verdict::kServe;
}

bool GssServer::Fresh(Context *ctx, uint32_t seq) {
  if (seq > ctx->seq_max) {
    const uint32_t ahead = seq - ctx->seq_max;
    if (ahead >= kWindow) {
      ctx->seen.reset();
    } else {
      ctx->seen <<= ahead;
    }
    ctx->seen.set(0);
    ctx->seq_max = seq;
    return true;
  }
  const uint32_t behind = ctx->seq_max - seq;
  if (behind >= kWindow || ctx->seen.test(behind)) return false;
  ctx->seen.set(behind);
  return true;
}

bool GssServer::OpenArgs(Context *ctx, uint32_t seq, uint32_t service,
                         XdrIn *args, std::string *plain) {
  if (GssService(service) == GssService::kNone) return true;
  // The sequence number, then the arguments: checksummed (integrity) or
  // wrapped (privacy) together (RFC 2203 5.3.2.2, 5.3.2.3).
  const char *body;
  uint32_t body_len;
  if (!args->Opaque(&body, &body_len, kMaxBody)) return false;
  if (GssService(service) == GssService::kIntegrity) {
    const char *mic;
    uint32_t mic_len;
    if (!args->Opaque(&mic, &mic_len, kMaxBody) ||
        !ctx->gss->VerifyMic(body, body_len, mic, mic_len))
      return false;
    plain->assign(body, body_len);
  } else if (!ctx->gss->Unwrap(body, body_len, plain)) {
    return false;
  }
  XdrIn in(plain->data(), plain->size());
  uint32_t inner;
  if (!in.U32(&inner) || inner != seq) return false;
  *args = in;
  return true;
}

bool GssServer::Seal(const Reply &reply, const std::string &results,
                     std::string *out) {
  auto it = contexts_.find(reply.context);
  if (it == contexts_.end() || !it->second.gss) return false;
  GssContext *gss = it->second.gss.get();
  if (GssService(reply.service) == GssService::kNone) {
    out->append(results);
    return true;
  }
  std::string body = SeqBytes(reply.seq) + results, sealed;
  XdrOut x(out);
  if (GssService(reply.service) == GssService::kIntegrity) {
    if (!gss->GetMic(body, &sealed)) return false;
    x.Opaque(body);
    x.Opaque(sealed);
    return true;
  }
  if (!gss->Wrap(body, &sealed)) return false;
  x.Opaque(sealed);
  return true;
}

}  // namespace rpc
}  // namespace nache
