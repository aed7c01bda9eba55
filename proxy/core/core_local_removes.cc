// Removes kept local on write-back single-writer exports
// (proxy/writeback/DESIGN.md): a remove of a file or symlink the remote
// has, or of a directory that is empty here (its entries' removes may be
// unsent), is acknowledged once its kRemove record is synced to the log; the
// name is hidden here at once (a whiteout in LocalNames), and the remote
// REMOVE is sent later, before anything that needs the name free there
// (a create of the same name, a rename or link onto it, the directory's
// own removal) and at the latest when the directory's mtime is flushed.
// Removes of objects created here and never sent are cancellations
// instead (RemoveLocal in core_local_names.cc).
#include "core/core.h"
#include "util/log.h"
#include "util/parallel.h"

namespace nache {
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::FileType;
using upstream::Op;

uint32_t Core::RemoveLogged(const Creds &cr, Key dir, const std::string &name,
                            bool *done, Key *target) {
  *done = false;
  *target = kNoKey;
  if (NotAtRemote(dir)) return upstream::kNfs4Ok;  // nothing remote in it
  Key k;
  Attrs a;
  uint32_t st = Lookup(cr, dir, name, &k, &a);
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
  if ((st = Getattr(cr, dir, &da))) {
    *done = true;
    return st;
  }
  uint32_t allowed = 0;
  const uint32_t need = upstream::kAccessModify | upstream::kAccessLookup;
  *done = true;
  if ((st = Access(cr, dir, need, &allowed))) return st;
  if ((allowed & need) != need) return upstream::kNfs4ErrAccess;
  if (StickyForbids(cr, da, a)) return upstream::kNfs4ErrPerm;
  LogRecord r = RemoveRecord(cr, dir, name, k);
  {
    MutexLock g(&meta_mu_);
    // Synced: once the client hears "removed", a crash must not bring the
    // name back.
    uint64_t seq = oplog_->Append(r);
    if (seq == 0) return StoreFailure();
    local_names_->AddRemoved(LocalNames::Removed{seq, dir, name, k});
  }
  cache_->Forget(k);  // its unflushed data need never be sent
  cache_->LocalDirEdit(dir, name, "", kNoKey);
  metrics_->CountLoggedRemove();
  return upstream::kNfs4Ok;
}

bool Core::EmptyHere(const Creds &cr, Key dir, bool *empty) {
  *empty = false;
  if (local_names_->LastChildSeq(dir) != 0) return true;
  auto listing = cache_->Listing(dir);
  if (!listing) {
    PrefetchListing(cr, dir);
    listing = cache_->Listing(dir);
  }
  if (!listing) return false;  // too big to keep: the remote decides
  for (const CachedDirent &e : *listing)
    if (!local_names_->FindRemoved(dir, e.name, nullptr)) return true;
  *empty = true;
  return true;
}

bool Core::RemoveRefused(uint32_t status) {
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

bool Core::RemoveMayBeLogged(Key k, const Attrs &a) {
  // Directories (their removal needs the remote's word that they are
  // empty) and files with other links (their nlink and data live on) go
  // the remote way.
  return (a.type == FileType::kReg || a.type == FileType::kLnk) &&
         !((a.mask & upstream::kAttrNlink) && a.nlink > 1) && !NotAtRemote(k);
}

LogRecord Core::RemoveRecord(const Creds &cr, Key dir, const std::string &name,
                             Key k) {
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

uint32_t Core::SendRemoveOf(Key dir, const std::string &name) {
  LocalNames::Removed w;
  if (!LocalNamespace() || !local_names_->FindRemoved(dir, name, &w))
    return upstream::kNfs4Ok;
  return SendRemoves(dir, {w});
}

uint32_t Core::SendRemovesIn(Key dir) {
  if (!LocalNamespace()) return upstream::kNfs4Ok;
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

uint32_t Core::SendRemoves(Key dir,
                           const std::vector<LocalNames::Removed> &ws) {
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
    MutexLock g(&meta_mu_);
    for (const LocalNames::Removed &w : plain) {
      while (removing_.count(w.seq) != 0) meta_cv_.Wait();
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
    delegations_->ReturnIfReadDelegated(mine[i].key);
    return upstream::kNfs4Ok;
  });
  Fh dfh;
  // (dir may be removed here itself, its own remove waiting for these.)
  uint32_t st = FhOfAny(dir, &dfh);
  size_t done = 0;  // mine[0, done) are removed at the remote (or refused)
  std::vector<size_t> refused;  // indexes in mine the remote refused
  while (st == upstream::kNfs4Ok && done < mine.size()) {
    // As the remover of the first; the rest in the same COMPOUND when
    // they were removed by the same user.
    Creds cr = recs[done].SendCreds();
    Compound c;
    c.SetTag("flush_remove").Putfh(dfh);
    size_t n = 0;
    while (done + n < mine.size() && recs[done + n].SendCreds() == cr) {
      c.Remove(mine[done + n].name);
      n++;
    }
    CompoundReply rep;
    st = Run(c, cr, &rep);
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
    MutexLock g(&meta_mu_);
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
  meta_cv_.SignalAll();
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

}  // namespace nache
