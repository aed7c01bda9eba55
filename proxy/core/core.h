// The core of one export: owns the store, the handle map, the upstream
// client and the upstream open table, and implements every operation of the
// C API (nache.h) as the minimum of upstream COMPOUNDs.
//
// The cache (cache/) answers what it can: attributes and ACCESS validated
// within the attribute window, directory listings under the directory's
// change attribute, and data blocks of the current data generation. A
// local open always revalidates (close-to-open) in one COMPOUND. Upstream
// opens linger after the last local close (open_linger_ms), so a reopen
// costs no OPEN (opens/lingering_opens.h). Round trips per operation are
// listed in the README.
//
// Delegations (delegations/delegations.h) and reclaims after a remote
// restart (delegations/reclaim.h) are components the core owns: they keep
// their own state, locks and threads, and see the core through a narrow
// Host interface (core_hosts.h implements both). The core asks
// them whether a file is delegated and tells them of grants; they call
// back for the core's part of a return or a reclaim (opens, locks,
// queued and unflushed writes, COMPOUNDs).
//
// Write-back's state is in writeback/ the same way: WriteBack (who each
// dirty file's flush writes as, the flush open-owners, the conflict
// gate), NamespaceWriteBack (the log, local names, logged creates,
// removes and renames and their sends), Conflicts (conflict checks and
// copies, lost files), the Flusher and its sends (FlushSender). The core
// decides which way an operation goes and calls into them; they call back
// through one Host (core_hosts.h) for lookups, handles, COMPOUNDs and the
// delegation checks.
//
// Thread safety: all methods are thread-safe and may block on the upstream.
// Every shared field names its lock (GUARDED_BY) and every method that
// expects one says so (REQUIRES); clang checks both (make check-locks).
// Lock order, outermost first; a lock is never taken while one below it is
// held:
//   1. an open-owner's OwnerSlot::mu (opens.h), one at a time, held across
//      the upstream call of that owner's OPEN, CLOSE, OPEN_DOWNGRADE, LOCK
//      or LOCKU (NFSv4.0 seqids);
//   2. the core's own last_error_mu_, and the components' at this level:
//      LingeringOpens' mu_, Delegations' local_mu_ and recall_mu_,
//      Reclaim's mu_, NamespaceWriteBack's mu_ (local namespace),
//      WriteBack's writers_mu_; none held across an upstream call and
//      none nested in another but NamespaceWriteBack's mu_ ->
//      WriteBack's writers_mu_ (a local create notes its creator);
//   3. the leaf components' locks (FileOpen::io_mu, OpenTable,
//      DelegationTable, WriteBack's resolving_mu_, Cache, HandleMap,
//      OpLog, LocalNames, Store, the upstream client): they call back into
//      nothing that locks.
// Delegations' local_mu_ is the exception to "no call out under it": local
// delegation recalls are queued to Ganesha under it (the up-call only
// queues).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "access/owner_rights.h"
#include "admin/registry.h"
#include "cache/cache.h"
#include "cache/reader.h"
#include "callback/back_channel.h"
#include "callback/callback_server.h"
#include "core/core_config.h"
#include "core/unanswered.h"
#include "core/unstable_writes.h"
#include "core/warm.h"
#include "delegations/delegations.h"
#include "delegations/reclaim.h"
#include "handles/handle_map.h"
#include "metrics/metrics.h"
#include "nache/nache.h"
#include "opens/lingering_opens.h"
#include "opens/name_turns.h"
#include "opens/opens.h"
#include "store/store.h"
#include "upstream/compound.h"
#include "upstream/upstream.h"
#include "util/mutex.h"
#include "util/shared_attempt.h"
#include "writeback/conflicts.h"
#include "writeback/flush_sender.h"
#include "writeback/flusher.h"
#include "writeback/local_names.h"
#include "writeback/namespace_writeback.h"
#include "writeback/oplog.h"
#include "writeback/writeback.h"

// A local open, as handed to the FSAL (opaque there).
struct nache_open {
  std::shared_ptr<nache::FileOpen> file;  // pinned in the OpenTable
  uint32_t access = 0;                    // this open's share access
  uint32_t deny = 0;                      // this open's share deny
};

namespace nache {

class OwnReturn;  // core/own_return.h

// nache_open names both the struct and a C function; C++ needs the
// elaborated name.
using NacheOpen = struct ::nache_open;

// The status of the first op of kind op in rep, or the compound status when
// the server did not reach it.
uint32_t OpStatus(const upstream::CompoundReply &rep, upstream::Op op);
// Whether st says the stateid sent is no good (retry without it).
bool IsStateError(uint32_t st);

class Core {
 public:
  // Open-owners that create flushed files (WriteBack's).
  static constexpr size_t kFlushOwners = WriteBack::kFlushOwners;

