// The write-back of the namespace on single-writer exports
// (proxy/writeback/DESIGN.md, "Metadata"): the log (OpLog) and its index
// of local names (LocalNames), and everything that edits them or sends
// their records:
// - creates of files, directories and symlinks kept local (kCreate), and
//   their removes and renames before they are sent (which edit the log);
// - removes of what the remote has, logged as whiteouts (kRemove);
// - renames of what the remote has, logged (kRename), chains of them kept
//   to one record;
// - the sends of those records: CreateRemotely (a create or a RENAME, the
//   directory's first), SendRemoveOf / SendRemovesIn (REMOVEs).
// The core decides which way an operation goes and calls in here; data
// write-back (dirty blocks, the flusher) and conflicts are not here.
//
// Invariants:
// - An object is local (LocalNames has it) exactly while its kCreate
//   record is in the log; its handle record has no filehandle then.
// - A directory is created remotely before anything in it. A local rename
//   moves the record to the end of the log (OpLog::Replace), which keeps
//   that order: only non-directories created here are renamed locally,
//   and the target directory's record is older. Directories the remote
//   has are moved by handle-independent kRename records, sent in log order
//   among themselves (SendDirRenamesBefore). Nothing else orders records:
//   names are unique among local objects, and whiteouts make a name's
//   remove or rename go before its reuse.
// - Anything that needs the remote handle of a local object goes through
//   Host::FhOf, which creates it remotely first (CreateRemotely).
// - One sender per record: a create or rename being sent (sending_) or a
//   remove being sent (removing_) is not rewritten nor sent again until
//   that send ends.
//
// What it needs of the core is the narrow Host below (lookups, attributes
// and access as a client's, the remote handle of an object, running a
// COMPOUND, the flush open-owners' create, the delegation checks), and
// the leaf components it is given: the cache, the handle map, WriteBack
// (the flush writers) and the export's metrics.
//
// Thread safety: all methods are thread-safe and may block on the
// upstream (through the Host). Lock order (the core's, core.h):
//   mu_ (level 2 of the core's order) serialises namespace changes: a
//     change's log records and its LocalNames entries are made under it as
//     one step (OpLog and LocalNames lock themselves; mu_ makes the pair
//     atomic), and it guards sending_, removing_ and never_sent_. Held for
//     local work only, never across an upstream call or a Host call (but
//     StoreFailure, a leaf).
//   mu_ -> WriteBack::writers_mu_ (CreateLocal notes the creator as the
//     file's writer under it: the only nesting of two level-2 locks);
//   mu_ -> Cache::mu_, HandleMap's, OpLog's and LocalNames' locks, the
//     store (leaves: they call back into nothing that locks).
// Nothing here is ever taken under any of those.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "handles/handle_map.h"
#include "metrics/metrics.h"
#include "store/store.h"
#include "upstream/compound.h"
#include "upstream/types.h"
#include "util/mutex.h"
#include "writeback/local_names.h"
#include "writeback/new_object.h"
#include "writeback/oplog.h"
#include "writeback/remote.h"
#include "writeback/writeback.h"

namespace nache {

class NamespaceWriteBack {
 public:
  using Creds = upstream::Creds;
  using Attrs = upstream::Attrs;

