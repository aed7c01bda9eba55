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
// Thread safety: all methods are thread-safe. Writes are not synced: a
// daemon crash keeps them (the WAL is in the OS), a power loss may lose the
// newest keys, whose clients then see ESTALE.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "store/store.h"
#include "upstream/types.h"

namespace nache {

using Key = uint64_t;
constexpr Key kNoKey = 0;

struct HandleRecord {
  upstream::Fh fh;   // the remote filehandle
  Key parent = kNoKey;  // a directory containing it (kNoKey for the root)
  std::string name;  // its name in parent
};

class HandleMap {
 public:
  explicit HandleMap(Store *store);

  // Returns the key of fh, creating one if it is new. Records (parent, name)
  // as the object's current name when given (parent != kNoKey).
  Key Intern(const upstream::Fh &fh, Key parent, const std::string &name);

  // Looks up a key; false if unknown.
  bool Get(Key key, HandleRecord *out) const;

  // Records that the object now lives at (parent, name) (after RENAME).
  void SetName(Key key, Key parent, const std::string &name);

  // Key for fh if known, else kNoKey.
  Key Find(const upstream::Fh &fh) const;

  // The key of a named, persistent slot (e.g. an export's root), created
  // with an empty filehandle if new: the object gets its stable key before
  // its remote handle is known.
  Key NamedKey(const std::string &slot);
  // A new key for an object created locally (write-back) at (parent,
  // name), with no remote filehandle until the create is flushed.
  Key NewLocal(Key parent, const std::string &name);
  // Records the remote filehandle of key (resolving a NamedKey or a
  // NewLocal key).
  void SetFh(Key key, const upstream::Fh &fh);

  // Encoding of records, exposed for tests.
  static std::string EncodeRecord(const HandleRecord &r);
  static bool DecodeRecord(const std::string &s, HandleRecord *r);

 private:
  Key AllocateKey();

  Store *store_;                 // not owned; outlives this map
  std::mutex alloc_mu_;          // guards next_key_/reserved_ and Intern races
  Key next_key_ = 1;             // next key to hand out
  Key reserved_ = 0;             // keys below this are reserved on disk
};

}  // namespace nache
