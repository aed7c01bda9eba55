// The cache of remote objects: attributes, access results, directory
// listings and file data blocks, validated by the remote change attribute.
//
// Persistent part (RocksDB, the export's store, three column families):
//   attrs      key            -> {data generation, attributes when the
//                                 change attribute last moved}
//   block_meta key|block      -> {generation, change, length, dirty, and
//                                 for a dirty block its dirty range and
//                                 epoch}
//   blocks     key|block      -> the block's bytes
// Attributes, access results and listings also live in memory, with the
// time they were last validated; that time is never persisted, so after a
// restart every object is revalidated (one GETATTR) before its cached data
// is served.
//
// Consistency. A file's cached blocks belong to a data generation. Whenever
// the file's change attribute is seen to move for a reason that is not one
// of our own writes, the generation advances and the file's blocks are
// deleted (in the same RocksDB batch that records the new attributes). Our
// own writes and setattrs fetch the change attribute just before and just
// after the operation in one COMPOUND: if "before" equals the cached change
// or the "after" of another of our own recent operations (clients send
// WRITEs in parallel), or, while the remote's change attributes grow, lies
// among the changes our operations in flight together moved through (a
// WRITE the server held back behind many of ours finds its "before" there),
// nothing else happened in between and the cache stays valid, with the
// written bytes applied; otherwise the generation advances. Attributes
// fetched while ours are in flight (a client's GETATTR crossing them) are
// judged the same way once ours are back, not taken for a foreign change
// at once; a reply showing a state of ours the cache has moved past is no
// news.
// Like any NFS client, a foreign write landing between our "before" and our
// own operation goes unseen until the next change. A block read
// from upstream is stored only if its generation is still current.
//
// Size bound: the sum of block lengths stays at or below the configured
// size; the least recently used clean blocks are evicted first. Dirty
// blocks are never evicted, nor are pinned ones (below).
//
// Memory bound: at most max_objects objects are kept in memory (beyond it
// only while every older one is in use); the least recently used are
// dropped from memory, not from the store. Never dropped: a dirty object
// (its dirty state lives only in memory besides the store's records), one
// with our own operations in flight or parked (BeginOwnChange ..
// AfterOwnChange), a delegated one. The block index is not part of an
// object: an object dropped keeps its cached blocks. Before an object is
// dropped its attrs record is brought up to date (written when it differs
// from what the store holds), so that the object loaded again from it has
// the same generation, attributes and base: a fetch that took Generation()
// before the drop stores its block after the reload exactly when it would
// have without the drop (every change that moves the generation goes
// through the object in memory, loading it first). What lives only in
// memory is lost with it, and costs one revalidation: the validated time,
// access results, the listing, our recent change attributes, and the
// listing hints (unlistable, cookie verifier).
//
// Pins (nachectl pin): objects whose cached blocks the size bound never
// evicts. A pin names the object pinned (its root) and every object of its
// subtree when it was made, with the size each regular file takes cached
// whole; objects added under the root later are not pinned by it. Pins are
// persisted in the store's kMeta family, one record per pin under
// "pin/<root key, big-endian>", synced when made or removed, and loaded
// before the block index (whose load may evict). Pinned blocks still count
// against the size bound; the core refuses pins beyond a share of it.
//
// Records of objects gone (ForgetGone: the remote said the object is gone)
// are deleted with their blocks; the handle map's records are the core's
// to delete (handle_map.h).
//
// Write-back (proxy/writeback/DESIGN.md): a local write goes into the
// blocks, marked dirty with the byte range written and a dirty epoch, and
// into the object's attributes, in one batch synced to disk. An object with
// dirty blocks is locally authoritative: its attributes are always fresh
// and attributes from the remote never drop its data, until the flusher has
// sent every dirty range (Flushed).
//
// Thread safety: all methods are thread-safe. One mutex guards the
// in-memory index; block bytes are read from RocksDB outside it. A second,
// listed_mu_, guards only when each directory was last listed
// (ListingDue); neither is held while the other is taken, and both are
// leaves of the core's lock order (core.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "handles/handle_map.h"
#include "store/store.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {
namespace metrics {
class ExportMetrics;
}

struct CacheOptions {
  uint64_t size_bytes = 4ull << 30;  // bound on cached block bytes
  uint32_t block_size = 256 << 10;   // bytes per data block
  uint32_t attr_timeout_ms = 3000;   // attribute window
  // Objects kept in memory (0: derived from size_bytes, DefaultMaxObjects).
  uint64_t max_objects = 0;
};

