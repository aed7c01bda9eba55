// After the remote server restarts: the upstream client re-establishes its
// client id (a new epoch), and the state local clients still rely on is
// reclaimed in the server's grace period (RFC 7530 9.6.2): each upstream
// open with OPEN CLAIM_PREVIOUS (asking back the delegation we held on the
// file), then each held lock range with LOCK reclaim=true. Local clients
// notice nothing: their opens and locks live in Ganesha, and nache's
// upstream state behind them is the same again.
//
// When the server refuses reclaims because it is not in a grace period
// (NO_GRACE: our lease expired rather than the server restarting, or the
// grace ended before we got there), the opens and locks are acquired again
// as new ones. Whatever cannot be had back is logged and counted as lost
// (nache_upstream_reclaims_total); a lost open is reopened on demand.
//
// Who reclaims: the reclaim thread walks the open table at once; an
// operation reaching a file first (ResetIfStale, under the owner's mutex)
// reclaims that file itself. Delegations without an open are not
// reclaimed: they were dropped with the old client id, and the cache
// revalidates what they covered.
#include <chrono>
#include <thread>

#include "core/core.h"
#include "util/log.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Creds;
using upstream::DelegationType;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

namespace {
const char kComponent[] = "NACHE_RECLAIM";
}  // namespace

void Core::OnNewClientId(uint64_t epoch) {
  // On the upstream's state thread, before held calls go out: no upstream
  // call here.
  auto gone = DropAllDelegations();
  if (epoch == 0) return;  // the first client id: nothing to reclaim
  {
    MutexLock g(&reclaim_mu_);
    reclaim_delegs_.clear();
    for (const auto &kv : gone)
      if (kv.second.epoch + 1 == epoch && !kv.second.returning)
        reclaim_delegs_[kv.first] = kv.second.type;
    reclaim_epoch_ = epoch;
  }
  reclaim_cv_.SignalAll();
}

void Core::ReclaimLoop() {
  MutexLock g(&reclaim_mu_);
  for (;;) {
    while (!reclaim_stop_ && !reclaim_epoch_) reclaim_cv_.Wait();
    if (reclaim_stop_) return;
    uint64_t epoch = reclaim_epoch_;
    reclaim_epoch_ = 0;
    g.Unlock();
    size_t n = 0;
    for (const std::shared_ptr<FileOpen> &f : opens_->Snapshot()) {
      MutexLock og(&f->owner->mu);
      if (up_->epoch() != epoch) break;  // lost again: a newer pass follows
      if (f->open() && f->epoch() != epoch) {
        ResetIfStale(f.get());
        n++;
      } else if (!f->open() && f->n_local > 0 &&
                 HasDelegationToReclaim(f->key)) {
        ResetIfStale(f.get());  // (the owner's seqid follows the new id)
        ReclaimLocked(f.get(), epoch);
        n++;
      }
    }
    NACHE_LOG(kLogEvent, kComponent,
              "client id epoch %llu: upstream state of %zu open file(s) "
              "handled",
              (unsigned long long)epoch, n);
    // NFSv4.1: the server may end our grace (and serves our new opens).
    if (up_->epoch() == epoch) up_->ReclaimDone();
    g.Lock();
    reclaim_delegs_.clear();  // those of files with no open are not reclaimed
  }
}

bool Core::HasDelegationToReclaim(Key key) {
  MutexLock g(&reclaim_mu_);
  return reclaim_delegs_.count(key) != 0;
}

