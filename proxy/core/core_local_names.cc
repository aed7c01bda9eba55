// The local namespace of write-back on single-writer exports
// (proxy/writeback/DESIGN.md, "Metadata"): creates, removes and renames of
// objects the remote has not seen yet, and the flush of their creates.
//
// Invariants:
// - An object is local (LocalNames has it) exactly while its kCreate
//   record is in the log; its handle record has no filehandle then.
// - A directory is created remotely before anything in it. A local rename
//   moves the record to the end of the log (OpLog::Replace), which keeps
//   that order: only non-directories created here are renamed locally,
//   and the target directory's record is older. Directories the remote
//   has are moved by handle-independent kRename records, sent in log order
//   among themselves (core_local_renames.cc). Nothing else orders records:
//   names are unique among local objects, and whiteouts make a name's
//   remove or rename go before its reuse.
// - Anything that needs the remote handle of a local object goes through
//   FhOf, which creates it remotely first (CreateRemotely).
#include <time.h>

#include <algorithm>

#include "core/convert.h"
#include "core/core.h"
#include "util/log.h"
#include "util/parallel.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::FileType;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

namespace {

const char *const kComponent = kWritebackComponent;

upstream::Time Now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return upstream::Time{ts.tv_sec, uint32_t(ts.tv_nsec)};
}

}  // namespace

uint32_t Core::CheckNewName(const Creds &cr, Key dir, const std::string &name,
                            Attrs *dir_attrs) {
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos)
    return upstream::kNfs4ErrInval;
  if (name.size() > 255) return upstream::kNfs4ErrNametoolong;
  uint32_t st = Getattr(cr, dir, dir_attrs);
  if (st) return st;
  return dir_attrs->type == FileType::kDir ? upstream::kNfs4Ok
                                           : upstream::kNfs4ErrNotdir;
}

uint32_t Core::CreateLocal(const Creds &cr, Key dir, const std::string &name,
                           FileType type, const Attrs &in,
                           const std::string &link_text, Key *key, Attrs *out) {
  Attrs da;
  uint32_t st = CheckNewName(cr, dir, name, &da);
  if (st) return st;
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessExtend | upstream::kAccessLookup;
  if ((st = Access(cr, dir, need, &allowed))) return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  Key existing;
  st = Lookup(cr, dir, name, &existing, nullptr);
  if (st == upstream::kNfs4Ok) return upstream::kNfs4ErrExist;
  if (st != upstream::kNfs4ErrNoent) return st;

  MutexLock g(&meta_mu_);
  if (local_names_->Find(dir, name, nullptr)) return upstream::kNfs4ErrExist;
  Key k = handles_->NewLocal(dir, name);
  if (k == kNoKey) return StoreFailure();
  Attrs a;
  a.mask = upstream::kAttrsObject;
  a.type = type;
  a.change = 1;
  a.size = type == FileType::kDir   ? 4096
           : type == FileType::kLnk ? link_text.size()
                                    : 0;
  a.fsid_major = da.fsid_major;
  a.fsid_minor = da.fsid_minor;
  a.fileid = k;
  a.mode = (in.mask & upstream::kAttrMode) ? (in.mode & 07777)
                                           : (type == FileType::kDir   ? 0755
                                              : type == FileType::kLnk ? 0777
                                                                       : 0644);
  a.nlink = type == FileType::kDir ? 2 : 1;
  a.uid = cr.uid;
  // A set-group-id directory passes its group on (and the bit, to
  // subdirectories), as at the remote.
  a.gid = (da.mode & 02000) ? da.gid : cr.gid;
  // (A group the remote named and we could not map stays no one's here.)
  if (da.mode & 02000) a.mask |= da.mask & upstream::kAttrGroupUnmapped;
  if (type == FileType::kDir && (da.mode & 02000)) a.mode |= 02000;
  a.atime = a.mtime = a.ctime = Now();
  if (!cache_->LocalCreate(k, a)) return StoreFailure();
  LogRecord r;
  r.op = LogOp::kCreate;
  r.key = dir;
  r.key2 = k;
  r.type = type;
  r.attrs = a;
  r.name = name;
  r.text = link_text;
  r.SetCreds(cr);  // sent as its creator, groups and all
  uint64_t seq = oplog_->Append(r);
  if (seq == 0) {
    cache_->Forget(k);
    return StoreFailure();
  }
  local_names_->Add(LocalNames::Entry{seq, dir, name, k, type, link_text,
                                      int64_t(time(nullptr))});
  never_sent_.insert(k);
  cache_->LocalDirEdit(dir, "", name, k);
  writeback_->NoteWriter(k, cr);
  metrics_->CountLocalCreate();
  *key = k;
  if (out) *out = a;
  return upstream::kNfs4Ok;
}