// The in-memory object bound used when CacheOptions::max_objects is 0: one
// object per 32 KiB of Cache_Size, at least 10,000 and at most 1,000,000
// (about 600 bytes each).
uint64_t DefaultMaxObjects(uint64_t size_bytes);

// A cached directory entry (a complete listing is a vector of these).
struct CachedDirent {
  std::string name;
  Key key = kNoKey;
  uint64_t cookie = 0;  // the upstream cookie after this entry
};

class Cache {
 public:
  using Clock = std::chrono::steady_clock;
  using Attrs = upstream::Attrs;

  // Loads the block index from store (which must outlive the cache).
  Cache(Store *store, const CacheOptions &opts,
        metrics::ExportMetrics *metrics);
  ~Cache();

  const CacheOptions &options() const { return opts_; }

  // --- attributes -------------------------------------------------------
  // The attributes of key if they were validated within the attribute
  // window (counts a hit or a miss).
  bool FreshAttrs(Key key, Attrs *out);
  // The last known attributes of key, however old (false if none).
  bool KnownAttrs(Key key, Attrs *out);
  // The attributes of key if the remote gave them at or after since
  // (false if not, or expired since).
  bool ValidatedSince(Key key, Clock::time_point since, Attrs *out);
  // Attributes just fetched from the upstream. A moved change attribute
  // drops the object's data, access results and listing; but not one our
  // own operations explain: a change one of ours produced or moved on from
  // (a reply overtaken by ours: no news, ignored), or one seen while ours
  // are in flight, judged once they are back (someone else's then when
  // none of them explains it, as AfterOwnChange judges a "before").
  void Validated(Key key, const Attrs &a);
  // After an operation of ours changed the object: pre is the change
  // attribute fetched in the same COMPOUND just before the operation
  // (have_pre false when there was none). When the operation is known to be
  // ours alone (pre equals the cached change, or see OursLocked), the cached
  // data stays valid and the written bytes [off, off+len) (len 0 for none)
  // are applied to it; otherwise as Validated(post).
  // Every AfterOwnChange (or Forget) is preceded by a BeginOwnChange when
  // the operation is sent, so that parallel operations can vouch for each
  // other.
  void BeginOwnChange(Key key);
  void AfterOwnChange(Key key, bool have_pre, uint64_t pre, const Attrs &post,
                      uint64_t off = 0, const char *buf = nullptr,
                      size_t len = 0);
  // The next attribute request goes upstream (e.g. a directory an entry
  // was added to).
  void ExpireAttrs(Key key);
  // An operation of ours moved key's change attribute at the remote
  // without our seeing the result (a RENAME or LINK of it changes its
  // ctime): the next flush of its changes must not take that for someone
  // else's write. Its base becomes uncertain (now if it is dirty, or once
  // it becomes dirty unless the remote's attributes are seen before) and
  // its attributes are revalidated.
  void OwnChangeUnseen(Key key);
  // The object is gone (or its cached state is not trusted): drops it all.
  void Forget(Key key);
  // The remote said key is gone (removed, its handle stale): drops it all,
  // its store records included, unless it is dirty (its data is ours to
  // save) or in use (operations in flight, delegated): then false, and
  // nothing is dropped.
  bool ForgetGone(Key key);
  // Forget, unless key's change attribute is no longer change (a local
  // write since): then false, and nothing is dropped.
  bool ForgetIfUnchanged(Key key, uint64_t change);

  // --- delegations ------------------------------------------------------
  // While key is delegated to us upstream, its validated attributes (and so
  // its access results and data) stay fresh past the attribute window, as
  // long as the lease clock says our lease holds: a delegation outlives the
  // lease by nothing. ExpireAttrs still forces one revalidation.
  void SetDelegated(Key key, bool delegated);
  // Until when the upstream lease is known to hold (set once, before use;
  // without it delegations give no freshness).
  void SetLeaseClock(std::function<Clock::time_point()> lease_valid_until);
  // While stale_ok() says so (the remote is unreachable and the admin
  // chose to serve stale data then), every known object counts as fresh.
  // Set once, before use.
  void SetStaleOk(std::function<bool()> stale_ok);

  // --- access -----------------------------------------------------------
  // ACCESS answered locally: this identity asked the remote for (at least)
  // these bits before, the object's attributes are fresh, and they are the
  // ones the answer came with (a new change attribute, mode or owner
  // clears every answer). Without a delegation vouching for the object an
  // answer is trusted for kAccessTrust at most, however fresh the object.
  static constexpr std::chrono::seconds kAccessTrust{60};
  bool CachedAccess(Key key, uint64_t who, uint32_t want, uint32_t *allowed);
  void NoteAccess(Key key, uint64_t who, uint32_t asked, uint32_t allowed);

