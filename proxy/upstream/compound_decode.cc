// Decoding of libnfs' COMPOUND4res into CompoundReply / OpResult: the other
// half of compound.cc. READ data goes straight to the buffer the caller gave
// Compound::Read (the only copy after libnfs' own decode).
#include <cstring>

#include "upstream/attrs.h"
#include "upstream/compound.h"
#include "upstream/compound_impl.h"

namespace nache {
namespace upstream {
namespace {

StateId FromStateid4(const stateid4 &s) {
  StateId out;
  out.seqid = s.seqid;
  std::memcpy(out.other, s.other, sizeof(out.other));
  return out;
}

ChangeInfo FromChangeInfo4(const change_info4 &c) {
  ChangeInfo out;
  out.atomic = c.atomic != 0;
  out.before = c.before;
  out.after = c.after;
  return out;
}

Verifier FromVerifier4(const verifier4 v) {
  return Verifier(v, NFS4_VERIFIER_SIZE);
}

void FromDenied(const LOCK4denied &d, LockDenied *out) {
  out->offset = d.offset;
  out->length = d.length;
  out->type = LockType(uint32_t(d.locktype));
  out->owner_clientid = d.owner.clientid;
  out->owner.assign(d.owner.owner.owner_val, d.owner.owner.owner_len);
}

bool FromFattr4(const fattr4 &f, Attrs *out, Fh *fh) {
  return DecodeAttrs(f.attrmask.bitmap4_val, f.attrmask.bitmap4_len,
                     f.attr_vals.attrlist4_val, f.attr_vals.attrlist4_len, out,
                     fh);
}

// The status every nfs_resop4 arm starts with. All arms begin with an
// nfsstat4, but reading it through the right member keeps this honest.
uint32_t ResStatus(const nfs_resop4 &r) {
  const auto &u = r.nfs_resop4_u;
  switch (r.resop) {
    case OP_ACCESS: return u.opaccess.status;
    case OP_CLOSE: return u.opclose.status;
    case OP_COMMIT: return u.opcommit.status;
    case OP_CREATE: return u.opcreate.status;
    case OP_DELEGPURGE: return u.opdelegpurge.status;
    case OP_DELEGRETURN: return u.opdelegreturn.status;
    case OP_GETATTR: return u.opgetattr.status;
    case OP_GETFH: return u.opgetfh.status;
    case OP_LINK: return u.oplink.status;
    case OP_LOCK: return u.oplock.status;
    case OP_LOCKT: return u.oplockt.status;
    case OP_LOCKU: return u.oplocku.status;
    case OP_LOOKUP: return u.oplookup.status;
    case OP_LOOKUPP: return u.oplookupp.status;
    case OP_NVERIFY: return u.opnverify.status;
    case OP_OPEN: return u.opopen.status;
    case OP_OPENATTR: return u.opopenattr.status;
    case OP_OPEN_CONFIRM: return u.opopen_confirm.status;
    case OP_OPEN_DOWNGRADE: return u.opopen_downgrade.status;
    case OP_PUTFH: return u.opputfh.status;
    case OP_PUTPUBFH: return u.opputpubfh.status;
    case OP_PUTROOTFH: return u.opputrootfh.status;
    case OP_READ: return u.opread.status;
    case OP_READDIR: return u.opreaddir.status;
    case OP_READLINK: return u.opreadlink.status;
    case OP_REMOVE: return u.opremove.status;
    case OP_RENAME: return u.oprename.status;
    case OP_RENEW: return u.oprenew.status;
    case OP_RESTOREFH: return u.oprestorefh.status;
    case OP_SAVEFH: return u.opsavefh.status;
    case OP_SETATTR: return u.opsetattr.status;
    case OP_SETCLIENTID: return u.opsetclientid.status;
    case OP_SETCLIENTID_CONFIRM: return u.opsetclientid_confirm.status;
    case OP_VERIFY: return u.opverify.status;
    case OP_WRITE: return u.opwrite.status;
    case OP_RELEASE_LOCKOWNER: return u.oprelease_lockowner.status;
    case OP_ILLEGAL: return u.opillegal.status;
    default: return kNfs4ErrServerfault;
  }
}

// Fills the operation-specific part of out from res. Returns false when the
// reply is inconsistent with the request (a decode error).
bool DecodeResult(const nfs_resop4 &res, const OpMeta &meta, OpResult *out) {
  const auto &u = res.nfs_resop4_u;
  switch (meta.op) {
    case Op::kGetfh:
      if (out->status == kNfs4Ok) {
        const nfs_fh4 &fh = u.opgetfh.GETFH4res_u.resok4.object;
        if (fh.nfs_fh4_len > kMaxFhSize) return false;
        out->fh.assign(fh.nfs_fh4_val, fh.nfs_fh4_len);
      }
      return true;
    case Op::kGetattr:
      if (out->status != kNfs4Ok) return true;
      return FromFattr4(u.opgetattr.GETATTR4res_u.resok4.obj_attributes,
                        &out->attrs, nullptr);
    case Op::kAccess:
      if (out->status == kNfs4Ok) {
        out->access_supported = u.opaccess.ACCESS4res_u.resok4.supported;
        out->access = u.opaccess.ACCESS4res_u.resok4.access;
      }
      return true;
    case Op::kRead: {
      if (out->status != kNfs4Ok) return true;
      const READ4resok &r = u.opread.READ4res_u.resok4;
      // A server returning more than asked would overrun the caller's buffer.
      if (r.data.data_len > meta.read_count) return false;
      if (r.data.data_len > 0) {
        std::memcpy(meta.read_dest, r.data.data_val, r.data.data_len);
      }
      out->count = r.data.data_len;
      out->eof = r.eof != 0;
      return true;
    }
    case Op::kWrite:
      if (out->status == kNfs4Ok) {
        const WRITE4resok &w = u.opwrite.WRITE4res_u.resok4;
        out->count = w.count;
        out->committed = StableHow(uint32_t(w.committed));
        out->verifier = FromVerifier4(w.writeverf);
      }
      return true;
    case Op::kCommit:
      if (out->status == kNfs4Ok) {
        out->verifier = FromVerifier4(u.opcommit.COMMIT4res_u.resok4.writeverf);
      }
      return true;
    case Op::kOpen: {
      if (out->status != kNfs4Ok) return true;
      const OPEN4resok &o = u.opopen.OPEN4res_u.resok4;
      out->stateid = FromStateid4(o.stateid);
      out->cinfo = FromChangeInfo4(o.cinfo);
      out->open_rflags = o.rflags;
      const open_delegation4 &d = o.delegation;
      switch (d.delegation_type) {
        case OPEN_DELEGATE_READ:
          out->delegation.type = DelegationType::kRead;
          out->delegation.stateid =
              FromStateid4(d.open_delegation4_u.read.stateid);
          out->delegation.recall = d.open_delegation4_u.read.recall != 0;
          break;
        case OPEN_DELEGATE_WRITE:
          out->delegation.type = DelegationType::kWrite;
          out->delegation.stateid =
              FromStateid4(d.open_delegation4_u.write.stateid);
          out->delegation.recall = d.open_delegation4_u.write.recall != 0;
          break;
        default:
          out->delegation.type = DelegationType::kNone;
          break;
      }
      return true;
    }
    case Op::kOpenConfirm:
      if (out->status == kNfs4Ok) {
        out->stateid = FromStateid4(
            u.opopen_confirm.OPEN_CONFIRM4res_u.resok4.open_stateid);
      }
      return true;
    case Op::kOpenDowngrade:
      if (out->status == kNfs4Ok) {
        out->stateid = FromStateid4(
            u.opopen_downgrade.OPEN_DOWNGRADE4res_u.resok4.open_stateid);
      }
      return true;
    case Op::kClose:
      if (out->status == kNfs4Ok) {
        out->stateid = FromStateid4(u.opclose.CLOSE4res_u.open_stateid);
      }
      return true;
    case Op::kCreate:
      if (out->status == kNfs4Ok) {
        out->cinfo = FromChangeInfo4(u.opcreate.CREATE4res_u.resok4.cinfo);
      }
      return true;
    case Op::kRemove:
      if (out->status == kNfs4Ok) {
        out->cinfo = FromChangeInfo4(u.opremove.REMOVE4res_u.resok4.cinfo);
      }
      return true;
    case Op::kLink:
      if (out->status == kNfs4Ok) {
        out->cinfo = FromChangeInfo4(u.oplink.LINK4res_u.resok4.cinfo);
      }
      return true;
    case Op::kRename:
      if (out->status == kNfs4Ok) {
        out->cinfo =
            FromChangeInfo4(u.oprename.RENAME4res_u.resok4.source_cinfo);
        out->cinfo2 =
            FromChangeInfo4(u.oprename.RENAME4res_u.resok4.target_cinfo);
      }
      return true;
    case Op::kReadlink:
      if (out->status == kNfs4Ok) {
        const linktext4 &l = u.opreadlink.READLINK4res_u.resok4.link;
        out->data.assign(l.utf8string_val, l.utf8string_len);
      }
      return true;
    case Op::kReaddir: {
      if (out->status != kNfs4Ok) return true;
      const READDIR4resok &r = u.opreaddir.READDIR4res_u.resok4;
      out->verifier = FromVerifier4(r.cookieverf);
      out->eof = r.reply.eof != 0;
      for (const entry4 *e = r.reply.entries; e != nullptr; e = e->nextentry) {
        DirEntry de;
        de.cookie = e->cookie;
        de.name.assign(e->name.utf8string_val, e->name.utf8string_len);
        if (!FromFattr4(e->attrs, &de.attrs, meta.want_fh ? &de.fh : nullptr)) {
          return false;
        }
        out->entries.push_back(std::move(de));
      }
      return true;
    }
    case Op::kLock:
      if (out->status == kNfs4Ok) {
        out->stateid = FromStateid4(u.oplock.LOCK4res_u.resok4.lock_stateid);
      } else if (out->status == kNfs4ErrDenied) {
        FromDenied(u.oplock.LOCK4res_u.denied, &out->denied);
      }
      return true;
    case Op::kLockt:
      if (out->status == kNfs4ErrDenied) {
        FromDenied(u.oplockt.LOCKT4res_u.denied, &out->denied);
      }
      return true;
    case Op::kLocku:
      if (out->status == kNfs4Ok) {
        out->stateid = FromStateid4(u.oplocku.LOCKU4res_u.lock_stateid);
      }
      return true;
    case Op::kSetclientid:
      if (out->status == kNfs4Ok) {
        const SETCLIENTID4resok &s = u.opsetclientid.SETCLIENTID4res_u.resok4;
        out->clientid = s.clientid;
        out->verifier = FromVerifier4(s.setclientid_confirm);
      } else if (out->status == kNfs4ErrClidInuse) {
        // Who holds the id, for the log: "netid addr".
        const clientaddr4 &c = u.opsetclientid.SETCLIENTID4res_u.client_using;
        out->data = std::string(c.r_netid ? c.r_netid : "") + " " +
                    (c.r_addr ? c.r_addr : "");
      }
      return true;
    default:
      // Status-only operations (PUTFH, LOOKUP, SAVEFH, SETATTR, RENEW, ...).
      return true;
  }
}

}  // namespace

bool Compound::Decode(const COMPOUND4res *res, CompoundReply *out) const {
  out->status = res->status;
  out->results.clear();
  size_t n = res->resarray.resarray_len;
  // The server stops at the first failure, so it may return fewer results,
  // never more.
  if (n > impl_->meta.size()) return false;
  out->results.reserve(n);
  for (size_t i = 0; i < n; i++) {
    const nfs_resop4 &r = res->resarray.resarray_val[i];
    const OpMeta &meta = impl_->meta[i];
    OpResult result;
    result.op = meta.op;
    result.status = ResStatus(r);
    if (r.resop == OP_ILLEGAL) {
      // The server did not know the operation: nothing else to decode.
      out->results.push_back(std::move(result));
      continue;
    }
    if (uint32_t(r.resop) != uint32_t(meta.op)) return false;
    if (!DecodeResult(r, meta, &result)) return false;
    out->results.push_back(std::move(result));
  }
  return true;
}

}  // namespace upstream
}  // namespace nache