uint32_t Core::RemoveLocal(const Creds &cr, Key dir,
                           const LocalNames::Entry &e) {
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessModify | upstream::kAccessLookup;
  uint32_t st = Access(cr, dir, need, &allowed);
  if (st) return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  MutexLock g(&meta_mu_);
  while (sending_.count(e.key) != 0) meta_cv_.Wait();
  LocalNames::Entry now;
  // Created remotely (or removed) while we were checking: the caller
  // takes the remote way.
  if (!local_names_->Find(dir, e.name, &now) || now.key != e.key)
    return upstream::kNfs4ErrDelay;
  if (e.type == FileType::kDir && local_names_->LastChildSeq(e.key) != 0)
    return upstream::kNfs4ErrNotempty;
  // Synced: once the client hears "removed", a crash must not bring the
  // create back.
  if (!oplog_->Erase({e.seq}, true)) return StoreFailure();
  local_names_->Erase(e.key);
  never_sent_.erase(e.key);
  cache_->Forget(e.key);  // its data need never be sent
  cache_->LocalDirEdit(dir, e.name, "", kNoKey);
  metrics_->CountLocalCancel();
  return upstream::kNfs4Ok;
}

uint32_t Core::RenameLocal(const Creds &cr, const LocalNames::Entry &src,
                           Key newdir, const std::string &newname, bool *done) {
  *done = false;
  Attrs nda;
  uint32_t st = CheckNewName(cr, newdir, newname, &nda);
  if (st) return st;
  if ((st = MayRenameBetween(cr, src.dir, newdir))) return st;
  LocalNames::Entry target;
  bool target_local = local_names_->Find(newdir, newname, &target);
  // A file or symlink of the remote's that the rename replaces (an
  // editor saving through a temporary file): its remove is logged with
  // the rename, in one synced write.
  Key replaced = kNoKey;
  if (!target_local) {
    bool remote = false;
    if ((st = ReplacedByRename(cr, newdir, newname, nda, &replaced, &remote)))
      return st;
    if (remote) return upstream::kNfs4Ok;
  }

  MutexLock g(&meta_mu_);
  while (sending_.count(src.key) != 0 ||
         (target_local && sending_.count(target.key) != 0))
    meta_cv_.Wait();
  LocalNames::Entry now;
  if (!local_names_->Get(src.key, &now) || now.dir != src.dir ||
      now.name != src.name)
    return upstream::kNfs4ErrDelay;  // moved meanwhile: the client retries
  if (local_names_->Find(newdir, newname, &target)) {
    if (target.key == src.key) {
      *done = true;
      return upstream::kNfs4Ok;
    }
    if (target.type == FileType::kDir) return upstream::kNfs4ErrExist;
  } else if (target_local ||
             (replaced != kNoKey &&
              local_names_->FindRemoved(newdir, newname, nullptr))) {
    return upstream::kNfs4ErrDelay;  // the target changed meanwhile
  }
  std::vector<LogRecord> rec = oplog_->Read(src.seq, 1);
  if (rec.empty() || rec[0].seq != src.seq || rec[0].key2 != src.key)
    return upstream::kNfs4ErrServerfault;
  LogRecord r = rec[0];
  r.key = newdir;
  r.name = newname;
  r.logged_at = 0;
  if (target_local) {
    // Replaced: the target is dropped as if removed.
    if (!oplog_->Erase({target.seq}, false)) return StoreFailure();
  }
  std::vector<LogRecord> recs;
  if (replaced != kNoKey)
    recs.push_back(RemoveRecord(cr, newdir, newname, replaced));
  recs.push_back(std::move(r));
  if (!oplog_->Replace(src.seq, &recs)) return StoreFailure();
  uint64_t seq = recs.back().seq;
  if (replaced != kNoKey) NoteReplaced(recs[0].seq, newdir, newname, replaced);
  if (target_local) {
    local_names_->Erase(target.key);
    never_sent_.erase(target.key);
    cache_->Forget(target.key);
    metrics_->CountLocalCancel();
  }
  local_names_->Move(src.key, seq, newdir, newname);
  handles_->SetName(src.key, newdir, newname);
  EditListingsForRename(src.dir, src.name, newdir, newname, src.key);
  *done = true;
  return upstream::kNfs4Ok;
}

