// Conflicts of write-back (see conflicts.h).
#include "writeback/conflicts.h"

#include <algorithm>
#include <ctime>

#include "util/log.h"

namespace nache {
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::Op;
using upstream::StateId;

uint32_t Conflicts::CheckForConflict(Key key) {
  Cache::DirtyBase base;
  // Created here (nothing to conflict with), clean, or only attributes set
  // (those simply apply: the last setter wins, as at any server).
  if (!cache_->GetDirtyBase(key, &base) || !base.has_data)
    return upstream::kNfs4Ok;
  // Under our write delegation nobody else can have written it.
  if (host_->WriteDelegated(key)) return upstream::kNfs4Ok;
  if (base.uncertain) {
    // A flush of it was cut off: the remote may hold part of our writes
    // under a change attribute we never saw, so a moved one proves
    // nothing. Ours is sent whole again.
    NACHE_LOG(kLogDebug, kWritebackComponent,
              "%llu: an earlier flush was cut off, no conflict check",
              (unsigned long long)key);
    return upstream::kNfs4Ok;
  }
  Fh fh;
  uint32_t st = host_->FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("flush_check").Putfh(fh).Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  const Creds cr = writeback_->FlushCreds(key);
  if ((st = host_->Run(c, cr, &rep))) {
    // The data's flush begins here, as its writer: refused (the remote
    // refuses the writer, or with Upstream_Identity = user the writer's
    // credentials cannot be had), it is that flush that is refused.
    host_->NoteFlushRefused("write", key, cr, st);
    return st;
  }
  const Attrs &now = rep.Find(Op::kGetattr)->attrs;
  if (!(now.mask & upstream::kAttrChange) || now.change == base.change)
    return upstream::kNfs4Ok;
  // An operation of ours that moved it (a RENAME sent by the directory's
  // flush meanwhile) marks the base uncertain before it is sent: if the
  // GETATTR saw its effect, the mark is there now.
  Cache::DirtyBase again;
  if (!cache_->GetDirtyBase(key, &again) || again.uncertain ||
      again.change != base.change)
    return upstream::kNfs4Ok;
  NACHE_LOG(kLogWarn, kWritebackComponent,
            "%llu: its change attribute at the remote is %llu (size %llu), "
            "our changes are based on %llu (size %llu)",
            (unsigned long long)key, (unsigned long long)now.change,
            (unsigned long long)now.size, (unsigned long long)base.change,
            (unsigned long long)base.size);
  return KeepBothVersions(key, now);
}

void Conflicts::LastNameOf(Key key, Key *dir, std::string *name) {
  *dir = host_->RootKey();
  *name = "nache-file-" + std::to_string(key);
  HandleRecord rec;
  if (handles_->Get(key, &rec) && rec.parent != kNoKey && !rec.name.empty()) {
    *dir = rec.parent;
    *name = rec.name;
  }
}

uint32_t Conflicts::KeepBothVersions(Key key, const Attrs &remote) {
  // Beside the file, under the name we last saw it by.
  Key dir;
  std::string name, cname;
  LastNameOf(key, &dir, &name);
  uint32_t st = SaveOurVersion(key, dir, name, "conflict", &cname);
  if (st) return st;
  metrics_->CountConflict();
  NACHE_LOG(kLogWarn, kWritebackComponent,
            "conflict: %s (key %llu) changed at the remote (change %llu, "
            "size %llu) while we held unflushed writes; the remote's "
            "version stays, ours is saved beside it as %s",
            name.c_str(), (unsigned long long)key,
            (unsigned long long)remote.change, (unsigned long long)remote.size,
            cname.c_str());
  return upstream::kNfs4Ok;
}

uint32_t Conflicts::SaveLostFile(Key key) {
  Key dir;
  std::string name, cname;
  LastNameOf(key, &dir, &name);
  // Beside where it was; when its directory is gone too, in the export's
  // nache-lost+found.
  uint32_t st = SaveOurVersion(key, dir, name, "lost", &cname);
  if (st == upstream::kNfs4ErrStale || st == upstream::kNfs4ErrNoent) {
    Key lf;
    if ((st = LostAndFound(writeback_->FlushCreds(key), &lf)) ==
        upstream::kNfs4Ok) {
      st = SaveOurVersion(key, lf, name, "lost", &cname);
      cname = std::string(kLostAndFound) + "/" + cname;
    }
  }
  if (st) {
    metrics_->CountLostFile(false);
    NACHE_LOG(kLogCrit, kWritebackComponent,
              "%s (key %llu) is gone at the remote with unflushed data of "
              "ours, which could not be saved there (nfs status %u): it "
              "stays in the cache, retried later",
              name.c_str(), (unsigned long long)key, st);
    return st;
  }
  metrics_->CountLostFile(true);
  NACHE_LOG(kLogCrit, kWritebackComponent,
            "%s (key %llu) is gone at the remote (removed, or the remote's "
            "handles changed) while we held acknowledged data not yet "
            "sent: our version is saved at the remote as %s",
            name.c_str(), (unsigned long long)key, cname.c_str());
  return upstream::kNfs4Ok;
}

uint32_t Conflicts::LostAndFound(const Creds &cr, Key *key) {
  Fh root;
  uint32_t st = host_->FhOf(host_->RootKey(), &root);
  if (st) return st;
  Attrs ca;
  ca.mask = upstream::kAttrMode;
  // Like /tmp: every writer may save there, only theirs to remove (made
  // by the first writer who needs it; the remote may squash root).
  ca.mode = 01777;
  Compound c;
  c.SetTag("lost_found")
      .Putfh(root)
      .Create(upstream::FileType::kDir, kLostAndFound, ca, "")
      .Getfh();
  CompoundReply rep;
  st = host_->Run(c, cr, &rep);
  if (st == upstream::kNfs4ErrExist) {
    Compound l;
    l.SetTag("lost_found").Putfh(root).Lookup(kLostAndFound).Getfh();
    rep = CompoundReply();
    st = host_->Run(l, cr, &rep);
  }
  if (st) return st;
  *key = handles_->Intern(rep.Find(Op::kGetfh)->fh, host_->RootKey(),
                          kLostAndFound);
  cache_->ExpireAttrs(host_->RootKey());
  return upstream::kNfs4Ok;
}

uint32_t Conflicts::SaveOurVersion(Key key, Key dir, const std::string &name,
                                   const char *kind, std::string *saved_as) {
  Fh pfh;
  uint32_t st = host_->FhOf(dir, &pfh);
  if (st) return st;
  Attrs mine;
  if (!cache_->KnownAttrs(key, &mine)) return upstream::kNfs4Ok;  // gone
  // New local writes wait until ours is copied and dropped: they go on top
  // of the remote's version, not into the copy.
  WriteBack::Resolving resolving = writeback_->BeginResolving(key);
  // As the file's writer: the copy is theirs, as the file was.
  Creds cr = writeback_->FlushCreds(key);
  Attrs ca;
  ca.mask = upstream::kAttrMode;
  ca.mode = mine.mode & 07777;
  const std::string stamp = WriteBack::UtcStamp();
  std::string cname;
  Fh fh;
  CompoundReply rep;
  upstream::Delegation deleg;
  st = upstream::kNfs4ErrExist;
  for (int n = 0; n < 100 && st == upstream::kNfs4ErrExist; n++) {
    cname = WriteBack::CopyName(name, kind, stamp, n);
    rep = CompoundReply();
    st = host_->CreateClosedFile(
        cr, pfh, cname, upstream::OpenArgs::Create::kGuarded, ca, key,
        [](Compound *) {}, &rep, &fh, &deleg);
  }
  if (st) {
    NACHE_LOG(kLogWarn, kWritebackComponent,
              "%s of %s (key %llu): could not create %s at the remote "
              "(nfs status %u); our version stays here, retried later",
              kind, name.c_str(), (unsigned long long)key, cname.c_str(), st);
    return st;
  }
  Key copy = handles_->Intern(fh, dir, cname);
  host_->NoteGrant(copy, deleg);
  NoteConflictCopy(dir, rep.Find(Op::kOpen)->cinfo, "", cname, copy);
  // Local writes that began before the resolution (and so were made on
  // our version) may land while the copy is made: then copy again, so
  // that the version we drop is the one the copy holds.
  for (int round = 0;; round++) {
    uint64_t copied_change = 0;
    st = CopyOurVersion(key, fh, cr, &copied_change);
    if (st == upstream::kNfs4Ok &&
        cache_->ForgetIfUnchanged(key, copied_change))
      break;
    if (st || round == 3) {
      if (!st) st = upstream::kNfs4ErrDelay;
      // An incomplete copy would mislead: remove it (the next flush
      // makes a new one).
      Compound rm;
      rm.SetTag("conflict_copy_remove").Putfh(pfh).Remove(cname);
      CompoundReply rmrep;
      host_->Run(rm, cr, &rmrep);
      if (const upstream::OpResult *r = rmrep.Find(Op::kRemove))
        if (r->status == upstream::kNfs4Ok)
          NoteConflictCopy(dir, r->cinfo, cname, "", kNoKey);
      NACHE_LOG(kLogWarn, kWritebackComponent,
                "%s of %s (key %llu): copying our version to %s failed "
                "(nfs status %u); it stays here, retried later",
                kind, name.c_str(), (unsigned long long)key, cname.c_str(), st);
      return st;
    }
  }
  *saved_as = cname;
  return upstream::kNfs4Ok;
}

void Conflicts::NoteConflictCopy(Key dir, const upstream::ChangeInfo &ci,
                                 const std::string &removed,
                                 const std::string &added, Key added_key) {
  // The directory's change attribute must move where our clients (and
  // Ganesha's directory cache) see it: a directory with unflushed local
  // entries is ours (a local edit), any other follows the remote.
  if (cache_->IsDirty(dir)) {
    cache_->LocalDirEdit(dir, removed, added, added_key);
    return;
  }
  cache_->OwnDirChange(dir, ci, Attrs(), removed, added, added_key,
                       single_writer_);
  cache_->ExpireAttrs(dir);
}

uint32_t Conflicts::CopyOurVersion(Key key, const Fh &fh, const Creds &cr,
                                   uint64_t *copied_change) {
  Attrs mine;
  if (!cache_->KnownAttrs(key, &mine)) return upstream::kNfs4ErrStale;
  *copied_change = mine.change;
  const uint64_t bs = cache_->block_size();
  uint64_t missing = 0;
  for (uint64_t idx = 0; idx * bs < mine.size; idx++) {
    std::string b;
    if (!cache_->GetBlock(key, idx, &b)) {
      // Never read here (a hole our writes made reads as zeros anyway):
      // the remote's old bytes are gone, so the copy has a hole.
      if (!cache_->ReadsAsZeros(key, idx))
        missing += std::min<uint64_t>(bs, mine.size - idx * bs);
      continue;
    }
    if (uint32_t st = host_->WriteRange(
            cr, fh, StateId::Anonymous(), idx * bs, b.data(), b.size(),
            upstream::StableHow::kFileSync, "conflict_copy"))
      return st;
  }
  // Our size (a hole may end it) and our mtime.
  Attrs set;
  set.mask = upstream::kAttrSize | upstream::kAttrMtime;
  set.size = mine.size;
  set.mtime = mine.mtime;
  Compound c;
  c.SetTag("conflict_copy_setattr")
      .Putfh(fh)
      .Setattr(StateId::Anonymous(), set);
  CompoundReply rep;
  if (uint32_t st = host_->Run(c, cr, &rep)) return st;
  if (missing)
    NACHE_LOG(kLogWarn, kWritebackComponent,
              "conflict copy of key %llu: %llu bytes of the file were never "
              "read here and are holes in the copy",
              (unsigned long long)key, (unsigned long long)missing);
  return upstream::kNfs4Ok;
}

}  // namespace nache
