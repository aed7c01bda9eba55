// Decoding of a COMPOUND reply's results into CompoundReply / OpResult: the
// other half of compound.cc. The reply comes from a server we do not trust
// (and over a clear-text WAN), so it is read here by hand with the bounded
// reader of rpc/xdr.h, never by libnfs 4.0.0's generated decoders (whose
// zdr_array multiplies a count in 32 bits and then writes count elements:
// README.md, "Replies are decoded by our own reader"). Every count and
// length is checked against the bytes left and a maximum before anything is
// read or allocated. A result is decoded by the shape its row in ops.h
// gives (a stateid, a change_info4, ...) or, when that says kSpecial, by
// its own code here; a result of an operation with neither is a decode
// error. READ data goes straight from the reply to the buffer the
// caller gave Compound::Read (the only copy).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "rpc/xdr.h"
#include "upstream/attrs.h"
#include "upstream/compound.h"
#include "upstream/compound_impl.h"

namespace nache {
namespace upstream {
namespace {

using rpc::XdrIn;

constexpr uint32_t kOpIllegal = 10044;      // OP_ILLEGAL's result number
constexpr uint32_t kOpaqueLimit = 1024;     // NFS4_OPAQUE_LIMIT (owners)
constexpr uint32_t kMaxBitmapWords = 8;     // NFSv4.2 needs 3
constexpr uint32_t kMaxAttrlist = 1 << 20;  // one object's attributes
constexpr uint32_t kMaxName = 1 << 16;      // one READDIR entry's name
constexpr uint32_t kMaxLinkText = 1 << 16;  // READLINK
constexpr uint32_t kMaxString = 1 << 16;    // ACE who, netid, addr

bool GetStateid(XdrIn *in, StateId *s) {
  return in->U32(&s->seqid) && in->Fixed(s->other, sizeof(s->other));
}

bool GetChangeInfo(XdrIn *in, ChangeInfo *c) {
  return in->Bool(&c->atomic) && in->U64(&c->before) && in->U64(&c->after);
}

bool GetVerifier(XdrIn *in, Verifier *v) {
  char b[8];
  if (!in->Fixed(b, sizeof b)) return false;
  v->assign(b, sizeof b);
  return true;
}

// READ_PLUS4resok (RFC 7862 15.10.2): eof, then segments of data and
// holes. They must cover the range asked for from its first byte on, in
// order and without a gap (what a gap holds is unknown), and no data may
// run past it (the caller's buffer ends there); a hole may start before
// the range or end after it, and is clipped. An empty data segment (a
// read at the end of the file; Ganesha 4.3's answer when its FSAL has no
// READ_PLUS) covers nothing, whatever its offset. count is the bytes
// covered.
bool GetReadPlus(XdrIn *in, const OpMeta &meta, OpResult *out) {
  constexpr uint32_t kData = 0, kHole = 1;  // data_content4
  const uint64_t start = meta.v42.offset;
  const uint64_t limit = start + meta.read_count;
  uint32_t n;
  if (!in->Bool(&out->eof) || !in->U32(&n)) return false;
  if (n > in->left() / 16) return false;  // a segment is 16 bytes or more
  uint64_t at = start;  // the first byte no segment has covered yet
  for (uint32_t i = 0; i < n; i++) {
    uint32_t what;
    uint64_t off;
    if (!in->U32(&what) || !in->U64(&off)) return false;
    if (what == kData) {
      const char *data;
      uint32_t len;
      if (!in->Opaque(&data, &len, uint32_t(limit - at))) return false;
      if (len == 0) continue;  // covers nothing, wherever it says it is
      if (off != at) return false;
      std::memcpy(meta.read_dest + (at - start), data, len);
      at += len;
    } else if (what == kHole) {
      uint64_t len;
      if (!in->U64(&len) || off > at || len == 0 || len > UINT64_MAX - off ||
          off + len <= at)
        return false;
      const uint64_t end = std::min(off + len, limit);
      std::memset(meta.read_dest + (at - start), 0, size_t(end - at));
      out->hole_bytes += uint32_t(end - at);
      at = end;
    } else {
      return false;
    }
  }
  out->count = uint32_t(at - start);
  return true;
}

// COPY4res (RFC 7862 15.2.2): on success write_response4 (a callback id
// when the server copies on alone, the bytes copied, how stable, the
// verifier) and copy_requirements4; the requirements alone with
// NFS4ERR_OFFLOAD_NO_REQS; nothing else on failure.
bool GetCopy(XdrIn *in, OpResult *out) {
  constexpr uint32_t kOffloadNoReqs = 10094;  // NFS4ERR_OFFLOAD_NO_REQS
  bool consecutive, synchronous;
  if (out->status == kOffloadNoReqs)
    return in->Bool(&consecutive) && in->Bool(&synchronous);
  if (out->status != kNfs4Ok) return true;
  uint32_t ids, committed;
  if (!in->U32(&ids) || ids > 1) return false;
  StateId callback;
  if (ids == 1 && !GetStateid(in, &callback)) return false;
  out->copy_async = ids == 1;
  if (!in->U64(&out->copied) || !in->U32(&committed) ||
      !GetVerifier(in, &out->verifier))
    return false;
  out->committed = StableHow(committed);
  return in->Bool(&consecutive) && in->Bool(&synchronous);
}

// bitmap4 into words (at most kMaxBitmapWords of them).
bool GetBitmap(XdrIn *in, uint32_t *words, uint32_t *n) {
  if (!in->U32(n) || *n > kMaxBitmapWords) return false;
  for (uint32_t i = 0; i < *n; i++)
    if (!in->U32(&words[i])) return false;
  return true;
}

bool SkipBitmap(XdrIn *in) {
  uint32_t words[kMaxBitmapWords], n;
  return GetBitmap(in, words, &n);
}

bool SkipString(XdrIn *in, uint32_t max) {
  const char *p;
  uint32_t n;
  return in->Opaque(&p, &n, max);
}

// fattr4: the bitmap, then the attrlist it describes (attrs.cc), owners
// decoded by owners.
bool GetFattr(XdrIn *in, OwnerCodec *owners, Attrs *out, Fh *fh) {
  uint32_t words[kMaxBitmapWords], n, len;
  const char *list;
  return GetBitmap(in, words, &n) && in->Opaque(&list, &len, kMaxAttrlist) &&
         DecodeAttrs(words, n, list, len, out, fh, owners);
}

// nfsace4, skipped (a delegation's permissions: we do not use them).
bool SkipAce(XdrIn *in) { return in->Skip(12) && SkipString(in, kMaxString); }

bool GetDenied(XdrIn *in, LockDenied *d) {
  uint32_t type;
  if (!in->U64(&d->offset) || !in->U64(&d->length) || !in->U32(&type) ||
      !in->U64(&d->owner_clientid) || !in->Opaque(&d->owner, kOpaqueLimit))
    return false;
  d->type = LockType(type);
  return true;
}

// open_delegation4 (RFC 7530), and NFSv4.1's OPEN_DELEGATE_NONE_EXT.
bool GetDelegation(XdrIn *in, Delegation *d) {
  uint32_t type;
  if (!in->U32(&type)) return false;
  switch (type) {
    case 0:  // OPEN_DELEGATE_NONE
      d->type = DelegationType::kNone;
      return true;
    case 1:  // OPEN_DELEGATE_READ: stateid, recall, permissions
      d->type = DelegationType::kRead;
      return GetStateid(in, &d->stateid) && in->Bool(&d->recall) && SkipAce(in);
    case 2: {  // OPEN_DELEGATE_WRITE: ..., space_limit, permissions
      uint32_t limitby;
      d->type = DelegationType::kWrite;
      if (!GetStateid(in, &d->stateid) || !in->Bool(&d->recall) ||
          !in->U32(&limitby))
        return false;
      if (limitby == 1) {  // NFS_LIMIT_SIZE: filesize
        if (!in->Skip(8)) return false;
      } else if (limitby == 2) {  // NFS_LIMIT_BLOCKS: num_blocks, per block
        if (!in->Skip(8)) return false;
      } else {
        return false;
      }
      return SkipAce(in);
    }
    case 3: {  // OPEN_DELEGATE_NONE_EXT (4.1): why, maybe a bool
      uint32_t why;
      bool b;
      d->type = DelegationType::kNone;
      if (!in->U32(&why)) return false;
      // WND4_CONTENTION and WND4_RESOURCE carry a bool.
      return (why == 1 || why == 2) ? in->Bool(&b) : true;
    }
    default: return false;
  }
}

// READDIR4resok: the cookie verifier, the entries, eof. Entries are an XDR
// optional-data list, read iteratively (libnfs' decoder recurses per
// entry). Its size is bounded by the maxcount asked for (RFC 7530 16.24.4:
// it counts the whole READDIR4resok), with some slack for servers that count
// their overhead differently: that bounds the entries we allocate.
constexpr size_t kReaddirSlack = 4096;
bool GetReaddir(XdrIn *in, const OpMeta &meta, OwnerCodec *owners,
                OpResult *out) {
  const size_t start = in->left();
  const size_t limit = size_t(meta.readdir_maxcount) + kReaddirSlack;
  bool more;
  if (!GetVerifier(in, &out->verifier) || !in->Bool(&more)) return false;
  while (more) {
    DirEntry de;
    if (!in->U64(&de.cookie) || !in->Opaque(&de.name, kMaxName) ||
        !GetFattr(in, owners, &de.attrs, meta.want_fh ? &de.fh : nullptr) ||
        !in->Bool(&more) || start - in->left() > limit)
      return false;
    out->entries.push_back(std::move(de));
  }
  return in->Bool(&out->eof);
}

// LISTXATTRS4resok: the cookie, the names, eof. Each name takes at least
// 4 bytes, and the whole is bounded by the maxcount asked for (with the
// same slack as READDIR's), which bounds what we allocate.
bool GetXattrNames(XdrIn *in, const OpMeta &meta, OpResult *out) {
  const size_t start = in->left();
  const size_t limit = size_t(meta.v42.maxcount) + kReaddirSlack;
  uint32_t n;
  if (!in->U64(&out->cookie) || !in->U32(&n) || n > in->left() / 4)
    return false;
  for (uint32_t i = 0; i < n; i++) {
    std::string name;
    if (!in->Opaque(&name, kMaxName) || start - in->left() > limit)
      return false;
    out->names.push_back(std::move(name));
  }
  return in->Bool(&out->eof);
}

// The body of a result whose row in ops.h gives its shape: decoded by the
// shape alone, whatever the operation.
bool GetShapedBody(XdrIn *in, ResultShape shape, OpResult *out) {
  if (out->status != kNfs4Ok) return true;  // a body only with NFS4_OK
  switch (shape) {
    case ResultShape::kStatus: return true;
    case ResultShape::kStateid: return GetStateid(in, &out->stateid);
    case ResultShape::kChangeInfo: return GetChangeInfo(in, &out->cinfo);
    case ResultShape::kVerifier: return GetVerifier(in, &out->verifier);
    case ResultShape::kSpecial:
    case ResultShape::kSession: break;
  }
  return false;
}

// The body of a kSpecial result: one decoder per operation.
bool GetSpecialBody(XdrIn *in, const OpMeta &meta, OwnerCodec *owners,
                    OpResult *out) {
  const bool ok = out->status == kNfs4Ok;
  switch (meta.op) {
    case Op::kAccess:
      return !ok || (in->U32(&out->access_supported) && in->U32(&out->access));
    case Op::kCreate:
      return !ok || (GetChangeInfo(in, &out->cinfo) && SkipBitmap(in));
    case Op::kGetattr: return !ok || GetFattr(in, owners, &out->attrs, nullptr);
    case Op::kGetfh: return !ok || in->Opaque(&out->fh, kMaxFhSize);
    case Op::kRename:
      return !ok || (GetChangeInfo(in, &out->cinfo) &&
                     GetChangeInfo(in, &out->cinfo2));
    case Op::kLock:
      if (ok) return GetStateid(in, &out->stateid);
      return out->status != kNfs4ErrDenied || GetDenied(in, &out->denied);
    case Op::kLockt:
      return out->status != kNfs4ErrDenied || GetDenied(in, &out->denied);
    case Op::kOpen:
      return !ok ||
             (GetStateid(in, &out->stateid) && GetChangeInfo(in, &out->cinfo) &&
              in->U32(&out->open_rflags) && SkipBitmap(in) &&
              GetDelegation(in, &out->delegation));
    case Op::kRead: {
      if (!ok) return true;
      const char *data;
      uint32_t len;
      // More than asked for would overrun the caller's buffer.
      if (!in->Bool(&out->eof) || !in->Opaque(&data, &len, meta.read_count))
        return false;
      if (len > 0) std::memcpy(meta.read_dest, data, len);
      out->count = len;
      return true;
    }
    case Op::kReaddir: return !ok || GetReaddir(in, meta, owners, out);
    case Op::kReadlink: return !ok || in->Opaque(&out->data, kMaxLinkText);
    case Op::kSetattr:
      return SkipBitmap(in);  // attrsset: there whatever the status
    case Op::kSetclientid:
      if (ok) {
        return in->U64(&out->clientid) && GetVerifier(in, &out->verifier);
      }
      if (out->status == kNfs4ErrClidInuse) {
        // Who holds the id, for the log: "netid addr".
        std::string netid, addr;
        if (!in->Opaque(&netid, kMaxString) || !in->Opaque(&addr, kMaxString))
          return false;
        out->data = netid + " " + addr;
      }
      return true;
    case Op::kWrite: {
      if (!ok) return true;
      uint32_t committed;
      if (!in->U32(&out->count) || !in->U32(&committed) ||
          !GetVerifier(in, &out->verifier))
        return false;
      // More written than was sent, or a stability that does not exist:
      // a reply that cannot be true (taken, it would mark bytes that never
      // left us as written, or read past the caller's buffer).
      if (out->count > meta.write_count ||
          committed > uint32_t(StableHow::kFileSync))
        return false;
      out->committed = StableHow(committed);
      return true;
    }
    // NFSv4.2 (RFC 7862, RFC 8276).
    case Op::kSeek:
      return !ok || (in->Bool(&out->eof) && in->U64(&out->offset));
    case Op::kReadPlus: return !ok || GetReadPlus(in, meta, out);
    case Op::kCopy: return GetCopy(in, out);
    case Op::kGetxattr: return !ok || in->Opaque(&out->data, kMaxXattrValue);
    case Op::kListxattrs: return !ok || GetXattrNames(in, meta, out);
    default: return false;  // kSpecial in ops.h, but no decoder here
  }
}

// The body of one result (after its number and status) for the operation
// meta describes. False when it is malformed, too large, or not what was
// asked for.
bool GetResultBody(XdrIn *in, const OpMeta &meta, OwnerCodec *owners,
                   OpResult *out) {
  const ResultShape shape = ResultShapeOf(meta.op);
  switch (shape) {
    // The session layer's own operations (nfs41.cc decodes SEQUENCE and
    // the rest): never in a Compound's results.
    case ResultShape::kSession: return false;
    case ResultShape::kSpecial: return GetSpecialBody(in, meta, owners, out);
    default: return GetShapedBody(in, shape, out);
  }
}

}  // namespace

bool Compound::DecodeResults(rpc::XdrIn *in, uint32_t status, uint32_t nres,
                             bool after_sequence, OwnerCodec *owners,
                             CompoundReply *out) const {
  out->status = status;
  out->results.clear();
  const std::vector<OpMeta> &meta = impl_->meta;
  // One result per operation at most, and each takes at least 8 bytes
  // (its number and status): a count beyond either is a lie.
  if (nres > meta.size() || nres > in->left() / 8) return false;
  out->results.reserve(nres);
  for (uint32_t i = 0; i < nres; i++) {
    OpResult r;
    uint32_t resop;
    r.op = meta[i].op;
    if (!in->U32(&resop) || !in->U32(&r.status)) return false;
    if (resop == kOpIllegal) {
      // The server did not know the operation: nothing else to read, and
      // it ends the compound.
      if (r.status != kNfs4ErrOpIllegal) return false;
    } else if (resop != uint32_t(meta[i].op) ||
               !GetResultBody(in, meta[i], owners, &r)) {
      return false;
    }
    out->results.push_back(std::move(r));
    // The server stops at the first failure.
    if (out->results.back().status != kNfs4Ok && i + 1 != nres) return false;
  }
  // The protocol's invariant (compound.h): OK answers every operation;
  // a failure is the last result's status. A failure with no result at
  // all is a whole compound refused before any operation ran (e.g.
  // NFS4ERR_MINOR_VERS_MISMATCH, NFS4ERR_RESOURCE); with SEQUENCE first,
  // it ran.
  if (status == kNfs4Ok)
    return nres == meta.size() &&
           (nres == 0 || out->results.back().status == kNfs4Ok);
  if (nres == 0) return !after_sequence;
  return out->results.back().status == status;
}

}  // namespace upstream
}  // namespace nache
