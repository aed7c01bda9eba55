// The core's side of write-back (proxy/writeback/DESIGN.md): which writes
// stay local, the local write itself, the flusher's sends and first step,
// the listing of local entries, and the create of a closed file with a
// flush open-owner. The namespace's write-back itself (the log, local
// names, logged removes and renames) is NamespaceWriteBack's
// (writeback/namespace_writeback.h).
#include <time.h>

#include <algorithm>
#include <cstdint>

#include "core/convert.h"
#include "core/core.h"
#include "util/bytes.h"
#include "util/log.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

bool Core::WriteBackFor(Key key) {
  if (!flusher_) return false;
  // A file with unflushed data stays write-back until flushed, whatever
  // happens to the delegation meanwhile (its return flushes it first), and
  // whether or not nachectl drain is in force: a write sent at once could
  // land at the remote before older data of the file still to be flushed.
  if (cache_->IsDirty(key)) return true;
  if (Draining()) return false;
  return cfg_.single_writer ||
         delegations_->Covers(key, upstream::kShareAccessWrite, 0, nullptr);
}

Key Core::DirtyFileNamed(Key dir, const std::string &name) {
  for (Key k : cache_->DirtyFiles(std::chrono::milliseconds(0), SIZE_MAX)) {
    HandleRecord rec;
    if (handles_->Get(k, &rec) && rec.parent == dir && rec.name == name)
      return k;
  }
  return kNoKey;
}

uint32_t Core::WriteLocal(const Creds &cr, Key key, NacheOpen *open,
                          uint64_t offset, size_t len, const char *buf,
                          size_t *nwritten, upstream::StableHow *committed) {
  // Earlier unstable writes of the same file, queued for the upstream,
  // land before this one.
  if (unstable_writes_) unstable_writes_->Drain(key);
  // A conflict of this file being resolved: this write is made on the
  // remote's version once ours is set aside (writeback/conflicts.h).
  if (!writeback_->WaitUnresolved(
          key,
          std::chrono::steady_clock::now() +
              std::chrono::milliseconds(cfg_.call_timeout_ms),
          [this] { metrics_->CountConflictWait(); }))
    return upstream::kNfs4ErrDelay;
  Attrs a;
  if (!cache_->KnownAttrs(key, &a)) {
    uint32_t st = Revalidate(cr, key, &a);
    if (st) return st;
  }
  // Beyond the dirty bound writes wait for the flusher; when it cannot
  // make room (the remote is away) the client retries later.
  if (!flusher_->WaitForRoom(len,
                             std::chrono::milliseconds(cfg_.call_timeout_ms)))
    return upstream::kNfs4ErrDelay;
  struct Used {
    Flusher *f;
    size_t n;
    ~Used() { f->RoomUsed(n); }
  } used{flusher_.get(), len};
  // The writer first: its record is made durable by the write's own sync.
  writeback_->NoteWriter(key, cr);
  for (int attempt = 0; attempt < 4; attempt++) {
    uint64_t need = UINT64_MAX, unchanged = 0;
    if (cache_->LocalWrite(key, offset, buf, len, &need, &unchanged)) {
      if (unchanged) metrics_->CountUnchangedWrite(unchanged);
      *nwritten = len;
      // FILE_SYNC: it is on our stable storage.
      *committed = upstream::StableHow::kFileSync;
      return upstream::kNfs4Ok;
    }
    // The store failed: a full cache disk is the client's NOSPC (nothing
    // of the write was taken; it can free space or retry); else EIO.
    if (need == UINT64_MAX) return StoreFailure();
    // A block the write covers only in part and whose other bytes are at
    // the remote: read it first (it is cached, then the write goes in).
    std::string block;
    uint32_t st = reader_->Get(key, need, cr, IoStateid(open), &block);
    if (st) return st;
    // Read but not kept (a full cache disk): trying again would read it
    // again, for ever.
    if (store_->no_space()) return upstream::kNfs4ErrNospc;
  }
  return upstream::kNfs4ErrDelay;  // evicted again and again: retry
}

uint32_t Core::StoreFailure() const {
  return store_->no_space() ? upstream::kNfs4ErrNospc : upstream::kNfs4ErrIo;
}

