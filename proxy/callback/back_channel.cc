// See back_channel.h.
#include "callback/back_channel.h"

#include <algorithm>
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

}  // namespace

BackChannel::BackChannel(CallbackHandler *handler, uint32_t program)
    : handler_(handler), program_(program) {}

void BackChannel::SetSession(const nfs41::SessionId &session, uint32_t slots) {
  MutexLock g(&mu_);
  told_ = true;
  have_session_ = true;
  session_ = session;
  // Every slot at sequence id 0, nothing cached: a reply of the old
  // session must never answer a call of the new one.
  slots_.assign(std::max<uint32_t>(slots, 1), Slot());
}

uint64_t BackChannel::calls() const {
  MutexLock g(&mu_);
  return calls_;
}

ReplyStatus BackChannel::Serve(const rpc::PeerCall &call, XdrIn *args,
                               std::string *results) {
  const ReplyStatus program = CheckCbProgram(call, program_, results);
  if (program != ReplyStatus::kOk) return program;
  {
    MutexLock g(&mu_);
    calls_++;
  }
  handler_->OnContact();
  if (call.proc == kCbProcNull) return ReplyStatus::kOk;
  if (call.proc != kCbProcCompound) return ReplyStatus::kProcUnavail;
  Compound(args, results);
  return ReplyStatus::kOk;
}

void BackChannel::Compound(XdrIn *in, std::string *results) {
  // results already holds the RPC reply header (with this call's XID):
  // what follows is ours, and only that is cached.
  const size_t body_at = results->size();
  const char *tag;
  uint32_t tag_len, minor, ident, nops;
  std::string ops;  // the results of the ops, after the header
  XdrOut o(&ops);
  uint32_t status = upstream::kNfs4Ok, done = 0;
  if (!in->Opaque(&tag, &tag_len, kMaxCbTag) || !in->U32(&minor) ||
      !in->U32(&ident) || !in->U32(&nops)) {
    tag = "";
    tag_len = 0;
    nops = 0;
    status = upstream::kNfs4ErrBadxdr;
  } else if (minor != 1 && minor != 2) {
    // (An NFSv4.2 session's server calls back in 4.2: the same operations.)
    nops = 0;
    status = upstream::kNfs4ErrMinorVersMismatch;
  } else if (nops > kMaxCbOps) {
    nops = 0;
    status = upstream::kNfs4ErrResource;
  }
  bool sequenced = false;
  nfs41::SessionId session{};  // the slot sequenced: session, id, seqid
  uint32_t slotid = 0, seqid = 0;
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
      } else {
        MutexLock g(&mu_);
        if (!told_ && (!have_session_ || a.sessionid != session_)) {
          // Never told the session: the one named is taken as new.
          have_session_ = true;
          session_ = a.sessionid;
          slots_.assign(slots_.size(), Slot());
        }
        if (!have_session_ || a.sessionid != session_) {
          status = upstream::kNfs4ErrBadSession;  // not the current one
        } else if (a.slotid >= slots_.size()) {
          status = upstream::kNfs4ErrBadSlot;
        } else {
          Slot &s = slots_[a.slotid];
          // (Unsigned: the id after 0xffffffff is 0, RFC 8881 2.10.6.1.)
          if (s.seqid != 0 && a.sequenceid == s.seqid) {
            if (s.reply.empty()) {
              status = upstream::kNfs4ErrDelay;  // the first still runs
            } else {
              // The server resends: the same answer, under the XID of the
              // resend, which the header before body_at carries.
              results->append(s.reply);
              return;
            }
          } else if (a.sequenceid != s.seqid + 1) {
            status = upstream::kNfs4ErrSeqMisordered;
          } else {
            s.seqid = a.sequenceid;
            s.reply.clear();
            sequenced = true;
            session = a.sessionid;
            slotid = a.slotid;
            seqid = a.sequenceid;
          }
          // Our own table's highest slot, for the server's next calls.
          a.highest_slotid = uint32_t(slots_.size() - 1);
        }
      }
      nfs41::EncodeCbSequenceRes(&o, status, a);
      continue;
    }
    if (i == 0) {
      status = upstream::kNfs4ErrOpNotInSession;  // CB_SEQUENCE must lead
      PutCbOpStatus(&o,
                    op == kOpCbRecall || op == kOpCbGetattr ? op : kOpCbIllegal,
                    status);
      break;
    }
    if (op == kOpCbRecall) {
      CbRecallArgs a;
      if (ReadCbRecallArgs(in, &a)) {
        status = ServeCbRecall(handler_, a, &o);
      } else {
        status = upstream::kNfs4ErrBadxdr;
        PutCbOpStatus(&o, op, status);
      }
    } else if (op == kOpCbGetattr) {
      CbGetattrArgs a;
      if (ReadCbGetattrArgs(in, &a)) {
        status = ServeCbGetattr(handler_, a, &o);
      } else {
        status = upstream::kNfs4ErrBadxdr;
        PutCbOpStatus(&o, op, status);
      }
    } else if (op == nfs41::kCbOpRecallAny) {
      uint32_t keep, nwords;
      bool ok = in->U32(&keep) && in->U32(&nwords) &&
                nwords <= in->left() / 4 && in->Skip(size_t(nwords) * 4);
      // A request to give back what we can spare: our delegations go back
      // on their own once unused (the open linger), so nothing is forced.
      status = ok ? upstream::kNfs4Ok : upstream::kNfs4ErrBadxdr;
      PutCbOpStatus(&o, op, status);
    } else {
      status = upstream::kNfs4ErrOpIllegal;
      PutCbOpStatus(&o, kOpCbIllegal, status);
      NACHE_LOG(kLogWarn, kComponent, "back channel: illegal callback op %u",
                unsigned(op));
    }
  }
  PutCbCompoundRes(results, status, tag, tag_len, done, ops);
  if (!sequenced) return;
  MutexLock g(&mu_);
  // Unless a new session came meanwhile: its slots start empty.
  if (have_session_ && session_ == session && slotid < slots_.size() &&
      slots_[slotid].seqid == seqid)
    slots_[slotid].reply = results->substr(body_at);
}

}  // namespace callback
}  // namespace nache
