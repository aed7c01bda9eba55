// The flusher's sends (proxy/writeback/DESIGN.md, "The flusher"): what
// the Flusher (flusher.h) calls for each file it flushes, and the sends
// the other write-back components share.
// - Prepare: the first step of a file's flush; a local object is created
//   remotely (NamespaceWriteBack), a directory whose entries are too young
//   waits, a file someone else changed is set aside (Conflicts).
// - SendRange, Commit, Setattr: one dirty range's WRITEs, the file's
//   COMMIT, the attributes set locally (a directory's after the removes
//   and creates of its entries), each as the file's flush writer
//   (WriteBack::FlushCreds), under our write delegation's stateid when we
//   hold one.
// - WriteRange: WRITEs of a range no bigger than the remote takes (also a
//   conflict copy's); CreateObjects: new objects of one directory
//   (logged creates), regular files created with the flush open-owners
//   (WriteBack's) and closed at once, directories and symlinks by
//   CREATE, over NFSv4.1 many in one COMPOUND with the files' data;
//   CreateClosedFile: one file (a conflict copy).
// - NoteRefused: a send refused for the permissions of the caller it is
//   sent as, counted and logged at CRIT.
//
// What it needs of the core is the narrow Host below (the remote handle
// of an object, running a COMPOUND, the server's WRITE size, the client
// id epoch, an OPEN's confirmation, the delegation checks) and the
// components it is given: the cache, WriteBack (the flush writers and
// open-owners), NamespaceWriteBack (null unless the namespace is written
// back) and Conflicts.
//
// Thread safety: all methods are thread-safe and block on the upstream;
// callers hold no lock of the core's. It has no lock of its own:
// CreateObjects holds one flush open-owner's OwnerSlot::mu (level 1 of
// the core's lock order, core.h) across that owner's OPENs and CLOSEs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "handles/handle_map.h"
#include "metrics/metrics.h"
#include "opens/opens.h"
#include "upstream/compound.h"
#include "upstream/types.h"
#include "util/mutex.h"
#include "writeback/conflicts.h"
#include "writeback/flusher.h"
#include "writeback/namespace_writeback.h"
#include "writeback/new_object.h"
#include "writeback/remote.h"
#include "writeback/writeback.h"

namespace nache {

class FlushSender {
 public:
  // COMPOUNDs of creates of one directory in flight at once over NFSv4.1
  // (each file with data takes its own: kMaxWritesPerCompound).
  static constexpr size_t kCreatesInFlight = 16;

  using Creds = upstream::Creds;
  using Attrs = upstream::Attrs;

  // What the flusher's sends need of the core.
  // (The remote handle of an object and running a COMPOUND: the base's.)
  class Host : public WriteBackRemote {
   public:
    // The largest WRITE the server takes (learnt first when not known).
    virtual uint32_t MaxWrite() = 0;
    // The current client id's epoch (an open-owner's seqids start afresh
    // with a new one).
    virtual uint64_t Epoch() const = 0;
    // The NFSv4 minor version COMPOUNDs go out with (Upstream's).
    virtual uint32_t MinorVersion() const = 0;
    // Sends OPEN_CONFIRM when the OPEN result open asks for it; updates
    // *sid, and *deleg with the delegation the final OPEN carries.
    virtual uint32_t ConfirmIfAsked(const Creds &cr,
                                    const upstream::OpResult &open,
                                    const upstream::Fh &fh, OwnerSlot *owner,
                                    upstream::StateId *sid,
                                    upstream::Delegation *deleg)
        REQUIRES(owner->mu) = 0;
    // Delegations: our read delegation on key given back before a send
    // the server would recall it for; whether key is under our write
    // delegation, and its stateid then.
    virtual void ReturnIfReadDelegated(Key key) = 0;
    virtual bool WriteDelegation(Key key, upstream::StateId *sid) = 0;
  };

  struct Options {
    // Names the flush open-owners: "<owner_prefix>-flush<n>" (unique per
    // proxy start).
    std::string owner_prefix;
    // Flush_Age: a directory's entries younger than this wait.
    uint32_t flush_age_ms = 30000;
  };

  // cache, writeback, conflicts, metrics and host outlive this;
  // namespace_wb may be null (the namespace is not written back).
  FlushSender(Cache *cache, WriteBack *writeback,
              NamespaceWriteBack *namespace_wb, Conflicts *conflicts,
              metrics::ExportMetrics *metrics, Host *host, Options opts);
  FlushSender(const FlushSender &) = delete;
  FlushSender &operator=(const FlushSender &) = delete;