  // --- directory listings -----------------------------------------------
  // Every change of ours to dir's names (local edits, our own creates,
  // removes and renames at the remote) moves its listing epoch. A listing
  // read from the remote is recorded only if the epoch taken before its
  // READDIR was sent has not moved: a READDIR that crossed one of our
  // changes may lack a name we just created there (and a single-writer
  // export answers lookups of names a fresh listing lacks with NOENT).
  uint64_t ListingEpoch(Key dir);
  // Records a complete listing of dir read under change attribute change,
  // unless dir's listing epoch is no longer epoch.
  void PutListing(Key dir, uint64_t change, std::vector<CachedDirent> list,
                  uint64_t epoch);
  // Our namespace change reached the remote (a create, remove or rename
  // logged here and sent by write-back): removed (when not empty) leaves
  // dir's cached listing, added (when not empty) is in it as added_key;
  // the listing epoch moves.
  void NoteNameSent(Key dir, const std::string &removed,
                    const std::string &added, Key added_key);
  // The listing of dir, if one was recorded under the directory's current
  // (fresh) change attribute. for_readdir: only a listing read from the
  // remote (whose cookies are the server's), not one we edited.
  std::shared_ptr<const std::vector<CachedDirent>> Listing(
      Key dir, bool for_readdir = false);
  // Our own change to directory dir: the server's atomic change_info
  // (before, after) and dir's attributes after it (post, may lack the
  // change when not fetched). When the listing was current at "before",
  // it stays usable for lookups with the edit applied (remove `removed`,
  // add `added` as `added_key`; empty names: none); otherwise as
  // Validated(post), or the attributes expire. sole_writer (a
  // single-writer export): nothing else changes the directory, so the
  // edit applies whatever the change_info says.
  void OwnDirChange(Key dir, const upstream::ChangeInfo &ci, const Attrs &post,
                    const std::string &removed, const std::string &added,
                    Key added_key, bool sole_writer = false);

  // Hints about a directory's listing, in memory with the object only
  // (lost when it is dropped from memory or forgotten: then learnt again).
  // Unlistable: its listing is too big to cache, or not readable; lookups
  // ask name by name.
  void SetUnlistable(Key dir);
  bool Unlistable(Key dir);
  // The remote's cookie verifier of dir's listing (8 zero bytes when none
  // is known).
  void SetCookieVerf(Key dir, const upstream::Verifier &v);
  upstream::Verifier CookieVerf(Key dir);
  // Whether dir's listing is due to be read: not read (by this call's
  // say-so) within window. When due, notes it read now. The times are kept
  // apart from the objects (an object dropped from memory keeps its time),
  // pruned of those older than the window beyond 4096 directories.
  bool ListingDue(Key dir, Clock::duration window) EXCLUDES(listed_mu_);

  // --- data ---------------------------------------------------------------
  uint32_t block_size() const { return opts_.block_size; }
  // The current data generation of key (to pass to PutBlock).
  uint64_t Generation(Key key);
  // Copies block idx of key into *data if it is cached under the current
  // generation and complete for the file's known size. Counts hit/miss.
  bool GetBlock(Key key, uint64_t idx, std::string *data);
  // Whether GetBlock would hit (no data read, nothing counted).
  bool HasBlock(Key key, uint64_t idx);
  // Stores a block read from upstream under gen (ignored when the
  // generation moved meanwhile, or when the block is dirty); evicts to stay
  // within the bound.
  bool PutBlock(Key key, uint64_t idx, uint64_t gen, const std::string &data);