  ~Core();
  static std::unique_ptr<Core> Open(const CoreConfig &cfg, std::string *err);

  uint64_t incarnation() const { return store_->incarnation(); }
  bool WaitReady(int timeout_ms) { return up_->WaitReady(timeout_ms); }
  bool KeyKnown(Key key) const;
  // This export's series (for the C API wrappers' local op counts).
  metrics::ExportMetrics *metrics() const { return metrics_; }
  Cache *cache() const { return cache_.get(); }

  // --- the admin socket's view (core_admin.cc) ----------------------------
  // This export as nachectl status shows it.
  admin::ExportStatus AdminStatus();
  // Flushes all dirty write-back data until done or deadline (see
  // admin::ExportControl::FlushUntil).
  bool AdminFlush(std::chrono::steady_clock::time_point deadline,
                  std::string *error);
  // Draining (nachectl drain, WriteBack::Draining): nothing new is kept
  // for write-back.
  void SetDraining(bool draining) { writeback_->SetDraining(draining); }
  bool Draining() const { return writeback_->Draining(); }
  // nachectl warm, pin, unpin, evict and flush PATH: *path is a path
  // inside the export as its clients see it below the export's root ("/"
  // is the root), resolved with the core's own lookups as root; it is
  // normalised in place ("a//b/" -> "/a/b"). False with *error (for the
  // administrator) when it does not resolve; ".." is refused.
  bool AdminResolve(std::string *path, Key *key, upstream::Attrs *attrs,
                    std::string *error);
  bool AdminStartWarm(const admin::WarmRequest &req, std::string *error);
  bool AdminCancelWarm(std::string *error);
  admin::WarmProgress AdminWarm() const;
  // Pins path's object and subtree (as it is now: a walk lists it);
  // refused when pins would take more than kPinShare of Cache_Size.
  bool AdminPin(const std::string &path,
                const std::function<void(const std::string &)> &progress,
                std::string *summary, std::string *error);
  bool AdminUnpin(const std::string &path, std::string *summary,
                  std::string *error);
  // Drops the clean cached state of path's object and of every object the
  // handle map places below it (local knowledge: no listing is read);
  // dirty objects, those the write-back log names, pinned ones (unless
  // unpin: pins at or below path go first) and those in use are kept
  // and counted.
  bool AdminEvict(const std::string &path, bool unpin, std::string *summary,
                  std::string *error);
  // Makes the dirty objects at or below path due for the flusher now.
  bool AdminFlushPath(const std::string &path, std::vector<Key> *objects,
                      std::string *summary, std::string *error);
  void AdminDirtyAmong(const std::vector<Key> &objects, uint64_t *bytes,
                       uint64_t *count);
  // Pins may hold this share of Cache_Size at most.
  static constexpr double kPinShare = 0.9;
  // The daemon is stopping this export: walks end.
  bool AdminStopping() const { return admin_stopping_.load(); }
  // Reads block idx of key into the cache as a client's read would (the
  // block reader, the same fetch), without readahead; *fetched: the bytes
  // read from the remote (0 when it was cached already).
  uint32_t Prefetch(const upstream::Creds &cr, Key key, uint64_t idx,
                    uint64_t *fetched);

  using Creds = upstream::Creds;
  using Attrs = upstream::Attrs;

  uint32_t Root(const Creds &cr, Key *key, Attrs *attrs);
  uint32_t Lookup(const Creds &cr, Key dir, const std::string &name, Key *key,
                  Attrs *attrs);
  uint32_t LookupParent(const Creds &cr, Key dir, Key *key, Attrs *attrs);
  uint32_t Getattr(const Creds &cr, Key key, Attrs *attrs);
  uint32_t Setattr(const Creds &cr, Key key, NacheOpen *open, const Attrs &set,
                   Attrs *out);
  uint32_t Access(const Creds &cr, Key key, uint32_t want, uint32_t *allowed);
  // Whether cr owns key by the attributes known here (no upstream call;
  // false when none are known, and for an owner we could not map):
  // Ganesha's owner_skip shortcut (nache_caller_owns).
  bool CallerOwnsKnown(const Creds &cr, Key key);
  uint32_t Readdir(const Creds &cr, Key dir, uint64_t cookie,
                   nache_dirent_cb cb, void *ctx, bool *eof);
  uint32_t Create(const Creds &cr, Key dir, const std::string &name,
                  upstream::FileType type, const Attrs &attrs,
                  const std::string &link_text, Key *key, Attrs *out);
  uint32_t Readlink(const Creds &cr, Key key, std::string *text);
  uint32_t Link(const Creds &cr, Key key, Key dir, const std::string &name);
  // source: the object oldname names, as the caller looked it up (kNoKey
  // when not known).
  uint32_t Rename(const Creds &cr, Key olddir, const std::string &oldname,
                  Key newdir, const std::string &newname, Key source = kNoKey);
  // object: what name names, as the caller looked it up (kNoKey when not
  // known).
  uint32_t Remove(const Creds &cr, Key dir, const std::string &name,
                  Key object = kNoKey);
  uint32_t Statfs(const Creds &cr, Key key, Attrs *out);

