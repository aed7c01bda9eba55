// The typed COMPOUND builder: turns Compound's operations into libnfs'
// COMPOUND4args (see compound_impl.h for who owns which bytes). Decoding of
// the reply lives in compound_decode.cc. Nothing outside these two files and
// attrs.cc touches NFSv4 XDR structures.
#include "upstream/compound.h"

#include <algorithm>
#include <cstring>

#include "rpc/xdr.h"
#include "upstream/attrs.h"
#include "upstream/compound_impl.h"

namespace nache {
namespace upstream {
namespace {

// XDR size of a variable-length opaque or string of n bytes.
size_t XdrOpaqueSize(size_t n) { return 4 + ((n + 3) & ~size_t(3)); }

// Upper bound of the fixed-size part of any operation's arguments (OPEN is
// the largest at ~70 bytes; LOCK ~64). Variable parts are added on top.
constexpr size_t kFixedArgBound = 128;
// COMPOUND4args header: tag length, minorversion, array length.
constexpr size_t kCompoundHeaderBound = 12;

void CopyStateid(const StateId &in, stateid4 *out) {
  out->seqid = in.seqid;
  std::memcpy(out->other, in.other, sizeof(out->other));
}

void CopyVerifier(const Verifier &in, verifier4 out) {
  std::memset(out, 0, NFS4_VERIFIER_SIZE);
  std::memcpy(out, in.data(), std::min<size_t>(in.size(), NFS4_VERIFIER_SIZE));
}

nfs_lock_type4 LockType4(LockType t) { return nfs_lock_type4(uint32_t(t)); }

void PutStateid(rpc::XdrOut *x, const StateId &s) {
  x->U32(s.seqid);
  x->Fixed(s.other, sizeof(s.other));
}

}  // namespace

// Builder helpers, private to this file: they need the Impl layout.
namespace {

// A template only because Compound::Impl is private: members name it, and
// access is checked where the name is written.
template <typename ImplT>
struct Builder {
  ImplT *impl;  // the Compound being built (not owned)

  // Appends a zeroed operation; var_bytes is its variable-length XDR size.
  nfs_argop4 &Add(Op op, size_t var_bytes) {
    nfs_argop4 a;
    std::memset(&a, 0, sizeof(a));
    a.argop = nfs_opnum4(uint32_t(op));
    impl->args.push_back(a);
    OpMeta m;
    m.op = op;
    impl->meta.push_back(m);
    impl->size_hint += 4 + kFixedArgBound + var_bytes;
    return impl->args.back();
  }
  OpMeta &meta() { return impl->meta.back(); }
  // Where the builder of an operation libnfs cannot encode writes its
  // arguments (OpMeta::wire_args).
  rpc::XdrOut Wire() { return rpc::XdrOut(&meta().wire_args); }