  // What the namespace's write-back needs of the core (and the remote
  // handle of an object, through which a local one is created remotely
  // first, back into CreateRemotely, and running a COMPOUND: the base's).
  class Host : public WriteBackRemote {
   public:
    // The core's own operations, answered for cr as for a client: a name
    // in a directory (local names included), attributes, access.
    virtual uint32_t Lookup(const Creds &cr, Key dir, const std::string &name,
                            Key *key, Attrs *attrs) = 0;
    virtual uint32_t Getattr(const Creds &cr, Key key, Attrs *attrs) = 0;
    virtual uint32_t Access(const Creds &cr, Key key, uint32_t want,
                            uint32_t *allowed) = 0;
    // Reads dir's whole listing into the cache (when it can be kept).
    virtual void PrefetchListing(const Creds &cr, Key dir) = 0;
    // FhOf, also for an object removed here.
    virtual uint32_t FhOfAny(Key key, upstream::Fh *fh) = 0;
    // The largest WRITE the server takes (learnt first when not known).
    virtual uint32_t MaxWrite() = 0;
    // Creates regular files in pfh with the flush open-owners, each with
    // the ops its `more` adds after its GETFH, then a GETATTR, and closes
    // them: over NFSv4.1 many in one COMPOUND
    // (FlushSender::CreateObjects).
    virtual void CreateObjects(const Creds &cr, const upstream::Fh &pfh,
                               const std::vector<NewObject> &files,
                               std::vector<NewObjectResult> *out) = 0;
    // Delegations: a grant an OPEN brought; our read delegation on key
    // given back before an operation the server would recall it for.
    virtual void NoteGrant(Key key, const upstream::Delegation &d) = 0;
    virtual void ReturnIfReadDelegated(Key key) = 0;
    // A send refused for the permissions of cr: counted and logged.
    virtual void NoteFlushRefused(const char *op, Key key, const Creds &cr,
                                  uint32_t st) = 0;
    // An object nache created at the remote, with the attributes the
    // remote gave it: a warning when they say nobody (Core's).
    virtual void NoteNewObjectOwner(Key key, const Attrs &a) = 0;
    // The client's answer to a failed write to the store (NOSPC or IO).
    virtual uint32_t StoreFailure() const = 0;
    // The export root's key.
    virtual Key RootKey() const = 0;
  };

  // Opens the log in store and loads the local names from it. store,
  // cache, handles, writeback, metrics and host outlive this.
  NamespaceWriteBack(Store *store, Cache *cache, HandleMap *handles,
                     WriteBack *writeback, metrics::ExportMetrics *metrics,
                     Host *host);
  NamespaceWriteBack(const NamespaceWriteBack &) = delete;
  NamespaceWriteBack &operator=(const NamespaceWriteBack &) = delete;

  // The index of local names and whiteouts, for the core's lookups and
  // listings (it locks itself; what it says may change at once).
  const LocalNames &names() const { return *local_names_; }
  // The log (the admin view counts its records).
  OpLog *log() { return oplog_.get(); }
  // Created here and not sent yet: it has no remote handle.
  bool NotAtRemote(Key key) const { return local_names_->IsLocal(key); }

  // --- local objects (kCreate records) ------------------------------------
  // A name a local create or rename may use in dir (a directory, whose
  // attributes come back in dir_attrs).
  uint32_t CheckNewName(const Creds &cr, Key dir, const std::string &name,
                        Attrs *dir_attrs);
  // A create kept local: the object gets its key and attributes at once
  // and a kCreate record (synced).
  uint32_t CreateLocal(const Creds &cr, Key dir, const std::string &name,
                       upstream::FileType type, const Attrs &in,
                       const std::string &link_text, Key *key, Attrs *out)
      EXCLUDES(mu_);
  // Removes the local object e (named in dir) before it was ever created
  // remotely: its create record is dropped, with its data.
  uint32_t RemoveLocal(const Creds &cr, Key dir, const LocalNames::Entry &e)
      EXCLUDES(mu_);
  // Renames a local non-directory object, also over a remote file or
  // symlink (whose remove is logged with it); *done false when it must go
  // the remote way (the target is a remote directory, or has other
  // links).
  uint32_t RenameLocal(const Creds &cr, const LocalNames::Entry &src,
                       Key newdir, const std::string &newname, bool *done)
      EXCLUDES(mu_);
  // Whether e's create may have made the object at the remote already (a
  // try whose reply was lost, or one from before a restart): its name
  // there is then removed when the object is removed or renamed here.
  bool MayBeAtRemote(const LocalNames::Entry &e) REQUIRES(mu_);
  // Creates the local object key at the remote, its directory first
  // (recursively); OK also when it is no longer local (sent by another
  // thread meanwhile, or removed). Creates of unrelated objects proceed in
  // parallel: only a directory's create must precede its entries'. A
  // moved object: its RENAME.
  uint32_t CreateRemotely(Key key) EXCLUDES(mu_);
  // The same for every local entry of dir (its regular files together:
  // many in a COMPOUND over NFSv4.1).
  uint32_t CreateEntriesRemotely(Key dir) EXCLUDES(mu_);
  // CreateRemotely of key, for the flusher: it goes together with the
  // local objects of its directory that were created by created_before
  // (wall-clock seconds; those that may still die young wait).
  uint32_t CreateWithSiblings(Key key, int64_t created_before) EXCLUDES(mu_);

