// The core as its components see it: the Host interfaces through which
// Delegations (delegations/delegations.h) and Reclaim
// (delegations/reclaim.h) reach the upstream, the handle map, the cache
// and the core's opens, locks and writes, the one through which
// LingeringOpens (opens/lingering_opens.h) closes an open, and the one
// through which the write-back components (writeback/: WriteBack,
// NamespaceWriteBack, Conflicts, FlushSender) reach the cache, the core's
// lookups, handles and COMPOUNDs and the delegation checks. Private to the
// core's .cc files (core.h only names these classes).
//
// Thread safety: as the Host interfaces say; every method here takes only
// the locks of the core method it calls.
#pragma once

#include <rocksdb/status.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/core.h"
#include "util/log.h"

namespace nache {

class Core::DelegationsHost : public Delegations::Host {
 public:
  explicit DelegationsHost(Core *core) : core_(core) {}

  uint64_t Epoch() const override { return core_->up_->epoch(); }
  std::chrono::steady_clock::time_point LeaseValidUntil() const override {
    return core_->up_->lease_valid_until();
  }
  uint32_t LeaseTime() const override { return core_->up_->lease_time(); }
  Key KeyOf(const upstream::Fh &fh) override {
    return core_->handles_->Find(fh);
  }
  bool KnownAttrs(Key key, upstream::Attrs *attrs) override {
    return core_->cache_->KnownAttrs(key, attrs);
  }
  void SetDelegated(Key key, bool delegated) override {
    core_->cache_->SetDelegated(key, delegated);
  }
  void ExpireAttrs(Key key) override { core_->cache_->ExpireAttrs(key); }

  void BeforeReturn(Key key, const HeldDelegation &d) override {
    // Queued writes and unflushed data reach the server under the
    // delegation.
    if (core_->unstable_writes_) core_->unstable_writes_->Drain(key);
    // (Only a write delegation covers unflushed data; a read one is
    // returned by the flusher itself before it writes, so flushing here
    // would wait for that very flush.)
    // The return's own flush, under the delegation still: no conflict
    // check (nobody else can have written), WRITEs with its stateid. It
    // owns the file's flush from before it is marked until after, so no
    // other flush of the file runs under the mark, and none is left in
    // flight when the DELEGRETURN goes. The operation the delegation
    // conflicts with waits for the return: no COMMIT round trip after
    // WRITEs that go in one wave.
    if (core_->flusher_ && d.type == upstream::DelegationType::kWrite) {
      Flusher::Ownership own = core_->flusher_->Own(key);
      if (core_->delegations_->ReturnFlush(
              key, [&] { return own.Flush(Flusher::Urgency::kWaitedFor); }))
        NACHE_LOG(kLogWarn, "NACHE_DELEG",
                  "flush of %llu before returning its delegation failed; its "
                  "data stays here and is sent later",
                  (unsigned long long)key);
    }
    // Opens we granted locally under the delegation become upstream opens
    // before the delegation goes (RFC 7530 10.4.4). A plain OPEN by name:
    // the server does not treat its delegation holder's read open as a
    // conflict.
    if (d.epoch != core_->up_->epoch()) return;
    std::shared_ptr<FileOpen> f = core_->opens_->Get(key);
    {
      MutexLock fg(&f->owner->mu);
      core_->ResetIfStale(f.get());
      uint32_t want_access = f->WantAccess(), want_deny = f->WantDeny();
      bool covered = f->open() && (f->up_access & want_access) == want_access &&
                     (f->up_deny & want_deny) == want_deny;
      if (f->n_local > 0 && !covered) {
        uint32_t st = core_->UpstreamOpenByHandle(
            f->deleg_creds, f.get(), want_access, want_deny, nullptr);
        if (st && st != upstream::kNfs4ErrNoent)
          NACHE_LOG(kLogWarn, "NACHE_DELEG",
                    "open of %llu before returning its delegation: %s; "
                    "its local opens continue without upstream state",
                    (unsigned long long)key, nache_status_name(st));
      }
      // Then the locks granted here, on that open.
      upstream::Fh lfh;
      if (f->open() && core_->FhOfAny(key, &lfh) == upstream::kNfs4Ok)
        core_->SendLocalLocks(f.get(), lfh);
    }
    core_->opens_->Unpin(f);
  }

