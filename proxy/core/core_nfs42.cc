// NFSv4.2's operations, forwarded: ALLOCATE and DEALLOCATE (fallocate and
// hole punching), SEEK (SEEK_DATA, SEEK_HOLE) and the user extended
// attributes of RFC 8276. They need an upstream session of minor version 2
// (Upstream_Minor_Version = 2, and a remote that speaks it); otherwise the
// office's clients hear NFS4ERR_NOTSUPP, as from a server without them, and
// fall back to what they do without (Linux: writing zeros, a file that is
// all data, no xattrs).
//
// Nothing here is answered from the cache: xattrs are not cached, and the
// data operations go to the remote's copy of the file. So a file's
// unflushed data (write-back, or UNSTABLE writes queued behind the client)
// goes first, under the flusher's ownership of the file, which also keeps
// a flush of older data from landing after a DEALLOCATE. A change of ours
// to a file we hold a read delegation of would make the remote recall it
// from us: it is given back first, as for SETATTR.
#include <algorithm>
#include <optional>

#include "core/core.h"
#include "util/log.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

namespace {

// A LISTXATTRS reply we ask for is at most this big (the client's maxcount
// is larger only for long lists; it then asks again from the cookie).
constexpr uint32_t kListxattrsMaxcount = 64 * 1024;

}  // namespace

bool Core::Speaks42() const { return up_ && up_->minor_version() >= 2; }

uint32_t Core::DataToRemoteFirst(Key key,
                                 std::optional<Flusher::Ownership> *owned) {
  if (flusher_) {
    owned->emplace(flusher_->Own(key));
    if (cache_->IsDirty(key)) {
      uint32_t st = (*owned)->Flush();
      if (st) return st;
    }
  }
  if (unstable_writes_) unstable_writes_->Drain(key);
  return upstream::kNfs4Ok;
}

uint32_t Core::Fallocate(const Creds &cr, Key key, NacheOpen *open,
                         uint64_t offset, uint64_t length, bool allocate) {
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  delegations_->ReturnIfReadDelegated(key);
  std::optional<Flusher::Ownership> owned;
  if ((st = DataToRemoteFirst(key, &owned))) return st;
  StateId sid = IoStateid(open);
  for (int attempt = 0; attempt < 2; attempt++) {
    cache_->BeginOwnChange(key);
    Compound c;
    c.SetTag(allocate ? "allocate" : "deallocate").Putfh(fh);
    if (allocate)
      c.Allocate(sid, offset, length);
    else
      c.Deallocate(sid, offset, length);
    c.Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    // Cached blocks are not trusted after either: a hole reads as zeros,
    // and an allocation may have moved the size.
    const OpResult *post = rep.Find(Op::kGetattr);
    cache_->AfterOwnChange(
        key, false, 0,
        st == upstream::kNfs4Ok && post ? post->attrs : upstream::Attrs());
    if (!IsStateError(st) || sid == StateId::Anonymous()) return st;
    sid = StateId::Anonymous();  // our open went away: retry stateless
  }
  return st;
}

uint32_t Core::Copy(const Creds &cr, Key src, NacheOpen *src_open,
                    uint64_t src_offset, Key dst, NacheOpen *dst_open,
                    uint64_t dst_offset, uint64_t count, uint64_t *copied) {
  *copied = 0;
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  Fh src_fh, dst_fh;
  uint32_t st = FhOf(src, &src_fh);
  if (st || (st = FhOf(dst, &dst_fh))) return st;
  delegations_->ReturnIfReadDelegated(dst);
  // The remote copies what it holds: both files' unflushed data goes
  // first, and neither is flushed meanwhile. Owned in key order, so that
  // two copies between the same files in opposite directions cannot each
  // hold one and wait for the other.
  std::optional<Flusher::Ownership> first, second;
  if ((st = DataToRemoteFirst(std::min(src, dst), &first))) return st;
  if (src != dst && (st = DataToRemoteFirst(std::max(src, dst), &second)))
    return st;
  StateId src_sid = IoStateid(src_open), dst_sid = IoStateid(dst_open);
  // A synchronous COPY holds its call until the remote has copied it all:
  // one too big outlasts the call timeout, the client is told to retry,
  // and its retry copies it all again. At most kMaxCopyBytes per COPY
  // (seconds at disk speed); the client goes on from a short copy. (A
  // count of 0, "to the end", goes as it is: a short copy of it would look
  // complete.)
  if (count > kMaxCopyBytes) count = kMaxCopyBytes;
  for (int attempt = 0; attempt < 2; attempt++) {
    cache_->BeginOwnChange(dst);
    Compound c;
    c.SetTag("copy")
        .Putfh(src_fh)
        .Savefh()
        .Putfh(dst_fh)
        .Copy(src_sid, dst_sid, src_offset, dst_offset, count)
        .Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    const OpResult *r = rep.Find(Op::kCopy);
    const OpResult *post = rep.Find(Op::kGetattr);
    // dst's cached blocks in the range are the old bytes: not trusted.
    cache_->AfterOwnChange(
        dst, false, 0,
        st == upstream::kNfs4Ok && post ? post->attrs : upstream::Attrs());
    if (st == upstream::kNfs4Ok && r->copy_async) {
      // We asked for the copy done before the reply; a remote that goes
      // on alone would tell its end to a callback we do not serve. The
      // client copies by reading and writing instead (the same bytes).
      NACHE_LOG(kLogWarn, "NACHE_UPSTREAM",
                "copy: the remote made it asynchronous; the client copies");
      return upstream::kNfs4ErrNotsupp;
    }
    if (st == upstream::kNfs4Ok &&
        r->committed != upstream::StableHow::kFileSync)
      st = CommitCopy(cr, dst_fh, dst_offset, r->verifier);
    if (st == upstream::kNfs4Ok) *copied = r->copied;
    if (!IsStateError(st) ||
        (src_sid == StateId::Anonymous() && dst_sid == StateId::Anonymous()))
      return st;
    src_sid = dst_sid = StateId::Anonymous();  // our opens went away
  }
  return st;
}