  // --- write-back -------------------------------------------------------
  // Applies a local write of [off, off+len) to key (which must have known
  // attributes): into its blocks, marked dirty, and its attributes (size,
  // mtime and ctime now, change bumped), synced to disk before the client
  // is answered (Store::WriteBeforeReply: at once, or by the call's
  // ReplySync after this returns and the cache's lock is free).
  // A block the write covers only in part, and which holds remote data
  // (below the remote's size), must be cached: otherwise returns false
  // with *need set to its index, and changes nothing. Extending the file
  // zero-fills the rest of its old last block (which then counts as
  // written). Bytes the write puts back as the cache holds them are not
  // dirtied, so never re-sent (*unchanged: how many; a write changing
  // nothing at all leaves only the mtime to flush).
  bool LocalWrite(Key key, uint64_t off, const char *buf, size_t len,
                  uint64_t *need, uint64_t *unchanged = nullptr);
  // Whether block idx of a dirty file is not cached and lies wholly beyond
  // the remote's data (a hole our writes made: it reads as zeros).
  bool ReadsAsZeros(Key key, uint64_t idx);
  bool IsDirty(Key key);
  struct DirtyRange {
    uint64_t idx = 0;         // block
    uint32_t lo = 0, hi = 0;  // bytes [lo, hi) of the block
    uint64_t epoch = 0;       // the block's dirty epoch when read
    std::string data;         // those bytes
  };
  // Dirty files whose oldest unflushed write is at least min_age old
  // (oldest first, at most max).
  std::vector<Key> DirtyFiles(std::chrono::milliseconds min_age, size_t max);
  // Key's dirty ranges with their bytes, in block order.
  std::vector<DirtyRange> DirtyRanges(Key key);
  // Sets attributes locally (mode, owner, group, atime, mtime of set.mask;
  // no size), synced like a local write; the flush sends them after the
  // data. False when key's attributes are unknown or the store failed.
  bool LocalSetattr(Key key, const Attrs &set);
  // An object created locally (write-back on a single-writer export) with
  // attributes a: they are ours alone until its create is flushed, so the
  // object is dirty from the start (the flusher creates it remotely, then
  // sends its data and its mtime). Not synced: the caller's log append is.
  bool LocalCreate(Key key, const Attrs &a);
  // A name was added to (added_key) or removed from directory dir locally:
  // its cached listing is edited, its mtime and change move, and it is
  // dirty until the flusher sets that mtime at the remote. False when dir's
  // attributes are unknown.
  bool LocalDirEdit(Key dir, const std::string &removed,
                    const std::string &added, Key added_key);
  // The attributes set locally and not flushed (set->mask says which; it
  // may be empty for an object created locally), and the epoch to pass to
  // Flushed. False when there are none.
  bool PendingSetattr(Key key, Attrs *set, uint64_t *epoch);
  // The flusher sent these ranges (and, when set_epoch is not 0, the
  // pending attributes of that epoch), and the remote's attributes after
  // them are `after`: each range whose block was not written again
  // meanwhile is clean, the attributes too unless set again; once nothing
  // is dirty the object follows the remote again (from `after`, which then
  // must show the size we had); while still dirty, `after` (when it has a
  // change attribute: pass none after a failed send) is its new base.
  void Flushed(Key key, const std::vector<DirtyRange> &sent, uint64_t set_epoch,
               const Attrs &after);
  // Conflict detection (a change at the remote since our changes began):
  // the remote state a dirty object's changes are based on, its change
  // attribute and size when it became dirty or after our last complete
  // flush. uncertain: a flush of it began and never completed (a crash, a
  // lost reply), so the remote may hold part of our writes under a change
  // attribute we never saw. has_data: it has dirty blocks (not only
  // attributes). False when key is not dirty or was created here.
  struct DirtyBase {
    uint64_t change = 0;
    uint64_t size = 0;
    bool uncertain = false;
    bool has_data = false;
  };
  bool GetDirtyBase(Key key, DirtyBase *out);
  // A flush of key is about to send: its base is uncertain until Flushed
  // reports the remote's attributes after it. Persisted unsynced: a daemon
  // crash keeps it; after a power loss the old base may come back, and a
  // flush cut off by the loss then counts as a conflict (nothing is lost:
  // our version is kept beside the remote's).
  void FlushBegins(Key key);
  uint64_t dirty_bytes() const;  // sum of dirty ranges
  // Objects with changes not yet flushed (what DirtyFiles would list).
  size_t dirty_files() const;
  // Age of the oldest unflushed write (zero when nothing is dirty).
  std::chrono::milliseconds flush_lag() const;