  // A Flusher (started) whose sends are these (WRITEs up to the remote's
  // largest, unless opts.max_send says), and whose files found gone at the
  // remote Conflicts saves (Conflicts::SaveLostFile).
  std::unique_ptr<Flusher> NewFlusher(const FlusherOptions &opts);

  // The flusher's first step for key (Flusher::PrepareFn): a local object
  // is created remotely; a directory with entries younger than the flush
  // age waits (Flusher::kNotYet) when patient; a file changed at the
  // remote is checked for a conflict.
  uint32_t Prepare(Key key, bool patient);
  // One dirty range upstream (Flusher::SendFn).
  uint32_t SendRange(Key key, uint64_t offset, const std::string &data,
                     upstream::StableHow stable, Flusher::Sent *sent);
  // The file's COMMIT (Flusher::CommitFn).
  uint32_t Commit(Key key, upstream::Verifier *verf, Attrs *after);
  // The attributes set locally (Flusher::SetattrFn).
  uint32_t Setattr(Key key, const Attrs &set, Attrs *after);

  // Writes [offset, offset+len) to fh with the stability asked, in WRITEs
  // no bigger than the server takes; *sent (unless null): what the server
  // said (the attributes after the last WRITE are fetched only then).
  uint32_t WriteRange(const Creds &cr, const upstream::Fh &fh,
                      const upstream::StateId &sid, uint64_t offset,
                      const char *data, size_t len, upstream::StableHow stable,
                      const char *tag, Flusher::Sent *sent);
  // Creates objs in directory pfh at the remote as cr: a regular file
  // with the ops its `more` adds after its GETFH, then a GETATTR, and
  // closed; a directory or symlink by CREATE, then a GETATTR. NFSv4.1: as
  // many in one COMPOUND as the session and one WRITE take, a file's CLOSE
  // in it too, one flush open-owner per COMPOUND; an object whose COMPOUND
  // stopped before it is not reached (its status DELAY). NFSv4.0: a
  // COMPOUND per object, a file's open confirmed when asked and closed in
  // another. A few COMPOUNDs at once. (*out)[i]: objs[i]'s.
  void CreateObjects(const Creds &cr, const upstream::Fh &pfh,
                     const std::vector<NewObject> &objs,
                     std::vector<NewObjectResult> *out);
  // One file of CreateObjects, with the flush open-owner chosen by key
  // (the object the file is for): *rep its operations' results, their
  // status telling whether the ops after the OPEN went through; *fh: the
  // file's handle; *deleg: a delegation the OPEN brought (for the
  // caller's NoteGrant). Returns the OPEN's status.
  uint32_t CreateClosedFile(
      const Creds &cr, const upstream::Fh &pfh, const std::string &name,
      upstream::OpenArgs::Create how, const Attrs &ca, Key key,
      const std::function<void(upstream::Compound *)> &more,
      upstream::CompoundReply *rep, upstream::Fh *fh,
      upstream::Delegation *deleg);
  // A send refused by the remote for the permissions of the caller it is
  // sent as (ACCESS, PERM): counted and logged, naming op, the object and
  // the uid. Other statuses: nothing.
  void NoteRefused(const char *op, Key key, const Creds &cr, uint32_t st);

 private:
  // Whether st is the remote's refusal of set, only times, on a directory:
  // given up (the remote's times stand), never retried.
  bool RefusedDirectoryTimes(Key key, const Attrs &set, uint32_t st);
  // CreateObjects' two ways: NFSv4.0's one object; NFSv4.1's COMPOUND
  // of files [first, end).
  NewObjectResult CreateObject40(const Creds &cr, const upstream::Fh &pfh,
                                 const NewObject &f);
  void CreateObjects41(const Creds &cr, const upstream::Fh &pfh,
                       const std::vector<NewObject> &files, size_t first,
                       size_t end, std::vector<NewObjectResult> *out);
  // A flush open-owner's name and seqids start afresh with a new client
  // id.
  void NameFlushOwner(OwnerSlot *owner) REQUIRES(owner->mu);
  // The OPEN that creates f for owner.
  static upstream::OpenArgs CreateArgs(OwnerSlot *owner, const NewObject &f)
      REQUIRES(owner->mu);

  Cache *const cache_;
  WriteBack *const writeback_;
  NamespaceWriteBack *const namespace_;  // null: namespace not written back
  Conflicts *const conflicts_;
  metrics::ExportMetrics *const metrics_;
  Host *const host_;
  const Options opts_;
};

}  // namespace nache
