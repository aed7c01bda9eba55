// The write-back of the namespace (see namespace_writeback.h): creates
// kept local and their sends, logged removes of what the remote has
// (whiteouts), logged renames (moved entries).
#include "writeback/namespace_writeback.h"

#include <time.h>

#include <algorithm>

#include "access/owner_rights.h"
#include "nache/nache.h"
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

NamespaceWriteBack::NamespaceWriteBack(Store *store, Cache *cache,
                                       HandleMap *handles, WriteBack *writeback,
                                       metrics::ExportMetrics *metrics,
                                       Host *host)
    : cache_(cache),
      handles_(handles),
      writeback_(writeback),
      metrics_(metrics),
      host_(host),
      oplog_(new OpLog(store)),
      local_names_(new LocalNames()) {
  local_names_->Load(oplog_.get());
  // Unsent removes go out with their directory's flush: the directory's
  // dirty mark is written after the synced log record, and a power loss
  // may have taken it. Marked again here.
  // (A directory removed here itself sends them with its own remove.)
  for (Key dir : local_names_->DirsWithRemoved()) {
    if (!local_names_->IsRemovedKey(dir) &&
        !cache_->LocalDirEdit(dir, "", "", kNoKey))
      NACHE_LOG(kLogWarn, kWritebackComponent,
                "directory %llu has unsent removes but no known "
                "attributes: they are sent with its next change",
                (unsigned long long)dir);
    // A removed object's unflushed data is dropped after its remove is
    // logged: a kill in between left it dirty, and the flusher would send
    // it after the REMOVE (and save it as lost). The log is the word.
    for (const LocalNames::Removed &r : local_names_->RemovedIn(dir))
      if (!r.moved && r.key != kNoKey && cache_->IsDirty(r.key)) {
        NACHE_LOG(kLogInfo, kWritebackComponent,
                  "%s (key %llu) was removed here: its unflushed data is "
                  "dropped",
                  r.name.c_str(), (unsigned long long)r.key);
        cache_->Forget(r.key);
      }
  }
}

uint32_t NamespaceWriteBack::CheckNewName(const Creds &cr, Key dir,
                                          const std::string &name,
                                          Attrs *dir_attrs) {
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos)
    return upstream::kNfs4ErrInval;
  if (name.size() > 255) return upstream::kNfs4ErrNametoolong;
  uint32_t st = host_->Getattr(cr, dir, dir_attrs);
  if (st) return st;
  return dir_attrs->type == FileType::kDir ? upstream::kNfs4Ok
                                           : upstream::kNfs4ErrNotdir;
}

