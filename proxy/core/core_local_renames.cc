// Renames of what the remote has, kept local on write-back single-writer
// exports (proxy/writeback/DESIGN.md): a rename of a file or symlink with
// one link, or of a directory, is acknowledged once its kRename record
// (old directory and name, new directory and name, the object) is synced
// to the log. The old name becomes a "moved" whiteout and the new one a
// "moved" entry in LocalNames, so lookups and listings show the new name
// at once, while the object keeps its handle (and the remote its old name,
// which opens by name still use) until the RENAME is sent: with the flush
// of either directory, or earlier when something needs one of the names at
// the remote. A file the rename replaces has its remove logged in the same
// synced batch. Renaming a moved object again rewrites its record (a chain
// costs one RENAME, none when it ends under the name the remote knows);
// removing it turns the record into the remove of that name.
//
// Directories: everything in a moved directory is known by the
// directory's handle, which the rename does not change, so its entries'
// records need no order against its RENAME. Two directory RENAMEs do: sent
// out of log order, they could make a cycle at the remote (a moved out of
// b, then b moved into a), so each waits for the older ones, and a rename
// that goes the remote way sends them all first. A move into the moved
// directory's own subtree is refused here, as the remote would; where the
// ancestry is unknown here the rename goes the remote way.
#include "core/core.h"
#include "util/log.h"