  // Keeps a copy of s alive for the Compound's lifetime.
  char *Keep(const std::string &s) {
    impl->bytes.push_back(s);
    return &impl->bytes.back()[0];  // NUL-terminated, stable in a deque
  }
  void Utf8(const std::string &s, utf8string *out) {
    out->utf8string_len = u_int(s.size());
    out->utf8string_val = Keep(s);
  }
  void Bitmap(std::vector<uint32_t> words, bitmap4 *out) {
    impl->bitmaps.push_back(std::move(words));
    std::vector<uint32_t> &kept = impl->bitmaps.back();
    out->bitmap4_len = u_int(kept.size());
    out->bitmap4_val = kept.data();
  }
  void Attrlist(const std::string &bytes, attrlist4 *out) {
    out->attrlist4_len = u_int(bytes.size());
    out->attrlist4_val = Keep(bytes);
  }
  // Settable attributes as an fattr4 (owners numeric: EncodeOwners may
  // encode them again); returns its XDR size.
  size_t Fattr(const Attrs &attrs, fattr4 *out, OwnerCodec *owners = nullptr) {
    std::vector<uint32_t> words;
    std::string list;
    EncodeSettableAttrs(attrs, &words, &list, owners);
    size_t size = 4 + 4 * words.size() + XdrOpaqueSize(list.size());
    Bitmap(std::move(words), &out->attrmask);
    Attrlist(list, &out->attr_vals);
    return size;
  }
  // Fattr for the operation being added, remembered for EncodeOwners when
  // it names an owner or a group.
  void FattrWithOwners(const Attrs &attrs, fattr4 *out) {
    Fattr(attrs, out);
    if (attrs.mask & (kAttrOwner | kAttrOwnerGroup))
      impl->owner_fattrs.push_back({impl->args.size() - 1, attrs});
  }
  size_t ChangeFattr(uint64_t change, fattr4 *out) {
    std::vector<uint32_t> words;
    std::string list;
    EncodeChangeAttr(change, &words, &list);
    size_t size = 4 + 4 * words.size() + XdrOpaqueSize(list.size());
    Bitmap(std::move(words), &out->attrmask);
    Attrlist(list, &out->attr_vals);
    return size;
  }
};

// Largest possible settable fattr4: bitmap (2 words) + size 8, mode 4, two
// owners of at most 10 digits, two settime4 of 16 bytes each. (Owners sent
// as names add their length when EncodeOwners encodes them.)
constexpr size_t kSettableFattrBound = 4 + 8 + 4 + 8 + 4 + 2 * 16 + 2 * 16;

// The settable attributes of a SETATTR, CREATE or OPEN(create) argument.
fattr4 *SettableFattr(nfs_argop4 *a) {
  switch (a->argop) {
    case OP_SETATTR: return &a->nfs_argop4_u.opsetattr.obj_attributes;
    case OP_CREATE: return &a->nfs_argop4_u.opcreate.createattrs;
    case OP_OPEN:
      return &a->nfs_argop4_u.opopen.openhow.openflag4_u.how.createhow4_u
                  .createattrs;
    default: return nullptr;
  }
}

}  // namespace

const char *OpName(Op op) {
  switch (op) {
#define NACHE_OP_NAME(e, n, s, r) \
  case Op::e: return s;
    NACHE_COMPOUND_OPS(NACHE_OP_NAME) NACHE_SESSION_OPS(NACHE_OP_NAME)
#undef NACHE_OP_NAME
  }
  return "UNKNOWN";
}

const OpResult *CompoundReply::Find(Op op, int nth) const {
  for (const OpResult &r : results) {
    if (r.op == op && nth-- == 0) return &r;
  }
  return nullptr;
}

int CompoundReply::FailedIndex() const {
  for (size_t i = 0; i < results.size(); i++) {
    if (results[i].status != kNfs4Ok) return int(i);
  }
  return -1;
}

Compound::Compound() : impl_(new Impl) {
  impl_->size_hint = kCompoundHeaderBound;
  std::memset(&impl_->compound, 0, sizeof(impl_->compound));
}
Compound::~Compound() = default;
Compound::Compound(Compound &&) noexcept = default;
Compound &Compound::operator=(Compound &&) noexcept = default;

Compound &Compound::SetTag(const std::string &tag) {
  impl_->size_hint +=
      XdrOpaqueSize(tag.size()) - XdrOpaqueSize(impl_->tag.size());
  impl_->tag = tag;
  return *this;
}

const std::string &Compound::tag() const { return impl_->tag; }

Compound &Compound::Putfh(const Fh &fh) {
  Builder<Impl> b{impl_.get()};
  nfs_argop4 &a = b.Add(Op::kPutfh, XdrOpaqueSize(fh.size()));
  a.nfs_argop4_u.opputfh.object.nfs_fh4_len = u_int(fh.size());
  a.nfs_argop4_u.opputfh.object.nfs_fh4_val = b.Keep(fh);
  return *this;
}

Compound &Compound::Putrootfh() {
  Builder<Impl>{impl_.get()}.Add(Op::kPutrootfh, 0);
  return *this;
}

Compound &Compound::Lookup(const std::string &name) {
  Builder<Impl> b{impl_.get()};
  nfs_argop4 &a = b.Add(Op::kLookup, XdrOpaqueSize(name.size()));
  b.Utf8(name, &a.nfs_argop4_u.oplookup.objname);
  return *this;
}

Compound &Compound::Lookupp() {
  Builder<Impl>{impl_.get()}.Add(Op::kLookupp, 0);
  return *this;
}

Compound &Compound::Getfh() {
  Builder<Impl>{impl_.get()}.Add(Op::kGetfh, 0);
  return *this;
}

Compound &Compound::Getattr(uint64_t attr_mask) {
  Builder<Impl> b{impl_.get()};
  std::vector<uint32_t> words = AttrRequestBitmap(attr_mask, false);
  nfs_argop4 &a = b.Add(Op::kGetattr, 4 + 4 * words.size());
  b.Bitmap(std::move(words), &a.nfs_argop4_u.opgetattr.attr_request);
  return *this;
}

Compound &Compound::Savefh() {
  Builder<Impl>{impl_.get()}.Add(Op::kSavefh, 0);
  return *this;
}

Compound &Compound::Restorefh() {
  Builder<Impl>{impl_.get()}.Add(Op::kRestorefh, 0);
  return *this;
}

Compound &Compound::Access(uint32_t access_mask) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kAccess, 0).nfs_argop4_u.opaccess.access = access_mask;
  return *this;
}

