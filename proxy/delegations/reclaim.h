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
// operation reaching a file first (the core's ResetIfStale, under the
// owner's mutex) reclaims that file itself (ReclaimFile). Delegations
// without an open are not reclaimed: they were dropped with the old client
// id, and the cache revalidates what they covered.
//
// What it needs of the core is the narrow Host below: the upstream's epoch,
// the open table, running a COMPOUND, and the core's open and lock helpers.
//
// Thread safety: all methods are thread-safe. Locks, in the core's lock
// order (core.h): an open-owner's mutex (opens.h), held by ReclaimFile's
// caller and by the reclaim thread across a file's reclaim (its upstream
// calls included), then mu_, which guards the pending reclaim and is held
// across nothing (no Host call, no other lock).
#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "delegations/delegation_table.h"
#include "metrics/metrics.h"
#include "opens/opens.h"
#include "upstream/compound.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

class Reclaim {
 public:
  // What Reclaim needs of the core.
  class Host {
   public:
    virtual ~Host() = default;
    // The upstream client's current client-id epoch.
    virtual uint64_t Epoch() const = 0;
    // The upstream client may end our grace period (NFSv4.1).
    virtual void ReclaimDone() = 0;
    // The open table as it is now.
    virtual std::vector<std::shared_ptr<FileOpen>> OpenFiles() = 0;
    // Brings f's owner to the current client id, and reclaims f (through
    // ReclaimFile) when it is open under an earlier one.
    virtual void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu) = 0;
    // The remote filehandle of key, also for an object removed here.
    virtual uint32_t FhOf(Key key, upstream::Fh *fh) = 0;
    // Sends c; the compound's NFS status (transport failures: DELAY).
    virtual uint32_t Run(upstream::Compound &c, const upstream::Creds &cr,
                         upstream::CompoundReply *rep) = 0;
    // Sends OPEN_CONFIRM when the OPEN result asks for it; updates *sid,
    // and *deleg with the delegation the OPEN carries.
    virtual uint32_t ConfirmIfAsked(const upstream::Creds &cr,
                                    const upstream::OpResult &open,
                                    const upstream::Fh &fh, OwnerSlot *owner,
                                    upstream::StateId *sid,
                                    upstream::Delegation *deleg)
        REQUIRES(owner->mu) = 0;
    // A new upstream OPEN of f by handle with these share modes.
    virtual uint32_t OpenByHandle(const upstream::Creds &cr, FileOpen *f,
                                  uint32_t access, uint32_t deny)
        REQUIRES(f->owner->mu) = 0;
    // LOCK of range h for lo on f (a reclaim when reclaim).
    virtual uint32_t SendHeldLock(FileOpen *f, const upstream::Fh &fh,
                                  LockOwnerState *lo, const HeldLock &h,
                                  bool reclaim) REQUIRES(f->owner->mu) = 0;
    // Records a delegation an OPEN reply brought.
    virtual void NoteGrant(Key key, const upstream::Delegation &d) = 0;
  };

  // host and metrics outlive this.
  Reclaim(Host *host, metrics::ExportMetrics *metrics);
  ~Reclaim();  // Stop
  Reclaim(const Reclaim &) = delete;
  Reclaim &operator=(const Reclaim &) = delete;

  // The reclaim thread.
  void Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);
  // The upstream confirmed client id epoch; gone: the delegations held
  // until then (Delegations::DropAll). The state of the previous client id
  // is handed to the reclaim thread. On the upstream's state thread: no
  // upstream call here.
  void OnNewClientId(uint64_t epoch,
                     const std::vector<std::pair<Key, HeldDelegation>> &gone)
      EXCLUDES(mu_);
  // f's open of an earlier client id: reclaimed in the server's grace
  // period (with the delegation held on f, and f's locks), else opened and
  // locked anew when the server has no grace period, else dropped (lost
  // locks are logged and counted). True: f is open upstream under epoch.
  bool ReclaimFile(FileOpen *f, uint64_t epoch) REQUIRES(f->owner->mu)
      EXCLUDES(mu_);
  // Whether key's delegation, held under the previous client id, is to be
  // reclaimed.
  bool HasDelegationToReclaim(Key key) EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  // Takes f's held lock ranges again under the current client id.
  void Relock(FileOpen *f, const upstream::Fh &fh, bool reclaim)
      REQUIRES(f->owner->mu);

  Host *const host_;
  metrics::ExportMetrics *const metrics_;
  Mutex mu_{"reclaim"};  // after any open-owner's mutex, never before
  CondVar cv_{&mu_};     // a reclaim asked for, or stop
  // A new client id to reclaim under (0: none).
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  // Delegations held under the previous client id, to ask back with the
  // reclaim of their file's open.
  std::unordered_map<Key, upstream::DelegationType> delegs_ GUARDED_BY(mu_);
  std::thread thread_;  // Loop
};

}  // namespace nache
