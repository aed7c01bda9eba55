// The upstream delegations one export holds, and the local ones Ganesha
// grants its clients under them: grants recorded from OPEN replies, the
// callback service (or the NFSv4.1 back channel) and its handler, recalls
// served on the recall thread, returns (after a CB_RECALL, or before an
// operation of ours the server would answer with a recall of our own
// delegation and NFS4ERR_DELAY), and everything dropped at once when the
// lease lapses or the client id changes.
//
// A delegated file needs no revalidation, and opens its delegation covers
// are granted locally with no upstream OPEN. A recall turns those local
// opens into upstream ones, flushes queued writes and returns the
// delegation, on the recall thread, never on a Ganesha worker: the
// callback thread only queues it (it must answer CB_RECALL at once).
//
// What it needs of the core is the narrow Host below: the upstream's epoch
// and lease, the handle map's lookup, the cache's delegated mark and
// attributes, and the core's own part of a return (Host::BeforeReturn:
// queued writes, dirty data, the opens and locks granted locally;
// Host::SendReturn: the DELEGRETURN). It sends nothing itself.
//
// Thread safety: all methods are thread-safe. Return and
// ReturnIfReadDelegated block on the upstream (through the Host) and are
// never called with an open-owner's mutex held. Locks, in the core's lock
// order (core.h), all below the open-owners' mutexes:
//   local_mu_   the local delegations; held while the table is checked
//               (AcquireLocal, through Host::Epoch and LeaseValidUntil)
//               and while local recalls are queued to Ganesha (the up-call
//               only queues): the one lock held across a call out;
//   recall_mu_  the recall queue; held across nothing;
//   the DelegationTable's mutex, a leaf, taken under local_mu_.
// local_mu_ and recall_mu_ are never held together. No Host method is
// called with recall_mu_ held; only Epoch and LeaseValidUntil (leaves:
// the upstream client's own locks) with local_mu_ held.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "callback/back_channel.h"
#include "callback/callback_server.h"
#include "delegations/delegation_table.h"
#include "handles/handle_map.h"
#include "metrics/metrics.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

class Delegations {
 public:
  // What Delegations needs of the core.
  class Host {
   public:
    virtual ~Host() = default;
    // The upstream client: its current client-id epoch, the end of its
    // lease as last renewed, and the lease time (seconds).
    virtual uint64_t Epoch() const = 0;
    virtual std::chrono::steady_clock::time_point LeaseValidUntil() const = 0;
    virtual uint32_t LeaseTime() const = 0;
    // The key of a remote filehandle (the handle map), kNoKey if unknown.
    virtual Key KeyOf(const upstream::Fh &fh) = 0;
    // The cache: the attributes last known of key; key's delegated mark;
    // its attributes (and the ACCESS answers kept with them) expired.
    virtual bool KnownAttrs(Key key, upstream::Attrs *attrs) = 0;
    virtual void SetDelegated(Key key, bool delegated) = 0;
    virtual void ExpireAttrs(Key key) = 0;
    // The core's part of returning d, key's delegation, after the local
    // delegations are recalled and before the DELEGRETURN: queued writes
    // and unflushed data sent, the opens and locks granted locally under
    // it made upstream. Blocks on the upstream.
    virtual void BeforeReturn(Key key, const HeldDelegation &d) = 0;
    // Sends d's DELEGRETURN (when d is of the current client id); its
    // status.
    virtual uint32_t SendReturn(Key key, const HeldDelegation &d) = 0;
  };

  // Where the server calls us back.
  struct CallbackConfig {
    uint32_t minor_version = 0;   // 1: the session's back channel
    std::string address;          // NFSv4.0: our callback service's address
    uint32_t port = 0;            // and port (0: no delegations)
    std::string upstream_server;  // the only peer the service accepts
    // NFSv4.0 to a Kerberos remote: its callbacks come under RPCSEC_GSS,
    // and only those are accepted (callback_server.h); unset: AUTH_SYS.
    rpc::GssServerOptions gss;
  };

