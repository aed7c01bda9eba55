// See cb_ops.h.
#include "callback/cb_ops.h"

namespace nache {
namespace callback {

using rpc::XdrIn;
using rpc::XdrOut;

namespace {

// bitmap4: word 0 kept, the others stepped over.
bool ReadBitmapWord0(XdrIn *in, uint32_t *word0) {
  uint32_t n;
  if (!in->U32(&n) || n > in->left() / 4) return false;
  *word0 = 0;
  if (n > 0) (void)in->U32(word0);  // cannot fail: n words are there
  return in->Skip(size_t(n > 0 ? n - 1 : 0) * 4);
}

bool ReadFh(XdrIn *in, upstream::Fh *fh) {
  return in->Opaque(fh, uint32_t(upstream::kMaxFhSize));
}

}  // namespace

rpc::ReplyStatus CheckCbProgram(const rpc::PeerCall &call, uint32_t program,
                                std::string *results) {
  if (call.prog != program) return rpc::ReplyStatus::kProgUnavail;
  if (call.vers == 1) return rpc::ReplyStatus::kOk;
  XdrOut x(results);
  x.U32(1);  // the lowest version served
  x.U32(1);  // and the highest
  return rpc::ReplyStatus::kProgMismatch;
}

bool ReadCbRecallArgs(XdrIn *in, CbRecallArgs *a) {
  return in->U32(&a->stateid.seqid) &&
         in->Fixed(a->stateid.other, sizeof(a->stateid.other)) &&
         in->Bool(&a->truncate) && ReadFh(in, &a->fh);
}

bool ReadCbGetattrArgs(XdrIn *in, CbGetattrArgs *a) {
  return ReadFh(in, &a->fh) && ReadBitmapWord0(in, &a->word0);
}

uint32_t ServeCbRecall(CallbackHandler *handler, const CbRecallArgs &a,
                       XdrOut *out) {
  const uint32_t status = handler->OnRecall(a.stateid, a.truncate, a.fh);
  PutCbOpStatus(out, kOpCbRecall, status);
  return status;
}

uint32_t ServeCbGetattr(CallbackHandler *handler, const CbGetattrArgs &a,
                        XdrOut *out) {
  uint64_t change = 0, size = 0;
  const uint32_t status = handler->OnGetattr(a.fh, &change, &size);
  PutCbOpStatus(out, kOpCbGetattr, status);
  if (status != upstream::kNfs4Ok) return status;
  constexpr uint32_t kChangeBit = 1u << 3;  // FATTR4_CHANGE in word 0
  constexpr uint32_t kSizeBit = 1u << 4;    // FATTR4_SIZE in word 0
  const uint32_t mask = a.word0 & (kChangeBit | kSizeBit);
  // fattr4: the bitmap (no words when nothing is returned), then the
  // values as one opaque, in bit order.
  if (mask != 0) {
    out->U32(1);
    out->U32(mask);
  } else {
    out->U32(0);
  }
  std::string vals;
  XdrOut v(&vals);
  if (mask & kChangeBit) v.U64(change);
  if (mask & kSizeBit) v.U64(size);
  out->Opaque(vals);
  return status;
}

void PutCbOpStatus(XdrOut *out, uint32_t op, uint32_t status) {
  out->U32(op);
  out->U32(status);
}

void PutCbCompoundRes(std::string *out, uint32_t status, const char *tag,
                      uint32_t tag_len, uint32_t nres, const std::string &ops) {
  XdrOut x(out);
  x.U32(status);
  x.Opaque(tag, tag_len);
  x.U32(nres);
  out->append(ops);
}

}  // namespace callback
}  // namespace nache
