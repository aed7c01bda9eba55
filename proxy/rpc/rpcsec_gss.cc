// See rpcsec_gss.h.
#include "rpc/rpcsec_gss.h"

namespace nache {
namespace rpc {

namespace {

constexpr uint32_t kGssVersion1 = 1;
// Bounds on what a reply may claim (a hostile server's lengths are never
// trusted): a context handle and a GSS token.
constexpr uint32_t kMaxHandle = 1024, kMaxToken = 64 * 1024;
constexpr uint32_t kMaxVerifier = 400;  // RFC 5531's MAX_AUTH_BYTES
// A wrapped body's bound: the transport's record bound caps it anyway.
constexpr uint32_t kMaxBody = 0x7fffffffu;

// rpc_gss_cred_t, version 1, as an opaque_auth.
void PutCred(XdrOut *x, GssProc proc, uint32_t seq, GssService service,
             const std::string &handle) {
  std::string body;
  XdrOut b(&body);
  b.U32(kGssVersion1);
  b.U32(uint32_t(proc));
  b.U32(seq);
  b.U32(uint32_t(service));
  b.Opaque(handle);
  x->U32(kAuthRpcsecGss);
  x->Opaque(body);
}

std::string SeqBytes(uint32_t seq) {
  std::string s;
  XdrOut(&s).U32(seq);
  return s;
}

}  // namespace

bool ParseGssService(const std::string &flavor, GssService *out) {
  if (flavor == "krb5") {
    *out = GssService::kNone;
  } else if (flavor == "krb5i") {
    *out = GssService::kIntegrity;
  } else if (flavor == "krb5p") {
    *out = GssService::kPrivacy;
  } else {
    return false;
  }
  return true;
}

const char *GssServiceName(GssService s) {
  switch (s) {
    case GssService::kNone: return "krb5";
    case GssService::kIntegrity: return "krb5i";
    case GssService::kPrivacy: return "krb5p";
  }
  return "?";
}

bool GssInitCall::PutCredVerf(std::string *rec, size_t, uint32_t *seq) {
  XdrOut x(rec);
  // The service of the context to be is the data calls' business; these
  // calls are sent as "none" (RFC 2203 5.2.2).
  PutCred(&x, handle_.empty() ? GssProc::kInit : GssProc::kContinueInit, 0,
          GssService::kNone, handle_);
  x.U32(0);  // AUTH_NONE verifier
  x.U32(0);
  *seq = 0;
  return true;
}

bool GssInitCall::PutArgs(uint32_t, const Transport::EncodeFn &encode,
                          std::string *rec) {
  return encode(rec);  // the token, as opaque<>
}

bool GssInitCall::OpenReply(uint32_t, uint32_t verf_flavor, const char *verf,
                            uint32_t verf_len, XdrIn *, std::string *) {
  verf_.clear();
  if (verf_flavor == kAuthRpcsecGss) verf_.assign(verf, verf_len);
  return true;
}

bool DecodeGssInitRes(XdrIn *in, GssInitRes *out) {
  return in->Opaque(&out->handle, kMaxHandle) && in->U32(&out->major) &&
         in->U32(&out->minor) && in->U32(&out->window) &&
         in->Opaque(&out->token, kMaxToken);
}

RpcsecGss::RpcsecGss(std::unique_ptr<GssContext> ctx, std::string handle,
                     uint32_t window, GssService service)
    : ctx_(std::move(ctx)),
      handle_(std::move(handle)),
      window_(window),
      service_(service) {}

bool RpcsecGss::CheckWindowVerifier(const std::string &verf) {
  std::string w = SeqBytes(window_);
  return !verf.empty() &&
         ctx_->VerifyMic(w.data(), w.size(), verf.data(), verf.size());
}

bool RpcsecGss::PutCredVerf(std::string *rec, size_t hdr, uint32_t *seq) {
  if (expired_ || next_seq_ >= kRpcsecGssMaxSeq) {
    expired_ = true;
    return false;
  }
  *seq = next_seq_++;
  XdrOut x(rec);
  PutCred(&x, GssProc::kData, *seq, service_, handle_);
  // The verifier: the MIC of the header from the XID through the
  // credential (RFC 2203 5.3.1).
  std::string mic;
  if (!ctx_->GetMic(rec->substr(hdr), &mic)) return false;
  x.U32(kAuthRpcsecGss);
  x.Opaque(mic);
  return true;
}

bool RpcsecGss::PutArgs(uint32_t seq, const Transport::EncodeFn &encode,
                        std::string *rec) {
  if (service_ == GssService::kNone) return encode(rec);
  // The sequence number, then the arguments: checksummed (integrity) or
  // wrapped (privacy) together (RFC 2203 5.3.2.2, 5.3.2.3).
  std::string body = SeqBytes(seq);
  if (!encode(&body)) return false;
  XdrOut x(rec);
  if (service_ == GssService::kIntegrity) {
    std::string mic;
    if (!ctx_->GetMic(body, &mic)) return false;
    x.Opaque(body);
    x.Opaque(mic);
    return true;
  }
  std::string token;
  if (!ctx_->Wrap(body, &token)) return false;
  x.Opaque(token);
  return true;
}

bool RpcsecGss::OpenReply(uint32_t seq, uint32_t verf_flavor, const char *verf,
                          uint32_t verf_len, XdrIn *results,
                          std::string *plain) {
  // The reply's verifier is the MIC of the call's sequence number: a reply
  // without it is not this context's server answering this call.
  std::string s = SeqBytes(seq);
  if (verf_flavor != kAuthRpcsecGss || verf_len > kMaxVerifier ||
      !ctx_->VerifyMic(s.data(), s.size(), verf, verf_len))
    return false;
  if (service_ == GssService::kNone) return true;
  const char *body;
  uint32_t body_len;
  if (!results->Opaque(&body, &body_len, kMaxBody)) return false;
  if (service_ == GssService::kIntegrity) {
    const char *mic;
    uint32_t mic_len;
    if (!results->Opaque(&mic, &mic_len, kMaxVerifier) ||
        !ctx_->VerifyMic(body, body_len, mic, mic_len))
      return false;
    plain->assign(body, body_len);
  } else if (!ctx_->Unwrap(body, body_len, plain)) {
    return false;
  }
  // The results start with the call's sequence number again.
  XdrIn in(plain->data(), plain->size());
  uint32_t echoed;
  if (!in.U32(&echoed) || echoed != seq) return false;
  *results = in;
  return true;
}

void RpcsecGss::Refused(uint32_t auth_stat) {
  if (auth_stat == kRpcsecGssCredProblem || auth_stat == kRpcsecGssCtxProblem)
    expired_ = true;
}

}  // namespace rpc
}  // namespace nache