  // --- pins (nachectl pin, unpin, evict) ----------------------------------
  struct PinnedObject {
    Key key = kNoKey;
    uint64_t size = 0;  // bytes it takes cached whole (0: not a file)
  };
  struct Pin {
    Key root = kNoKey;
    std::string path;                   // as the administrator named it
    std::vector<PinnedObject> objects;  // root included
  };
  // Records pin (replacing one of the same root), synced; false when the
  // store refused it (nothing changes then).
  bool AddPin(const Pin &pin);
  // Removes root's pin; false when there is none (or the store refused).
  bool RemovePin(Key root);
  struct PinSummary {
    Key root = kNoKey;
    std::string path;
    uint64_t objects = 0;
    uint64_t size = 0;  // of its objects, each once
  };
  std::vector<PinSummary> PinList() const;
  // root's pin; false when there is none.
  bool GetPin(Key root, Pin *out) const;
  // Whether a pin holds key; *root (unless null): the first such pin's.
  bool Pinned(Key key, Key *root = nullptr) const;
  struct PinTotals {
    uint64_t pins = 0;
    uint64_t objects = 0;  // distinct objects pinned
    uint64_t size = 0;     // their sizes, each object once
    uint64_t cached = 0;   // bytes of their blocks cached now
  };
  PinTotals pin_totals() const;
  // The sizes of these objects not pinned yet (each once): what a new
  // pin of them would add to pin_totals().size.
  uint64_t UnpinnedSize(const std::vector<PinnedObject> &objects) const;

  // What Evict did with one object.
  enum class EvictOutcome { kEvicted, kDirty, kInUse, kPinned };
  // Drops key's cached blocks and attributes, in memory and in the store
  // (its handle stays: clients keep using it, and it is revalidated at
  // its next use), unless it is pinned, dirty, or in use (operations of
  // ours in flight, delegated). *freed: the bytes of blocks dropped.
  EvictOutcome Evict(Key key, uint64_t *freed);
  // The objects the cache holds anything of (blocks, or an attrs record):
  // what an evict of a subtree looks through.
  std::vector<Key> CachedKeys() const;
  // Bytes of key's unflushed writes (0: clean), and whether it is dirty.
  bool DirtyOf(Key key, uint64_t *bytes) const;

  // --- accounting -------------------------------------------------------
  uint64_t bytes() const;      // sum of cached block lengths
  uint64_t blocks() const;     // number of cached blocks
  uint64_t evictions() const;  // blocks evicted since start
  size_t objects() const;      // objects with cached state in memory
  uint64_t max_objects() const { return max_objects_; }
  uint64_t object_evictions() const;  // objects dropped from memory

  // Stable identity of a credential for the access cache.
  static uint64_t CredId(const upstream::Creds &cr);