  uint32_t SendReturn(Key key, const HeldDelegation &d) override {
    upstream::Fh fh;
    uint32_t st = core_->FhOfAny(key, &fh);
    if (st == upstream::kNfs4Ok && d.epoch == core_->up_->epoch()) {
      upstream::Compound c;
      c.SetTag("delegreturn").Putfh(fh).DelegReturn(d.stateid);
      upstream::CompoundReply rep;
      st = core_->Run(c, Creds(), &rep);
    }
    return st;
  }

 private:
  Core *core_;  // owns us
};

class Core::ReclaimHost : public Reclaim::Host {
 public:
  explicit ReclaimHost(Core *core) : core_(core) {}

  uint64_t Epoch() const override { return core_->up_->epoch(); }
  void ReclaimDone() override { core_->up_->ReclaimDone(); }
  std::vector<std::shared_ptr<FileOpen>> OpenFiles() override {
    return core_->opens_->Snapshot();
  }
  void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu) override {
    core_->ResetIfStale(f);
  }
  uint32_t FhOf(Key key, upstream::Fh *fh) override {
    return core_->FhOfAny(key, fh);
  }
  uint32_t Run(upstream::Compound &c, const Creds &cr,
               upstream::CompoundReply *rep) override {
    return core_->Run(c, cr, rep);
  }
  uint32_t ConfirmIfAsked(const Creds &cr, const upstream::OpResult &open,
                          const upstream::Fh &fh, OwnerSlot *owner,
                          upstream::StateId *sid, upstream::Delegation *deleg)
      REQUIRES(owner->mu) override {
    return core_->ConfirmIfAsked(cr, open, fh, owner, sid, {}, deleg);
  }
  uint32_t OpenByHandle(const Creds &cr, FileOpen *f, uint32_t access,
                        uint32_t deny) REQUIRES(f->owner->mu) override {
    return core_->UpstreamOpenByHandle(cr, f, access, deny, nullptr);
  }
  uint32_t SendHeldLock(FileOpen *f, const upstream::Fh &fh, LockOwnerState *lo,
                        const HeldLock &h, bool reclaim)
      REQUIRES(f->owner->mu) override {
    return core_->SendHeldLock(f, fh, lo, h, reclaim);
  }
  void NoteGrant(Key key, const upstream::Delegation &d) override {
    core_->delegations_->NoteGrant(key, d);
  }

 private:
  Core *core_;  // owns us
};

class Core::LingeringHost : public LingeringOpens::Host {
 public:
  explicit LingeringHost(Core *core) : core_(core) {}

  void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu) override {
    core_->ResetIfStale(f);
  }
  void CloseUpstream(FileOpen *f) REQUIRES(f->owner->mu) override {
    core_->UpstreamCloseLocked(Creds(), f);
  }

 private:
  Core *core_;  // owns us
};