  // The remote's change_info of each directory that the operations of this
  // thread change at the remote while a DirChangeScope lives: the C API
  // hands it on to Ganesha's NFSv4 replies (ganesha_patch_cinfo.cmake), so
  // that a client keeps what it cached of the directory when the change
  // was its own alone, as it does mounting the remote directly (CREATE,
  // OPEN that creates, REMOVE, RENAME, LINK). Nothing is
  // noted on an export whose namespace is written back (its directories'
  // change attributes are partly nache's, not the remote's).
  struct DirChange {
    Key dir = kNoKey;
    upstream::ChangeInfo ci;
  };
  class DirChangeScope {
   public:
    explicit DirChangeScope(std::vector<DirChange> *out);
    ~DirChangeScope();
    DirChangeScope(const DirChangeScope &) = delete;
    DirChangeScope &operator=(const DirChangeScope &) = delete;

   private:
    std::vector<DirChange> *outer_;  // an enclosing scope's, restored
  };

  struct OpenRequest {
    Key key = kNoKey;  // the file (by handle) or the directory (by name)
    const char *name = nullptr;  // by name when not null
    uint32_t access = 0, deny = 0;
    nache_createmode mode = NACHE_OPEN_NOCREATE;
    Attrs create_attrs;
    // NACHE_OPEN_EXCLUSIVE: the client's verifier (create_verifier.h).
    const uint8_t *verifier = nullptr;
    bool truncate = false;
  };
  uint32_t OpenFile(const Creds &cr, const OpenRequest &req, NacheOpen **out,
                    Key *key, Attrs *attrs, bool *created);
  uint32_t Reopen(const Creds &cr, NacheOpen *open, uint32_t access,
                  uint32_t deny);
  // Whether the file key carries an exclusive create's verifier
  // (create_verifier.h): NFS4_OK when it does, NFS4ERR_EXIST when not.
  uint32_t CheckCreateVerifier(const Creds &cr, Key key,
                               const uint8_t *verifier);
  uint32_t CloseFile(NacheOpen *open);
  uint32_t Read(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                size_t len, char *buf, size_t *nread, bool *eof);
  uint32_t Write(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                 size_t len, const char *buf, upstream::StableHow stable,
                 size_t *nwritten, upstream::StableHow *committed);
  uint32_t Commit(const Creds &cr, Key key, uint64_t offset, uint64_t len);
  void WriteVerifier(uint8_t out[8]);
  // Delegations to local clients (see nache.h).
  uint32_t AcquireLocalDelegation(Key key, bool write);
  void ReleaseLocalDelegation(Key key);
  void SetLocalRecall(std::function<void(Key)> recall);
  uint64_t LocalDelegations();  // held now, all files
  // Called with a file's key once its upstream delegation is given back
  // (see nache.h, nache_set_attrs_stale).
  void SetAttrsStale(std::function<void(Key)> stale);

  uint32_t Lock(const Creds &cr, Key key, NacheOpen *open,
                const std::string &owner, nache_lock_op op, bool write,
                uint64_t offset, uint64_t length, bool reclaim,
                nache_lock_conflict *conflict);