  // --- removes of what the remote has (kRemove records) -------------------
  // A remove of a file or symlink the remote has, kept local: logged
  // (synced), the name hidden here, the REMOVE sent later. *done false when
  // it must go the remote way (a directory, a file with other links);
  // *target: the object the name denotes (kNoKey when unknown).
  uint32_t RemoveLogged(const Creds &cr, Key dir, const std::string &name,
                        bool *done, Key *target) EXCLUDES(mu_);
  // Sends the unsent remove of (dir, name), if any: before anything that
  // needs the name free at the remote.
  uint32_t SendRemoveOf(Key dir, const std::string &name) EXCLUDES(mu_);
  // Sends dir's unsent removes (its flush; its own removal).
  uint32_t SendRemovesIn(Key dir) EXCLUDES(mu_);

  // --- renames of what the remote has (kRename records) -------------------
  // A rename of a file or symlink (one link) or a directory the remote
  // has, kept local: logged (synced) with the remove of a remote file it
  // replaces, the new name shown here at once, the RENAME sent later.
  // *done false when it must go the remote way.
  uint32_t RenameLogged(const Creds &cr, Key olddir, const std::string &oldname,
                        Key newdir, const std::string &newname, bool *done)
      EXCLUDES(mu_);
  // A moved object (src) renamed again: its kRename record now names the
  // new target (or is dropped when that is its remote name); *done false
  // when it must go the remote way.
  uint32_t RenameMoved(const Creds &cr, const LocalNames::Entry &src,
                       Key newdir, const std::string &newname, bool *done)
      EXCLUDES(mu_);
  // A moved object removed: its kRename record becomes the kRemove of its
  // remote name.
  uint32_t RemoveMoved(const Creds &cr, Key dir, const LocalNames::Entry &e)
      EXCLUDES(mu_);
  // Sends the RENAMEs of moved directories logged before seq, oldest
  // first (UINT64_MAX: all of them).
  uint32_t SendDirRenamesBefore(uint64_t seq) EXCLUDES(mu_);