 private:
  struct BlockId {
    Key key;
    uint64_t idx;
    bool operator<(const BlockId &o) const {
      return key < o.key || (key == o.key && idx < o.idx);
    }
  };
  struct BlockInfo {
    uint32_t len = 0;
    uint64_t gen = 0;
    bool dirty = false;
    uint32_t dirty_lo = 0, dirty_hi = 0;  // dirty bytes (when dirty)
    uint64_t dirty_epoch = 0;          // a new stamp at every local write of it
    std::list<BlockId>::iterator lru;  // position in lru_ (clean or dirty)
  };
  // The block index: every cached block of every file, by file then block
  // (independent of the objects in memory).
  using BlockIndex = std::map<BlockId, BlockInfo>;
  struct AccessEntry {
    uint64_t who;
    uint32_t asked;
    uint32_t allowed;
    std::chrono::steady_clock::time_point when;  // when the remote answered
  };
  struct Object {
    bool have_attrs = false;
    bool delegated = false;  // an upstream delegation covers the object
    int dirty_blocks = 0;    // blocks with unflushed local writes
    uint64_t set_mask = 0;   // attributes set locally, not flushed
    uint64_t set_epoch = 0;  // a new stamp at every local attribute change
    Clock::time_point dirty_since{};  // oldest unflushed write
    // The remote's state. While dirty: the base our changes are on, its
    // size and change attribute when the object became dirty, moved only
    // by our own complete flushes and our own operations that started from
    // it (base_known; not for objects created here), and whether a flush
    // or an operation of ours was cut off, so that the remote may hold
    // part of our changes under a change attribute we never saw
    // (base_uncertain). While clean: the last state seen at the remote, so
    // that the base of the next local change is the remote's, never our
    // own view (which runs ahead of the remote's after a flush whose
    // attributes do not match ours).
    uint64_t remote_size = 0;
    uint64_t remote_change = 0;
    bool base_known = false;
    bool base_uncertain = false;
    // Between FlushBegins and Flushed (in memory: a flush dies with the
    // process), and whether OwnChangeUnseen came meanwhile.
    bool flushing = false;
    bool unseen_while_flushing = false;
    Attrs attrs;
    Clock::time_point validated{};  // epoch: never (not persisted)
    uint64_t gen = 0;
    std::vector<AccessEntry> access;
    // Change attributes our own recent writes and setattrs produced: a
    // concurrent write of ours may see one of them as its "before".
    std::vector<uint64_t> own_changes;
    // The spans (before, after] of our operations taken as ours while
    // others of ours are in flight (cleared once none is). Everything the
    // server did between one's "before" and "after" is taken as ours (the
    // GETATTRs around a WRITE are not atomic with it), so a concurrent
    // completion whose "before" or "after" lies inside one of them is ours
    // too (OursLocked).
    struct Span {
      uint64_t before, after;
    };
    std::vector<Span> own_spans;
    // While the remote's change attributes are seen to grow: every change
    // our operations moved through, as sorted, disjoint, closed intervals
    // [from, to] (the state one of ours started from up to where it left
    // the object, and the cached state the first of a run of ours in
    // flight together started from: own_floor). A completion whose
    // "before" lies in one at or above own_floor is ours, however many of
    // ours ran since: a WRITE the server held back while dozens of ours
    // went through (knfsd takes one WRITE of a file at a time) still finds
    // its "before". Below own_floor they only tell a late reply from news
    // (Validated). At most kMaxOwnRanges (the lowest go); forgotten with
    // the other own changes.
    std::vector<std::pair<uint64_t, uint64_t>> own_ranges;
    uint64_t own_floor = 0;
    int own_inflight = 0;  // our operations between Begin and After
    // Completions whose "before" is not known yet but may be the "after"
    // of one of ours still in flight; and changes a GETATTR saw while ours
    // were in flight (seen: pre == post.change, nothing to apply), which
    // one of ours may yet explain.
    struct Parked {
      uint64_t pre;
      Attrs post;
      uint64_t off;
      std::string data;
      bool seen = false;
    };
    std::vector<Parked> parked;
    // Blocks our own writes have written part of, not cached: pieces of
    // one large write (or of writes one after another) whose replies came
    // out of order, so that none covered its block up to the file's end
    // alone. By block index: the bytes written so far and the ranges they
    // cover (relative to the block, sorted, merged). A block is built once
    // its ranges cover it up to the file's end. Valid while the file is
    // ours alone: dropped with the data (DropData), by a local change
    // (LocalWrite) and when a block is stored for its index; at most
    // kMaxAssemblies over all objects (assembly_fifo_, oldest first).
    struct Assembly {
      std::string data;
      std::vector<std::pair<uint64_t, uint64_t>> have;  // [from, to)
      std::list<BlockId>::iterator fifo;                // in assembly_fifo_
    };
    std::map<uint64_t, Assembly> assembling;
    uint64_t listing_change = 0;
    bool listing_edited = false;  // names only; cookies not the server's
    uint64_t listing_epoch = 0;   // a new stamp at each change of ours
    std::shared_ptr<const std::vector<CachedDirent>> listing;
    bool unlistable = false;   // SetUnlistable (in memory only)
    uint64_t cookie_verf = 0;  // SetCookieVerf's 8 bytes (in memory only)
    // What the store's attrs record holds (RecordHash of its encoding, of
    // a default object when there is none; 0: not known, e.g. its last
    // write failed): an object dropped from memory is written first
    // unless its state hashes to this.
    uint64_t record_hash = 0;
    std::list<Key>::iterator lru;  // position in object_lru_
  };

  // Attributes LocalSetattr keeps (the rest go to the remote first).
  static constexpr uint64_t kLocalSetattrMask =
      upstream::kAttrMode | upstream::kAttrOwner | upstream::kAttrOwnerGroup |
      upstream::kAttrAtime | upstream::kAttrMtime;
  // In set_mask: the object was created locally and its flush is due
  // (no attribute bit; cleared by Flushed like the others).
  static constexpr uint64_t kSetCreated = 1ull << 63;
  static bool IsDirtyObj(const Object &o) {
    return o.dirty_blocks > 0 || o.set_mask != 0;
  }
  // Whether o may be dropped from memory (see the file comment).
  // Changes seen by GETATTRs while ours are in flight, parked at most.
  static constexpr size_t kMaxSeen = 16;
  static constexpr size_t kMaxOwnRanges = 256;
  static bool MayDrop(const Object &o) {
    return !IsDirtyObj(o) && o.own_inflight == 0 && o.parked.empty() &&
           !o.delegated;
  }
  // The attrs record of o, encoded, and the hash record_hash keeps of one.
  static std::string EncodeRecord(const Object &o);
  static uint64_t RecordHash(const std::string &encoded);
  // mu_ held; on leaving, the objects in memory are brought back within
  // the bound (TrimObjectsLocked). Every method that may load an object
  // takes the lock this way.
  class SCOPED_CAPABILITY Locked {
   public:
    explicit Locked(Cache *c) ACQUIRE(c->mu_) : c_(c) { c_->mu_.Lock(); }
    ~Locked() RELEASE() {
      c_->TrimObjectsLocked();
      c_->mu_.Unlock();
    }