Compound &Compound::Read(const StateId &stateid, uint64_t offset,
                         uint32_t count, char *dest) {
  Builder<Impl> b{impl_.get()};
  READ4args &r = b.Add(Op::kRead, 0).nfs_argop4_u.opread;
  CopyStateid(stateid, &r.stateid);
  r.offset = offset;
  r.count = count;
  b.meta().read_dest = dest;
  b.meta().read_count = count;
  return *this;
}

Compound &Compound::Write(const StateId &stateid, uint64_t offset,
                          StableHow stable, const char *data, uint32_t len) {
  Builder<Impl> b{impl_.get()};
  WRITE4args &w = b.Add(Op::kWrite, XdrOpaqueSize(len)).nfs_argop4_u.opwrite;
  CopyStateid(stateid, &w.stateid);
  w.offset = offset;
  w.stable = stable_how4(uint32_t(stable));
  w.data.data_len = len;
  // Not copied: libnfs encodes it straight into the PDU buffer (the caller
  // keeps it alive until the call completes).
  w.data.data_val = const_cast<char *>(data);
  b.meta().write_count = len;
  return *this;
}

Compound &Compound::Commit(uint64_t offset, uint32_t count) {
  Builder<Impl> b{impl_.get()};
  COMMIT4args &c = b.Add(Op::kCommit, 0).nfs_argop4_u.opcommit;
  c.offset = offset;
  c.count = count;
  return *this;
}