 private:
  // One create record sent upstream. fresh: created by this run and never
  // tried (see never_sent_).
  uint32_t SendCreate(const LogRecord &r, bool fresh) EXCLUDES(mu_);
  // Local entries of dir created here (not moved), created remotely
  // together (CreateObjects: many in a COMPOUND over NFSv4.1), each
  // claimed as CreateRemotely claims one; those it could not create (a
  // name taken at the remote, a refusal, the COMPOUND stopped before
  // them) are added to *rest, for CreateRemotely.
  void CreateObjectsIn(Key dir, const std::vector<LocalNames::Entry> &made,
                       std::vector<LocalNames::Entry> *rest) EXCLUDES(mu_);
  // What goes with a file's create in its COMPOUND: its dirty ranges and
  // the attributes set here, when they are few and small enough
  // (inline_all), read from the cache when the create is built.
  struct FilePlan {
    std::vector<Cache::DirtyRange> ranges;
    Attrs set;
    uint64_t set_epoch = 0;
    bool have_set = false;
    bool inline_all = false;
  };
  FilePlan PlanFile(const LogRecord &r);  // (empty but for a regular file)
  // The create of record r's object as name (its own, or a conflict
  // name), a file with plan's data when inline (plan outlives the
  // NewObject).
  NewObject NewObjectFor(const LogRecord &r, bool fresh,
                         const std::string &name, const FilePlan &plan);
  // After r's object was made (nf): a file's delegation noted, what went
  // with it marked flushed when all of it did; the remote's attributes
  // after.
  Attrs ObjectSent(const LogRecord &r, const FilePlan &plan,
                   const NewObjectResult &nf);
  // r's object exists at the remote as fh (attributes after): its handle,
  // the directory's listing, its owner checked, counted.
  void CreatedAtRemote(const LogRecord &r, const upstream::Fh &fh,
                       const Attrs &after);
  // Whether directory dir (the remote has it) is empty as our clients see
  // it: no local entries, and none of the remote's but those removed here
  // (*empty). False when that cannot be told without asking the remote
  // to remove it (a listing too big to keep).
  bool EmptyHere(const Creds &cr, Key dir, bool *empty);
  // Whether a remove of k (attributes a) may be logged instead of sent: a
  // file or symlink with one link that the remote has.
  bool RemoveMayBeLogged(Key k, const Attrs &a);
  // Whether a REMOVE failing with status is refused for good (a logged
  // remove that fails so is dropped, and logged, not retried forever).
  static bool RemoveRefused(uint32_t status);
  // The kRemove record of (dir, name) = k, removed by cr.
  static LogRecord RemoveRecord(const Creds &cr, Key dir,
                                const std::string &name, Key k);
  // Sends these removes of names in dir (in one COMPOUND per remover).
  uint32_t SendRemoves(Key dir, const std::vector<LocalNames::Removed> &ws)
      EXCLUDES(mu_);
  // Bookkeeping of renames kept local: the remote file or symlink
  // `replaced` at (dir, name), whose kRemove record is seq; a moved object
  // k (its kRename record is seq); and the cached listings of both
  // directories.
  void NoteReplaced(uint64_t seq, Key dir, const std::string &name,
                    Key replaced) REQUIRES(mu_);
  void AddMoved(uint64_t seq, Key olddir, const std::string &oldname,
                Key newdir, const std::string &newname, Key k,
                upstream::FileType type) REQUIRES(mu_);
  void EditListingsForRename(Key olddir, const std::string &oldname, Key newdir,
                             const std::string &newname, Key k);
  // What a rename kept local would replace at (newdir, newname) (nda: the
  // directory's attributes): nothing (*replaced kNoKey), or a file or
  // symlink of the remote's whose remove is logged with it; *remote when
  // the rename must go the remote way (a directory, a file with other
  // links).
  uint32_t ReplacedByRename(const Creds &cr, Key newdir,
                            const std::string &newname, const Attrs &nda,
                            Key *replaced, bool *remote);
  // Whether directory k may move from olddir into newdir, decided here:
  // not into itself or its subtree (INVAL), and with write permission on
  // k when its parent changes. *remote when only the remote can tell (an
  // ancestor of newdir unknown here).
  uint32_t MayMoveDir(const Creds &cr, Key k, Key olddir, Key newdir,
                      bool *remote);
  // Whether cr may rename entries from olddir to newdir (write and search
  // permission on both), decided here by their access bits.
  uint32_t MayRenameBetween(const Creds &cr, Key olddir, Key newdir);
  // Sends a kRename record's RENAME (its directories are at the remote).
  // A reply that does not answer the RENAME leaves the record to be sent
  // again; NOENT then is success when the new name holds our object (the
  // try whose reply was lost went through: NamedAtRemote).
  uint32_t SendRename(const LogRecord &r);
  bool NamedAtRemote(const Creds &cr, const upstream::Fh &dir,
                     const std::string &name, Key k);

  Cache *const cache_;
  HandleMap *const handles_;
  WriteBack *const writeback_;
  metrics::ExportMetrics *const metrics_;
  Host *const host_;
  // The log and its index of local names (each locks itself).
  std::unique_ptr<OpLog> oplog_;
  std::unique_ptr<LocalNames> local_names_;
  // See the lock order above.
  Mutex mu_{"namespace_writeback"};
  CondVar cv_{&mu_};                       // sending_ or removing_ changed
  std::set<Key> sending_ GUARDED_BY(mu_);  // creates and renames being sent
  std::set<uint64_t> removing_ GUARDED_BY(mu_);  // remove records being sent
  // Local objects created by this run whose create was never tried: their
  // name must be free at the remote (else a conflict). After a restart
  // every record counts as possibly sent.
  std::set<Key> never_sent_ GUARDED_BY(mu_);
};

}  // namespace nache