uint32_t Core::CommitCopy(const Creds &cr, const Fh &fh, uint64_t offset,
                          const upstream::Verifier &verf) {
  Compound c;
  c.SetTag("copy_commit").Putfh(fh).Commit(offset, 0);  // 0: to the end
  CompoundReply rep;
  uint32_t st = Run(c, cr, &rep);
  if (st) return st;
  // Another verifier: the remote restarted between COPY and COMMIT, and
  // the copy may be lost; the client copies again (the same bytes).
  return rep.Find(Op::kCommit)->verifier == verf ? upstream::kNfs4Ok
                                                 : upstream::kNfs4ErrDelay;
}

uint32_t Core::Seek(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                    upstream::SeekWhat what, bool *eof, uint64_t *found) {
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  std::optional<Flusher::Ownership> owned;
  if ((st = DataToRemoteFirst(key, &owned))) return st;
  StateId sid = IoStateid(open);
  for (int attempt = 0; attempt < 2; attempt++) {
    Compound c;
    c.SetTag("seek").Putfh(fh).Seek(sid, offset, what);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (st == upstream::kNfs4Ok) {
      const OpResult *r = rep.Find(Op::kSeek);
      *eof = r->eof;
      *found = r->offset;
      return st;
    }
    if (!IsStateError(st) || sid == StateId::Anonymous()) return st;
    sid = StateId::Anonymous();
  }
  return st;
}

uint32_t Core::GetXattr(const Creds &cr, Key key, const std::string &name,
                        std::string *value) {
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("getxattr").Putfh(fh).Getxattr(name);
  CompoundReply rep;
  if ((st = Run(c, cr, &rep))) return st;
  *value = std::move(const_cast<OpResult *>(rep.Find(Op::kGetxattr))->data);
  return st;
}

uint32_t Core::ListXattrs(const Creds &cr, Key key, uint64_t cookie,
                          uint32_t maxcount, std::vector<std::string> *names,
                          uint64_t *next_cookie, bool *eof) {
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("listxattrs")
      .Putfh(fh)
      .Listxattrs(cookie, std::min(maxcount, kListxattrsMaxcount));
  CompoundReply rep;
  if ((st = Run(c, cr, &rep))) return st;
  OpResult *r = const_cast<OpResult *>(rep.Find(Op::kListxattrs));
  *names = std::move(r->names);
  *next_cookie = r->cookie;
  *eof = r->eof;
  return st;
}

uint32_t Core::SetXattr(const Creds &cr, Key key, upstream::XattrOption option,
                        const std::string &name, const std::string &value) {
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  if (value.size() > upstream::kMaxXattrValue)
    return upstream::kNfs4ErrXattr2big;
  return ChangeXattr(cr, key, "setxattr",
                     [&](Compound *c) { c->Setxattr(option, name, value); });
}

uint32_t Core::RemoveXattr(const Creds &cr, Key key, const std::string &name) {
  if (!Speaks42()) return upstream::kNfs4ErrNotsupp;
  return ChangeXattr(cr, key, "removexattr",
                     [&](Compound *c) { c->Removexattr(name); });
}

uint32_t Core::ChangeXattr(const Creds &cr, Key key, const char *tag,
                           const std::function<void(Compound *)> &add_op) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  delegations_->ReturnIfReadDelegated(key);
  // The attributes just before and just after: when only we changed the
  // file, its cached data stays valid (an xattr is not its data) under the
  // new change attribute; when the remote refused the change (no such
  // xattr, one already there, no right to), nothing changed.
  cache_->BeginOwnChange(key);
  Compound c;
  c.SetTag(tag).Putfh(fh).Getattr(upstream::kAttrsObject);
  add_op(&c);
  c.Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  const OpResult *pre = rep.Find(Op::kGetattr);
  if (st == upstream::kNfs4Ok) {
    cache_->AfterOwnChange(key, true, pre->attrs.change,
                           rep.Find(Op::kGetattr, 1)->attrs);
  } else if (rep.results.size() == 3 && pre && pre->status == 0) {
    cache_->AfterOwnChange(key, true, pre->attrs.change, pre->attrs);
  } else {
    cache_->AfterOwnChange(key, false, 0, upstream::Attrs());  // unknown
  }
  return st;
}

}  // namespace nache