// Write-back's one view of the core: what WriteBack, NamespaceWriteBack,
// Conflicts and FlushSender need (each sees only its own Host's part). The
// sends they share (a closed file's create, WRITEs of a range, a refused
// send's note) are FlushSender's.
class Core::WriteBackHost : public WriteBack::Host,
                            public NamespaceWriteBack::Host,
                            public Conflicts::Host,
                            public FlushSender::Host {
 public:
  explicit WriteBackHost(Core *core) : core_(core) {}

  // The cache.
  bool IsDirty(Key key) override { return core_->cache_->IsDirty(key); }
  bool KnownAttrs(Key key, upstream::Attrs *attrs) override {
    return core_->cache_->KnownAttrs(key, attrs);
  }
  uint32_t StoreFailure() const override { return core_->StoreFailure(); }

  // The core's own operations, as a client's.
  uint32_t Lookup(const Creds &cr, Key dir, const std::string &name, Key *key,
                  Attrs *attrs) override {
    return core_->Lookup(cr, dir, name, key, attrs);
  }
  uint32_t Getattr(const Creds &cr, Key key, Attrs *attrs) override {
    return core_->Getattr(cr, key, attrs);
  }
  uint32_t Access(const Creds &cr, Key key, uint32_t want,
                  uint32_t *allowed) override {
    return core_->Access(cr, key, want, allowed);
  }
  void PrefetchListing(const Creds &cr, Key dir) override {
    core_->PrefetchListing(cr, dir);
  }
  void NoteNewObjectOwner(Key key, const Attrs &a) override {
    core_->NoteNewObjectOwner(key, a);
  }
  Key RootKey() const override { return core_->root_key_; }

  // The upstream.
  uint32_t FhOf(Key key, upstream::Fh *fh) override {
    return core_->FhOf(key, fh);
  }
  uint32_t FhOfAny(Key key, upstream::Fh *fh) override {
    return core_->FhOfAny(key, fh);
  }
  uint32_t Run(upstream::Compound &c, const Creds &cr,
               upstream::CompoundReply *rep) override {
    // What write-back sends was read from writes a client's call may not
    // have synced yet (store/reply_sync.h): durable here first, so that a
    // power loss cannot take back what the remote already has. Retried
    // later when the store cannot sync.
    if (!core_->store_->SyncDeferred().ok()) return upstream::kNfs4ErrDelay;
    return core_->Run(c, cr, rep);
  }
  uint32_t MaxOps() override { return core_->MaxOps(); }
  uint32_t MaxWrite() override {
    core_->LearnIoLimits();
    return core_->max_write_.load();
  }
  uint64_t Epoch() const override { return core_->up_->epoch(); }
  uint32_t MinorVersion() const override { return core_->up_->minor_version(); }
  uint32_t ConfirmIfAsked(const Creds &cr, const upstream::OpResult &open,
                          const upstream::Fh &fh, OwnerSlot *owner,
                          upstream::StateId *sid, upstream::Delegation *deleg)
      REQUIRES(owner->mu) override {
    return core_->ConfirmIfAsked(cr, open, fh, owner, sid, {}, deleg);
  }

  // Delegations.
  void NoteGrant(Key key, const upstream::Delegation &d) override {
    core_->delegations_->NoteGrant(key, d);
  }
  void ReturnIfReadDelegated(Key key) override {
    core_->delegations_->ReturnIfReadDelegated(key);
  }
  bool WriteDelegated(Key key) override {
    return core_->delegations_->CoversFlush(key, nullptr);
  }
  bool WriteDelegation(Key key, upstream::StateId *sid) override {
    return core_->delegations_->CoversFlush(key, sid);
  }

  // FlushSender's, for NamespaceWriteBack and Conflicts.
  uint32_t CreateClosedFile(
      const Creds &cr, const upstream::Fh &pfh, const std::string &name,
      upstream::OpenArgs::Create how, const Attrs &ca, Key key,
      const std::function<void(upstream::Compound *)> &more,
      upstream::CompoundReply *rep, upstream::Fh *fh,
      upstream::Delegation *deleg) override {
    return core_->flush_sender_->CreateClosedFile(cr, pfh, name, how, ca, key,
                                                  more, rep, fh, deleg);
  }
  void CreateObjects(const Creds &cr, const upstream::Fh &pfh,
                     const std::vector<NewObject> &files,
                     std::vector<NewObjectResult> *out) override {
    core_->flush_sender_->CreateObjects(cr, pfh, files, out);
  }
  uint32_t WriteRange(const Creds &cr, const upstream::Fh &fh,
                      const upstream::StateId &sid, uint64_t offset,
                      const char *data, size_t len, upstream::StableHow stable,
                      const char *tag) override {
    return core_->flush_sender_->WriteRange(cr, fh, sid, offset, data, len,
                                            stable, tag, nullptr);
  }
  void NoteFlushRefused(const char *op, Key key, const Creds &cr,
                        uint32_t st) override {
    core_->flush_sender_->NoteRefused(op, key, cr, st);
  }

 private:
  Core *core_;  // owns us
};

}  // namespace nache