bool Core::ReclaimLocked(FileOpen *f, uint64_t epoch) {
  DelegationType dt = DelegationType::kNone;
  {
    MutexLock g(&reclaim_mu_);
    auto it = reclaim_delegs_.find(f->key);
    if (it != reclaim_delegs_.end()) {
      dt = it->second;
      reclaim_delegs_.erase(it);
    }
  }
  using metrics::ReclaimOutcome;
  using metrics::ReclaimState;
  // A file open here only under our delegation (no upstream open) gets
  // its delegation back by reclaiming an open for what its local opens
  // want.
  const bool had_open = f->open();
  const Creds cr = had_open ? f->open_creds : f->deleg_creds;
  uint32_t access = had_open ? f->up_access : f->WantAccess();
  uint32_t deny = had_open ? f->up_deny : f->WantDeny();
  Fh fh;
  uint32_t st = upstream::kNfs4ErrStaleClientid;
  // Only the state of the client id just replaced can be reclaimed (for a
  // delegation alone, reclaim_delegs_ holds only such).
  bool reclaimable = had_open ? f->epoch() + 1 == epoch
                              : dt != DelegationType::kNone && access != 0;
  if (reclaimable && (st = FhOfAny(f->key, &fh)) == 0) {
    upstream::OpenArgs a;
    a.share_access = access;
    a.share_deny = deny;
    a.owner = f->owner->name;
    a.claim = upstream::OpenArgs::Claim::kPrevious;
    a.delegate_type = dt;
    CompoundReply rep;
    const OpResult *o = nullptr;
    // A transport failure (the server still booting) is tried again.
    for (int attempt = 0; attempt < 3; attempt++) {
      a.seqid = f->owner->seqid;
      Compound c;
      c.SetTag("open_reclaim").Putfh(fh).Open(a);
      rep = CompoundReply();
      st = Run(c, cr, &rep);
      o = rep.Find(Op::kOpen);
      if (o) OpenTable::AdvanceSeqid(&f->owner->seqid, o->status);
      if (o || st != upstream::kNfs4ErrDelay) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    }
    if (o && o->status == upstream::kNfs4Ok) {
      StateId sid = o->stateid;
      upstream::Delegation deleg;
      st = ConfirmIfAsked(cr, *o, fh, f->owner, &sid, {}, &deleg);
      if (st == upstream::kNfs4Ok) {
        f->SetOpen(sid, epoch);
        f->up_access = access;
        f->up_deny = deny;
        f->NoteUpstreamModes(access, deny);
        metrics_->CountReclaim(ReclaimState::kOpen, ReclaimOutcome::kReclaimed);
        if (dt != DelegationType::kNone)
          metrics_->CountReclaim(ReclaimState::kDelegation,
                                 deleg.type == dt ? ReclaimOutcome::kReclaimed
                                                  : ReclaimOutcome::kLost);
        NoteGrant(f->key, deleg);
        RelockLocked(f, fh, true);
        return true;
      }
    } else if (o) {
      st = o->status;
    }
  }
  if (dt != DelegationType::kNone)
    metrics_->CountReclaim(ReclaimState::kDelegation, ReclaimOutcome::kLost);
  // No open was lost: the local opens go on, revalidating as without a
  // delegation.
  if (!had_open) return false;
  f->SetClosed();
  f->up_access = f->up_deny = 0;
  f->up_seen_access = f->up_seen_deny = 0;
  // Not in a grace period: what our clients hold is acquired anew.
  if (st == upstream::kNfs4ErrNoGrace && f->owner->epoch == epoch &&
      UpstreamOpenByHandle(cr, f, access, deny, nullptr) == upstream::kNfs4Ok) {
    NACHE_LOG(kLogWarn, kComponent,
              "open of %llu could not be reclaimed (no grace period): "
              "opened again, with its locks",
              (unsigned long long)f->key);
    metrics_->CountReclaim(ReclaimState::kOpen, ReclaimOutcome::kReacquired);
    RelockLocked(f, fh, false);
    return true;
  }
  size_t locks = 0;
  for (const auto &kv : f->lock_owners) locks += kv.second.held.size();
  NACHE_LOG(locks ? kLogMajor : kLogWarn, kComponent,
            "open of %llu lost at the remote (%s); %zu lock range(s) lost "
            "with it; reopened on demand",
            (unsigned long long)f->key, nache_status_name(st), locks);
  metrics_->CountReclaim(ReclaimState::kOpen, ReclaimOutcome::kLost);
  for (size_t i = 0; i < locks; i++)
    metrics_->CountReclaim(ReclaimState::kLock, ReclaimOutcome::kLost);
  f->lock_owners.clear();
  return false;
}

void Core::RelockLocked(FileOpen *f, const Fh &fh, bool reclaim) {
  using metrics::ReclaimOutcome;
  using metrics::ReclaimState;
  for (auto &kv : f->lock_owners) {
    LockOwnerState &lo = kv.second;
    // A new client id: the server knows none of our lock-owners.
    lo.established = false;
    lo.seqid = 0;
    std::vector<HeldLock> want;
    want.swap(lo.held);
    for (const HeldLock &h : want) {
      uint32_t st = SendHeldLock(f, fh, &lo, h, reclaim);
      if (st == upstream::kNfs4Ok) {
        metrics_->CountReclaim(
            ReclaimState::kLock,
            reclaim ? ReclaimOutcome::kReclaimed : ReclaimOutcome::kReacquired);
        continue;
      }
      metrics_->CountReclaim(ReclaimState::kLock, ReclaimOutcome::kLost);
      NACHE_LOG(kLogMajor, kComponent,
                "lock [%llu, +%llu) of %llu lost at the remote after its "
                "restart (%s): its holder here no longer excludes others",
                (unsigned long long)h.offset, (unsigned long long)HeldLength(h),
                (unsigned long long)f->key, nache_status_name(st));
    }
  }
}

}  // namespace nache