uint32_t Core::FlushRange(Key key, uint64_t offset, const std::string &data,
                          upstream::StableHow stable, Flusher::Sent *sent) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  delegations_->ReturnIfReadDelegated(
      key);  // a read delegation of ours, not a write one
  Creds cr = writeback_->FlushCreds(key);
  StateId sid;
  if (!delegations_->Covers(key, upstream::kShareAccessWrite, 0, &sid))
    sid = StateId::Anonymous();
  st = WriteRange(cr, fh, sid, offset, data.data(), data.size(), stable,
                  "flush", sent);
  NoteFlushRefused("write", key, cr, st);
  return st;
}

uint32_t Core::FlushCommit(Key key, upstream::Verifier *verf, Attrs *after) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("flush_commit")
      .Putfh(fh)
      .Commit(0, 0)
      .Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  st = Run(c, writeback_->FlushCreds(key), &rep);
  if (st) return st;
  *verf = rep.Find(Op::kCommit)->verifier;
  *after = rep.Find(Op::kGetattr)->attrs;
  return upstream::kNfs4Ok;
}

void Core::NoteFlushRefused(const char *op, Key key, const Creds &cr,
                            uint32_t st) {
  if (st != upstream::kNfs4ErrAccess && st != upstream::kNfs4ErrPerm) return;
  metrics_->CountWritebackRefused(op);
  NACHE_LOG(kLogCrit, kWritebackComponent,
            "the remote refuses the %s of key %llu, acknowledged here "
            "earlier, to uid %u gid %u with %zu group(s) (%s): kept, "
            "retried later",
            op, (unsigned long long)key, cr.uid, cr.gid, cr.groups.size(),
            nache_status_name(st));
}

uint32_t Core::WriteRange(const Creds &cr, const Fh &fh, const StateId &sid,
                          uint64_t offset, const char *data, size_t len,
                          upstream::StableHow stable, const char *tag,
                          Flusher::Sent *sent) {
  LearnIoLimits();
  const size_t per = std::max<size_t>(4096, max_write_.load());
  bool first = true;
  for (size_t done = 0; done < len;) {
    size_t n = std::min(per, len - done);
    bool last = done + n == len;
    Compound c;
    c.SetTag(tag).Putfh(fh).Write(sid, offset + done, stable, data + done,
                                  uint32_t(n));
    if (last && sent) c.Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    uint32_t st = Run(c, cr, &rep);
    if (st) return st;
    const upstream::OpResult &w = *rep.Find(Op::kWrite);
    if (w.count == 0) return upstream::kNfs4ErrIo;
    done += w.count;
    if (!sent) continue;
    if (uint32_t(w.committed) < uint32_t(sent->committed))
      sent->committed = w.committed;
    if (!first && w.verifier != sent->verifier) sent->mixed = true;
    sent->verifier = w.verifier;
    first = false;
    if (last && w.count == n) sent->after = rep.Find(Op::kGetattr)->attrs;
  }
  return upstream::kNfs4Ok;
}

uint32_t Core::FlushSetattr(Key key, const Attrs &set, Attrs *after) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  // A directory's mtime is set after its entries are removed and created
  // there (that would move it again).
  if (LocalNamespace() && ((st = namespace_->SendRemovesIn(key)) ||
                           (st = namespace_->CreateEntriesRemotely(key))))
    return st;
  delegations_->ReturnIfReadDelegated(key);
  Compound c;
  c.SetTag("flush_setattr").Putfh(fh);
  // Nothing to set (an object created here, whose create was all): its
  // attributes at the remote, to follow from now on.
  if (set.mask != 0) c.Setattr(StateId::Anonymous(), set);
  c.Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  Creds cr = writeback_->FlushCreds(key);
  st = Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok) *after = rep.Find(Op::kGetattr)->attrs;
  if (RefusedDirectoryTimes(key, set, st))
    return FlushSetattr(key, Attrs(), after);  // the remote's times stand
  NoteFlushRefused("setattr", key, cr, st);
  return st;
}

bool Core::RefusedDirectoryTimes(Key key, const Attrs &set, uint32_t st) {
  // A directory's times follow from the creates and removes in it, which
  // the remote applied itself, moving them. Set explicitly they need the
  // owner's rights (utimes), which the caller they are sent as may lack
  // (nobody wrote the directory here but to add entries; a squashed root
  // owns nothing): refused, they would be retried for ever and keep the
  // directory dirty. Given up instead, logged: nothing a user wrote is in
  // them.
  const uint64_t times = upstream::kAttrAtime | upstream::kAttrMtime;
  Attrs a;
  if ((st != upstream::kNfs4ErrAccess && st != upstream::kNfs4ErrPerm) ||
      set.mask == 0 || (set.mask & ~times) != 0 ||
      !cache_->KnownAttrs(key, &a) || a.type != upstream::FileType::kDir)
    return false;
  NACHE_LOG(kLogWarn, kWritebackComponent,
            "the remote refuses to set the times of directory %llu (%s): "
            "its own times stand",
            (unsigned long long)key, nache_status_name(st));
  return true;
}

