// A Compound on the wire: the XDR of the whole COMPOUND request and reply.
// Requests: NFSv4.0 goes through libnfs' generated COMPOUND4args encoder;
// NFSv4.1 puts our own SEQUENCE (nfs41.cc) in front, each further
// operation is libnfs' 4.0 encoder. Replies, in both minor versions, are
// decoded by our own bounded reader (compound_decode.cc), never by libnfs:
// they come from a server we do not trust with lengths.
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

}  // namespace

Compound &Compound::ReclaimComplete() {
  impl_->reclaim_complete = true;
  return *this;
}

bool Compound::EncodeWire(std::string *out, const nfs41::SequenceArgs *seq,
                          OwnerCodec *owners) {
  EncodeOwners(owners);
  const size_t room = EncodedSizeHint() + kEncodeSlack;
  if (impl_->reclaim_complete) {
    if (seq == nullptr || !impl_->args.empty()) return false;  // 4.1, alone
    rpc::XdrOut x(out);
    nfs41::EncodeCompoundHeader(&x, impl_->tag, 2);
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
  nfs41::EncodeCompoundHeader(&x, impl_->tag, uint32_t(1 + impl_->args.size()));
  nfs41::EncodeSequence(&x, *seq);
  std::vector<nfs_argop4> &ops = impl_->args;
  bool ok = AppendWithLibnfs(out, room, [&ops](ZDR *z) {
    for (nfs_argop4 &op : ops)
      if (!zdr_nfs_argop4(z, &op)) return false;
    return true;
  });
  if (!ok) out->resize(at);
  return ok;
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
