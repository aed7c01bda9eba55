// The persistent map between local handle keys and remote filehandles.
//
// Ganesha's wire handle can carry at most 123 opaque bytes, a remote NFSv4
// filehandle up to 128, so the wire handle holds a short local key instead.
// Every object nache has handed out keeps its key for the life of the store:
// clients continue across a proxy restart without ESTALE.
//
// Besides the remote filehandle, each record keeps one (parent, name) under
// which the object was last seen. NFSv4.0 has no open-by-filehandle
// (CLAIM_FH is 4.1), so an upstream OPEN of an object known only by handle
// needs them.
//
// Records of objects that are gone are removed (Remove), so that the map
// does not grow with every object ever seen. Removing a record turns the
// key into ESTALE for every client that still holds it, which is the right
// answer only for an object gone at the remote, so the core removes one
// only when the remote said so: the remote answered NFS4ERR_STALE for the
// object's filehandle, or our REMOVE took its last link and the remote
// then had no such object or one with no link left, and no open of ours
// keeps it alive (Core::ForgetGone, core.cc). Never a named slot (the
// export root), an object created here and not yet at the remote, or one
// the write-back log still names. Records of objects that live on at the
// remote are kept however old: the map grows with the objects the remote
// has that nache has seen (about 400 bytes each with their attrs record;
// README, "Memory and metadata", says why none is aged out).
//
// Thread safety: all methods are thread-safe. Writes are not synced: a
// daemon crash keeps them (the WAL is in the OS), a power loss may lose the
// newest keys, whose clients then see ESTALE.
//
// A full (or failing) cache disk: a record that cannot be written is kept
// in memory (unsaved_) and written at the next chance, so that objects
// seen meanwhile are still served (a LOOKUP of a new name gets a key
// that works). Lost at a restart before it is written: its clients see
// ESTALE, never another object. For that, a key is handed out only from
// a range reserved on disk; when a new range cannot be reserved, keys
// come from a range of this process's own (kVolatileKeyBit, with a random
// part), never reserved on disk and so never handed out again by a later
// process.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "store/store.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

using Key = uint64_t;
constexpr Key kNoKey = 0;

struct HandleRecord {
  upstream::Fh fh;      // the remote filehandle
  Key parent = kNoKey;  // a directory containing it (kNoKey for the root)
  std::string name;     // its name in parent
};

class HandleMap {
 public:
  explicit HandleMap(Store *store);

  // Returns the key of fh, creating one if it is new. Records (parent, name)
  // as the object's current name when given (parent != kNoKey).
  Key Intern(const upstream::Fh &fh, Key parent, const std::string &name)
      EXCLUDES(alloc_mu_, save_mu_, unsaved_mu_);

  // Looks up a key; false if unknown.
  bool Get(Key key, HandleRecord *out) const EXCLUDES(unsaved_mu_);

  // Records that the object now lives at (parent, name) (after RENAME).
  void SetName(Key key, Key parent, const std::string &name)
      EXCLUDES(save_mu_, unsaved_mu_);

  // Key for fh if known, else kNoKey.
  Key Find(const upstream::Fh &fh) const EXCLUDES(unsaved_mu_);

  // The key of a named, persistent slot (e.g. an export's root), created
  // with an empty filehandle if new: the object gets its stable key before
  // its remote handle is known.
  Key NamedKey(const std::string &slot) EXCLUDES(alloc_mu_);
  // A new key for an object created locally (write-back) at (parent,
  // name), with no remote filehandle until the create is flushed.
  Key NewLocal(Key parent, const std::string &name) EXCLUDES(alloc_mu_);
  // Records the remote filehandle of key (resolving a NamedKey or a
  // NewLocal key).
  void SetFh(Key key, const upstream::Fh &fh) EXCLUDES(save_mu_, unsaved_mu_);
  // Deletes key's record and its filehandle's index entry: the object is
  // gone (see the file comment for who may decide that). Clients holding
  // key get ESTALE from then on; a LOOKUP of a new object with the same
  // filehandle gets a new key.
  void Remove(Key key) EXCLUDES(alloc_mu_, save_mu_, unsaved_mu_);

  // Records kept in memory only, not written yet (a full cache disk).
  size_t Unsaved() const EXCLUDES(unsaved_mu_);

  // Encoding of records, exposed for tests.
  static std::string EncodeRecord(const HandleRecord &r);
  static bool DecodeRecord(const std::string &s, HandleRecord *r);

  // Keys handed out while no range could be reserved on disk have this bit.
  static constexpr Key kVolatileKeyBit = 1ull << 63;

 private:
  Key AllocateKey() REQUIRES(alloc_mu_);
  // Writes r as key's record (and its filehandle's index entry; dropping
  // old_fh's); kept in unsaved_ when the store refuses.
  void Save(Key key, const HandleRecord &r, const upstream::Fh &old_fh)
      EXCLUDES(save_mu_, unsaved_mu_);
  // Writes what unsaved_ holds, as far as the store takes it.
  void SaveUnsaved() REQUIRES(save_mu_) EXCLUDES(unsaved_mu_);
  bool GetUnsaved(Key key, HandleRecord *out) const EXCLUDES(unsaved_mu_);

  Store *store_;  // not owned; outlives this map
  // Lock order: alloc_mu_, save_mu_, unsaved_mu_ (never the other way).
  Mutex alloc_mu_{
      "handles_alloc"};  // also serialises Intern's check-then-add of an fh
  Key next_key_ GUARDED_BY(alloc_mu_) = 1;       // next key to hand out
  Key reserved_ GUARDED_BY(alloc_mu_) = 0;       // keys below: reserved on disk
  Key next_volatile_ GUARDED_BY(alloc_mu_) = 0;  // this process's own range
  // Orders the writes of records (Save, SaveUnsaved), so that an older
  // version never lands over a newer one.
  Mutex save_mu_ ACQUIRED_AFTER(alloc_mu_){"handles_save"};
  mutable Mutex unsaved_mu_ ACQUIRED_AFTER(save_mu_){"handles_unsaved"};
  std::unordered_map<Key, HandleRecord> unsaved_ GUARDED_BY(unsaved_mu_);
  std::unordered_map<upstream::Fh, Key> unsaved_fh_ GUARDED_BY(unsaved_mu_);
};

}  // namespace nache
