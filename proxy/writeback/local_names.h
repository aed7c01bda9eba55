// The names a write-back export created locally and has not yet created at
// the remote (issue: write-back, metadata on single-writer exports).
//
// Each such object has a key (and attributes in the cache) at once, and a
// kCreate record in the OpLog; its remote filehandle comes when the flusher
// sends that record. Until then this index answers "which local object is
// `name` in `dir`", "is key local only" and "what does dir hold that the
// remote does not": lookups, listings and removes of these names never go
// upstream. It also holds the removes of objects the remote has that are
// logged and not yet sent ("whiteouts": the remote still lists those
// names). It is rebuilt from the log at start-up, so it says exactly what
// the durable log says.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/mutex.h"
#include "writeback/oplog.h"

namespace nache {

class LocalNames {
 public:
  struct Entry {
    uint64_t seq = 0;  // its kCreate (or kRename) record in the log
    Key dir = kNoKey;
    std::string name;
    Key key = kNoKey;
    upstream::FileType type = upstream::FileType::kNone;
    std::string text;        // a symlink's target
    int64_t created_at = 0;  // wall-clock seconds when logged
    // An object the remote has, renamed here to (dir, name) and not there
    // yet (a kRename record; its old name is a moved Removed).
    bool moved = false;
  };

  // A remove of an object the remote has, logged and not yet sent: until
  // then the remote still lists the name, and this "whiteout" hides it.
  struct Removed {
    uint64_t seq = 0;  // its kRemove record in the log
    Key dir = kNoKey;
    std::string name;
    Key key = kNoKey;  // the object removed
    // The old name of a moved object (the kRename record's seq): the
    // object lives on under its new name, so its handle stays valid.
    bool moved = false;
  };

  // The kCreate, kRemove and kRename records of log (one pass over it).
  void Load(OpLog *log);

  void Add(const Entry &e);
  // Forgets key (created at the remote, or removed before it was).
  void Erase(Key key);
  // key's create record is now seq, under (dir, name) (a local rename).
  void Move(Key key, uint64_t seq, Key dir, const std::string &name);

  bool Find(Key dir, const std::string &name, Entry *out) const;
  bool Get(Key key, Entry *out) const;
  // Whether key was created here and is not at the remote yet (a moved
  // object is at the remote).
  bool IsLocal(Key key) const;
  // The local entries of dir, in creation (log) order.
  std::vector<Entry> Children(Key dir) const;
  // The highest create seq among dir's local entries; 0 when none.
  uint64_t LastChildSeq(Key dir) const;
  // When the newest of dir's local entries was logged; 0 when none.
  int64_t NewestChildTime(Key dir) const;
  // The moved directories whose kRename record is older than seq, in log
  // order (their RENAMEs must reach the remote in that order: sent out of
  // it, two could make a cycle there).
  std::vector<Entry> MovedDirsBefore(uint64_t seq) const;
  size_t size() const;

  void AddRemoved(const Removed &r);
  void EraseRemoved(uint64_t seq);
  // The unsent remove of (dir, name), if any (at most one: the name can
  // only be created again locally, and a local create is sent after it).
  bool FindRemoved(Key dir, const std::string &name, Removed *out) const;
  // Whether key was removed here and the remote does not know yet.
  bool IsRemovedKey(Key key) const;
  // dir's unsent removes, in log order.
  std::vector<Removed> RemovedIn(Key dir) const;
  // The directories with unsent removes.
  std::vector<Key> DirsWithRemoved() const;
  // The directory with local entries whose own name (as handles records
  // it) is (parent, name); kNoKey when none.
  Key DirNamed(Key parent, const std::string &name,
               const HandleMap &handles) const;

 private:
  using NameKey = std::pair<Key, std::string>;
  // Every method takes mu_ itself, and calls no other method.
  mutable Mutex mu_{"local_names"};
  std::unordered_map<Key, Entry> by_key_ GUARDED_BY(mu_);
  std::map<NameKey, Key> by_name_ GUARDED_BY(mu_);
  // dir -> (seq -> key): children in log order.
  std::unordered_map<Key, std::map<uint64_t, Key>> children_ GUARDED_BY(mu_);
  // Whiteouts by name.
  std::map<NameKey, Removed> removed_ GUARDED_BY(mu_);
  // object -> seq
  std::unordered_map<Key, uint64_t> removed_keys_ GUARDED_BY(mu_);
  std::map<uint64_t, NameKey> removed_seqs_ GUARDED_BY(mu_);  // seq -> name
};

}  // namespace nache
