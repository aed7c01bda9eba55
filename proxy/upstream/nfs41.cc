// See nfs41.h. XDR as RFC 8881 section 18 and 20 define it.
#include "upstream/nfs41.h"

#include <algorithm>

namespace nache {
namespace upstream {
namespace nfs41 {

using rpc::XdrIn;
using rpc::XdrOut;

namespace {

constexpr uint32_t kOpaqueLimit = 1024;  // NFS4_OPAQUE_LIMIT
constexpr uint32_t kAuthNone = 0, kAuthSys = 1;
constexpr uint32_t kSp4None = 0, kSp4MachCred = 1;

void PutChannelAttrs(XdrOut *x, const ChannelAttrs &c) {
  x->U32(c.header_pad);
  x->U32(c.max_request);
  x->U32(c.max_response);
  x->U32(c.max_response_cached);
  x->U32(c.max_operations);
  x->U32(c.max_requests);
  x->U32(0);  // ca_rdma_ird<1>: none
}

bool GetChannelAttrs(XdrIn *in, ChannelAttrs *c) {
  uint32_t nird, ird;
  if (!in->U32(&c->header_pad) || !in->U32(&c->max_request) ||
      !in->U32(&c->max_response) || !in->U32(&c->max_response_cached) ||
      !in->U32(&c->max_operations) || !in->U32(&c->max_requests) ||
      !in->U32(&nird) || nird > 1)
    return false;
  return nird == 0 || in->U32(&ird);
}

bool GetSessionId(XdrIn *in, SessionId *s) {
  return in->Fixed(s->data(), s->size());
}

// bitmap4, skipped.
bool SkipBitmap(XdrIn *in) {
  uint32_t n;
  return in->U32(&n) && n <= in->left() / 4 && in->Skip(size_t(n) * 4);
}

// An operation's result starts with its number and status; false unless
// the number is op.
bool ResultHead(XdrIn *in, uint32_t op, uint32_t *status) {
  uint32_t got;
  return in->U32(&got) && got == op && in->U32(status);
}

}  // namespace

void EncodeCompoundHeader(XdrOut *x, const std::string &tag, uint32_t nops,
                          uint32_t minor) {
  x->Opaque(tag);
  x->U32(minor);
  x->U32(nops);
}

bool DecodeCompoundReplyHeader(XdrIn *in, uint32_t *status, uint32_t *nres) {
  const char *tag;
  uint32_t len;
  return in->U32(status) && in->Opaque(&tag, &len, kOpaqueLimit) &&
         in->U32(nres);
}

void EncodeExchangeId(XdrOut *x, const ExchangeIdArgs &a) {
  x->U32(kOpExchangeId);
  x->Fixed(a.verifier.data(), a.verifier.size());
  x->Opaque(a.owner);
  x->U32(a.flags);
  x->U32(kSp4None);
  if (a.impl_domain.empty() && a.impl_name.empty()) {
    x->U32(0);
    return;
  }
  x->U32(1);
  x->Opaque(a.impl_domain);
  x->Opaque(a.impl_name);
  x->U64(0);  // nii_date: seconds
  x->U32(0);  // nanoseconds
}

bool DecodeExchangeId(XdrIn *in, ExchangeIdRes *r) {
  if (!ResultHead(in, kOpExchangeId, &r->status)) return false;
  if (r->status != 0) return true;
  uint32_t nimpl;
  if (!in->U64(&r->clientid) || !in->U32(&r->sequenceid) ||
      !in->U32(&r->flags) || !in->U32(&r->state_protect))
    return false;
  if (r->state_protect == kSp4MachCred) {
    if (!SkipBitmap(in) || !SkipBitmap(in)) return false;
  } else if (r->state_protect != kSp4None) {
    return false;  // SSV: never asked for
  }
  if (!in->U64(&r->server_minor_id) ||
      !in->Opaque(&r->server_major_id, kOpaqueLimit) ||
      !in->Opaque(&r->server_scope, kOpaqueLimit) || !in->U32(&nimpl) ||
      nimpl > 1)
    return false;
  if (nimpl == 1) {
    std::string domain, name;
    uint64_t secs;
    uint32_t nsecs;
    if (!in->Opaque(&domain, kOpaqueLimit) ||
        !in->Opaque(&name, kOpaqueLimit) || !in->U64(&secs) || !in->U32(&nsecs))
      return false;
  }
  return true;
}

void EncodeCreateSession(XdrOut *x, const CreateSessionArgs &a) {
  x->U32(kOpCreateSession);
  x->U64(a.clientid);
  x->U32(a.sequenceid);
  x->U32(a.flags);
  PutChannelAttrs(x, a.fore);
  PutChannelAttrs(x, a.back);
  x->U32(a.cb_program);
  // csa_sec_parms: AUTH_SYS, then AUTH_NONE, also under Kerberos: Linux
  // knfsd refuses RPCSEC_GSS here (NFS4ERR_ENCR_ALG_UNSUPP); the back
  // channel is our own connection (config/README.md).
  x->U32(2);
  x->U32(kAuthSys);
  x->U32(0);  // stamp
  x->Opaque(a.cb_machine.data(), std::min<size_t>(a.cb_machine.size(), 255));
  x->U32(a.cb_uid);
  x->U32(a.cb_gid);
  x->U32(0);  // no supplementary groups
  x->U32(kAuthNone);
}

bool DecodeCreateSession(XdrIn *in, CreateSessionRes *r) {
  if (!ResultHead(in, kOpCreateSession, &r->status)) return false;
  if (r->status != 0) return true;
  return GetSessionId(in, &r->sessionid) && in->U32(&r->sequenceid) &&
         in->U32(&r->flags) && GetChannelAttrs(in, &r->fore) &&
         GetChannelAttrs(in, &r->back);
}

void EncodeSequence(XdrOut *x, const SequenceArgs &a) {
  x->U32(kOpSequence);
  x->Fixed(a.sessionid.data(), a.sessionid.size());
  x->U32(a.sequenceid);
  x->U32(a.slotid);
  x->U32(a.highest_slotid);
  x->Bool(a.cachethis);
}

bool DecodeSequence(XdrIn *in, SequenceRes *r) {
  if (!ResultHead(in, kOpSequence, &r->status)) return false;
  if (r->status != 0) return true;
  return GetSessionId(in, &r->sessionid) && in->U32(&r->sequenceid) &&
         in->U32(&r->slotid) && in->U32(&r->highest_slotid) &&
         in->U32(&r->target_highest_slotid) && in->U32(&r->status_flags);
}

void EncodeBindConnToSession(XdrOut *x, const SessionId &s, uint32_t dir) {
  x->U32(kOpBindConnToSession);
  x->Fixed(s.data(), s.size());
  x->U32(dir);
  x->Bool(false);  // not RDMA
}

bool DecodeBindConnToSession(XdrIn *in, BindConnRes *r) {
  if (!ResultHead(in, kOpBindConnToSession, &r->status)) return false;
  if (r->status != 0) return true;
  bool rdma;
  return GetSessionId(in, &r->sessionid) && in->U32(&r->dir) && in->Bool(&rdma);
}

void EncodeReclaimComplete(XdrOut *x, bool one_fs) {
  x->U32(kOpReclaimComplete);
  x->Bool(one_fs);
}

void EncodeDestroySession(XdrOut *x, const SessionId &s) {
  x->U32(kOpDestroySession);
  x->Fixed(s.data(), s.size());
}

void EncodeDestroyClientid(XdrOut *x, uint64_t clientid) {
  x->U32(kOpDestroyClientid);
  x->U64(clientid);
}

bool DecodeStatusOnly(XdrIn *in, uint32_t op, uint32_t *status) {
  return ResultHead(in, op, status);
}

bool DecodeCbSequenceArgs(XdrIn *in, CbSequenceArgs *a) {
  uint32_t nlists;
  if (!GetSessionId(in, &a->sessionid) || !in->U32(&a->sequenceid) ||
      !in->U32(&a->slotid) || !in->U32(&a->highest_slotid) ||
      !in->Bool(&a->cachethis) || !in->U32(&nlists))
    return false;
  // referring_call_list4: a session id and (sequence id, slot id) pairs.
  for (uint32_t i = 0; i < nlists; i++) {
    uint32_t ncalls;
    if (!in->Skip(16) || !in->U32(&ncalls) || ncalls > in->left() / 8 ||
        !in->Skip(size_t(ncalls) * 8))
      return false;
  }
  return true;
}

void EncodeCbSequenceRes(XdrOut *x, uint32_t status, const CbSequenceArgs &a) {
  x->U32(kCbOpSequence);
  x->U32(status);
  if (status != 0) return;
  x->Fixed(a.sessionid.data(), a.sessionid.size());
  x->U32(a.sequenceid);
  x->U32(a.slotid);
  x->U32(a.highest_slotid);
  x->U32(a.highest_slotid);  // target: as many as the server uses
}

}  // namespace nfs41
}  // namespace upstream
}  // namespace nache
