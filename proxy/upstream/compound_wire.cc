// A Compound on the wire: the XDR of the whole COMPOUND request and reply.
// NFSv4.0 goes through libnfs' generated COMPOUND4args/COMPOUND4res
// encoders. NFSv4.1 puts our own SEQUENCE (nfs41.cc) in front: the header
// and the SEQUENCE are ours, each further operation is libnfs' (its 4.0
// encoder and decoder per operation), and the reply is split the same way.
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

bool Compound::EncodeWire(std::string *out, const nfs41::SequenceArgs *seq) {
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
    return AppendWithLibnfs(out, room, [args](ZDR *z) {
      return bool(zdr_COMPOUND4args(z, args));
    });
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
                          nfs41::SequenceRes *seq_res) const {
  if (seq_res == nullptr) {
    ZDR z;
    zdrmem_create(&z, const_cast<char *>(p), uint32_t(n), ZDR_DECODE);
    COMPOUND4res res;
    memset(&res, 0, sizeof res);
    bool ok = zdr_COMPOUND4res(&z, &res) && Decode(&res, out);
    zdr_destroy(&z);  // everything the decode allocated
    return ok;
  }
  rpc::XdrIn in(p, n);
  uint32_t status, nres;
  if (!nfs41::DecodeCompoundReplyHeader(&in, &status, &nres) || nres == 0 ||
      !nfs41::DecodeSequence(&in, seq_res))
    return false;
  if (seq_res->status != 0) {
    out->status = seq_res->status;
    out->results.clear();
    return nres == 1;
  }
  if (impl_->reclaim_complete) {
    out->results.clear();
    return nres == 2 &&
           nfs41::DecodeStatusOnly(&in, nfs41::kOpReclaimComplete,
                                   &out->status);
  }
  // The rest are this compound's results: libnfs decodes each into the
  // array a COMPOUND4res would hold, and Decode takes them from there.
  ZDR z;
  zdrmem_create(&z, const_cast<char *>(in.pos()), uint32_t(in.left()),
                ZDR_DECODE);
  std::vector<nfs_resop4> results(nres - 1);
  bool ok = true;
  for (nfs_resop4 &r : results) {
    memset(&r, 0, sizeof r);
    if (!(ok = zdr_nfs_resop4(&z, &r))) break;
  }
  if (ok) {
    COMPOUND4res res;
    memset(&res, 0, sizeof res);
    res.status = nfsstat4(status);
    res.resarray.resarray_len = u_int(results.size());
    res.resarray.resarray_val = results.data();
    ok = Decode(&res, out);
  }
  zdr_destroy(&z);
  return ok;
}

}  // namespace upstream
}  // namespace nache