  // host and metrics outlive this.
  Delegations(Host *host, metrics::ExportMetrics *metrics);
  ~Delegations();  // stops the callback service and the recall thread
  Delegations(const Delegations &) = delete;
  Delegations &operator=(const Delegations &) = delete;

  // --- the callback path --------------------------------------------------
  // Starts the callback service when configured (NFSv4.0), or makes the
  // back channel (NFSv4.1); false with *err when it cannot listen. Fills
  // the address to advertise in *uaddr. Before the upstream client exists.
  bool StartCallbacks(const CallbackConfig &cfg, std::string *uaddr,
                      std::string *err);
  // NFSv4.1's back channel (null: none, or NFSv4.0).
  callback::BackChannel *back_channel() const { return back_channel_.get(); }
  // The server can call us back (a callback service, or a back channel).
  bool CallbacksPossible() const { return cb_server_ || back_channel_; }
  // The server called us back once (it may delegate).
  bool Contacted() const { return cb_contact_.load(); }
  // The recall thread: started once the upstream client exists (when
  // CallbacksPossible); stopped after the callback service, answering the
  // recalls queued before with a DELEGRETURN.
  void StartRecalls() EXCLUDES(recall_mu_);
  void StopCallbacks() EXCLUDES(recall_mu_);

  // --- upstream delegations -----------------------------------------------
  // Records the delegation an OPEN reply of key carries, if any.
  void NoteGrant(Key key, const upstream::Delegation &d) EXCLUDES(recall_mu_);
  // Key holds a usable delegation and the lease is known to hold.
  bool Delegated(Key key) const;
  // Key's delegation covers a local open with these share modes; *sid (if
  // not null) gets the delegation stateid.
  bool Covers(Key key, uint32_t access, uint32_t deny,
              upstream::StateId *sid) const;
  // Whether the data of key may be flushed under its write delegation:
  // Covers for a write, or the return's own flush (ReturnFlush) is
  // running. Nobody else can have written it then (no conflict check), and
  // the WRITEs go under *sid (may be null): a late one after the
  // DELEGRETURN is refused, never taken as anyone's.
  bool CoversFlush(Key key, upstream::StateId *sid) const;
  // Runs flush as the return's own flush: CoversFlush holds for it,
  // though the return has begun. The caller (Host::BeforeReturn) holds the
  // file's flush ownership across the call, so that no other flush of key
  // runs while it is marked.
  uint32_t ReturnFlush(Key key, const std::function<uint32_t()> &flush);
  // Returns key's delegation: the local delegations on it recalled first,
  // then Host::BeforeReturn, the DELEGRETURN, and what it vouched for
  // expired. recalled: after a CB_RECALL (else before a conflicting
  // operation of ours).
  void Return(Key key, bool recalled) EXCLUDES(local_mu_, recall_mu_);
  // Before an operation of ours that the server would treat as conflicting
  // with our own read delegation (an open for write, a SETATTR, a WRITE, a
  // REMOVE or RENAME of the file): return it first rather than be recalled.
  void ReturnIfReadDelegated(Key key) EXCLUDES(local_mu_, recall_mu_);
  // The same, with the DELEGRETURN sent by the caller at the head of the
  // conflicting operation's own COMPOUND (PUTFH of the file, DELEGRETURN,
  // then the operation): one round trip for both. True when key has a read
  // delegation to return: its return has begun (the local delegations
  // recalled, Host::BeforeReturn done) and *d is the delegation; the caller
  // must then call EndOwnReturn. False: nothing to return.
  bool BeginOwnReturn(Key key, HeldDelegation *d)
      EXCLUDES(local_mu_, recall_mu_);
  // The COMPOUND of BeginOwnReturn came back. reached: the server executed
  // its DELEGRETURN, with status; else (no reply, the COMPOUND stopped
  // before it, or the caller did not send it) the DELEGRETURN is sent on
  // its own now. Either way the return ends as Return's does.
  void EndOwnReturn(Key key, const HeldDelegation &d, bool reached,
                    uint32_t status) EXCLUDES(local_mu_);
  // Every delegation is gone (the client id changed, the lease lapsed):
  // forgotten, the local ones recalled; returns those that were held.
  std::vector<std::pair<Key, HeldDelegation>> DropAll() EXCLUDES(local_mu_);
  // Delegations held, by type.
  size_t Count(upstream::DelegationType type) const;