Compound &Compound::Open(const OpenArgs &args) {
  Builder<Impl> b{impl_.get()};
  size_t var = XdrOpaqueSize(args.owner.size()) +
               XdrOpaqueSize(args.name.size()) + kSettableFattrBound;
  OPEN4args &o = b.Add(Op::kOpen, var).nfs_argop4_u.opopen;
  o.seqid = args.seqid;
  o.share_access = args.share_access;
  o.share_deny = args.share_deny;
  o.owner.clientid = args.clientid;
  b.meta().auto_clientid = args.clientid == 0;
  o.owner.owner.owner_len = u_int(args.owner.size());
  o.owner.owner.owner_val = b.Keep(args.owner);

  if (args.create == OpenArgs::Create::kNoCreate) {
    o.openhow.opentype = OPEN4_NOCREATE;
  } else {
    o.openhow.opentype = OPEN4_CREATE;
    createhow4 &how = o.openhow.openflag4_u.how;
    switch (args.create) {
      case OpenArgs::Create::kUnchecked:
        how.mode = UNCHECKED4;
        b.FattrWithOwners(args.create_attrs, &how.createhow4_u.createattrs);
        break;
      case OpenArgs::Create::kGuarded:
        how.mode = GUARDED4;
        b.FattrWithOwners(args.create_attrs, &how.createhow4_u.createattrs);
        break;
      case OpenArgs::Create::kExclusive41:
        // libnfs' createmode4 has no EXCLUSIVE4_1: EXCLUSIVE4 with the
        // verifier holds its place; the wire encoding is ours.
        how.mode = EXCLUSIVE4;
        CopyVerifier(args.create_verf, how.createhow4_u.createverf);
        b.meta().open_excl41 = true;
        EncodeSettableAttrs(args.create_attrs, &b.meta().excl41_bitmap,
                            &b.meta().excl41_attrs);
        break;
      default:
        how.mode = EXCLUSIVE4;
        CopyVerifier(args.create_verf, how.createhow4_u.createverf);
        break;
    }
  }

  open_claim4 &claim = o.claim;
  switch (args.claim) {
    case OpenArgs::Claim::kNull:
      claim.claim = CLAIM_NULL;
      b.Utf8(args.name, &claim.open_claim4_u.file);
      break;
    case OpenArgs::Claim::kPrevious:
      claim.claim = CLAIM_PREVIOUS;
      claim.open_claim4_u.delegate_type =
          open_delegation_type4(uint32_t(args.delegate_type));
      break;
    case OpenArgs::Claim::kDelegateCur:
      claim.claim = CLAIM_DELEGATE_CUR;
      CopyStateid(args.delegate_stateid,
                  &claim.open_claim4_u.delegate_cur_info.delegate_stateid);
      b.Utf8(args.name, &claim.open_claim4_u.delegate_cur_info.file);
      break;
    case OpenArgs::Claim::kDelegatePrev:
      claim.claim = CLAIM_DELEGATE_PREV;
      b.Utf8(args.name, &claim.open_claim4_u.file_delegate_prev);
      break;
    case OpenArgs::Claim::kFh:
      // libnfs' open_claim_type4 has no CLAIM_FH (storing 4 there would be
      // an invalid enum value): a placeholder; the wire encoding is ours.
      claim.claim = CLAIM_NULL;
      b.meta().open_by_fh = true;
      break;
  }
  return *this;
}

Compound &Compound::OpenConfirm(const StateId &stateid, uint32_t seqid) {
  Builder<Impl> b{impl_.get()};
  OPEN_CONFIRM4args &c = b.Add(Op::kOpenConfirm, 0).nfs_argop4_u.opopen_confirm;
  CopyStateid(stateid, &c.open_stateid);
  c.seqid = seqid;
  return *this;
}

Compound &Compound::OpenDowngrade(const StateId &stateid, uint32_t seqid,
                                  uint32_t share_access, uint32_t share_deny) {
  Builder<Impl> b{impl_.get()};
  OPEN_DOWNGRADE4args &d =
      b.Add(Op::kOpenDowngrade, 0).nfs_argop4_u.opopen_downgrade;
  CopyStateid(stateid, &d.open_stateid);
  d.seqid = seqid;
  d.share_access = share_access;
  d.share_deny = share_deny;
  return *this;
}

Compound &Compound::Close(uint32_t seqid, const StateId &stateid) {
  Builder<Impl> b{impl_.get()};
  CLOSE4args &c = b.Add(Op::kClose, 0).nfs_argop4_u.opclose;
  c.seqid = seqid;
  CopyStateid(stateid, &c.open_stateid);
  return *this;
}

