// Conflicts of write-back (proxy/writeback/DESIGN.md, "Disconnected
// operation and conflicts"): a file we hold unflushed writes for changed
// at the remote meanwhile, or is gone there. The remote's version stays;
// ours is written beside it as NAME.nache-conflict-<UTC time> (or, gone,
// NAME.nache-lost-<time>, in the export's nache-lost+found when its
// directory is gone too), logged and counted. Nothing is overwritten
// silently. (A local create whose name was taken at the remote meanwhile
// is the other kind of conflict: NamespaceWriteBack::SendCreate puts ours
// beside theirs the same way.)
//
// It keeps no state of its own: the file's dirty base is the cache's, the
// gate that holds local writes while a conflict is resolved and the
// writers a copy is made as are WriteBack's. What it needs of the core is
// the narrow Host below (the remote handle of an object, running a
// COMPOUND, WRITEs of a range, the flush open-owners' create, the
// delegation check) and the leaf components it is given.
//
// Thread safety: all methods are thread-safe and block on the upstream.
// It takes no lock of its own; WriteBack's resolving_mu_ (a leaf) is held
// for a moment by BeginResolving and the end of a resolution, never
// across a call. Callers hold no lock of the core's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cache/cache.h"
#include "handles/handle_map.h"
#include "metrics/metrics.h"
#include "upstream/compound.h"
#include "upstream/types.h"
#include "writeback/remote.h"
#include "writeback/writeback.h"

namespace nache {

class Conflicts {
 public:
  using Creds = upstream::Creds;
  using Attrs = upstream::Attrs;

  // What conflict handling needs of the core.
  // (The remote handle of an object and running a COMPOUND: the base's.)
  class Host : public WriteBackRemote {
   public:
    // Writes [offset, offset+len) to fh with sid and the stability asked,
    // in WRITEs no bigger than the server takes (FlushSender::WriteRange).
    virtual uint32_t WriteRange(const Creds &cr, const upstream::Fh &fh,
                                const upstream::StateId &sid, uint64_t offset,
                                const char *data, size_t len,
                                upstream::StableHow stable,
                                const char *tag) = 0;
    // Creates regular file name in pfh with one of the flush open-owners
    // (chosen by key), closed at once (FlushSender::CreateClosedFile).
    virtual uint32_t CreateClosedFile(
        const Creds &cr, const upstream::Fh &pfh, const std::string &name,
        upstream::OpenArgs::Create how, const Attrs &ca, Key key,
        const std::function<void(upstream::Compound *)> &more,
        upstream::CompoundReply *rep, upstream::Fh *fh,
        upstream::Delegation *deleg) = 0;
    // Delegations: a grant an OPEN brought; whether key is under our
    // write delegation (nobody else can have written it).
    virtual void NoteGrant(Key key, const upstream::Delegation &d) = 0;
    virtual bool WriteDelegated(Key key) = 0;
    // A send refused for the permissions of cr: counted and logged.
    virtual void NoteFlushRefused(const char *op, Key key, const Creds &cr,
                                  uint32_t st) = 0;
    // The export root's key.
    virtual Key RootKey() const = 0;
  };

  // cache, handles, writeback, metrics and host outlive this.
  // single_writer: the export's Single_Writer (a conflict copy's
  // directory is then ours alone).
  Conflicts(Cache *cache, HandleMap *handles, WriteBack *writeback,
            metrics::ExportMetrics *metrics, Host *host, bool single_writer)
      : cache_(cache),
        handles_(handles),
        writeback_(writeback),
        metrics_(metrics),
        host_(host),
        single_writer_(single_writer) {}
  Conflicts(const Conflicts &) = delete;
  Conflicts &operator=(const Conflicts &) = delete;

  // Before the flush of a file with unflushed writes and no write
  // delegation of ours: if its change attribute at the remote moved since
  // our writes began (someone else wrote it: a single-writer promise
  // broken, or a delegation lost in a long WAN cut), our version is saved
  // beside it as NAME.nache-conflict-<UTC time> and the file follows the
  // remote again.
  uint32_t CheckForConflict(Key key);
  // The flusher found key gone at the remote (NFS4ERR_STALE) while we
  // hold acknowledged data of it: our version is saved where the remote
  // keeps it visibly, NAME.nache-lost-<time> beside where it was, or in
  // the export's nache-lost+found when that directory is gone too; an
  // ERROR line and nache_writeback_lost_files_total say so. Non-zero:
  // not saved (the data stays in the cache, retried later).
  uint32_t SaveLostFile(Key key);
  static constexpr const char *kLostAndFound = "nache-lost+found";

 private:
  uint32_t KeepBothVersions(Key key, const Attrs &remote);
  // The export's nache-lost+found (made as cr when missing, mode 01777).
  uint32_t LostAndFound(const Creds &cr, Key *key);
  // The directory and name key was last known by (the export root and
  // nache-file-<key> when none).
  void LastNameOf(Key key, Key *dir, std::string *name);
  // Creates NAME.nache-<kind>-<time> in dir and copies our cached version
  // of key into it; then key's state here is dropped (unless written
  // again meanwhile: copied again). *saved_as: the name made.
  uint32_t SaveOurVersion(Key key, Key dir, const std::string &name,
                          const char *kind, std::string *saved_as);
  // The conflict copy appeared in (or, failed, left) directory dir.
  void NoteConflictCopy(Key dir, const upstream::ChangeInfo &ci,
                        const std::string &removed, const std::string &added,
                        Key added_key);
  // Writes our cached version of key (holes where we hold nothing) into
  // the remote file fh, with our size and mtime; *local_change: our change
  // attribute of the version written.
  uint32_t CopyOurVersion(Key key, const upstream::Fh &fh, const Creds &cr,
                          uint64_t *local_change);

  Cache *const cache_;
  HandleMap *const handles_;
  WriteBack *const writeback_;
  metrics::ExportMetrics *const metrics_;
  Host *const host_;
  const bool single_writer_;
};

}  // namespace nache