  // NFSv4.2 (core_nfs42.cc): forwarded as the caller when the remote
  // speaks 4.2 (Upstream_Minor_Version = 2), else NFS4ERR_NOTSUPP; none
  // is answered from the cache. A file's unflushed data reaches the remote
  // before an ALLOCATE, DEALLOCATE or SEEK of it.
  // ALLOCATE (allocate) or DEALLOCATE (a hole) of [offset, offset+length).
  uint32_t Fallocate(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                     uint64_t length, bool allocate);
  // COPY at the remote (a server-side copy: no byte crosses the WAN) of
  // count bytes (0: to the source's end) from src's src_offset to dst's
  // dst_offset; *copied says how many (at most kMaxCopyBytes per call:
  // the client goes on from a short copy). Both files' unflushed data
  // goes first; dst's cached blocks are not trusted after.
  static constexpr uint64_t kMaxCopyBytes = 256ull << 20;
  uint32_t Copy(const Creds &cr, Key src, NacheOpen *src_open,
                uint64_t src_offset, Key dst, NacheOpen *dst_open,
                uint64_t dst_offset, uint64_t count, uint64_t *copied);
  // Where the first data (or hole) at or after offset starts.
  uint32_t Seek(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                upstream::SeekWhat what, bool *eof, uint64_t *found);
  // Extended attributes (user namespace, names without "user.").
  uint32_t GetXattr(const Creds &cr, Key key, const std::string &name,
                    std::string *value);
  uint32_t SetXattr(const Creds &cr, Key key, upstream::XattrOption option,
                    const std::string &name, const std::string &value);
  uint32_t ListXattrs(const Creds &cr, Key key, uint64_t cookie,
                      uint32_t maxcount, std::vector<std::string> *names,
                      uint64_t *next_cookie, bool *eof);
  uint32_t RemoveXattr(const Creds &cr, Key key, const std::string &name);

 private:
  Core() = default;

  // Sends c and returns the compound's NFS status; transport failures
  // become NFS4ERR_DELAY (the client retries). Every COMPOUND the core
  // sends passes here, so this is where upstream metrics are counted.
  uint32_t Run(upstream::Compound &c, const Creds &cr,
               upstream::CompoundReply *rep);
  // Operations a COMPOUND given to Run may carry: the session's grant;
  // before a session is made 15 (what we asked for until 2026, less the
  // SEQUENCE); on NFSv4.0 33, one PUTFH and 32 REMOVEs, what write-back
  // has always sent (knfsd takes 50, Ganesha 100).
  uint32_t MaxOps() const;
  // The client's answer to a write to the store that failed: a full cache
  // disk is NFS4ERR_NOSPC (nothing was taken; space can be freed), any
  // other failure NFS4ERR_IO.
  uint32_t StoreFailure() const;
  // NFSv4.0: c bears an open-owner's or lock-owner's seqid (OPEN,
  // OPEN_CONFIRM, OPEN_DOWNGRADE, CLOSE, LOCK, LOCKU).
  bool SeqidBearing(const upstream::Compound &c) const;
  // Run's recovery of a seqid-bearing compound sent under client id epoch
  // that got no usable reply (s): resent unchanged until answered, for up
  // to a lease, while the client id is still that one; then the client id
  // is given up. The caller holds the owner's lock.
  upstream::CallStatus ResendSeqidBearing(upstream::Compound &c,
                                          const Creds &cr,
                                          upstream::CompoundReply *rep,
                                          upstream::CallStatus s,
                                          uint64_t epoch);
  static constexpr uint32_t kMaxSeqidResendSeconds = 90;
  static constexpr uint64_t kNoEpoch = ~0ull;
  // The client id epoch whose seqid-bearing requests were given up
  // (RestartClient asked once for it), or kNoEpoch.
  std::atomic<uint64_t> gave_up_epoch_{kNoEpoch};
  // The remote filehandle of key, or NFS4ERR_STALE (also for an object
  // removed here, the remote not told yet). Resolves the export root on
  // first use; creates a local object remotely first.
  uint32_t FhOf(Key key, upstream::Fh *fh);
  // FhOf, also for an object removed here: its upstream state (opens,
  // delegations) must still be given back.
  uint32_t FhOfAny(Key key, upstream::Fh *fh);
  // The remote said key is gone (its filehandle is stale, or our REMOVE
  // took its last link): its cache records and its handle record are
  // deleted, unless something here still needs them (the export root, an
  // open of ours, a local delegation, dirty data, operations in flight, a
  // delegation, the write-back log). See handle_map.h.
  void ForgetGone(Key key);
  // PUTFH + GETATTR(mask) of key; for the object attributes
  // (kAttrsObject) also the caller's ACCESS, both recorded in the cache.
  uint32_t FetchAttrs(const Creds &cr, Key key, uint64_t mask, const char *tag,
                      Attrs *out);
  // GETATTR upstream, recorded in the cache (a moved change attribute
  // invalidates the object's cached data).
  uint32_t Revalidate(const Creds &cr, Key key, Attrs *out);
  // Reads block idx of key from upstream (the BlockReader's fetch).
  uint32_t FetchBlock(Key key, uint64_t idx, const Creds &cr,
                      const upstream::StateId &sid, std::string *data);
  // After an operation of ours changed directory dir: its change_info ci,
  // its attributes from the nth GETATTR of rep (when there), and the edit
  // (entry removed, entry added as added_key) that keeps its cached
  // listing usable for lookups.
  // Notes the remote's change_info of dir for this thread's
  // DirChangeScope, if one lives.
  void NoteDirChange(Key dir, const upstream::ChangeInfo &ci);
  void NoteDirAfter(Key dir, const upstream::CompoundReply &rep, int nth,
                    const upstream::ChangeInfo &ci, const std::string &removed,
                    const std::string &added, Key added_key);
  // Whether an open of key with these share modes would be granted here
  // with no OPEN sent: under our delegation, decided here, or joining our
  // upstream open, which covers them. A guess (OpenFile decides again
  // under the file's owner lock).
  bool OpenIsLocal(Key key, uint32_t access, uint32_t deny);
  // The key of dir's entry name in dir's cached listing, or kNoKey.
  Key ListedKey(Key dir, const std::string &name);
  // Whether cr may search dir (kNfs4Ok, NFS4ERR_ACCESS, or the error of
  // asking): a kept ACCESS answer, else the remote's. Ganesha leaves a
  // create by name to the FSAL's judgement (open_judged_by_server): where
  // a create is answered here without an OPEN sent, this judges it.
  uint32_t MaySearch(const Creds &cr, Key dir);
  // One upstream WRITE of [off, off+len) (several when len exceeds the
  // server's maxwrite), updating the cache; *committed and *verf from the
  // server. sid_of gives the stateid to use (again after a state error).
  // own, if given, goes at the head of the first WRITE's COMPOUND.
  uint32_t WriteUpstream(const Creds &cr, Key key,
                         const std::function<upstream::StateId()> &sid_of,
                         uint64_t offset, size_t len, const char *buf,
                         upstream::StableHow stable, size_t *nwritten,
                         upstream::StableHow *committed,
                         upstream::Verifier *verf, OwnReturn *own = nullptr);
  // One upstream COMMIT of the whole file, as cr; *verf from the server.
  uint32_t CommitUpstream(const Creds &cr, Key key, upstream::Verifier *verf);
  // Looks the export's path up on the remote and records its handle.
  uint32_t ResolveRoot(upstream::Fh *fh);
  uint32_t WalkToRoot();  // ResolveRoot's one attempt
  // The server's READ/WRITE limits, learnt once per start (the root's
  // handle may be known from an earlier run): before any READ or WRITE.
  void LearnIoLimits();
  void ApplyIoLimits(const Attrs &a);
  upstream::Verifier CookieVerf(Key dir);
  // Whether a lookup miss in dir should read its whole listing: not a
  // directory found unlistable, and (unless the namespace is written
  // back) a small one not listed within the attribute window.
  // The second of Ganesha's two lookups of a new name in one request
  // (TakeRecentAbsence: the remote's "no such name" just heard by this
  // thread, used once); any create here forgets it.
  bool TakeRecentAbsence(Key dir, const std::string &name);
  void NoteRecentAbsence(Key dir, const std::string &name);
  static void ForgetRecentAbsence();
  bool WorthListing(Key dir);
  // Reads dir's whole listing into the cache (when it is not too big to
  // keep, or not listable; then lookups in dir ask name by name).
  void PrefetchListing(const Creds &cr, Key dir);
  void SetCookieVerf(Key dir, const upstream::Verifier &v);