Compound &Compound::Create(FileType type, const std::string &name,
                           const Attrs &attrs, const std::string &link_text) {
  Builder<Impl> b{impl_.get()};
  size_t var = XdrOpaqueSize(name.size()) + XdrOpaqueSize(link_text.size()) +
               kSettableFattrBound;
  CREATE4args &c = b.Add(Op::kCreate, var).nfs_argop4_u.opcreate;
  c.objtype.type = nfs_ftype4(uint32_t(type));
  if (type == FileType::kLnk) {
    b.Utf8(link_text, &c.objtype.createtype4_u.linkdata);
  } else if (type == FileType::kBlk || type == FileType::kChr) {
    c.objtype.createtype4_u.devdata.specdata1 = attrs.rdev_major;
    c.objtype.createtype4_u.devdata.specdata2 = attrs.rdev_minor;
  }
  b.Utf8(name, &c.objname);
  b.FattrWithOwners(attrs, &c.createattrs);
  return *this;
}

Compound &Compound::Remove(const std::string &name) {
  Builder<Impl> b{impl_.get()};
  nfs_argop4 &a = b.Add(Op::kRemove, XdrOpaqueSize(name.size()));
  b.Utf8(name, &a.nfs_argop4_u.opremove.target);
  return *this;
}

Compound &Compound::Rename(const std::string &old_name,
                           const std::string &new_name) {
  Builder<Impl> b{impl_.get()};
  nfs_argop4 &a = b.Add(Op::kRename, XdrOpaqueSize(old_name.size()) +
                                         XdrOpaqueSize(new_name.size()));
  b.Utf8(old_name, &a.nfs_argop4_u.oprename.oldname);
  b.Utf8(new_name, &a.nfs_argop4_u.oprename.newname);
  return *this;
}

Compound &Compound::Link(const std::string &new_name) {
  Builder<Impl> b{impl_.get()};
  nfs_argop4 &a = b.Add(Op::kLink, XdrOpaqueSize(new_name.size()));
  b.Utf8(new_name, &a.nfs_argop4_u.oplink.newname);
  return *this;
}

Compound &Compound::Readlink() {
  Builder<Impl>{impl_.get()}.Add(Op::kReadlink, 0);
  return *this;
}

Compound &Compound::Readdir(uint64_t cookie, const Verifier &cookieverf,
                            uint32_t dircount, uint32_t maxcount,
                            uint64_t attr_mask, bool want_fh) {
  Builder<Impl> b{impl_.get()};
  std::vector<uint32_t> words = AttrRequestBitmap(attr_mask, want_fh);
  READDIR4args &r =
      b.Add(Op::kReaddir, 4 + 4 * words.size()).nfs_argop4_u.opreaddir;
  r.cookie = cookie;
  CopyVerifier(cookieverf, r.cookieverf);
  r.dircount = dircount;
  r.maxcount = maxcount;
  b.Bitmap(std::move(words), &r.attr_request);
  b.meta().want_fh = want_fh;
  b.meta().readdir_maxcount = maxcount;
  return *this;
}

Compound &Compound::Setattr(const StateId &stateid, const Attrs &attrs) {
  Builder<Impl> b{impl_.get()};
  SETATTR4args &s =
      b.Add(Op::kSetattr, kSettableFattrBound).nfs_argop4_u.opsetattr;
  CopyStateid(stateid, &s.stateid);
  b.FattrWithOwners(attrs, &s.obj_attributes);
  return *this;
}

Compound &Compound::Lock(const LockArgs &args) {
  Builder<Impl> b{impl_.get()};
  LOCK4args &l =
      b.Add(Op::kLock, XdrOpaqueSize(args.owner.size())).nfs_argop4_u.oplock;
  l.locktype = LockType4(args.type);
  l.reclaim = args.reclaim;
  l.offset = args.offset;
  l.length = args.length;
  l.locker.new_lock_owner = args.new_lock_owner;
  if (args.new_lock_owner) {
    open_to_lock_owner4 &o = l.locker.locker4_u.open_owner;
    o.open_seqid = args.open_seqid;
    CopyStateid(args.open_stateid, &o.open_stateid);
    o.lock_seqid = args.lock_seqid;
    o.lock_owner.clientid = args.clientid;
    b.meta().auto_clientid = args.clientid == 0;
    o.lock_owner.owner.owner_len = u_int(args.owner.size());
    o.lock_owner.owner.owner_val = b.Keep(args.owner);
  } else {
    exist_lock_owner4 &e = l.locker.locker4_u.lock_owner;
    CopyStateid(args.lock_stateid, &e.lock_stateid);
    e.lock_seqid = args.lock_seqid;
  }
  return *this;
}