uint32_t NamespaceWriteBack::CreateLocal(const Creds &cr, Key dir,
                                         const std::string &name, FileType type,
                                         const Attrs &in,
                                         const std::string &link_text, Key *key,
                                         Attrs *out) {
  Attrs da;
  uint32_t st = CheckNewName(cr, dir, name, &da);
  if (st) return st;
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessExtend | upstream::kAccessLookup;
  if ((st = host_->Access(cr, dir, need, &allowed))) return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  Key existing;
  st = host_->Lookup(cr, dir, name, &existing, nullptr);
  if (st == upstream::kNfs4Ok) return upstream::kNfs4ErrExist;
  if (st != upstream::kNfs4ErrNoent) return st;

  MutexLock g(&mu_);
  if (local_names_->Find(dir, name, nullptr)) return upstream::kNfs4ErrExist;
  Key k = handles_->NewLocal(dir, name);
  if (k == kNoKey) return host_->StoreFailure();
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
  if (!cache_->LocalCreate(k, a)) return host_->StoreFailure();
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
    return host_->StoreFailure();
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

uint32_t NamespaceWriteBack::RemoveLocal(const Creds &cr, Key dir,
                                         const LocalNames::Entry &e) {
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessModify | upstream::kAccessLookup;
  uint32_t st = host_->Access(cr, dir, need, &allowed);
  if (st) return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  MutexLock g(&mu_);
  while (sending_.count(e.key) != 0) cv_.Wait();
  LocalNames::Entry now;
  // Created remotely (or removed) while we were checking: the caller
  // takes the remote way.
  if (!local_names_->Find(dir, e.name, &now) || now.key != e.key)
    return upstream::kNfs4ErrDelay;
  if (e.type == FileType::kDir && local_names_->LastChildSeq(e.key) != 0)
    return upstream::kNfs4ErrNotempty;
  // Synced: once the client hears "removed", a crash must not bring the
  // create back. A create that may have reached the remote (one from
  // before a restart, or whose reply was lost) may have left the object
  // there under this name: its remove takes the create's place.
  const bool orphan = MayBeAtRemote(e);
  std::vector<LogRecord> recs;
  if (orphan) recs.push_back(RemoveRecord(cr, dir, e.name, e.key));
  if (!(orphan ? oplog_->Replace(e.seq, &recs) : oplog_->Erase({e.seq}, true)))
    return host_->StoreFailure();
  local_names_->Erase(e.key);
  if (orphan)
    local_names_->AddRemoved(
        LocalNames::Removed{recs[0].seq, dir, e.name, e.key});
  never_sent_.erase(e.key);
  cache_->Forget(e.key);  // its data need never be sent
  cache_->LocalDirEdit(dir, e.name, "", kNoKey);
  metrics_->CountLocalCancel();
  return upstream::kNfs4Ok;
}

bool NamespaceWriteBack::MayBeAtRemote(const LocalNames::Entry &e) {
  // Tried before (never_sent_ holds this run's untried ones; a record
  // from before a restart may have gone out), and in a directory the
  // remote has: a create is sent only with its directory's handle, so
  // one in a directory still local here has never left.
  return never_sent_.count(e.key) == 0 && !NotAtRemote(e.dir);
}

uint32_t NamespaceWriteBack::RenameLocal(const Creds &cr,
                                         const LocalNames::Entry &src,
                                         Key newdir, const std::string &newname,
                                         bool *done) {
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

  MutexLock g(&mu_);
  while (sending_.count(src.key) != 0 ||
         (target_local && sending_.count(target.key) != 0))
    cv_.Wait();
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
    if (!oplog_->Erase({target.seq}, false)) return host_->StoreFailure();
  }
  std::vector<LogRecord> recs;
  // A create that may have reached the remote may have left the object
  // there under its old name: removed first (the object itself is
  // created anew under the new name, so the whiteout names no object).
  const bool orphan = MayBeAtRemote(src);
  if (orphan) recs.push_back(RemoveRecord(cr, src.dir, src.name, kNoKey));
  if (replaced != kNoKey)
    recs.push_back(RemoveRecord(cr, newdir, newname, replaced));
  recs.push_back(std::move(r));
  if (!oplog_->Replace(src.seq, &recs)) return host_->StoreFailure();
  uint64_t seq = recs.back().seq;
  if (orphan)
    local_names_->AddRemoved(
        LocalNames::Removed{recs[0].seq, src.dir, src.name, kNoKey});
  if (replaced != kNoKey)
    NoteReplaced(recs[orphan ? 1 : 0].seq, newdir, newname, replaced);
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

uint32_t NamespaceWriteBack::CreateRemotely(Key key) {
  LogRecord r;
  LocalNames::Entry e;
  bool fresh = false;
  {
    MutexLock g(&mu_);
    while (sending_.count(key) != 0) cv_.Wait();
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
    MutexLock g(&mu_);
    sending_.erase(key);
    if (st == upstream::kNfs4Ok) {
      local_names_->Erase(key);
      if (e.moved) local_names_->EraseRemoved(r.seq);  // its old name
      oplog_->Erase({r.seq});
    }
  }
  cv_.SignalAll();
  if (st == upstream::kNfs4ErrAccess || st == upstream::kNfs4ErrPerm)
    host_->NoteFlushRefused(e.moved ? "rename" : "create", key, r.SendCreds(),
                            st);
  else if (st)
    NACHE_LOG(kLogInfo, kComponent,
              "create of %s (key %llu) at the remote failed (nfs status %u); "
              "kept, retried later",
              r.name.c_str(), (unsigned long long)key, st);
  return st;
}

uint32_t NamespaceWriteBack::CreateEntriesRemotely(Key dir) {
  // Several at once: each is round trips, not bandwidth.
  std::vector<LocalNames::Entry> todo = local_names_->Children(dir);
  // Its new objects together (many in a COMPOUND over NFSv4.1); moved
  // ones (a RENAME each), and those that could not go so, one by one.
  std::vector<LocalNames::Entry> made, rest;
  for (LocalNames::Entry &e : todo) (e.moved ? rest : made).push_back(e);
  if (made.size() > 1)
    CreateObjectsIn(dir, made, &rest);
  else
    rest.insert(rest.end(), made.begin(), made.end());
  return ParallelFor(rest.size(), WriteBack::kFlushOwners,
                     [&](size_t i) { return CreateRemotely(rest[i].key); });
}

uint32_t NamespaceWriteBack::CreateWithSiblings(Key key,
                                                int64_t created_before) {
  LocalNames::Entry e;
  if (local_names_->Get(key, &e) && !e.moved) {
    std::vector<LocalNames::Entry> made, rest;
    for (LocalNames::Entry &s : local_names_->Children(e.dir))
      if (!s.moved && (s.key == key || s.created_at <= created_before))
        made.push_back(s);
    // (What could not go with it waits for its own flush.)
    if (made.size() > 1) CreateObjectsIn(e.dir, made, &rest);
  }
  return CreateRemotely(key);
}

void NamespaceWriteBack::CreateObjectsIn(
    Key dir, const std::vector<LocalNames::Entry> &made,
    std::vector<LocalNames::Entry> *rest) {
  Fh pfh;
  if (host_->FhOf(dir, &pfh)) {  // (its own create failed: retried later)
    rest->insert(rest->end(), made.begin(), made.end());
    return;
  }
  // Claimed as CreateRemotely claims one: no remove or rename rewrites
  // their records meanwhile, and no other thread sends them.
  struct Claimed {
    LocalNames::Entry e;
    LogRecord r;
    bool fresh = false;
  };
  std::vector<Claimed> mine;
  {
    MutexLock g(&mu_);
    for (const LocalNames::Entry &e : made) {
      LocalNames::Entry now;
      if (!local_names_->Get(e.key, &now)) continue;  // sent meanwhile
      if (sending_.count(e.key) != 0 || now.seq != e.seq || now.moved ||
          now.dir != dir) {
        rest->push_back(e);  // (CreateRemotely waits for that, or sees it)
        continue;
      }
      std::vector<LogRecord> recs = oplog_->Read(now.seq, 1);
      if (recs.empty() || recs[0].seq != now.seq ||
          recs[0].op != LogOp::kCreate || recs[0].key2 != e.key) {
        rest->push_back(e);  // (CreateRemotely logs it)
        continue;
      }
      sending_.insert(e.key);
      Claimed c;
      c.e = now;
      c.r = std::move(recs[0]);
      c.fresh = never_sent_.erase(e.key) != 0;
      mine.push_back(std::move(c));
    }
  }
  // A remove of the same name logged before goes first.
  std::vector<uint32_t> status(mine.size(), upstream::kNfs4ErrDelay);
  std::vector<bool> may_be_sent(mine.size(), false);
  std::vector<size_t> go;
  for (size_t i = 0; i < mine.size(); i++)
    if (SendRemoveOf(dir, mine[i].e.name) == upstream::kNfs4Ok) go.push_back(i);
  // One batch per creator: a COMPOUND goes as one caller.
  std::vector<FilePlan> plans(mine.size());
  for (size_t i : go) plans[i] = PlanFile(mine[i].r);
  std::vector<bool> done(go.size(), false);
  for (size_t b = 0; b < go.size(); b++) {
    if (done[b]) continue;
    const Creds cr = mine[go[b]].r.SendCreds();
    std::vector<size_t> batch;
    std::vector<NewObject> nfs;
    for (size_t k = b; k < go.size(); k++) {
      if (done[k] || !(mine[go[k]].r.SendCreds() == cr)) continue;
      done[k] = true;
      batch.push_back(go[k]);
      const Claimed &c = mine[go[k]];
      nfs.push_back(NewObjectFor(c.r, c.fresh, c.r.name, plans[go[k]]));
    }
    std::vector<NewObjectResult> res;
    host_->CreateObjects(cr, pfh, nfs, &res);
    for (size_t k = 0; k < batch.size(); k++) {
      const size_t i = batch[k];
      status[i] = res[k].status;
      // Unless the server said its OPEN did not run, it may have.
      may_be_sent[i] = !res[k].answered || res[k].rep.sends > 1 ||
                       res[k].status == upstream::kNfs4Ok;
      if (res[k].status == upstream::kNfs4Ok)
        CreatedAtRemote(mine[i].r, res[k].fh,
                        ObjectSent(mine[i].r, plans[i], res[k]));
    }
  }
  {
    MutexLock g(&mu_);
    for (size_t i = 0; i < mine.size(); i++) {
      sending_.erase(mine[i].e.key);
      if (status[i] == upstream::kNfs4Ok) {
        local_names_->Erase(mine[i].e.key);
        oplog_->Erase({mine[i].r.seq});
        continue;
      }
      // Not made: one by one now (a name taken at the remote is a
      // conflict there), as never sent if it was not.
      if (mine[i].fresh && !may_be_sent[i]) never_sent_.insert(mine[i].e.key);
      rest->push_back(mine[i].e);
    }
  }
  cv_.SignalAll();
}

uint32_t NamespaceWriteBack::SendCreate(const LogRecord &r, bool fresh) {
  // Its directory is at the remote already (CreateRemotely sent it first).
  Fh pfh;
  if (uint32_t st = host_->FhOf(r.key, &pfh)) return st;
  // As its creator, with the groups that allowed the create here (a
  // record of the first format: the owner and group, no groups).
  Creds cr = r.SendCreds();
  Fh fh;
  Attrs after;
  bool resent_exist = false;  // EXIST to a create Run had to resend
  // A record never tried before must find its name free: one taken at the
  // remote meanwhile is somebody else's object (a conflict, below). One
  // that may have been sent before (by a run that crashed, or a try whose
  // reply was lost) finds its own object there instead: a file is opened
  // UNCHECKED, a directory or symlink looked up after EXIST.
  auto create_as = [&](const std::string &name) -> uint32_t {
    FilePlan plan = PlanFile(r);
    std::vector<NewObjectResult> res;
    host_->CreateObjects(cr, pfh, {NewObjectFor(r, fresh, name, plan)}, &res);
    NewObjectResult &nf = res[0];
    // The create went out again after getting no reply, and the remote
    // executed the resend anew rather than from its replay cache: the
    // name may hold the file the first send made.
    if (nf.status == upstream::kNfs4ErrExist && nf.rep.sends > 1)
      resent_exist = true;
    if (nf.status) return nf.status;
    fh = nf.fh;
    after = ObjectSent(r, plan, nf);
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
    if ((st = host_->Run(l, cr, &rep))) return st;
    fh = rep.Find(Op::kGetfh)->fh;
    after = rep.Find(Op::kGetattr)->attrs;
  }
  if (st) return st;
  CreatedAtRemote(r, fh, after);
  return upstream::kNfs4Ok;
}

void NamespaceWriteBack::CreatedAtRemote(const LogRecord &r, const Fh &fh,
                                         const Attrs &after) {
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
  host_->NoteNewObjectOwner(r.key2, after);
  metrics_->CountFlushedCreate();
}

NamespaceWriteBack::FilePlan NamespaceWriteBack::PlanFile(const LogRecord &r) {
  // A small file goes whole in its create's COMPOUND: its data (WRITEs
  // under the open's stateid) and the attributes set here, then the
  // attributes after. One round trip instead of three; the flusher then
  // finds it clean.
  FilePlan p;
  if (r.type != FileType::kReg) return p;
  p.ranges = cache_->DirtyRanges(r.key2);
  p.have_set = cache_->PendingSetattr(r.key2, &p.set, &p.set_epoch);
  size_t bytes = 0;
  for (const Cache::DirtyRange &d : p.ranges) bytes += d.data.size();
  NewObject f;
  f.more_ops = p.ranges.size() + (p.have_set && p.set.mask ? 1 : 0);
  p.inline_all = p.ranges.size() <= kMaxWritesPerCompound &&
                 bytes <= host_->MaxWrite() &&
                 NewObjectOps(f) <= host_->MaxOps();
  return p;
}

NewObject NamespaceWriteBack::NewObjectFor(const LogRecord &r, bool fresh,
                                           const std::string &name,
                                           const FilePlan &plan) {
  NewObject f;
  f.type = r.type;
  f.name = name;
  f.text = r.text;
  // A record never tried before must find its name free (GUARDED); one
  // that may have been sent before finds its own file (UNCHECKED).
  f.how = fresh ? upstream::OpenArgs::Create::kGuarded
                : upstream::OpenArgs::Create::kUnchecked;
  f.ca.mask = upstream::kAttrMode;
  f.ca.mode = r.attrs.mode;
  f.key = r.key2;
  if (!plan.inline_all) return f;
  const uint64_t bs = cache_->block_size();
  for (const Cache::DirtyRange &d : plan.ranges) f.more_bytes += d.data.size();
  f.writes = plan.ranges.size();
  f.more_ops = plan.ranges.size() + (plan.have_set && plan.set.mask ? 1 : 0);
  // (plan outlives the create: the caller's.)
  f.more = [&plan, bs](Compound *c, const StateId &sid) {
    for (const Cache::DirtyRange &d : plan.ranges)
      c->Write(sid, d.idx * bs + d.lo, upstream::StableHow::kFileSync,
               d.data.data(), uint32_t(d.data.size()));
    if (plan.have_set && plan.set.mask != 0) c->Setattr(sid, plan.set);
  };
  return f;
}

upstream::Attrs NamespaceWriteBack::ObjectSent(const LogRecord &r,
                                               const FilePlan &plan,
                                               const NewObjectResult &nf) {
  const OpResult *g = nf.rep.Find(Op::kGetattr);
  if (r.type != FileType::kReg) return g && !g->status ? g->attrs : Attrs();
  host_->NoteGrant(r.key2, nf.deleg);
  // Everything after the OPEN went through: the file is clean (unless
  // written or set again meanwhile, which Flushed sees). Otherwise the
  // flusher sends what is left the usual way.
  if (!g || g->status) return Attrs();
  if (plan.inline_all && nf.rep.status == upstream::kNfs4Ok) {
    // Each WRITE wrote its whole range, durably as asked (a short one, or
    // one a broken server kept only in memory, leaves the file dirty: the
    // flusher's COMMIT settles it).
    bool whole = true;
    for (size_t i = 0; i < plan.ranges.size(); i++) {
      const OpResult *w = nf.rep.Find(Op::kWrite, int(i));
      if (!w || w->count != plan.ranges[i].data.size() ||
          w->committed != upstream::StableHow::kFileSync)
        whole = false;
    }
    NACHE_LOG(kLogDebug, kComponent,
              "created %llu with its data: %zu range(s)%s, size there %llu",
              (unsigned long long)r.key2, plan.ranges.size(),
              whole ? "" : " (short or not durable: kept dirty)",
              (unsigned long long)g->attrs.size);
    if (whole)
      cache_->Flushed(r.key2, plan.ranges, plan.have_set ? plan.set_epoch : 0,
                      g->attrs);
  }
  return g->attrs;
}

uint32_t NamespaceWriteBack::RemoveLogged(const Creds &cr, Key dir,
                                          const std::string &name, bool *done,
                                          Key *target) {
  *done = false;
  *target = kNoKey;
  if (NotAtRemote(dir)) return upstream::kNfs4Ok;  // nothing remote in it
  Key k;
  Attrs a;
  uint32_t st = host_->Lookup(cr, dir, name, &k, &a);
  *target = st == upstream::kNfs4Ok ? k : kNoKey;
  if (st) {
    *done = true;
    return st;
  }
  // A directory the remote has: when it is empty here (its entries'
  // removes may still be unsent), its own remove is logged the same way
  // and sent after theirs.
  bool is_dir = a.type == FileType::kDir && !NotAtRemote(k);
  if (is_dir) {
    bool empty = false;
    if (!EmptyHere(cr, k, &empty)) return upstream::kNfs4Ok;  // remote way
    if (!empty) {
      *done = true;
      return upstream::kNfs4ErrNotempty;
    }
  } else if (!RemoveMayBeLogged(k, a)) {
    return upstream::kNfs4Ok;
  }
  // The remote's rules, decided here: write and search permission on the
  // directory, and with its sticky bit, owning the file or the directory.
  Attrs da;
  if ((st = host_->Getattr(cr, dir, &da))) {
    *done = true;
    return st;
  }
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessModify | upstream::kAccessLookup;
  *done = true;
  if ((st = host_->Access(cr, dir, need, &allowed))) return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  if (StickyForbids(cr, da, a)) return upstream::kNfs4ErrPerm;
  LogRecord r = RemoveRecord(cr, dir, name, k);
  {
    MutexLock g(&mu_);
    // Synced: once the client hears "removed", a crash must not bring the
    // name back.
    uint64_t seq = oplog_->Append(r);
    if (seq == 0) return host_->StoreFailure();
    local_names_->AddRemoved(LocalNames::Removed{seq, dir, name, k});
  }
  cache_->Forget(k);  // its unflushed data need never be sent
  cache_->LocalDirEdit(dir, name, "", kNoKey);
  metrics_->CountLoggedRemove();
  return upstream::kNfs4Ok;
}

bool NamespaceWriteBack::EmptyHere(const Creds &cr, Key dir, bool *empty) {
  *empty = false;
  if (local_names_->LastChildSeq(dir) != 0) return true;
  auto listing = cache_->Listing(dir);
  if (!listing) {
    host_->PrefetchListing(cr, dir);
    listing = cache_->Listing(dir);
  }
  if (!listing) return false;  // too big to keep: the remote decides
  for (const CachedDirent &e : *listing)
    if (!local_names_->FindRemoved(dir, e.name, nullptr)) return true;
  *empty = true;
  return true;
}

bool NamespaceWriteBack::RemoveRefused(uint32_t status) {
  // Answers that no retry changes: the remote's permissions or contents
  // (a directory someone else filled) say no.
  switch (status) {
    case upstream::kNfs4ErrAccess:
    case upstream::kNfs4ErrPerm:
    case upstream::kNfs4ErrNotempty:
    case upstream::kNfs4ErrRofs:
    case upstream::kNfs4ErrNotdir:
    case upstream::kNfs4ErrInval:
    case upstream::kNfs4ErrNametoolong: return true;
    default: return false;
  }
}

bool NamespaceWriteBack::RemoveMayBeLogged(Key k, const Attrs &a) {
  // Directories (their removal needs the remote's word that they are
  // empty) and files with other links (their nlink and data live on) go
  // the remote way.
  return (a.type == FileType::kReg || a.type == FileType::kLnk) &&
         !((a.mask & upstream::kAttrNlink) && a.nlink > 1) && !NotAtRemote(k);
}

LogRecord NamespaceWriteBack::RemoveRecord(const Creds &cr, Key dir,
                                           const std::string &name, Key k) {
  LogRecord r;
  r.op = LogOp::kRemove;
  r.key = dir;
  r.name = name;
  r.key2 = k;
  r.attrs.mask = upstream::kAttrOwner | upstream::kAttrOwnerGroup;
  r.attrs.uid = cr.uid;  // the remover, as whom it is sent
  r.attrs.gid = cr.gid;
  r.SetCreds(cr);  // with the groups that allowed it here
  return r;
}

uint32_t NamespaceWriteBack::SendRemoveOf(Key dir, const std::string &name) {
  LocalNames::Removed w;
  if (!local_names_->FindRemoved(dir, name, &w)) return upstream::kNfs4Ok;
  return SendRemoves(dir, {w});
}

uint32_t NamespaceWriteBack::SendRemovesIn(Key dir) {
  std::vector<LocalNames::Removed> all = local_names_->RemovedIn(dir);
  // Many at once (a mail spool's deletes, an rm -r): up to kBatch REMOVEs
  // in one COMPOUND, so a round trip removes kBatch names.
  constexpr size_t kBatch = 32;
  for (size_t i = 0; i < all.size(); i += kBatch) {
    std::vector<LocalNames::Removed> batch(
        all.begin() + i, all.begin() + std::min(all.size(), i + kBatch));
    if (uint32_t st = SendRemoves(dir, batch)) return st;
  }
  return upstream::kNfs4Ok;
}

uint32_t NamespaceWriteBack::SendRemoves(
    Key dir, const std::vector<LocalNames::Removed> &ws) {
  // The old name of an object renamed here is freed by its RENAME; a
  // directory's entries leave the remote before the directory.
  std::vector<LocalNames::Removed> plain;
  for (const LocalNames::Removed &w : ws) {
    if (w.moved) {
      if (uint32_t st = CreateRemotely(w.key)) return st;
      continue;
    }
    if (!local_names_->RemovedIn(w.key).empty())
      if (uint32_t st = SendRemovesIn(w.key)) return st;
    plain.push_back(w);
  }
  // One sender per record: a second REMOVE of a name could land after a
  // create of it that followed the first.
  std::vector<LocalNames::Removed> mine;
  std::vector<LogRecord> recs;
  {
    MutexLock g(&mu_);
    for (const LocalNames::Removed &w : plain) {
      while (removing_.count(w.seq) != 0) cv_.Wait();
      LocalNames::Removed now;
      if (!local_names_->FindRemoved(w.dir, w.name, &now) || now.seq != w.seq)
        continue;  // sent meanwhile
      std::vector<LogRecord> r = oplog_->Read(w.seq, 1);
      if (r.empty() || r[0].seq != w.seq) {
        NACHE_LOG(kLogCrit, kWritebackComponent, "no remove record %llu for %s",
                  (unsigned long long)w.seq, w.name.c_str());
        continue;
      }
      removing_.insert(w.seq);
      mine.push_back(w);
      recs.push_back(std::move(r[0]));
    }
  }
  if (mine.empty()) return upstream::kNfs4Ok;
  // Our own read delegations on them first: the server would recall them
  // (NFS4ERR_DELAY meanwhile), as from anyone else.
  ParallelFor(mine.size(), WriteBack::kFlushOwners, [&](size_t i) {
    host_->ReturnIfReadDelegated(mine[i].key);
    return upstream::kNfs4Ok;
  });
  Fh dfh;
  // (dir may be removed here itself, its own remove waiting for these.)
  uint32_t st = host_->FhOfAny(dir, &dfh);
  size_t done = 0;  // mine[0, done) are removed at the remote (or refused)
  std::vector<size_t> refused;  // indexes in mine the remote refused
  // A COMPOUND holds what the server takes: its PUTFH and this many.
  const uint32_t max_ops = host_->MaxOps();
  const size_t per_compound = max_ops > 2 ? max_ops - 1 : 1;
  while (st == upstream::kNfs4Ok && done < mine.size()) {
    // As the remover of the first; the rest in the same COMPOUND when
    // they were removed by the same user.
    Creds cr = recs[done].SendCreds();
    Compound c;
    c.SetTag("flush_remove").Putfh(dfh);
    size_t n = 0;
    while (done + n < mine.size() && n < per_compound &&
           recs[done + n].SendCreds() == cr) {
      c.Remove(mine[done + n].name);
      n++;
    }
    CompoundReply rep;
    st = host_->Run(c, cr, &rep);
    // Each REMOVE that went through, one that found the name gone (a
    // record sent before a crash that kept it), and one the remote
    // refuses for good, is done; the COMPOUND stopped at the first failure.
    for (size_t i = 0; i < n; i++) {
      const upstream::OpResult *r = rep.Find(Op::kRemove, int(i));
      if (!r) break;
      bool gone = r->status == upstream::kNfs4ErrNoent ||
                  r->status == upstream::kNfs4ErrStale;
      bool refused_here = RemoveRefused(r->status);
      if (r->status != upstream::kNfs4Ok && !gone && !refused_here) break;
      if (refused_here) {
        refused.push_back(done);
        NACHE_LOG(kLogMajor, kWritebackComponent,
                  "the remote refuses the remove of %s (key %llu) as uid "
                  "%u (%s), logged here earlier: it keeps the object, and "
                  "so do we",
                  mine[done].name.c_str(), (unsigned long long)mine[done].key,
                  cr.uid, nache_status_name(r->status));
        if (r->status == upstream::kNfs4ErrAccess ||
            r->status == upstream::kNfs4ErrPerm)
          metrics_->CountWritebackRefused("remove");
      }
      done++;
      if (r->status != upstream::kNfs4Ok) {
        if (i + 1 < n) st = upstream::kNfs4Ok;  // the rest in a new COMPOUND
        break;
      }
    }
    if (st == upstream::kNfs4ErrNoent || st == upstream::kNfs4ErrStale ||
        RemoveRefused(st))
      st = upstream::kNfs4Ok;
  }
  {
    MutexLock g(&mu_);
    std::vector<uint64_t> seqs;
    for (size_t i = 0; i < mine.size(); i++) {
      removing_.erase(mine[i].seq);
      if (i < done) {
        local_names_->EraseRemoved(mine[i].seq);
        seqs.push_back(mine[i].seq);
      }
    }
    if (!seqs.empty()) oplog_->Erase(seqs);
  }
  cv_.SignalAll();
  for (size_t i = 0; i < done; i++) {
    // Gone at the remote now (see SendCreate): no listing keeps them.
    cache_->NoteNameSent(dir, mine[i].name, "", kNoKey);
    NACHE_LOG(kLogInfo, kWritebackComponent,
              "removed %s (key %llu) in %llu at the remote",
              mine[i].name.c_str(), (unsigned long long)mine[i].key,
              (unsigned long long)dir);
  }
  for (size_t i = 0; i < done - refused.size(); i++)
    metrics_->CountSentRemove();
  for (size_t i : refused) {
    // Shown again once the directory follows the remote.
    metrics_->CountRefusedRemove();
    cache_->ExpireAttrs(mine[i].key);
  }
  if (done < mine.size())
    NACHE_LOG(kLogInfo, kWritebackComponent,
              "remove of %s at the remote failed (nfs status %u); %zu "
              "remove(s) kept, retried later",
              mine[done].name.c_str(), st, mine.size() - done);
  return done < mine.size() ? (st ? st : upstream::kNfs4ErrDelay)
                            : upstream::kNfs4Ok;
}

uint32_t NamespaceWriteBack::RenameLogged(const Creds &cr, Key olddir,
                                          const std::string &oldname,
                                          Key newdir,
                                          const std::string &newname,
                                          bool *done) {
  *done = false;
  if (NotAtRemote(olddir) || NotAtRemote(newdir)) return upstream::kNfs4Ok;
  Key k;
  Attrs a;
  uint32_t st = host_->Lookup(cr, olddir, oldname, &k, &a);
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
      (st = host_->Getattr(cr, olddir, &oda)))
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
    MutexLock g(&mu_);
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
    if (!oplog_->Replace(0, &recs)) return host_->StoreFailure();
    if (replaced != kNoKey)
      NoteReplaced(recs[0].seq, newdir, newname, replaced);
    AddMoved(recs.back().seq, olddir, oldname, newdir, newname, k, a.type);
  }
  EditListingsForRename(olddir, oldname, newdir, newname, k);
  metrics_->CountLoggedRename();
  return upstream::kNfs4Ok;
}