  // Open helpers; owner->mu held.
  // The OPEN that ConfirmIfAsked repeats: name in dir, with these modes.
  struct ReopenAfterConfirm {
    upstream::Fh dir;
    std::string name;
    uint32_t access = 0, deny = 0;
  };
  // Sends OPEN_CONFIRM when the OPEN result asks for it (repeating the
  // OPEN in the same COMPOUND, see core.cc); updates *sid, and *deleg with
  // the delegation the final OPEN carries.
  uint32_t ConfirmIfAsked(const Creds &cr, const upstream::OpResult &open,
                          const upstream::Fh &fh, OwnerSlot *owner,
                          upstream::StateId *sid,
                          const ReopenAfterConfirm &again,
                          upstream::Delegation *deleg) REQUIRES(owner->mu);
  // Brings f's upstream open to the current client id: reclaims it (see
  // Reclaim::ReclaimFile) when it belongs to an earlier one.
  void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu);
  // One LOCK of [offset, offset+length) for lo on f (introducing lo to the
  // server when new), advancing the seqids and recording what is held.
  uint32_t SendLock(const Creds &cr, FileOpen *f, const upstream::Fh &fh,
                    LockOwnerState *lo, upstream::LockType type,
                    uint64_t offset, uint64_t length, bool reclaim,
                    upstream::CompoundReply *rep) REQUIRES(f->owner->mu);

