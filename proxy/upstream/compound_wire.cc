// A Compound on the wire: the XDR of the whole COMPOUND request and reply.
// Requests: NFSv4.0 goes through libnfs' generated COMPOUND4args encoder;
// NFSv4.1 and 4.2 put our own SEQUENCE (nfs41.cc) in front, each further
// operation is libnfs' 4.0 encoder, but OPEN by filehandle or EXCLUSIVE4_1,
// encoded here, and NFSv4.2's operations, whose arguments their builders
// encoded (compound.cc): libnfs 4.0.0 knows neither.
// Replies, in both minor versions, are decoded by our own bounded reader
// (compound_decode.cc), never by libnfs: they come from a server we do not
// trust with lengths.
//
// libnfs.h first: the other libnfs headers use what it defines.
// clang-format off
#include <nfsc/libnfs.h>
// clang-format on

#include <nfsc/libnfs-zdr.h>

#include <cstring>
#include <vector>

#include "rpc/xdr.h"
#include "upstream/compound.h"
#include "upstream/compound_impl.h"
#include "upstream/nfs41.h"

namespace nache {
namespace upstream {
namespace {

// Room beyond the compound's own size estimate (its bound is loose on
// purpose; the output is cut to what was encoded).
constexpr size_t kEncodeSlack = 4096;

// Runs a libnfs encoder over room bytes appended to out, then cuts out to
// what it wrote (or back to its old size on failure).
template <typename Fn>
bool AppendWithLibnfs(std::string *out, size_t room, Fn encode) {
  const size_t at = out->size();
  out->resize(at + room);
  ZDR z;
  zdrmem_create(&z, &(*out)[at], uint32_t(room), ZDR_ENCODE);
  bool ok = encode(&z);
  const uint32_t used = zdr_getpos(&z);
  zdr_destroy(&z);
  out->resize(ok ? at + used : at);
  return ok;
}

// An NFSv4.2 operation: its number, then the arguments its builder
// encoded (compound.cc).
void EncodeNfs42(rpc::XdrOut *x, const OpMeta &m) {
  x->U32(uint32_t(m.op));
  x->Raw(m.wire_args);
}

// An NFSv4.1 OPEN libnfs cannot encode (RFC 8881 18.16): of the current
// filehandle (CLAIM_FH, never a create), or an EXCLUSIVE4_1 create by name.
void EncodeOpen41(rpc::XdrOut *x, const OPEN4args &o, const OpMeta &m) {
  x->U32(uint32_t(Op::kOpen));
  x->U32(o.seqid);
  x->U32(o.share_access);
  x->U32(o.share_deny);
  x->U64(o.owner.clientid);
  x->Opaque(std::string(o.owner.owner.owner_val, o.owner.owner.owner_len));
  if (m.open_excl41) {
    x->U32(OPEN4_CREATE);
    x->U32(kCreateExclusive41);
    x->Fixed(o.openhow.openflag4_u.how.createhow4_u.createverf,
             NFS4_VERIFIER_SIZE);
    x->U32(uint32_t(m.excl41_bitmap.size()));
    for (uint32_t w : m.excl41_bitmap) x->U32(w);
    x->Opaque(m.excl41_attrs);
  } else {
    x->U32(OPEN4_NOCREATE);
  }
  if (m.open_by_fh) {
    x->U32(kClaimFh);
  } else {
    const component4 &f = o.claim.open_claim4_u.file;
    x->U32(CLAIM_NULL);
    x->Opaque(std::string(f.utf8string_val, f.utf8string_len));
  }
}

// Operations libnfs 4.0.0 cannot encode: NFSv4.2's, and 4.1's OPENs.
bool EncodedHere(const OpMeta &m) {
  return IsNfs42Op(uint32_t(m.op)) || m.open_by_fh || m.open_excl41;
}

}  // namespace

Compound &Compound::ReclaimComplete() {
  impl_->reclaim_complete = true;
  return *this;
}

bool Compound::EncodeWire(std::string *out, const nfs41::SequenceArgs *seq,
                          OwnerCodec *owners, uint32_t minor) {
  // NFSv4.2's operations exist in minor version 2 only.
  if ((seq == nullptr || minor < 2) && NeedsNfs42()) return false;
  if (seq == nullptr && NeedsNfs41()) return false;
  EncodeOwners(owners);
  const size_t room = EncodedSizeHint() + kEncodeSlack;
  if (impl_->reclaim_complete) {
    if (seq == nullptr || !impl_->args.empty()) return false;  // 4.1, alone
    rpc::XdrOut x(out);
    nfs41::EncodeCompoundHeader(&x, impl_->tag, 2, minor);
    nfs41::EncodeSequence(&x, *seq);
    nfs41::EncodeReclaimComplete(&x, false);
    return true;
  }
  if (seq == nullptr) {
    COMPOUND4args *args = Args();
    return AppendWithLibnfs(
        out, room, [args](ZDR *z) { return bool(zdr_COMPOUND4args(z, args)); });
  }
  const size_t at = out->size();
  rpc::XdrOut x(out);
  nfs41::EncodeCompoundHeader(&x, impl_->tag, uint32_t(1 + impl_->args.size()),
                              minor);
  nfs41::EncodeSequence(&x, *seq);
  // Runs of libnfs-encoded operations, one libnfs pass each, with the
  // NFSv4.2 operations between them encoded here.
  std::vector<nfs_argop4> &ops = impl_->args;
  const std::vector<OpMeta> &meta = impl_->meta;
  size_t i = 0;
  while (i < ops.size()) {
    if (meta[i].open_by_fh || meta[i].open_excl41) {
      EncodeOpen41(&x, ops[i].nfs_argop4_u.opopen, meta[i]);
      i++;
      continue;
    }
    if (IsNfs42Op(uint32_t(meta[i].op))) {
      EncodeNfs42(&x, meta[i]);
      i++;
      continue;
    }
    size_t end = i;
    while (end < ops.size() && !EncodedHere(meta[end])) end++;
    bool ok = AppendWithLibnfs(out, room, [&ops, i, end](ZDR *z) {
      for (size_t k = i; k < end; k++)
        if (!zdr_nfs_argop4(z, &ops[k])) return false;
      return true;
    });
    if (!ok) {
      out->resize(at);
      return false;
    }
    i = end;
  }
  return true;
}

bool Compound::DecodeWire(const char *p, size_t n, CompoundReply *out,
                          nfs41::SequenceRes *seq_res,
                          OwnerCodec *owners) const {
  rpc::XdrIn in(p, n);
  auto decode = [&]() {
    uint32_t status, nres;
    // (The reply header is the same in both minor versions.)
    if (!nfs41::DecodeCompoundReplyHeader(&in, &status, &nres)) return false;
    if (seq_res == nullptr) {
      if (impl_->reclaim_complete) return false;  // 4.1 only
      return DecodeResults(&in, status, nres, false, owners, out);
    }
    // SEQUENCE leads: one more result than this compound's operations.
    // *seq_res is written only once SEQUENCE decoded whole (the connection
    // reads an unwritten one as "outcome unknown" for the slot).
    nfs41::SequenceRes seq;
    if (nres == 0 || !nfs41::DecodeSequence(&in, &seq)) return false;
    *seq_res = seq;
    if (seq.status != kNfs4Ok) {
      // Not executed: SEQUENCE's failure is the compound's, alone.
      out->status = seq.status;
      return nres == 1 && status == seq.status;
    }
    if (impl_->reclaim_complete) {
      uint32_t rc_status;
      out->status = status;
      return nres == 2 &&
             nfs41::DecodeStatusOnly(&in, nfs41::kOpReclaimComplete,
                                     &rc_status) &&
             rc_status == status;
    }
    return DecodeResults(&in, status, nres - 1, true, owners, out);
  };
  out->status = kNfs4Ok;
  out->results.clear();
  if (decode()) return true;
  // The caller sees no half-decoded reply.
  out->status = kNfs4Ok;
  out->results.clear();
  return false;
}

}  // namespace upstream
}  // namespace nache
