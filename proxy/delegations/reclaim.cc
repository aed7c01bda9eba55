// Reclaims after a remote restart (see reclaim.h).
#include "delegations/reclaim.h"

#include <chrono>
#include <thread>

#include "nache/nache.h"
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

Reclaim::Reclaim(Host *host, metrics::ExportMetrics *metrics)
    : host_(host), metrics_(metrics) {}

Reclaim::~Reclaim() { Stop(); }

void Reclaim::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Reclaim::Stop() {
  if (!thread_.joinable()) return;
  {
    MutexLock g(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void Reclaim::OnNewClientId(
    uint64_t epoch, const std::vector<std::pair<Key, HeldDelegation>> &gone) {
  if (epoch == 0) return;  // the first client id: nothing to reclaim
  {
    MutexLock g(&mu_);
    delegs_.clear();
    for (const auto &kv : gone)
      if (kv.second.epoch + 1 == epoch && !kv.second.returning)
        delegs_[kv.first] = kv.second.type;
    epoch_ = epoch;
  }
  cv_.SignalAll();
}

void Reclaim::Loop() {
  MutexLock g(&mu_);
  for (;;) {
    while (!stop_ && !epoch_) cv_.Wait();
    if (stop_) return;
    uint64_t epoch = epoch_;
    epoch_ = 0;
    g.Unlock();
    size_t n = 0;
    for (const std::shared_ptr<FileOpen> &f : host_->OpenFiles()) {
      MutexLock og(&f->owner->mu);
      if (host_->Epoch() != epoch) break;  // lost again: a newer pass follows
      if (f->open() && f->epoch() != epoch) {
        host_->ResetIfStale(f.get());
        n++;
      } else if (!f->open() && f->n_local > 0 &&
                 HasDelegationToReclaim(f->key)) {
        host_->ResetIfStale(f.get());  // (the owner's seqid follows the new id)
        ReclaimFile(f.get(), epoch);
        n++;
      }
    }
    NACHE_LOG(kLogEvent, kComponent,
              "client id epoch %llu: upstream state of %zu open file(s) "
              "handled",
              (unsigned long long)epoch, n);
    // NFSv4.1: the server may end our grace (and serves our new opens).
    if (host_->Epoch() == epoch) host_->ReclaimDone();
    g.Lock();
    delegs_.clear();  // those of files with no open are not reclaimed
  }
}

bool Reclaim::HasDelegationToReclaim(Key key) {
  MutexLock g(&mu_);
  return delegs_.count(key) != 0;
}

bool Reclaim::ReclaimFile(FileOpen *f, uint64_t epoch) {
  DelegationType dt = DelegationType::kNone;
  {
    MutexLock g(&mu_);
    auto it = delegs_.find(f->key);
    if (it != delegs_.end()) {
      dt = it->second;
      delegs_.erase(it);
    }
  }
  using metrics::ReclaimOutcome;
  using metrics::ReclaimState;
  // A file open here only under our delegation (no upstream open) gets
  // its delegation back by reclaiming an open for what its local opens
  // want.
  const bool had_open = f->open();
  Creds cr = had_open ? f->open_creds : f->deleg_creds;
  // Upstream_Identity = user: reclaimed under the machine's context. The
  // state is the client id's (SP4_NONE), and the machine's credentials
  // come from the keytab, with no KDC exchange for the user that could
  // outlast the remote's grace period.
  cr.as_machine = true;
  uint32_t access = had_open ? f->up_access : f->WantAccess();
  uint32_t deny = had_open ? f->up_deny : f->WantDeny();
  Fh fh;
  uint32_t st = upstream::kNfs4ErrStaleClientid;
  // Only the state of the client id just replaced can be reclaimed (for a
  // delegation alone, delegs_ holds only such).
  bool reclaimable = had_open ? f->epoch() + 1 == epoch
                              : dt != DelegationType::kNone && access != 0;
  if (reclaimable && (st = host_->FhOf(f->key, &fh)) == 0) {
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
      st = host_->Run(c, cr, &rep);
      o = rep.Find(Op::kOpen);
      if (o) OpenTable::AdvanceSeqid(&f->owner->seqid, o->status);
      if (o || st != upstream::kNfs4ErrDelay) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    }
    if (o && o->status == upstream::kNfs4Ok) {
      StateId sid = o->stateid;
      upstream::Delegation deleg;
      st = host_->ConfirmIfAsked(cr, *o, fh, f->owner, &sid, &deleg);
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
        host_->NoteGrant(f->key, deleg);
        Relock(f, fh, true);
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
      host_->OpenByHandle(cr, f, access, deny) == upstream::kNfs4Ok) {
    NACHE_LOG(kLogWarn, kComponent,
              "open of %llu could not be reclaimed (no grace period): "
              "opened again, with its locks",
              (unsigned long long)f->key);
    metrics_->CountReclaim(ReclaimState::kOpen, ReclaimOutcome::kReacquired);
    Relock(f, fh, false);
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

void Reclaim::Relock(FileOpen *f, const Fh &fh, bool reclaim) {
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
      uint32_t st = host_->SendHeldLock(f, fh, &lo, h, reclaim);
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