  // LOCKU of [offset, offset+length) for the local lock-owner owner on f,
  // if it holds locks there (granted here or upstream).
  uint32_t UnlockLocked(const Creds &cr, FileOpen *f, const upstream::Fh &fh,
                        const std::string &owner, upstream::LockType type,
                        uint64_t offset, uint64_t length)
      REQUIRES(f->owner->mu);
  // f's state for the local lock-owner owner, made on first use.
  LockOwnerState &LockOwnerFor(FileOpen *f, const std::string &owner)
      REQUIRES(f->owner->mu);
  // Sends the locks granted here under our write delegation (before it
  // goes back). f open upstream.
  void SendLocalLocks(FileOpen *f, const upstream::Fh &fh)
      REQUIRES(f->owner->mu);
  // LOCK of range h for lo (a reclaim when reclaim).
  uint32_t SendHeldLock(FileOpen *f, const upstream::Fh &fh, LockOwnerState *lo,
                        const HeldLock &h, bool reclaim) REQUIRES(f->owner->mu);
  // Whether name in the remote directory dir is a regular file carrying
  // an exclusive create's verifier (create_verifier.h).
  bool RemoteCarriesVerifier(const Creds &cr, const upstream::Fh &dir,
                             const std::string &name, const uint8_t *verifier);
  // own: our read delegation on the file, given back in the OPEN's
  // COMPOUND (own_return.h), or null.
  uint32_t UpstreamOpenByHandle(const Creds &cr, FileOpen *f, uint32_t access,
                                uint32_t deny, Attrs *attrs,
                                OwnReturn *own = nullptr)
      REQUIRES(f->owner->mu);
  uint32_t UpstreamCloseLocked(const Creds &cr, FileOpen *f)
      REQUIRES(f->owner->mu);
  uint32_t UpstreamDowngrade(const Creds &cr, FileOpen *f, uint32_t access,
                             uint32_t deny) REQUIRES(f->owner->mu);
  uint32_t UpstreamUnlockAll(const Creds &cr, FileOpen *f,
                             const upstream::Fh &fh) REQUIRES(f->owner->mu);
  // The stateid for I/O with open (anonymous when none).
  upstream::StateId IoStateid(NacheOpen *open);

  // --- write-back ---------------------------------------------------------
  // Whether key's writes stay local (write_back, and single_writer or our
  // write delegation).
  bool WriteBackFor(Key key);
  // A write kept local: durable in the store, FILE_SYNC to the client.
  uint32_t WriteLocal(const Creds &cr, Key key, NacheOpen *open,
                      uint64_t offset, size_t len, const char *buf,
                      size_t *nwritten, upstream::StableHow *committed);
  // The file with unflushed data known as name in dir, or kNoKey (one
  // look at each dirty file's recorded name: for the rare truncating open
  // by name).
  Key DirtyFileNamed(Key dir, const std::string &name);
  // An object we just made at the remote (a create, an open that created,
  // a write-back create), with its attributes from the same reply: under
  // nache's own principal (remote_sees_machine), one owned by nobody says
  // the remote maps that principal to its anonymous user. Counted each
  // time, logged once with the cause and the fix.
  void NoteNewObjectOwner(Key key, const Attrs &a);

  // --- local namespace (writeback/namespace_writeback.h) ------------------
  // With write-back on a single-writer export, creates of files,
  // directories and symlinks are local: the object gets its key and
  // attributes at once and a kCreate record in the log; the flusher (or
  // the first operation that needs its remote handle, through FhOf)
  // creates it remotely, in log order. Removing or renaming such an object
  // before then edits the log instead: nothing of it is ever sent.
  // NamespaceWriteBack owns the log, the local names and their sends.
  bool LocalNamespace() const { return namespace_ != nullptr; }
  // The remote cannot be reached: no connection, or the lease could not be
  // renewed in time (a WAN cut).
  bool Disconnected() const;
  // Our lease could not be renewed in time: the remote may have dropped
  // our state (a connection that is merely down is not this).
  bool LeaseLapsed() const;
  // Serving from the cache whatever its age (serve_stale, disconnected).
  bool ServingStale() const { return cfg_.serve_stale && Disconnected(); }
  // Created here and not sent yet: it has no remote handle.
  bool NotAtRemote(Key key) const {
    return LocalNamespace() && namespace_->NotAtRemote(key);
  }
  // A regular file with no links left (removed or replaced at the remote
  // while an open of ours kept it alive).
  static bool Unlinked(const Attrs &a) {
    return a.type == upstream::FileType::kReg &&
           (a.mask & upstream::kAttrNlink) && a.nlink == 0;
  }
  // Opens and ACCESS of key are decided here: the remote does not have it
  // yet, or cannot be asked.
  bool DecidedLocally(Key key) const {
    return NotAtRemote(key) || ServingStale();
  }

