// The flusher's sends (see flush_sender.h).
#include "writeback/flush_sender.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "nache/nache.h"
#include "util/log.h"
#include "util/parallel.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

FlushSender::FlushSender(Cache *cache, WriteBack *writeback,
                         NamespaceWriteBack *namespace_wb, Conflicts *conflicts,
                         metrics::ExportMetrics *metrics, Host *host,
                         Options opts)
    : cache_(cache),
      writeback_(writeback),
      namespace_(namespace_wb),
      conflicts_(conflicts),
      metrics_(metrics),
      host_(host),
      opts_(std::move(opts)) {}

std::unique_ptr<Flusher> FlushSender::NewFlusher(const FlusherOptions &opts) {
  FlusherOptions o = opts;
  // WRITEs as big as the remote takes.
  if (!o.max_send)
    o.max_send = [this]() -> uint64_t { return host_->MaxWrite(); };
  return std::unique_ptr<Flusher>(new Flusher(
      cache_,
      [this](Key key, uint64_t off, const std::string &data,
             upstream::StableHow stable, Flusher::Sent *sent) {
        return SendRange(key, off, data, stable, sent);
      },
      [this](Key key, upstream::Verifier *verf, Attrs *after) {
        return Commit(key, verf, after);
      },
      [this](Key key, const Attrs &set, Attrs *after) {
        return Setattr(key, set, after);
      },
      o, [this](Key key, bool patient) { return Prepare(key, patient); },
      [this](Key key) { return conflicts_->SaveLostFile(key); }));
}

uint32_t FlushSender::Prepare(Key key, bool patient) {
  if (namespace_) {
    // Created here: create it remotely first (with its data when small),
    // its directory before it, and together with the files of its
    // directory old enough to be flushed too.
    if (namespace_->names().IsLocal(key))
      return namespace_->CreateWithSiblings(
          key, patient
                   ? int64_t(time(nullptr)) - int64_t(opts_.flush_age_ms / 1000)
                   : INT64_MAX);
    // A directory's mtime waits until its local entries are old enough to
    // be sent (those that die young never are).
    int64_t newest = namespace_->names().NewestChildTime(key);
    if (patient && newest != 0 &&
        int64_t(time(nullptr)) - newest < int64_t(opts_.flush_age_ms / 1000))
      return Flusher::kNotYet;
  }
  return conflicts_->CheckForConflict(key);
}

uint32_t FlushSender::SendRange(Key key, uint64_t offset,
                                const std::string &data,
                                upstream::StableHow stable,
                                Flusher::Sent *sent) {
  Fh fh;
  uint32_t st = host_->FhOf(key, &fh);
  if (st) return st;
  // A read delegation of ours, not a write one.
  host_->ReturnIfReadDelegated(key);
  Creds cr = writeback_->FlushCreds(key);
  StateId sid;
  if (!host_->WriteDelegation(key, &sid)) sid = StateId::Anonymous();
  st = WriteRange(cr, fh, sid, offset, data.data(), data.size(), stable,
                  "flush", sent);
  NACHE_LOG(kLogDebug, kWritebackComponent,
            "flush of %llu: WRITE %zu at %llu (%s): status %u",
            (unsigned long long)key, data.size(), (unsigned long long)offset,
            stable == upstream::StableHow::kUnstable ? "unstable" : "stable",
            st);
  NoteRefused("write", key, cr, st);
  return st;
}

uint32_t FlushSender::Commit(Key key, upstream::Verifier *verf, Attrs *after) {
  Fh fh;
  uint32_t st = host_->FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("flush_commit")
      .Putfh(fh)
      .Commit(0, 0)
      .Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  st = host_->Run(c, writeback_->FlushCreds(key), &rep);
  if (st) return st;
  *verf = rep.Find(Op::kCommit)->verifier;
  *after = rep.Find(Op::kGetattr)->attrs;
  return upstream::kNfs4Ok;
}

