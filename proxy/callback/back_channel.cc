// See back_channel.h.
#include "callback/back_channel.h"

#include <cstring>

#include "upstream/nfs41.h"
#include "util/log.h"

namespace nache {
namespace callback {

using rpc::ReplyStatus;
using rpc::XdrIn;
using rpc::XdrOut;
namespace nfs41 = upstream::nfs41;

namespace {

const char *const kComponent = "NACHE_DELEG";
constexpr uint32_t kCbNull = 0, kCbCompound = 1;
constexpr uint32_t kOpCbGetattr = 3, kOpCbRecall = 4, kOpCbIllegal = 10044;
constexpr uint32_t kMaxOps = 16;

}  // namespace

BackChannel::BackChannel(CallbackHandler *handler, uint32_t program)
    : handler_(handler), program_(program) {}

uint64_t BackChannel::calls() const {
  std::lock_guard<std::mutex> g(mu_);
  return calls_;
}

ReplyStatus BackChannel::Serve(const rpc::PeerCall &call, XdrIn *args,
                               std::string *results) {
  if (call.prog != program_) return ReplyStatus::kProgUnavail;
  if (call.vers != 1) return ReplyStatus::kProgMismatch;
  {
    std::lock_guard<std::mutex> g(mu_);
    calls_++;
  }
  handler_->OnContact();
  if (call.proc == kCbNull) return ReplyStatus::kOk;
  if (call.proc != kCbCompound) return ReplyStatus::kProcUnavail;
  Compound(args, results);
  return ReplyStatus::kOk;
}

void BackChannel::Compound(XdrIn *in, std::string *results) {
  const char *tag;
  uint32_t tag_len, minor, ident, nops;
  std::string ops;  // the results of the ops, after the header
  XdrOut o(&ops);
  uint32_t status = upstream::kNfs4Ok, done = 0;
  if (!in->Opaque(&tag, &tag_len, 1024) || !in->U32(&minor) ||
      !in->U32(&ident) || !in->U32(&nops)) {
    tag = "";
    tag_len = 0;
    nops = 0;
    status = upstream::kNfs4ErrBadxdr;
  } else if (minor != 1) {
    nops = 0;
    status = upstream::kNfs4ErrMinorVersMismatch;
  } else if (nops > kMaxOps) {
    nops = 0;
    status = upstream::kNfs4ErrResource;
  }
  bool retransmission = false, sequenced = false;
  // COMPOUND semantics: stop at the first op that fails.
  for (uint32_t i = 0; status == upstream::kNfs4Ok && i < nops; i++) {
    uint32_t op;
    if (!in->U32(&op)) {
      status = upstream::kNfs4ErrBadxdr;
      break;
    }
    done++;
    if (op == nfs41::kCbOpSequence) {
      nfs41::CbSequenceArgs a;
      if (!nfs41::DecodeCbSequenceArgs(in, &a)) {
        status = upstream::kNfs4ErrBadxdr;
      } else if (i != 0) {
        status = upstream::kNfs4ErrSequencePos;
      } else if (a.slotid != 0) {
        status = upstream::kNfs4ErrBadSlot;  // we offered one slot
      } else {
        std::lock_guard<std::mutex> g(mu_);
        if (last_seqid_ != 0 && a.sequenceid == last_seqid_ &&
            !last_reply_.empty()) {
          *results = last_reply_;  // the server resends: the same answer
          retransmission = true;
        } else if (last_seqid_ != 0 && a.sequenceid != last_seqid_ + 1) {
          status = upstream::kNfs4ErrSeqMisordered;
        } else {
          last_seqid_ = a.sequenceid;
          sequenced = true;
        }
      }
      if (retransmission) return;
      nfs41::EncodeCbSequenceRes(&o, status, a);
      continue;
    }
    if (i == 0) {
      status = upstream::kNfs4ErrOpNotInSession;  // CB_SEQUENCE must lead
      o.U32(op == kOpCbRecall || op == kOpCbGetattr ? op : kOpCbIllegal);
      o.U32(status);
      break;
    }
    if (op == kOpCbRecall) {
      upstream::StateId sid;
      bool truncate;
      const char *fh;
      uint32_t fh_len;
      if (!in->U32(&sid.seqid) || !in->Fixed(sid.other, 12) ||
          !in->Bool(&truncate) ||
          !in->Opaque(&fh, &fh_len, upstream::kMaxFhSize)) {
        status = upstream::kNfs4ErrBadxdr;
      } else {
        status = handler_->OnRecall(sid, truncate, upstream::Fh(fh, fh_len));
      }
      o.U32(kOpCbRecall);
      o.U32(status);
    } else if (op == kOpCbGetattr) {
      const char *fh;
      uint32_t fh_len, word0 = 0;
      bool ok = in->Opaque(&fh, &fh_len, upstream::kMaxFhSize) &&
                ReadBitmapWord0(in, &word0);
      uint64_t change = 0, size = 0;
      status = ok ? handler_->OnGetattr(upstream::Fh(fh, fh_len), &change,
                                        &size)
                  : upstream::kNfs4ErrBadxdr;
      o.U32(kOpCbGetattr);
      o.U32(status);
      if (status == upstream::kNfs4Ok) {
        std::string vals;
        uint32_t mask = CbGetattrAnswer(word0, change, size, &vals);
        if (mask) {
          o.U32(1);
          o.U32(mask);
        } else {
          o.U32(0);
        }
        o.Opaque(vals);
      }
    } else if (op == nfs41::kCbOpRecallAny) {
      uint32_t keep, nwords;
      bool ok = in->U32(&keep) && in->U32(&nwords) &&
                nwords <= in->left() / 4 && in->Skip(size_t(nwords) * 4);
      // A request to give back what we can spare: our delegations go back
      // on their own once unused (the open linger), so nothing is forced.
      status = ok ? upstream::kNfs4Ok : upstream::kNfs4ErrBadxdr;
      o.U32(nfs41::kCbOpRecallAny);
      o.U32(status);
    } else {
      status = upstream::kNfs4ErrOpIllegal;
      o.U32(kOpCbIllegal);
      o.U32(status);
      NACHE_LOG(kLogWarn, kComponent, "back channel: illegal callback op %u",
                unsigned(op));
    }
  }
  XdrOut r(results);
  r.U32(status);  // the last op's, as COMPOUND requires
  r.Opaque(tag, tag_len);
  r.U32(done);
  results->append(ops);
  if (!sequenced) return;
  std::lock_guard<std::mutex> g(mu_);
  last_reply_ = *results;
}

}  // namespace callback
}  // namespace nache