  // Lists dir's local entries after cookie (0: all). Their cookies have
  // the top bit set, which no remote backed by a POSIX file system uses
  // (directory offsets are non-negative 64-bit values), so a later call
  // can tell them from the remote's.
  uint32_t ReaddirLocal(const Creds &cr, Key dir, uint64_t cookie,
                        nache_dirent_cb cb, void *ctx, bool *eof);
  static constexpr uint64_t kLocalCookie = 1ull << 63;
  static bool IsLocalCookie(uint64_t c) { return (c & kLocalCookie) != 0; }
  // Whether a RENAME to newname in the directory newdir_fh is done at the
  // remote: the name holds source (any file, when source's handle is not
  // known). For the retry of a rename whose reply was lost.
  bool RenamedOnce(const Creds &cr, Key source, const upstream::Fh &newdir_fh,
                   const std::string &newname);
  // The remote's listing of dir (Readdir without local entries).
  uint32_t ReaddirRemote(const Creds &cr, Key dir, uint64_t cookie,
                         nache_dirent_cb cb, void *ctx, bool *eof);
  // The remote decides access (Access): AskAccess appends an ACCESS of
  // every bit to a compound that goes out anyway and returns its index;
  // after Run, UnlessOnlyAccessFailed treats a failure of that ACCESS
  // alone as success (the rest answered), and NoteAccessAnswer, called
  // after the attributes the compound brought are validated, keeps the
  // caller's answer for the object the compound ended on.
  static size_t AskAccess(upstream::Compound &c);
  // Access as the remote answers it for cr (cached per caller), or by the
  // mode bits where the remote has no say (made here, or unreachable).
  uint32_t AccessAsTheRemoteSays(const Creds &cr, Key key, uint32_t want,
                                 uint32_t *allowed);
  static uint32_t UnlessOnlyAccessFailed(size_t at, uint32_t st,
                                         const upstream::CompoundReply &rep);
  // Keeps the answer of rep's nth ACCESS (0: the first) for key and cr.
  void NoteAccessAnswer(Key key, const Creds &cr,
                        const upstream::CompoundReply &rep, int nth = 0);
  // Whether the remote lets cr open key with share_access (NFS4ERR_ACCESS
  // if not), from its ACCESS answer: for opens no OPEN of cr's decides.
  uint32_t MayOpen(const Creds &cr, Key key, uint32_t share_access);
  // Root as a remote that squashes it sees it: nobody, no groups.
  static Creds SquashedRoot();

  // --- delegations and reclaims (core_delegations.cc) --------------------
  // Delegations' and Reclaim's view of the core (their Host interfaces).
  class DelegationsHost;
  class ReclaimHost;
  // Starts the callback service when configured; false with *err when it
  // cannot listen. Fills the address to advertise in *uaddr.
  bool StartCallbackService(std::string *uaddr, std::string *err);
  // The callback service's RPCSEC_GSS side (NFSv4.0 to a Kerberos
  // remote): nache's keytab as acceptor, the remote's principal allowed.
  bool CallbackGss(rpc::GssServerOptions *o, std::string *err);

  // core_nfs42.cc: whether the session speaks NFSv4.2; the file's
  // unflushed data sent first, and its flushing owned by *owned while the
  // caller's operation runs; SETXATTR or REMOVEXATTR (add_op) with the
  // change attributes around it.
  bool Speaks42() const;
  // COMMIT of what an UNSTABLE COPY wrote; DELAY when the verifier is
  // not the COPY's (the remote restarted: copy again).
  uint32_t CommitCopy(const Creds &cr, const upstream::Fh &fh, uint64_t offset,
                      const upstream::Verifier &verf);
  uint32_t DataToRemoteFirst(Key key, std::optional<Flusher::Ownership> *owned);
  uint32_t ChangeXattr(const Creds &cr, Key key, const char *tag,
                       const std::function<void(upstream::Compound *)> &add_op);