Compound &Compound::Lockt(LockType type, uint64_t offset, uint64_t length,
                          uint64_t clientid, const std::string &owner) {
  Builder<Impl> b{impl_.get()};
  LOCKT4args &l =
      b.Add(Op::kLockt, XdrOpaqueSize(owner.size())).nfs_argop4_u.oplockt;
  l.locktype = LockType4(type);
  l.offset = offset;
  l.length = length;
  l.owner.clientid = clientid;
  b.meta().auto_clientid = clientid == 0;
  l.owner.owner.owner_len = u_int(owner.size());
  l.owner.owner.owner_val = b.Keep(owner);
  return *this;
}

Compound &Compound::Locku(LockType type, uint32_t seqid,
                          const StateId &lock_stateid, uint64_t offset,
                          uint64_t length) {
  Builder<Impl> b{impl_.get()};
  LOCKU4args &l = b.Add(Op::kLocku, 0).nfs_argop4_u.oplocku;
  l.locktype = LockType4(type);
  l.seqid = seqid;
  CopyStateid(lock_stateid, &l.lock_stateid);
  l.offset = offset;
  l.length = length;
  return *this;
}

Compound &Compound::ReleaseLockowner(uint64_t clientid,
                                     const std::string &owner) {
  Builder<Impl> b{impl_.get()};
  RELEASE_LOCKOWNER4args &r =
      b.Add(Op::kReleaseLockowner, XdrOpaqueSize(owner.size()))
          .nfs_argop4_u.oprelease_lockowner;
  r.lock_owner.clientid = clientid;
  b.meta().auto_clientid = clientid == 0;
  r.lock_owner.owner.owner_len = u_int(owner.size());
  r.lock_owner.owner.owner_val = b.Keep(owner);
  return *this;
}

Compound &Compound::Renew(uint64_t clientid) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kRenew, 0).nfs_argop4_u.oprenew.clientid = clientid;
  b.meta().auto_clientid = clientid == 0;
  return *this;
}

Compound &Compound::Setclientid(const Verifier &verifier, const std::string &id,
                                uint32_t cb_program,
                                const std::string &cb_netid,
                                const std::string &cb_uaddr,
                                uint32_t cb_ident) {
  Builder<Impl> b{impl_.get()};
  size_t var = XdrOpaqueSize(id.size()) + XdrOpaqueSize(cb_netid.size()) +
               XdrOpaqueSize(cb_uaddr.size());
  SETCLIENTID4args &s = b.Add(Op::kSetclientid, var).nfs_argop4_u.opsetclientid;
  CopyVerifier(verifier, s.client.verifier);
  s.client.id.id_len = u_int(id.size());
  s.client.id.id_val = b.Keep(id);
  s.callback.cb_program = cb_program;
  s.callback.cb_location.r_netid = b.Keep(cb_netid);
  s.callback.cb_location.r_addr = b.Keep(cb_uaddr);
  s.callback_ident = cb_ident;
  return *this;
}

Compound &Compound::SetclientidConfirm(uint64_t clientid,
                                       const Verifier &confirm) {
  Builder<Impl> b{impl_.get()};
  SETCLIENTID_CONFIRM4args &c =
      b.Add(Op::kSetclientidConfirm, 0).nfs_argop4_u.opsetclientid_confirm;
  c.clientid = clientid;
  CopyVerifier(confirm, c.setclientid_confirm);
  return *this;
}

Compound &Compound::DelegReturn(const StateId &stateid) {
  Builder<Impl> b{impl_.get()};
  CopyStateid(
      stateid,
      &b.Add(Op::kDelegReturn, 0).nfs_argop4_u.opdelegreturn.deleg_stateid);
  return *this;
}