uint32_t Core::ReaddirLocal(const Creds &cr, Key dir, uint64_t cookie,
                            nache_dirent_cb cb, void *ctx, bool *eof) {
  // Cookies are the entries' log sequence numbers, marked: increasing in
  // listing order, never reused.
  uint64_t after = IsLocalCookie(cookie) ? cookie & ~kLocalCookie : 0;
  for (const LocalNames::Entry &e : local_names_->Children(dir)) {
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

uint32_t Core::CreateRemotely(Key key) {
  LogRecord r;
  LocalNames::Entry e;
  bool fresh = false;
  {
    MutexLock g(&meta_mu_);
    while (sending_.count(key) != 0) meta_cv_.Wait();
    if (!local_names_->Get(key, &e)) return upstream::kNfs4Ok;
    std::vector<LogRecord> recs = oplog_->Read(e.seq, 1);
    if (recs.empty() || recs[0].seq != e.seq ||
        (e.moved ? recs[0].op != LogOp::kRename || Key(recs[0].offset) != key
                 : recs[0].key2 != key)) {
      NACHE_LOG(kLogCrit, kComponent,
                "no create or rename record %llu for local object %llu",
                (unsigned long long)e.seq, (unsigned long long)key);
      return upstream::kNfs4ErrServerfault;
    }
    r = std::move(recs[0]);
    // While it is sent, a remove or rename of it waits (they would
    // rewrite a record that is on its way).
    sending_.insert(key);
    // From this try on it may be at the remote (if the reply is lost).
    fresh = never_sent_.erase(key) != 0;
  }
  // Its directory first (a record never comes before its directory's),
  // and a remove of the same name logged before it; a moved directory
  // after the directories moved before it.
  uint32_t st = local_names_->IsLocal(e.dir) ? CreateRemotely(e.dir)
                                             : SendRemoveOf(e.dir, e.name);
  if (st == upstream::kNfs4Ok && e.moved && e.type == FileType::kDir)
    st = SendDirRenamesBefore(e.seq);
  if (st == upstream::kNfs4Ok)
    st = e.moved ? SendRename(r) : SendCreate(r, fresh);
  {
    MutexLock g(&meta_mu_);
    sending_.erase(key);
    if (st == upstream::kNfs4Ok) {
      local_names_->Erase(key);
      if (e.moved) local_names_->EraseRemoved(r.seq);  // its old name
      oplog_->Erase({r.seq});
    }
  }
  meta_cv_.SignalAll();
  if (st == upstream::kNfs4ErrAccess || st == upstream::kNfs4ErrPerm)
    NoteFlushRefused(e.moved ? "rename" : "create", key, r.SendCreds(), st);
  else if (st)
    NACHE_LOG(kLogInfo, kComponent,
              "create of %s (key %llu) at the remote failed (nfs status %u); "
              "kept, retried later",
              r.name.c_str(), (unsigned long long)key, st);
  return st;
}

uint32_t Core::PrepareFlush(Key key, bool patient) {
  if (LocalNamespace()) {
    // Created here: create it remotely first (with its data when small),
    // its directory before it.
    if (local_names_->IsLocal(key)) return CreateRemotely(key);
    // A directory's mtime waits until its local entries are old enough to
    // be sent (those that die young never are).
    int64_t newest = local_names_->NewestChildTime(key);
    if (patient && newest != 0 &&
        int64_t(time(nullptr)) - newest < int64_t(cfg_.flush_age_ms / 1000))
      return Flusher::kNotYet;
  }
  return CheckForConflict(key);
}

uint32_t Core::CreateEntriesRemotely(Key dir) {
  // Several at once: each is round trips, not bandwidth.
  std::vector<LocalNames::Entry> todo = local_names_->Children(dir);
  return ParallelFor(todo.size(), WriteBack::kFlushOwners,
                     [&](size_t i) { return CreateRemotely(todo[i].key); });
}

uint32_t Core::SendCreate(const LogRecord &r, bool fresh) {
  // Its directory is at the remote already (CreateRemotely sent it first).
  Fh pfh;
  if (uint32_t st = FhOf(r.key, &pfh)) return st;
  // As its creator, with the groups that allowed the create here (a
  // record of the first format: the owner and group, no groups).
  Creds cr = r.SendCreds();
  Attrs ca;
  ca.mask = upstream::kAttrMode;
  ca.mode = r.attrs.mode;
  Fh fh;
  Attrs after;
  bool resent_exist = false;  // EXIST to a create Run had to resend
  // A record never tried before must find its name free: one taken at the
  // remote meanwhile is somebody else's object (a conflict, below). One
  // that may have been sent before (by a run that crashed, or a try whose
  // reply was lost) finds its own object there instead: a file is opened
  // UNCHECKED, a directory or symlink looked up after EXIST.
  auto create_as = [&](const std::string &name) -> uint32_t {
    if (r.type != FileType::kReg) {
      Compound c;
      c.SetTag("flush_create")
          .Putfh(pfh)
          .Create(r.type, name, ca, r.text)
          .Getfh()
          .Getattr(upstream::kAttrsObject);
      CompoundReply rep;
      uint32_t st = Run(c, cr, &rep);
      if (st) return st;
      fh = rep.Find(Op::kGetfh)->fh;
      after = rep.Find(Op::kGetattr)->attrs;
      return upstream::kNfs4Ok;
    }
    // A small file goes whole in the same COMPOUND: its data (WRITEs with
    // the anonymous stateid, which our deny-none open does not conflict
    // with) and the attributes set here, then the attributes after. One
    // round trip instead of three; the flusher then finds it clean.
    LearnIoLimits();
    std::vector<Cache::DirtyRange> ranges = cache_->DirtyRanges(r.key2);
    Attrs set;
    uint64_t set_epoch = 0;
    bool have_set = cache_->PendingSetattr(r.key2, &set, &set_epoch);
    size_t bytes = 0;
    for (const Cache::DirtyRange &d : ranges) bytes += d.data.size();
    bool inline_all = ranges.size() <= 4 && bytes <= max_write_.load();
    CompoundReply rep;
    upstream::Delegation deleg;
    uint32_t st = CreateClosedFile(
        cr, pfh, name,
        fresh ? upstream::OpenArgs::Create::kGuarded
              : upstream::OpenArgs::Create::kUnchecked,
        ca, r.key2,
        [&](Compound *c) {
          if (!inline_all) return;
          const uint64_t bs = cache_->block_size();
          for (const Cache::DirtyRange &d : ranges)
            c->Write(StateId::Anonymous(), d.idx * bs + d.lo,
                     upstream::StableHow::kFileSync, d.data.data(),
                     uint32_t(d.data.size()));
          if (have_set && set.mask != 0) c->Setattr(StateId::Anonymous(), set);
        },
        &rep, &fh, &deleg);
    // The create went out again after getting no reply, and the remote
    // executed the resend anew rather than from its replay cache: the
    // name may hold the file the first send made.
    if (st == upstream::kNfs4ErrExist && rep.sends > 1) resent_exist = true;
    if (st) return st;
    delegations_->NoteGrant(r.key2, deleg);
    // Everything after the OPEN went through: the file is clean (unless
    // written or set again meanwhile, which Flushed sees). Otherwise the
    // flusher sends what is left the usual way.
    if (const OpResult *g = rep.Find(Op::kGetattr)) {
      after = g->attrs;
      if (inline_all && rep.status == upstream::kNfs4Ok) {
        // Each WRITE wrote its whole range (a short one leaves it dirty).
        bool whole = true;
        for (size_t i = 0; i < ranges.size(); i++) {
          const OpResult *w = rep.Find(Op::kWrite, int(i));
          if (!w || w->count != ranges[i].data.size()) whole = false;
        }
        if (whole)
          cache_->Flushed(r.key2, ranges, have_set ? set_epoch : 0, after);
      }
    }
    return upstream::kNfs4Ok;
  };
  uint32_t st = create_as(r.name);
  if (st == upstream::kNfs4ErrExist && fresh && !resent_exist &&
      r.type != FileType::kDir) {
    // Taken at the remote since (a directory is simply shared: its
    // entries are checked one by one). Ours goes beside it, and is known
    // here by that name from now on.
    const std::string stamp = WriteBack::UtcStamp();
    std::string cname;
    for (int n = 0; n < 100 && st == upstream::kNfs4ErrExist; n++) {
      cname = WriteBack::ConflictName(r.name, stamp, n);
      st = create_as(cname);
    }
    if (st) return st;
    handles_->SetName(r.key2, r.key, cname);
    cache_->LocalDirEdit(r.key, r.name, cname, r.key2);
    metrics_->CountConflict();
    NACHE_LOG(kLogWarn, kComponent,
              "conflict: %s was created at the remote while ours (key %llu) "
              "waited to be sent; theirs stays, ours is created beside it "
              "as %s",
              r.name.c_str(), (unsigned long long)r.key2, cname.c_str());
  } else if (st == upstream::kNfs4ErrExist) {
    // Ours, sent before (or a directory of the same name: shared).
    Compound l;
    l.SetTag("flush_create_lookup")
        .Putfh(pfh)
        .Lookup(r.name)
        .Getfh()
        .Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    if ((st = Run(l, cr, &rep))) return st;
    fh = rep.Find(Op::kGetfh)->fh;
    after = rep.Find(Op::kGetattr)->attrs;
  }
  if (st) return st;
  NACHE_LOG(kLogInfo, kComponent, "created %s (key %llu) in %llu at the remote",
            r.name.c_str(), (unsigned long long)r.key2,
            (unsigned long long)r.key);
  handles_->SetFh(r.key2, fh);
  // From now on the name is the remote's, no longer in LocalNames: a
  // listing of the directory must show it, and one read before the
  // create landed must not be kept.
  HandleRecord sent;
  cache_->NoteNameSent(
      r.key, "", handles_->Get(r.key2, &sent) ? sent.name : r.name, r.key2);
  // The object stays dirty (its data and mtime follow); the remote's
  // attributes only tell what it has.
  cache_->Validated(r.key2, after);
  NoteNewObjectOwner(r.key2, after);
  metrics_->CountFlushedCreate();
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