void NamespaceWriteBack::NoteReplaced(uint64_t seq, Key dir,
                                      const std::string &name, Key replaced) {
  local_names_->AddRemoved(LocalNames::Removed{seq, dir, name, replaced});
  cache_->Forget(replaced);  // its unflushed data need never be sent
  metrics_->CountLoggedRemove();
}

void NamespaceWriteBack::AddMoved(uint64_t seq, Key olddir,
                                  const std::string &oldname, Key newdir,
                                  const std::string &newname, Key k,
                                  upstream::FileType type) {
  local_names_->Add(LocalNames::Entry{seq, newdir, newname, k, type, "",
                                      int64_t(time(nullptr)), true});
  local_names_->AddRemoved(LocalNames::Removed{seq, olddir, oldname, k, true});
}

void NamespaceWriteBack::EditListingsForRename(Key olddir,
                                               const std::string &oldname,
                                               Key newdir,
                                               const std::string &newname,
                                               Key k) {
  if (olddir == newdir) {
    cache_->LocalDirEdit(newdir, oldname, newname, k);
  } else {
    cache_->LocalDirEdit(olddir, oldname, "", kNoKey);
    cache_->LocalDirEdit(newdir, "", newname, k);
  }
}

uint32_t NamespaceWriteBack::RenameMoved(const Creds &cr,
                                         const LocalNames::Entry &src,
                                         Key newdir, const std::string &newname,
                                         bool *done) {
  *done = false;
  if (NotAtRemote(newdir)) return upstream::kNfs4Ok;  // the remote way
  if (local_names_->Find(newdir, newname, nullptr))
    return upstream::kNfs4Ok;  // onto a local entry: the remote way
  *done = true;
  Attrs nda, sda, a;
  uint32_t st;
  if ((st = CheckNewName(cr, newdir, newname, &nda)) ||
      (st = host_->Getattr(cr, src.dir, &sda)) ||
      (st = host_->Getattr(cr, src.key, &a)) ||
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

  MutexLock g(&mu_);
  while (sending_.count(src.key) != 0) cv_.Wait();
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
  if (!oplog_->Replace(src.seq, &recs)) return host_->StoreFailure();
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

uint32_t NamespaceWriteBack::RemoveMoved(const Creds &cr, Key dir,
                                         const LocalNames::Entry &e) {
  Attrs da, a;
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessModify | upstream::kAccessLookup;
  uint32_t st;
  if ((st = host_->Getattr(cr, dir, &da)) ||
      (st = host_->Getattr(cr, e.key, &a)) ||
      (st = host_->Access(cr, dir, need, &allowed)))
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
  MutexLock g(&mu_);
  while (sending_.count(e.key) != 0) cv_.Wait();
  LocalNames::Entry now;
  if (!local_names_->Get(e.key, &now) || now.seq != e.seq ||
      (e.type == FileType::kDir && local_names_->LastChildSeq(e.key) != 0))
    return upstream::kNfs4ErrDelay;  // changed meanwhile: retried
  std::vector<LogRecord> rec = oplog_->Read(e.seq, 1);
  if (rec.empty() || rec[0].seq != e.seq || rec[0].op != LogOp::kRename)
    return upstream::kNfs4ErrServerfault;
  // The remote only ever sees the remove, under the name it knows.
  std::vector<LogRecord> recs{RemoveRecord(cr, rec[0].key, rec[0].name, e.key)};
  if (!oplog_->Replace(e.seq, &recs)) return host_->StoreFailure();
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

uint32_t NamespaceWriteBack::ReplacedByRename(const Creds &cr, Key newdir,
                                              const std::string &newname,
                                              const Attrs &nda, Key *replaced,
                                              bool *remote) {
  *replaced = kNoKey;
  *remote = false;
  Key k;
  Attrs a;
  uint32_t st = host_->Lookup(cr, newdir, newname, &k, &a);
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

uint32_t NamespaceWriteBack::MayMoveDir(const Creds &cr, Key k, Key olddir,
                                        Key newdir, bool *remote) {
  *remote = false;
  if (olddir == newdir) return upstream::kNfs4Ok;  // no new ancestors
  // Not into itself or below: walk up from newdir (at most as deep as a
  // path can be).
  Key x = newdir;
  for (int depth = 0; x != host_->RootKey(); depth++) {
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
  uint32_t st = host_->Access(cr, k, upstream::kAccessModify, &allowed);
  if (st) return st;
  return (allowed & upstream::kAccessModify) ? upstream::kNfs4Ok
                                             : upstream::kNfs4ErrAccess;
}

uint32_t NamespaceWriteBack::SendDirRenamesBefore(uint64_t seq) {
  for (const LocalNames::Entry &e : local_names_->MovedDirsBefore(seq))
    if (uint32_t st = CreateRemotely(e.key)) return st;
  return upstream::kNfs4Ok;
}

uint32_t NamespaceWriteBack::MayRenameBetween(const Creds &cr, Key olddir,
                                              Key newdir) {
  // The remote's rule, decided here: write and search permission on both
  // directories.
  const uint32_t need = upstream::kAccessModify | upstream::kAccessExtend |
                        upstream::kAccessLookup;
  uint32_t a1 = 0, a2 = 0;
  uint32_t st;
  if ((st = host_->Access(cr, olddir, need, &a1)) ||
      (st = host_->Access(cr, newdir, need, &a2)))
    return st;
  return (a1 & need) != need || (a2 & need) != need ? upstream::kNfs4ErrAccess
                                                    : upstream::kNfs4Ok;
}

bool NamespaceWriteBack::NamedAtRemote(const Creds &cr, const Fh &dir,
                                       const std::string &name, Key k) {
  HandleRecord h;
  if (!handles_->Get(k, &h)) return false;
  Compound c;
  c.SetTag("flush_rename_check").Putfh(dir).Lookup(name).Getfh();
  CompoundReply rep;
  if (host_->Run(c, cr, &rep)) return false;
  const upstream::OpResult *got = rep.Find(Op::kGetfh);
  return got && got->fh == h.fh;
}

uint32_t NamespaceWriteBack::SendRename(const LogRecord &r) {
  const Key k = Key(r.offset);
  Fh ofh, nfh;
  // (The old directory may be removed here, its remove waiting for this.)
  uint32_t st = host_->FhOfAny(r.key, &ofh);
  if (st || (st = host_->FhOf(r.key2, &nfh))) return st;
  // Our own read delegation on it first: the server would recall it.
  host_->ReturnIfReadDelegated(k);
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
  st = host_->Run(c, cr, &rep);
  if (!rep.Find(Op::kRename)) return st ? st : upstream::kNfs4ErrServerfault;
  uint32_t rst = rep.Find(Op::kRename)->status;
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