// NFSv4.2 operations (RFC 7862 15, RFC 8276 8.4): their builders encode
// their arguments into the operation's meta, which EncodeWire sends
// (libnfs' nfs_argop4 only carries the number); the scripted server of the
// unit tests reads them decoded, in v42.
Compound &Compound::Allocate(const StateId &stateid, uint64_t offset,
                             uint64_t length) {
  return AddRangeOp(Op::kAllocate, stateid, offset, length);
}

Compound &Compound::Deallocate(const StateId &stateid, uint64_t offset,
                               uint64_t length) {
  return AddRangeOp(Op::kDeallocate, stateid, offset, length);
}

Compound &Compound::AddRangeOp(Op op, const StateId &stateid, uint64_t offset,
                               uint64_t length) {
  Builder<Impl> b{impl_.get()};
  b.Add(op, 0);
  Nfs42Args &a = b.meta().v42;
  a.stateid = stateid;
  a.offset = offset;
  a.length = length;
  rpc::XdrOut x = b.Wire();
  PutStateid(&x, stateid);
  x.U64(offset);
  x.U64(length);
  return *this;
}

Compound &Compound::Copy(const StateId &src_stateid, const StateId &dst_stateid,
                         uint64_t src_offset, uint64_t dst_offset,
                         uint64_t count) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kCopy, 0);
  Nfs42Args &a = b.meta().v42;
  a.stateid = src_stateid;
  a.dst_stateid = dst_stateid;
  a.offset = src_offset;
  a.dst_offset = dst_offset;
  a.length = count;
  rpc::XdrOut x = b.Wire();
  PutStateid(&x, src_stateid);
  PutStateid(&x, dst_stateid);
  x.U64(src_offset);
  x.U64(dst_offset);
  x.U64(count);
  x.Bool(true);  // ca_consecutive
  x.Bool(true);  // ca_synchronous
  x.U32(0);      // ca_source_server<>: this server
  return *this;
}

Compound &Compound::ReadPlus(const StateId &stateid, uint64_t offset,
                             uint32_t count, char *dest) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kReadPlus, 0);
  Nfs42Args &a = b.meta().v42;
  a.stateid = stateid;
  a.offset = offset;
  a.length = count;
  b.meta().read_dest = dest;
  b.meta().read_count = count;
  rpc::XdrOut x = b.Wire();
  PutStateid(&x, stateid);
  x.U64(offset);
  x.U32(count);
  return *this;
}

Compound &Compound::Seek(const StateId &stateid, uint64_t offset,
                         SeekWhat what) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kSeek, 0);
  Nfs42Args &a = b.meta().v42;
  a.stateid = stateid;
  a.offset = offset;
  a.what = what;
  rpc::XdrOut x = b.Wire();
  PutStateid(&x, stateid);
  x.U64(offset);
  x.U32(uint32_t(what));
  return *this;
}

Compound &Compound::Getxattr(const std::string &name) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kGetxattr, XdrOpaqueSize(name.size()));
  b.meta().v42.name = name;
  b.Wire().Opaque(name);
  return *this;
}

Compound &Compound::Setxattr(XattrOption option, const std::string &name,
                             const std::string &value) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kSetxattr,
        XdrOpaqueSize(name.size()) + XdrOpaqueSize(value.size()));
  Nfs42Args &a = b.meta().v42;
  a.option = option;
  a.name = name;
  a.value = value;
  rpc::XdrOut x = b.Wire();
  x.U32(uint32_t(option));
  x.Opaque(name);
  x.Opaque(value);
  return *this;
}

Compound &Compound::Listxattrs(uint64_t cookie, uint32_t maxcount) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kListxattrs, 0);
  b.meta().v42.cookie = cookie;
  b.meta().v42.maxcount = maxcount;
  rpc::XdrOut x = b.Wire();
  x.U64(cookie);
  x.U32(maxcount);
  return *this;
}