namespace nache {
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::FileType;
using upstream::Op;

uint32_t Core::RenameLogged(const Creds &cr, Key olddir,
                            const std::string &oldname, Key newdir,
                            const std::string &newname, bool *done) {
  *done = false;
  if (NotAtRemote(olddir) || NotAtRemote(newdir)) return upstream::kNfs4Ok;
  Key k;
  Attrs a;
  uint32_t st = Lookup(cr, olddir, oldname, &k, &a);
  if (st) {
    *done = true;
    return st;
  }
  // Files and symlinks with one link (a file with other links has other
  // names to keep right), and directories the remote has.
  const bool is_dir = a.type == FileType::kDir && !NotAtRemote(k);
  if (!is_dir && !RemoveMayBeLogged(k, a)) return upstream::kNfs4Ok;
  LocalNames::Entry t;
  if (local_names_->Find(newdir, newname, &t)) return upstream::kNfs4Ok;
  bool remote = false;
  if (is_dir && (st = MayMoveDir(cr, k, olddir, newdir, &remote), remote))
    return upstream::kNfs4Ok;
  *done = true;
  if (st) return st;
  Attrs nda, oda;
  if ((st = CheckNewName(cr, newdir, newname, &nda)) ||
      (st = Getattr(cr, olddir, &oda)))
    return st;
  if ((st = MayRenameBetween(cr, olddir, newdir))) return st;
  if (StickyForbids(cr, oda, a)) return upstream::kNfs4ErrPerm;
  if (olddir == newdir && oldname == newname) return upstream::kNfs4Ok;
  // The target: none, or a file or symlink of the remote's it replaces
  // (a directory over anything: the remote decides).
  Key replaced = kNoKey;
  if ((st = ReplacedByRename(cr, newdir, newname, nda, &replaced, &remote)))
    return st;
  if (replaced == k) return upstream::kNfs4Ok;  // the same object
  if (remote || (is_dir && replaced != kNoKey)) {
    *done = false;
    return upstream::kNfs4Ok;
  }

  LogRecord mv;
  mv.op = LogOp::kRename;
  mv.key = olddir;
  mv.name = oldname;
  mv.key2 = newdir;
  mv.name2 = newname;
  mv.offset = k;
  mv.type = a.type;
  mv.attrs.mask = upstream::kAttrOwner | upstream::kAttrOwnerGroup;
  mv.attrs.uid = cr.uid;  // the renamer, as whom it is sent
  mv.attrs.gid = cr.gid;
  mv.SetCreds(cr);  // with the groups that allowed it here
  {
    MutexLock g(&meta_mu_);
    // Changed while we were checking: the client retries.
    if (local_names_->FindRemoved(olddir, oldname, nullptr) ||
        local_names_->Find(newdir, newname, nullptr) ||
        (replaced != kNoKey &&
         local_names_->FindRemoved(newdir, newname, nullptr)))
      return upstream::kNfs4ErrDelay;
    std::vector<LogRecord> recs;
    if (replaced != kNoKey)
      recs.push_back(RemoveRecord(cr, newdir, newname, replaced));
    recs.push_back(mv);
    // Synced, in one write: the client hears "renamed" only then.
    if (!oplog_->Replace(0, &recs)) return StoreFailure();
    if (replaced != kNoKey)
      NoteReplaced(recs[0].seq, newdir, newname, replaced);
    AddMoved(recs.back().seq, olddir, oldname, newdir, newname, k, a.type);
  }
  EditListingsForRename(olddir, oldname, newdir, newname, k);
  metrics_->CountLoggedRename();
  return upstream::kNfs4Ok;
}

void Core::NoteReplaced(uint64_t seq, Key dir, const std::string &name,
                        Key replaced) {
  local_names_->AddRemoved(LocalNames::Removed{seq, dir, name, replaced});
  cache_->Forget(replaced);  // its unflushed data need never be sent
  metrics_->CountLoggedRemove();
}

void Core::AddMoved(uint64_t seq, Key olddir, const std::string &oldname,
                    Key newdir, const std::string &newname, Key k,
                    upstream::FileType type) {
  local_names_->Add(LocalNames::Entry{seq, newdir, newname, k, type, "",
                                      int64_t(time(nullptr)), true});
  local_names_->AddRemoved(LocalNames::Removed{seq, olddir, oldname, k, true});
}

void Core::EditListingsForRename(Key olddir, const std::string &oldname,
                                 Key newdir, const std::string &newname,
                                 Key k) {
  if (olddir == newdir) {
    cache_->LocalDirEdit(newdir, oldname, newname, k);
  } else {
    cache_->LocalDirEdit(olddir, oldname, "", kNoKey);
    cache_->LocalDirEdit(newdir, "", newname, k);
  }
}

uint32_t Core::RenameMoved(const Creds &cr, const LocalNames::Entry &src,
                           Key newdir, const std::string &newname, bool *done) {
  *done = false;
  if (NotAtRemote(newdir)) return upstream::kNfs4Ok;  // the remote way
  if (local_names_->Find(newdir, newname, nullptr))
    return upstream::kNfs4Ok;  // onto a local entry: the remote way
  *done = true;
  Attrs nda, sda, a;
  uint32_t st;
  if ((st = CheckNewName(cr, newdir, newname, &nda)) ||
      (st = Getattr(cr, src.dir, &sda)) || (st = Getattr(cr, src.key, &a)) ||
      (st = MayRenameBetween(cr, src.dir, newdir)))
    return st;
  if (StickyForbids(cr, sda, a)) return upstream::kNfs4ErrPerm;
  if (src.dir == newdir && src.name == newname) return upstream::kNfs4Ok;
  const bool is_dir = src.type == FileType::kDir;
  Key replaced = kNoKey;
  bool remote = false;
  if (is_dir && (st = MayMoveDir(cr, src.key, src.dir, newdir, &remote)))
    return st;
  if (!remote &&
      (st = ReplacedByRename(cr, newdir, newname, nda, &replaced, &remote)))
    return st;
  if (remote || (is_dir && replaced != kNoKey)) {
    *done = false;
    return upstream::kNfs4Ok;
  }

  MutexLock g(&meta_mu_);
  while (sending_.count(src.key) != 0) meta_cv_.Wait();
  LocalNames::Entry now;
  if (!local_names_->Get(src.key, &now) || now.seq != src.seq ||
      local_names_->Find(newdir, newname, nullptr))
    return upstream::kNfs4ErrDelay;  // changed meanwhile: the client retries
  std::vector<LogRecord> rec = oplog_->Read(src.seq, 1);
  if (rec.empty() || rec[0].seq != src.seq || rec[0].op != LogOp::kRename)
    return upstream::kNfs4ErrServerfault;
  const LogRecord &r = rec[0];
  std::vector<LogRecord> recs;
  bool back = newdir == r.key && newname == r.name;  // its remote name
  if (!back) {
    if (replaced != kNoKey)
      recs.push_back(RemoveRecord(cr, newdir, newname, replaced));
    LogRecord again = r;
    again.key2 = newdir;
    again.name2 = newname;
    again.logged_at = 0;
    recs.push_back(again);
  }
  // One synced write: the chain keeps one record (none when the object is
  // back under its remote name).
  if (!oplog_->Replace(src.seq, &recs)) return StoreFailure();
  local_names_->Erase(src.key);
  local_names_->EraseRemoved(src.seq);
  if (!back) {
    if (replaced != kNoKey)
      NoteReplaced(recs[0].seq, newdir, newname, replaced);
    AddMoved(recs.back().seq, r.key, r.name, newdir, newname, src.key,
             src.type);
  }
  g.Unlock();
  EditListingsForRename(src.dir, src.name, newdir, newname, src.key);
  metrics_->CountLoggedRename();
  return upstream::kNfs4Ok;
}

uint32_t Core::RemoveMoved(const Creds &cr, Key dir,
                           const LocalNames::Entry &e) {
  Attrs da, a;
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessModify | upstream::kAccessLookup;
  uint32_t st;
  if ((st = Getattr(cr, dir, &da)) || (st = Getattr(cr, e.key, &a)) ||
      (st = Access(cr, dir, need, &allowed)))
    return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  if (StickyForbids(cr, da, a)) return upstream::kNfs4ErrPerm;
  if (e.type == FileType::kDir) {
    // Removed only when empty here, as any directory the remote has.
    bool empty = false;
    if (!EmptyHere(cr, e.key, &empty)) {
      // Only the remote can tell: it must have the directory under the
      // name our client used first. (The caller then goes the remote way.)
      if ((st = CreateRemotely(e.key))) return st;
      return upstream::kNfs4ErrDelay;
    }
    if (!empty) return upstream::kNfs4ErrNotempty;
  }
  MutexLock g(&meta_mu_);
  while (sending_.count(e.key) != 0) meta_cv_.Wait();
  LocalNames::Entry now;
  if (!local_names_->Get(e.key, &now) || now.seq != e.seq ||
      (e.type == FileType::kDir && local_names_->LastChildSeq(e.key) != 0))
    return upstream::kNfs4ErrDelay;  // changed meanwhile: retried
  std::vector<LogRecord> rec = oplog_->Read(e.seq, 1);
  if (rec.empty() || rec[0].seq != e.seq || rec[0].op != LogOp::kRename)
    return upstream::kNfs4ErrServerfault;
  // The remote only ever sees the remove, under the name it knows.
  std::vector<LogRecord> recs{RemoveRecord(cr, rec[0].key, rec[0].name, e.key)};
  if (!oplog_->Replace(e.seq, &recs)) return StoreFailure();
  local_names_->Erase(e.key);
  local_names_->EraseRemoved(e.seq);
  local_names_->AddRemoved(
      LocalNames::Removed{recs[0].seq, rec[0].key, rec[0].name, e.key});
  g.Unlock();
  cache_->Forget(e.key);  // its unflushed data need never be sent
  cache_->LocalDirEdit(dir, e.name, "", kNoKey);
  metrics_->CountLoggedRemove();
  return upstream::kNfs4Ok;
}

uint32_t Core::ReplacedByRename(const Creds &cr, Key newdir,
                                const std::string &newname, const Attrs &nda,
                                Key *replaced, bool *remote) {
  *replaced = kNoKey;
  *remote = false;
  Key k;
  Attrs a;
  uint32_t st = Lookup(cr, newdir, newname, &k, &a);
  if (st == upstream::kNfs4ErrNoent) return upstream::kNfs4Ok;  // free
  if (st) return st;
  // A directory, or a file with other links: the remote decides.
  if (!RemoveMayBeLogged(k, a)) {
    *remote = true;
    return upstream::kNfs4Ok;
  }
  if (StickyForbids(cr, nda, a)) return upstream::kNfs4ErrPerm;
  *replaced = k;
  return upstream::kNfs4Ok;
}

uint32_t Core::MayMoveDir(const Creds &cr, Key k, Key olddir, Key newdir,
                          bool *remote) {
  *remote = false;
  if (olddir == newdir) return upstream::kNfs4Ok;  // no new ancestors
  // Not into itself or below: walk up from newdir (at most as deep as a
  // path can be).
  Key x = newdir;
  for (int depth = 0; x != root_key_; depth++) {
    if (x == k) return upstream::kNfs4ErrInval;
    LocalNames::Entry e;
    HandleRecord h;
    Key up = local_names_->Get(x, &e) ? e.dir
             : handles_->Get(x, &h)   ? h.parent
                                      : kNoKey;
    if (up == kNoKey || depth > 4096) {
      *remote = true;  // ancestry unknown here: the remote decides
      return upstream::kNfs4Ok;
    }
    x = up;
  }
  // Its ".." changes: the remote asks for write permission on it.
  uint32_t allowed = 0;
  uint32_t st = Access(cr, k, upstream::kAccessModify, &allowed);
  if (st) return st;
  return (allowed & upstream::kAccessModify) ? upstream::kNfs4Ok
                                             : upstream::kNfs4ErrAccess;
}

uint32_t Core::SendDirRenamesBefore(uint64_t seq) {
  for (const LocalNames::Entry &e : local_names_->MovedDirsBefore(seq))
    if (uint32_t st = CreateRemotely(e.key)) return st;
  return upstream::kNfs4Ok;
}

uint32_t Core::MayRenameBetween(const Creds &cr, Key olddir, Key newdir) {
  // The remote's rule, decided here: write and search permission on both
  // directories.
  const uint32_t need = upstream::kAccessModify | upstream::kAccessExtend |
                        upstream::kAccessLookup;
  uint32_t a1 = 0, a2 = 0;
  uint32_t st;
  if ((st = Access(cr, olddir, need, &a1)) ||
      (st = Access(cr, newdir, need, &a2)))
    return st;
  return (a1 & need) != need || (a2 & need) != need ? upstream::kNfs4ErrAccess
                                                    : upstream::kNfs4Ok;
}

bool Core::NamedAtRemote(const Creds &cr, const Fh &dir,
                         const std::string &name, Key k) {
  HandleRecord h;
  if (!handles_->Get(k, &h)) return false;
  Compound c;
  c.SetTag("flush_rename_check").Putfh(dir).Lookup(name).Getfh();
  CompoundReply rep;
  if (Run(c, cr, &rep)) return false;
  const upstream::OpResult *got = rep.Find(Op::kGetfh);
  return got && got->fh == h.fh;
}

uint32_t Core::SendRename(const LogRecord &r) {
  const Key k = Key(r.offset);
  Fh ofh, nfh;
  // (The old directory may be removed here, its remove waiting for this.)
  uint32_t st = FhOfAny(r.key, &ofh);
  if (st || (st = FhOf(r.key2, &nfh))) return st;
  // Our own read delegation on it first: the server would recall it.
  delegations_->ReturnIfReadDelegated(k);
  Creds cr = r.SendCreds();
  Compound c;
  c.SetTag("flush_rename")
      .Putfh(ofh)
      .Savefh()
      .Putfh(nfh)
      .Rename(r.name, r.name2);
  // Before it is sent (a kill may follow at once): the object's ctime, so
  // its change attribute, moves at the remote by our doing.
  cache_->OwnChangeUnseen(k);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (!rep.Find(Op::kRename)) return st ? st : upstream::kNfs4ErrServerfault;
  uint32_t rst = OpStatus(rep, Op::kRename);
  if (rst == upstream::kNfs4ErrNoent && NamedAtRemote(cr, nfh, r.name2, k))
    rst = upstream::kNfs4Ok;  // a try whose reply was lost went through
  if (rst == upstream::kNfs4Ok) {
    handles_->SetName(k, r.key2, r.name2);
    // Its names are the remote's now (see SendCreate).
    cache_->NoteNameSent(r.key, r.name, "", kNoKey);
    cache_->NoteNameSent(r.key2, "", r.name2, k);
    metrics_->CountSentRename();
    NACHE_LOG(kLogInfo, kWritebackComponent,
              "renamed %s in %llu to %s in %llu (key %llu) at the remote",
              r.name.c_str(), (unsigned long long)r.key, r.name2.c_str(),
              (unsigned long long)r.key2, (unsigned long long)k);
    return upstream::kNfs4Ok;
  }
  if (rst == upstream::kNfs4ErrNoent || RemoveRefused(rst) ||
      rst == upstream::kNfs4ErrExist || rst == upstream::kNfs4ErrXdev) {
    // Gone at the remote, or refused for good: the object stays (if at
    // all) under its old name there; ours follows once the directories
    // are revalidated.
    NACHE_LOG(kLogMajor, kWritebackComponent,
              "the remote refuses the rename of %s to %s (key %llu) as uid "
              "%u (%s), logged here earlier: the object keeps its old name",
              r.name.c_str(), r.name2.c_str(), (unsigned long long)k, cr.uid,
              nache_status_name(rst));
    metrics_->CountRefusedRename();
    if (rst == upstream::kNfs4ErrAccess || rst == upstream::kNfs4ErrPerm)
      metrics_->CountWritebackRefused("rename");
    cache_->ExpireAttrs(k);
    return upstream::kNfs4Ok;
  }
  return st ? st : upstream::kNfs4ErrServerfault;
}

}  // namespace nache