  // --- local delegations (granted by Ganesha to its clients) --------------
  // See nache.h: NFS4ERR_DELAY unless our delegation covers one.
  uint32_t AcquireLocal(Key key, bool write) EXCLUDES(local_mu_);
  void ReleaseLocal(Key key) EXCLUDES(local_mu_);
  uint64_t LocalCount() EXCLUDES(local_mu_);   // held now, all files
  bool HasLocal(Key key) EXCLUDES(local_mu_);  // held on key
  // The up-call that has Ganesha recall the local delegations on a file.
  void SetLocalRecall(std::function<void(Key)> recall) EXCLUDES(local_mu_);
  // Called with a file's key once its delegation is given back.
  void SetAttrsStale(std::function<void(Key)> stale) EXCLUDES(local_mu_);

 private:
  class Glue;  // the callback handler
  // Has the local clients' delegations on key recalled and waits (bounded
  // by half the lease) until they are returned.
  void RecallLocal(Key key) EXCLUDES(local_mu_);
  // A return's steps before its DELEGRETURN (key's local delegations
  // recalled, key no longer delegated, Host::BeforeReturn), and after it
  // (what d vouched for expired, d forgotten, counted and logged).
  void BeforeDelegReturn(Key key, const HeldDelegation &d) EXCLUDES(local_mu_);
  void AfterDelegReturn(Key key, const HeldDelegation &d, bool recalled,
                        uint32_t st) EXCLUDES(local_mu_);
  int LocalOnLocked(Key key) const REQUIRES(local_mu_);
  // Has every local delegation recalled (queues the up-calls only).
  void RecallAllLocal() EXCLUDES(local_mu_);
  void QueueRecall(Key key) EXCLUDES(recall_mu_);
  void RecallLoop() EXCLUDES(recall_mu_);

  Host *const host_;
  metrics::ExportMetrics *const metrics_;
  DelegationTable table_;
  std::unique_ptr<Glue> glue_;
  std::unique_ptr<callback::CallbackServer> cb_server_;  // null: none
  // NFSv4.1: the back channel on our upstream connections (null: none, or
  // NFSv4.0). Outlives the upstream's connections: the core shuts its
  // upstream client down before this goes.
  std::unique_ptr<callback::BackChannel> back_channel_;
  std::atomic<bool> cb_contact_{false};  // the server called us back once
  // Local delegations per file. An acquire checks for conflicts under it,
  // so that a return that starts after the check sees the acquired one.
  Mutex local_mu_{"delegations_local"};
  CondVar local_cv_{&local_mu_};  // a local delegation was released
  std::unordered_map<Key, int> local_delegs_ GUARDED_BY(local_mu_);
  std::function<void(Key)> local_recall_ GUARDED_BY(local_mu_);
  std::function<void(Key)> attrs_stale_ GUARDED_BY(local_mu_);
  // Delegations to return, for the recall thread.
  Mutex recall_mu_{"delegations_recall"};
  CondVar recall_cv_{&recall_mu_};  // a recall queued, or stop
  std::deque<Key> recalls_ GUARDED_BY(recall_mu_);
  bool recall_stop_ GUARDED_BY(recall_mu_) = false;
  std::thread recall_thread_;  // RecallLoop
};

}  // namespace nache