   private:
    Cache *c_;
  };
  // Drops least recently used objects from memory (their records written
  // first when they differ) until at most max_objects_ are left, or a few
  // beyond it when the oldest are in use.
  void TrimObjectsLocked() REQUIRES(mu_);
  // The in-memory object of key if loaded (nullptr if not); counts as a
  // use.
  Object *FindLocked(Key key) REQUIRES(mu_);
  // The first block of key at or after idx in blocks_.
  BlockIndex::iterator BlocksFrom(Key key, uint64_t idx = 0) REQUIRES(mu_) {
    return blocks_.lower_bound(BlockId{key, idx});
  }
  BlockIndex::iterator FindBlock(Key key, uint64_t idx) REQUIRES(mu_) {
    return blocks_.find(BlockId{key, idx});
  }
  // Keeps dirty_ in step with o (after any change of its dirty state).
  void IndexDirtyLocked(Key key, const Object &o) REQUIRES(mu_);
  // The in-memory object of key, loaded from the attrs family if absent.
  Object *Obj(Key key) REQUIRES(mu_);
  bool IsFresh(const Object &o) const;
  // Length of block idx of key (object o) if cached, valid and complete; 0
  // otherwise.
  uint32_t ValidBlockLenLocked(Key key, Object *o, uint64_t idx) REQUIRES(mu_);
  // Advances o's generation and deletes its blocks in batch.
  void DropData(Key key, Object *o, void *batch) REQUIRES(mu_);
  // Puts o's attrs record in batch (and takes it as the store's).
  void PersistAttrs(Key key, Object &o, void *batch) REQUIRES(mu_);
  void ForgetLocked(Key key) REQUIRES(mu_);
  // Writes batch (unsynced); false when the store refused it, after
  // dropping the clean blocks it wrote from the index.
  bool Commit(void *batch) REQUIRES(mu_);
  // Forgets a clean block of the index (its bytes did not reach the store).
  void UncacheCleanLocked(Key key, uint64_t idx) REQUIRES(mu_);
  void EvictLocked() REQUIRES(mu_);
  // Applies our write of [off, off+len) to o's cached blocks, into batch;
  // new_size is the file's size after it (o->attrs still has the size
  // before).
  void ApplyWriteLocked(Key key, Object *o, uint64_t off, const char *buf,
                        size_t len, uint64_t new_size, void *batch)
      REQUIRES(mu_);
  // Adds our written bytes [from, from+len) of block idx (relative to the
  // block) to o's assembly of it; true, with the block in *block, once the
  // assembly covers its first need bytes (the block, or up to the file's
  // end).
  bool AssembleLocked(Key key, Object *o, uint64_t idx, uint64_t from,
                      const char *buf, uint64_t len, uint64_t need,
                      std::string *block) REQUIRES(mu_);
  // Forgets o's assembly of block idx (if any), or all of o's.
  void EraseAssemblyLocked(Object *o, uint64_t idx) REQUIRES(mu_);
  void ClearAssembliesLocked(Object *o) REQUIRES(mu_);
  // Attributes of o (already changed by the caller) set locally: its change
  // moves, the bits of mask are pending for the flusher, and the record is
  // written (synced before the client is answered when sync).
  bool SetLocallyLocked(Key key, Object *o, uint64_t mask, bool sync)
      REQUIRES(mu_);
  // Our change of o's names (a directory): removed leaves its listing,
  // added joins it as added_key (empty names: none); the epoch moves.
  void EditListingLocked(Object *o, const std::string &removed,
                         const std::string &added, Key added_key) REQUIRES(mu_);
  // o becomes dirty: the remote's state as last seen is its base.
  void BaseIsCurrentLocked(Object *o) REQUIRES(mu_);
  // The remote's attributes a were seen: a clean o remembers them (the
  // base of its next local change). True when that changed what o holds.
  bool SeenRemoteLocked(Object *o, const Attrs &a) REQUIRES(mu_);
  // Adds change to o's own_changes (bounded; the oldest goes).
  void NoteOwnChangeLocked(Object *o, uint64_t change) REQUIRES(mu_);
  // Adds [from, to] to o's own_ranges (merging the ones it overlaps).
  static void AddOwnRange(Object *o, uint64_t from, uint64_t to);
  static bool InOwnRanges(const Object &o, uint64_t change);
  // Whether change is in o's own_changes.
  static bool KnownOwnChange(const Object &o, uint64_t change);
  // Whether an operation of ours that went from before to after is known
  // to be ours alone: its "before" is a change we know, or it ran inside
  // the span of one already taken as ours (its "after" is one of theirs,
  // with no assumption on the server's change attributes; or, while they
  // are seen to grow, its "before" lies in own_ranges). Two of ours can
  // interleave at the server so that one's "before" is a state nobody
  // reported: X reads c1 and writes (c2), Y reads c2 and writes (c3), X's
  // closing GETATTR runs last; X says c1 -> c3, Y c2 -> c3.
  bool OursLocked(const Object &o, uint64_t before, uint64_t after) const
      REQUIRES(mu_);
  // Forgets o's own changes and parked completions (after a foreign one).
  void ForgetOwnChangesLocked(Object *o) REQUIRES(mu_);
  // Applies one of our completed operations whose "before" is known.
  void ApplyOwnLocked(Key key, Object *o, uint64_t pre, const Attrs &post,
                      uint64_t off, const char *buf, size_t len, void *batch)
      REQUIRES(mu_);
  bool PutBlockLocked(Key key, Object *o, uint64_t idx, const std::string &data,
                      uint64_t change, bool dirty, void *batch) REQUIRES(mu_);
  // Reads block idx's stored bytes (false when absent or short).
  bool ReadBlockLocked(Key key, const BlockInfo &b, uint64_t idx,
                       std::string *data) REQUIRES(mu_);
  void LoadIndex() EXCLUDES(mu_);
  // Reads the pin records (before the block index: LoadIndex evicts).
  void LoadPins() REQUIRES(mu_);
  // Adds (+1) or removes (-1) pin's objects from pinned_.
  void CountPinLocked(const Pin &pin, int delta) REQUIRES(mu_);
  uint64_t NextStampLocked() REQUIRES(mu_) { return stamp_++; }