Compound &Compound::Removexattr(const std::string &name) {
  Builder<Impl> b{impl_.get()};
  b.Add(Op::kRemovexattr, XdrOpaqueSize(name.size()));
  b.meta().v42.name = name;
  b.Wire().Opaque(name);
  return *this;
}

const Nfs42Args *Compound::nfs42_args(size_t i) const {
  return IsNfs42Op(uint32_t(impl_->meta[i].op)) ? &impl_->meta[i].v42 : nullptr;
}

bool Compound::NeedsNfs41() const {
  for (const OpMeta &m : impl_->meta)
    if (m.open_by_fh || m.open_excl41) return true;
  return false;
}

bool Compound::NeedsNfs42() const {
  for (const OpMeta &m : impl_->meta)
    if (IsNfs42Op(uint32_t(m.op))) return true;
  return false;
}

Compound &Compound::VerifyChange(uint64_t change) {
  Builder<Impl> b{impl_.get()};
  b.ChangeFattr(change,
                &b.Add(Op::kVerify, 32).nfs_argop4_u.opverify.obj_attributes);
  return *this;
}

Compound &Compound::NverifyChange(uint64_t change) {
  Builder<Impl> b{impl_.get()};
  b.ChangeFattr(change,
                &b.Add(Op::kNverify, 32).nfs_argop4_u.opnverify.obj_attributes);
  return *this;
}

size_t Compound::size() const { return impl_->args.size(); }

Op Compound::op(size_t i) const { return impl_->meta[i].op; }

char *Compound::read_dest(size_t i) const { return impl_->meta[i].read_dest; }

bool Compound::open_by_fh(size_t i) const { return impl_->meta[i].open_by_fh; }

uint32_t Compound::open_seqid(size_t i) const {
  return op(i) == Op::kOpen ? impl_->args[i].nfs_argop4_u.opopen.seqid : 0;
}

size_t Compound::EncodedSizeHint() const { return impl_->size_hint; }

void Compound::FillClientid(uint64_t clientid) {
  for (size_t i = 0; i < impl_->args.size(); i++) {
    if (!impl_->meta[i].auto_clientid) continue;
    // Overwritten every time (not only while 0) so that a Compound retried
    // after the client id was re-established carries the new one.
    nfs_argop4 &a = impl_->args[i];
    switch (impl_->meta[i].op) {
      case Op::kOpen: a.nfs_argop4_u.opopen.owner.clientid = clientid; break;
      case Op::kLock:
        a.nfs_argop4_u.oplock.locker.locker4_u.open_owner.lock_owner.clientid =
            clientid;
        break;
      case Op::kLockt: a.nfs_argop4_u.oplockt.owner.clientid = clientid; break;
      case Op::kRenew: a.nfs_argop4_u.oprenew.clientid = clientid; break;
      case Op::kReleaseLockowner:
        a.nfs_argop4_u.oprelease_lockowner.lock_owner.clientid = clientid;
        break;
      default: break;
    }
  }
}

void Compound::EncodeOwners(OwnerCodec *owners) {
  if (owners == nullptr) return;  // numeric, as built
  Builder<Impl> b{impl_.get()};
  for (const OwnerFattr &of : impl_->owner_fattrs) {
    fattr4 *f = SettableFattr(&impl_->args[of.op]);
    if (f == nullptr) continue;
    // (The bytes encoded before stay kept until the compound dies.)
    impl_->size_hint += b.Fattr(of.attrs, f, owners);
  }
}

COMPOUND4args *Compound::Args() {
  COMPOUND4args &c = impl_->compound;
  c.tag.utf8string_len = u_int(impl_->tag.size());
  c.tag.utf8string_val = &impl_->tag[0];
  c.minorversion = 0;
  c.argarray.argarray_len = u_int(impl_->args.size());
  c.argarray.argarray_val = impl_->args.data();
  return &c;
}

}  // namespace upstream
}  // namespace nache