uint32_t Core::PrepareFlush(Key key, bool patient) {
  if (LocalNamespace()) {
    // Created here: create it remotely first (with its data when small),
    // its directory before it.
    if (namespace_->names().IsLocal(key))
      return namespace_->CreateRemotely(key);
    // A directory's mtime waits until its local entries are old enough to
    // be sent (those that die young never are).
    int64_t newest = namespace_->names().NewestChildTime(key);
    if (patient && newest != 0 &&
        int64_t(time(nullptr)) - newest < int64_t(cfg_.flush_age_ms / 1000))
      return Flusher::kNotYet;
  }
  return conflicts_->CheckForConflict(key);
}

uint32_t Core::ReaddirLocal(const Creds &cr, Key dir, uint64_t cookie,
                            nache_dirent_cb cb, void *ctx, bool *eof) {
  // Cookies are the entries' log sequence numbers, marked: increasing in
  // listing order, never reused.
  uint64_t after = IsLocalCookie(cookie) ? cookie & ~kLocalCookie : 0;
  for (const LocalNames::Entry &e : namespace_->names().Children(dir)) {
    if (e.seq <= after) continue;
    uint64_t c = kLocalCookie | e.seq;
    Attrs a;
    // (An object renamed here is the remote's: its attributes may need
    // asking for.)
    if (e.moved ? Getattr(cr, e.key, &a) != upstream::kNfs4Ok
                : !cache_->KnownAttrs(e.key, &a))
      continue;  // removed meanwhile
    nache_attrs ca;
    AttrsToC(a, e.key, &ca);
    if (!cb(ctx, e.name.c_str(), e.key, &ca, c)) return upstream::kNfs4Ok;
  }
  *eof = true;
  return upstream::kNfs4Ok;
}

uint32_t Core::CreateClosedFile(const Creds &cr, const Fh &pfh,
                                const std::string &name,
                                upstream::OpenArgs::Create how, const Attrs &ca,
                                Key key,
                                const std::function<void(Compound *)> &more,
                                CompoundReply *rep, Fh *fh,
                                upstream::Delegation *deleg) {
  // NFSv4.0 creates regular files by OPEN; this one is closed at once
  // (local opens of the file have their own).
  OwnerSlot *owner = writeback_->FlushOwner(key);
  MutexLock og(&owner->mu);
  uint64_t epoch = up_->epoch();
  if (owner->epoch != epoch) {
    owner->seqid = 0;
    owner->epoch = epoch;
    owner->name = owner_prefix_ + "-flush" +
                  std::to_string(writeback_->FlushOwnerIndex(owner));
  }
  upstream::OpenArgs a;
  a.seqid = owner->seqid;
  a.share_access = upstream::kShareAccessWrite;
  a.share_deny = upstream::kShareDenyNone;
  a.owner = owner->name;
  a.name = name;
  a.create = how;
  a.create_attrs = ca;
  Compound c;
  c.SetTag("flush_create").Putfh(pfh).Open(a).Getfh();
  more(&c);
  c.Getattr(upstream::kAttrsObject);
  uint32_t st = Run(c, cr, rep);
  const OpResult *o = rep->Find(Op::kOpen);
  if (o) OpenTable::AdvanceSeqid(&owner->seqid, o->status);
  if (!o || o->status) return o ? o->status : st;
  if (!rep->Find(Op::kGetfh)) return st ? st : upstream::kNfs4ErrServerfault;
  *fh = rep->Find(Op::kGetfh)->fh;
  StateId sid = o->stateid;
  if ((st = ConfirmIfAsked(cr, *o, *fh, owner, &sid, ReopenAfterConfirm(),
                           deleg)))
    return st;
  Compound cl;
  cl.SetTag("flush_create_close").Putfh(*fh).Close(owner->seqid, sid);
  CompoundReply clrep;
  Run(cl, cr, &clrep);  // a failed CLOSE: the state dies with the lease
  if (const OpResult *x = clrep.Find(Op::kClose))
    OpenTable::AdvanceSeqid(&owner->seqid, x->status);
  return upstream::kNfs4Ok;
}

}  // namespace nache