  Store *store_;                                    // not owned
  CacheOptions opts_;                               // immutable
  metrics::ExportMetrics *metrics_;                 // may be null; not owned
  std::function<Clock::time_point()> lease_clock_;  // set before use
  std::function<bool()> stale_ok_;                  // set before use
  mutable Mutex mu_{"cache"};
  std::unordered_map<Key, std::unique_ptr<Object>> objects_ GUARDED_BY(mu_);
  // objects_, least recent first
  std::list<Key> object_lru_ GUARDED_BY(mu_);
  uint64_t max_objects_ = 0;  // bound on objects_ (immutable)
  uint64_t object_evictions_ GUARDED_BY(mu_) = 0;  // dropped from memory
  BlockIndex blocks_ GUARDED_BY(mu_);              // every cached block
  std::list<BlockId> lru_ GUARDED_BY(mu_);  // blocks_, least recent first
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t nblocks_ GUARDED_BY(mu_) = 0;
  uint64_t evictions_ GUARDED_BY(mu_) = 0;
  uint64_t dirty_bytes_ GUARDED_BY(mu_) = 0;  // sum of dirty ranges
  // Every object's block assemblies (Object::assembling), oldest first.
  std::list<BlockId> assembly_fifo_ GUARDED_BY(mu_);
  // Cleared for good once an operation of ours saw the remote's change
  // attribute go down: a "before" inside one of our spans then proves
  // nothing (OursLocked).
  bool changes_grow_ GUARDED_BY(mu_) = true;
  // The next stamp: data generations, block dirty epochs and setattr
  // epochs all come from it, so none repeats for any object, ever (a
  // flush that read epoch e can never mistake a later write for its own).
  // Starts above every stamp in the store (LoadIndex).
  uint64_t stamp_ GUARDED_BY(mu_) = 1;
  // Dirty objects and their oldest unflushed change: the flusher and the
  // metrics look here, never through every cached object.
  std::unordered_map<Key, Clock::time_point> dirty_ GUARDED_BY(mu_);
  // Pins by root, and every pinned object with the number of pins that
  // hold it and its size (EvictLocked passes over their blocks).
  std::map<Key, Pin> pins_ GUARDED_BY(mu_);
  struct PinCount {
    int pins = 0;
    uint64_t size = 0;
  };
  std::unordered_map<Key, PinCount> pinned_ GUARDED_BY(mu_);
  // When ListingDue last said each directory's listing was due.
  Mutex listed_mu_{"cache_listed"};
  std::map<Key, Clock::time_point> listed_at_ GUARDED_BY(listed_mu_);
};

}  // namespace nache