uint32_t FlushSender::Setattr(Key key, const Attrs &set, Attrs *after) {
  Fh fh;
  uint32_t st = host_->FhOf(key, &fh);
  if (st) return st;
  // A directory's mtime is set after its entries are removed and created
  // there (that would move it again).
  if (namespace_ && ((st = namespace_->SendRemovesIn(key)) ||
                     (st = namespace_->CreateEntriesRemotely(key))))
    return st;
  host_->ReturnIfReadDelegated(key);
  Compound c;
  c.SetTag("flush_setattr").Putfh(fh);
  // Nothing to set (an object created here, whose create was all): its
  // attributes at the remote, to follow from now on.
  if (set.mask != 0) c.Setattr(StateId::Anonymous(), set);
  c.Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  Creds cr = writeback_->FlushCreds(key);
  st = host_->Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok) *after = rep.Find(Op::kGetattr)->attrs;
  if (RefusedDirectoryTimes(key, set, st))
    return Setattr(key, Attrs(), after);  // the remote's times stand
  NoteRefused("setattr", key, cr, st);
  return st;
}

bool FlushSender::RefusedDirectoryTimes(Key key, const Attrs &set,
                                        uint32_t st) {
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

void FlushSender::NoteRefused(const char *op, Key key, const Creds &cr,
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

uint32_t FlushSender::WriteRange(const Creds &cr, const Fh &fh,
                                 const StateId &sid, uint64_t offset,
                                 const char *data, size_t len,
                                 upstream::StableHow stable, const char *tag,
                                 Flusher::Sent *sent) {
  const size_t per = std::max<size_t>(4096, host_->MaxWrite());
  bool first = true;
  for (size_t done = 0; done < len;) {
    size_t n = std::min(per, len - done);
    bool last = done + n == len;
    Compound c;
    c.SetTag(tag).Putfh(fh).Write(sid, offset + done, stable, data + done,
                                  uint32_t(n));
    if (last && sent) c.Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    uint32_t st = host_->Run(c, cr, &rep);
    if (st) return st;
    const OpResult &w = *rep.Find(Op::kWrite);
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

uint32_t FlushSender::CreateClosedFile(
    const Creds &cr, const Fh &pfh, const std::string &name,
    upstream::OpenArgs::Create how, const Attrs &ca, Key key,
    const std::function<void(Compound *)> &more, CompoundReply *rep, Fh *fh,
    upstream::Delegation *deleg) {
  NewObject f;
  f.name = name;
  f.how = how;
  f.ca = ca;
  f.key = key;
  f.more = [&more](Compound *c, const StateId &) { more(c); };
  std::vector<NewObjectResult> res;
  CreateObjects(cr, pfh, {f}, &res);
  *rep = std::move(res[0].rep);
  if (res[0].status == upstream::kNfs4Ok) {
    *fh = res[0].fh;
    if (deleg) *deleg = res[0].deleg;
  }
  return res[0].status;
}

void FlushSender::CreateObjects(const Creds &cr, const Fh &pfh,
                                const std::vector<NewObject> &objs,
                                std::vector<NewObjectResult> *out) {
  out->assign(objs.size(), NewObjectResult());
  if (host_->MinorVersion() == 0) {
    // Each a COMPOUND (a file's OPEN, confirmed when new owners must be,
    // and a CLOSE), a few at once.
    ParallelFor(objs.size(), WriteBack::kFlushOwners, [&](size_t i) {
      (*out)[i] = CreateObject40(cr, pfh, objs[i]);
      return upstream::kNfs4Ok;
    });
    return;
  }
  // NFSv4.1: as many in one COMPOUND as the session takes, and no more
  // bytes than one WRITE's COMPOUND: the session's largest request is
  // about the largest WRITE and a page (knfsd), so each object's own
  // arguments count too (kNewObjectBytes). A few COMPOUNDs at once.
  const size_t max_ops = host_->MaxOps();
  const size_t max_bytes = host_->MaxWrite();
  std::vector<std::pair<size_t, size_t>> batches;  // [first, end) of objs
  for (size_t b = 0; b < objs.size();) {
    size_t e = b, ops = 0, bytes = 0, writes = 0;
    while (e < objs.size()) {
      const size_t o = NewObjectOps(objs[e]);
      const size_t n = objs[e].more_bytes + kNewObjectBytes;
      // (One WRITE a COMPOUND: see kMaxWritesPerCompound.)
      if (e > b && (ops + o > max_ops || bytes + n > max_bytes ||
                    writes + objs[e].writes > kMaxWritesPerCompound))
        break;
      ops += o;
      bytes += n;
      writes += objs[e].writes;
      e++;
    }
    batches.emplace_back(b, e);
    b = e;
  }
  // (A file with data is a batch of its own: kMaxWritesPerCompound. An
  // untar's directory of them goes kCreatesInFlight at once.)
  ParallelFor(batches.size(), kCreatesInFlight, [&](size_t i) {
    CreateObjects41(cr, pfh, objs, batches[i].first, batches[i].second, out);
    return upstream::kNfs4Ok;
  });
}

void FlushSender::NameFlushOwner(OwnerSlot *owner) {
  uint64_t epoch = host_->Epoch();
  if (owner->epoch == epoch) return;
  owner->seqid = 0;
  owner->epoch = epoch;
  owner->name = opts_.owner_prefix + "-flush" +
                std::to_string(writeback_->FlushOwnerIndex(owner));
}

upstream::OpenArgs FlushSender::CreateArgs(OwnerSlot *owner,
                                           const NewObject &f) {
  upstream::OpenArgs a;
  a.seqid = owner->seqid;
  a.share_access = upstream::kShareAccessWrite;
  a.share_deny = upstream::kShareDenyNone;
  a.owner = owner->name;
  a.name = f.name;
  a.create = f.how;
  a.create_attrs = f.ca;
  return a;
}

NewObjectResult FlushSender::CreateObject40(const Creds &cr, const Fh &pfh,
                                            const NewObject &f) {
  NewObjectResult r;
  if (f.type != upstream::FileType::kReg) {
    Compound c;
    c.SetTag("flush_create")
        .Putfh(pfh)
        .Create(f.type, f.name, f.ca, f.text)
        .Getfh()
        .Getattr(upstream::kAttrsObject);
    uint32_t st = host_->Run(c, cr, &r.rep);
    r.answered = !r.rep.results.empty();
    const OpResult *k = r.rep.Find(Op::kCreate);
    const OpResult *g = r.rep.Find(Op::kGetfh);
    r.status = !k          ? (st ? st : upstream::kNfs4ErrDelay)
               : k->status ? k->status
               : !g        ? (st ? st : upstream::kNfs4ErrServerfault)
                           : upstream::kNfs4Ok;
    if (r.status == upstream::kNfs4Ok) r.fh = g->fh;
    return r;
  }
  // NFSv4.0 creates regular files by OPEN; this one is closed at once
  // (local opens of the file have their own).
  OwnerSlot *owner = writeback_->FlushOwner(f.key);
  MutexLock og(&owner->mu);
  NameFlushOwner(owner);
  Compound c;
  c.SetTag("flush_create").Putfh(pfh).Open(CreateArgs(owner, f)).Getfh();
  if (f.more) f.more(&c, StateId::Anonymous());
  c.Getattr(upstream::kAttrsObject);
  uint32_t st = host_->Run(c, cr, &r.rep);
  r.answered = !r.rep.results.empty();
  const OpResult *o = r.rep.Find(Op::kOpen);
  if (o) OpenTable::AdvanceSeqid(&owner->seqid, o->status);
  if (!o || o->status) {
    r.status = o ? o->status : st ? st : upstream::kNfs4ErrDelay;
    return r;
  }
  if (!r.rep.Find(Op::kGetfh)) {
    r.status = st ? st : upstream::kNfs4ErrServerfault;
    return r;
  }
  r.fh = r.rep.Find(Op::kGetfh)->fh;
  StateId sid = o->stateid;
  if ((r.status = host_->ConfirmIfAsked(cr, *o, r.fh, owner, &sid, &r.deleg))) {
    r.fh.clear();
    return r;
  }
  Compound cl;
  cl.SetTag("flush_create_close").Putfh(r.fh).Close(owner->seqid, sid);
  CompoundReply clrep;
  host_->Run(cl, cr, &clrep);  // a failed CLOSE: the state dies with the lease
  if (const OpResult *x = clrep.Find(Op::kClose))
    OpenTable::AdvanceSeqid(&owner->seqid, x->status);
  return r;
}

void FlushSender::CreateObjects41(const Creds &cr, const Fh &pfh,
                                  const std::vector<NewObject> &files,
                                  size_t first, size_t end,
                                  std::vector<NewObjectResult> *out) {
  // Each file: PUTFH dir, OPEN, GETFH, its own operations, GETATTR, CLOSE,
  // all under the open's stateid as the current one (RFC 8881 16.2.3.1.2;
  // the next PUTFH clears it). Each directory or symlink: PUTFH dir,
  // CREATE, GETFH, GETATTR. The session makes the COMPOUND exactly-once,
  // so one owner serves the whole batch, and batches of one owner go side
  // by side (no seqid to keep in order): its lock is held only while its
  // name goes into the OPENs.
  OwnerSlot *owner = writeback_->FlushOwner(files[first].key);
  Compound c;
  c.SetTag("flush_create");
  std::vector<size_t> ops;  // each object's operations
  MutexLock og(&owner->mu);
  NameFlushOwner(owner);
  for (size_t i = first; i < end; i++) {
    const NewObject &f = files[i];
    const size_t before = c.size();
    if (f.type != upstream::FileType::kReg) {
      c.Putfh(pfh)
          .Create(f.type, f.name, f.ca, f.text)
          .Getfh()
          .Getattr(upstream::kAttrsObject);
      ops.push_back(c.size() - before);
      continue;
    }
    c.Putfh(pfh).Open(CreateArgs(owner, f)).Getfh();
    if (f.more) f.more(&c, StateId::Current());
    c.Getattr(upstream::kAttrsObject).Close(0, StateId::Current());
    ops.push_back(c.size() - before);
  }
  og.Unlock();
  CompoundReply rep;
  const uint32_t st = host_->Run(c, cr, &rep);
  // Each file's own results: the COMPOUND stopped at the first failure,
  // so the files after it were not reached.
  size_t at = 0;
  for (size_t i = first; i < end; i++) {
    NewObjectResult &r = (*out)[i];
    const size_t n = ops[i - first];
    r.answered = !rep.results.empty();
    r.rep.sends = rep.sends;
    for (size_t k = at; k < at + n && k < rep.results.size(); k++) {
      r.rep.results.push_back(rep.results[k]);
      if (rep.results[k].status && r.rep.status == upstream::kNfs4Ok)
        r.rep.status = rep.results[k].status;
    }
    at += n;
    if (r.rep.results.size() < n && r.rep.status == upstream::kNfs4Ok)
      r.rep.status = st ? st : upstream::kNfs4ErrDelay;
    const bool reg = files[i].type == upstream::FileType::kReg;
    const OpResult *o = r.rep.Find(reg ? Op::kOpen : Op::kCreate);
    const OpResult *g = r.rep.Find(Op::kGetfh);
    if (!o || o->status) {
      r.status = o ? o->status : upstream::kNfs4ErrDelay;
      continue;
    }
    if (!g || g->status) {
      r.status = upstream::kNfs4ErrServerfault;  // (GETFH does not fail)
      continue;
    }
    r.status = upstream::kNfs4Ok;
    r.fh = g->fh;
    if (!reg) continue;
    r.deleg = o->delegation;
    if (!r.rep.Find(Op::kClose)) {
      // One of its own operations failed (a WRITE without room): the file
      // is made, its open is closed on its own.
      Compound cl;
      cl.SetTag("flush_create_close").Putfh(r.fh).Close(0, o->stateid);
      CompoundReply clrep;
      host_->Run(cl, cr, &clrep);
    }
  }
}

}  // namespace nache
