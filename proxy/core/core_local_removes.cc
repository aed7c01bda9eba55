// Removes kept local on write-back single-writer exports
// (proxy/writeback/DESIGN.md): a remove of a file or symlink the remote
// has is acknowledged once its kRemove record is synced to the log; the
// name is hidden here at once (a whiteout in LocalNames), and the remote
// REMOVE is sent later, before anything that needs the name free there
// (a create of the same name, a rename or link onto it, the directory's
// own removal) and at the latest when the directory's mtime is flushed.
// Removes of objects created here and never sent are cancellations
// instead (RemoveLocal in core_local_names.cc).
#include "core/core.h"
#include "util/log.h"

namespace nache {
namespace {

const char *const kComponent = "NACHE_WRITEBACK";

}  // namespace

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
  // Directories (their removal needs the remote's word that they are
  // empty) and files with other links (their nlink and data live on) go
  // the remote way.
  if ((a.type != FileType::kReg && a.type != FileType::kLnk) ||
      ((a.mask & upstream::kAttrNlink) && a.nlink > 1) || NotAtRemote(k))
    return upstream::kNfs4Ok;
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
  if ((da.mode & 01000) && cr.uid != 0 && cr.uid != a.uid && cr.uid != da.uid)
    return upstream::kNfs4ErrPerm;
  LogRecord r;
  r.op = LogOp::kRemove;
  r.key = dir;
  r.name = name;
  r.key2 = k;
  r.attrs.mask = upstream::kAttrOwner | upstream::kAttrOwnerGroup;
  r.attrs.uid = cr.uid;  // the remover, as whom it is sent
  r.attrs.gid = cr.gid;
  {
    std::lock_guard<std::mutex> g(meta_mu_);
    // Synced: once the client hears "removed", a crash must not bring the
    // name back.
    uint64_t seq = oplog_->Append(r);
    if (seq == 0) return upstream::kNfs4ErrIo;
    local_names_->AddRemoved(LocalNames::Removed{seq, dir, name, k});
  }
  cache_->Forget(k);  // its unflushed data need never be sent
  cache_->LocalDirEdit(dir, name, "", kNoKey);
  metrics_->CountLoggedRemove();
  return upstream::kNfs4Ok;
}

uint32_t Core::SendRemoveOf(Key dir, const std::string &name) {
  LocalNames::Removed w;
  if (!LocalNamespace() || !local_names_->FindRemoved(dir, name, &w))
    return upstream::kNfs4Ok;
  return SendRemove(w);
}

uint32_t Core::SendRemovesIn(Key dir) {
  if (!LocalNamespace()) return upstream::kNfs4Ok;
  for (const LocalNames::Removed &w : local_names_->RemovedIn(dir))
    if (uint32_t st = SendRemove(w)) return st;
  return upstream::kNfs4Ok;
}

uint32_t Core::SendRemove(const LocalNames::Removed &w) {
  LogRecord r;
  {
    // One sender per record: a second REMOVE of the name could land after
    // a create of it that followed the first.
    std::unique_lock<std::mutex> g(meta_mu_);
    meta_cv_.wait(g, [&] { return removing_.count(w.seq) == 0; });
    LocalNames::Removed now;
    if (!local_names_->FindRemoved(w.dir, w.name, &now) || now.seq != w.seq)
      return upstream::kNfs4Ok;  // sent meanwhile
    std::vector<LogRecord> recs = oplog_->Read(w.seq, 1);
    if (recs.empty() || recs[0].seq != w.seq) {
      NACHE_LOG(kLogCrit, kComponent, "no remove record %llu for %s",
                (unsigned long long)w.seq, w.name.c_str());
      return upstream::kNfs4ErrServerfault;
    }
    r = std::move(recs[0]);
    removing_.insert(w.seq);
  }
  Fh dfh;
  uint32_t st = FhOf(w.dir, &dfh);
  if (st == upstream::kNfs4Ok) {
    Creds cr;
    cr.uid = r.attrs.uid;
    cr.gid = r.attrs.gid;
    Compound c;
    c.SetTag("flush_remove").Putfh(dfh).Remove(w.name);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    // Gone already: this record was sent before a crash that kept it.
    if (st == upstream::kNfs4ErrNoent) st = upstream::kNfs4Ok;
  }
  {
    std::lock_guard<std::mutex> g(meta_mu_);
    removing_.erase(w.seq);
    if (st == upstream::kNfs4Ok) {
      local_names_->EraseRemoved(w.seq);
      oplog_->Erase({w.seq});
    }
  }
  meta_cv_.notify_all();
  if (st) {
    NACHE_LOG(kLogInfo, kComponent,
              "remove of %s at the remote failed (nfs status %u); kept, "
              "retried later",
              w.name.c_str(), st);
  } else {
    metrics_->CountSentRemove();
  }
  return st;
}

}  // namespace nache