  CoreConfig cfg_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<HandleMap> handles_;
  std::unique_ptr<upstream::Upstream> up_;
  std::unique_ptr<OpenTable> opens_;
  std::unique_ptr<Cache> cache_;
  std::unique_ptr<BlockReader> reader_;  // uses cache_ (destroyed first)
  std::unique_ptr<UnstableWrites> unstable_writes_;  // null when disabled
  std::unique_ptr<Flusher> flusher_;                 // null unless write_back
  // Write-through removes and creates that got no answer (unanswered.h).
  UnansweredNames unanswered_;
  // Upstream OPENs by name, one per directory entry at a time: a second
  // open of the name opens by handle what the first found (counted).
  NameTurns name_turns_{[this] { metrics_->CountOpenNameWait(); }};
  // Write-back's components (writeback/), each owning its state and
  // locks: WriteBack (who each dirty file's flush writes as, the flush
  // open-owners, the conflict gate); NamespaceWriteBack (the log, local
  // names, logged creates, removes and renames and their sends; null
  // unless write_back and single_writer: LocalNamespace()); Conflicts and
  // FlushSender (the flusher's sends; both null unless write_back). Their
  // one host (core_hosts.h) is declared first: it outlives them.
  class WriteBackHost;
  std::unique_ptr<WriteBackHost> writeback_host_;
  std::unique_ptr<WriteBack> writeback_;
  std::unique_ptr<NamespaceWriteBack> namespace_;
  std::unique_ptr<Conflicts> conflicts_;
  std::unique_ptr<FlushSender> flush_sender_;
  uint8_t boot_verf_[8] = {};  // our write verifier (immutable after Open)
  // Upstream opens lingering after their last local close, and the thread
  // that closes them (opens/lingering_opens.h; null until Open started
  // it). Its host is declared first: it outlives it.
  class LingeringHost;
  std::unique_ptr<LingeringHost> lingering_host_;
  std::unique_ptr<LingeringOpens> lingering_;
  // Upstream delegations, the local ones under them, the callback service
  // and the recall thread (delegations/delegations.h); reclaims after a
  // remote restart and their thread (delegations/reclaim.h). Their hosts
  // are declared first: they outlive them.
  std::unique_ptr<DelegationsHost> delegations_host_;
  std::unique_ptr<ReclaimHost> reclaim_host_;
  std::unique_ptr<Delegations> delegations_;
  std::unique_ptr<Reclaim> reclaim_;
  metrics::ExportMetrics *metrics_ = nullptr;  // owned by the registry
  // NoteNewObjectOwner has warned (once per export).
  std::atomic<bool> warned_created_as_nobody_{false};
  // Our entry in the admin registry (core_admin.cc); removed first in
  // ~Core, which waits for a status or flush under way.
  std::unique_ptr<admin::ExportControl> admin_control_;
  uint64_t admin_token_ = 0;
  // nachectl warm's job (null until Open made it); stopped in ~Core right
  // after the admin registry entry is gone.
  std::unique_ptr<Warmer> warmer_;
  std::atomic<bool> admin_stopping_{false};  // ~Core began: walks end
  // Whether the handle map (and, for write-back, the local namespace)
  // places k at or below top; memo keeps what was learnt of each key.
  bool Below(Key k, Key top, std::unordered_map<Key, bool> *memo);
  // The last operation that failed for want of the upstream (a transport
  // failure), for nachectl status.
  Mutex last_error_mu_{"core_last_error"};
  std::string last_error_ GUARDED_BY(last_error_mu_);
  int64_t last_error_time_ GUARDED_BY(last_error_mu_) = 0;  // UTC seconds
  void NoteUpstreamError(const std::string &what) EXCLUDES(last_error_mu_);
  // Registers this core in the admin registry (end of Open).
  void RegisterAdmin();
  // Seconds since our lease was last renewed; -1 before the first.
  double LeaseAge() const;
  // The remote can call us back now (nache_callback_path_up).
  bool CallbackPathUp() const;
  uint64_t sampler_token_ = 0;  // our gauge sampler in metrics_ (immutable)
  Key root_key_ = kNoKey;       // the export root's key (immutable after Open)
  // READ/WRITE sizes: Max_IO_Size clamped to the server's maxread/maxwrite
  // (learnt when the root is resolved).
  std::atomic<uint32_t> max_read_{1 << 20};
  std::atomic<uint32_t> max_write_{1 << 20};
  std::atomic<bool> io_limits_known_{false};
  // The remote answered READ_PLUS with NFS4ERR_NOTSUPP (stock Ganesha
  // VFS): blocks are fetched with READ from then on.
  std::atomic<bool> read_plus_refused_{false};
  SharedAttempt io_limits_attempt_;  // one LearnIoLimits asks at a time
  SharedAttempt root_attempt_;       // one ResolveRoot walks at a time

  std::atomic<uint64_t> lock_serial_{0};  // numbers our lock-owner names
  std::string owner_prefix_;              // unique per proxy start (immutable)
};

}  // namespace nache
