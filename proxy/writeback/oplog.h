// The write-back modification log (issue: write-back caching): the durable
// record of every change a write-back export has acknowledged to a client
// and not yet sent upstream, in the export's store (column family wblog).
//
// A record is appended, and synced to disk, before the client is answered;
// so `kill -9` (or a power loss) at any moment loses no acknowledged change.
// "Synced" below means Store::WriteBeforeReply: at once, or, for a client's
// call with a ReplySync open (store/reply_sync.h), at the call's end.
// Records are keyed by a sequence number (big-endian, so iteration order is
// log order) and carry a CRC-32C of their contents. Opening the log scans
// it: the first record that does not decode or fails its checksum ends the
// log, and it and everything after it are discarded with one log line.
// RocksDB's WAL recovery already drops a record torn by a crash (only an
// unacknowledged one can be torn); a bad record inside the log means the
// disk corrupted it, and is logged as such.
//
// This file owns the record format and its durability only: what the
// records mean, in which order they are sent and how they are optimised
// belongs to the flusher.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "handles/handle_map.h"
#include "store/store.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

enum class LogOp : uint8_t {
  kWrite = 1,    // key: file; offset; data
  kSetattr = 2,  // key: object; attrs (mask says which)
  kCreate = 3,   // key: directory; name; key2: the new object; type;
                 // attrs; text: symlink target
  kRemove = 4,   // key: directory; name; key2: the object removed
  kRename = 5,   // key: old directory; name; key2: new directory; name2;
                 // offset: the object (one the remote has); type
  kLink = 6,     // key: the object; key2: directory; name
};

struct LogRecord {
  uint64_t seq = 0;  // assigned by Append
  LogOp op = LogOp::kWrite;
  int64_t logged_at = 0;  // wall-clock seconds when appended (flush age,
                          // conflict file names)
  Key key = kNoKey;
  Key key2 = kNoKey;
  uint64_t offset = 0;
  std::string data;                                     // kWrite
  upstream::Attrs attrs;                                // kSetattr, kCreate
  upstream::FileType type = upstream::FileType::kNone;  // kCreate
  std::string name, name2, text;
  // The caller whose change this is, as whom it is sent upstream (issue 16:
  // a change allowed only through a supplementary group must be sent with
  // that group). Records of the first format have none (has_creds false):
  // they are sent as attrs.uid/attrs.gid with no groups, as before.
  bool has_creds = false;
  upstream::Creds creds;  // at most kMaxGroups groups are kept

  // AUTH_SYS carries at most 16 supplementary groups (the transport sends
  // the first 16): more are never kept.
  static constexpr size_t kMaxGroups = 16;
  void SetCreds(const upstream::Creds &cr) {
    has_creds = true;
    creds = cr;
    if (creds.groups.size() > kMaxGroups) creds.groups.resize(kMaxGroups);
  }
  // As whom the record is sent: its creds, or for a record of the first
  // format its uid and gid (kept in attrs) without groups.
  upstream::Creds SendCreds() const {
    if (has_creds) return creds;
    upstream::Creds cr;
    cr.uid = attrs.uid;
    cr.gid = attrs.gid;
    return cr;
  }
};

// Credentials as the log and the write-back writer records keep them: uid,
// gid, the number of groups (at most LogRecord::kMaxGroups; more are
// dropped) and the groups, each big-endian 32-bit. ParseCreds takes all
// of v; false when it is not exactly that.
void PutCreds(std::string *out, const upstream::Creds &cr);
bool ParseCreds(const std::string &v, upstream::Creds *cr);

class OpLog {
 public:
  // Loads the log from store (which must outlive it); see above for what a
  // bad record does.
  explicit OpLog(Store *store);

  // Appends r (its seq and, when 0, logged_at are assigned) and syncs it to
  // disk before the client is answered. Returns the sequence number, or 0 when
  // the store could not write it (the caller must then not acknowledge the
  // change).
  uint64_t Append(LogRecord r) EXCLUDES(mu_);
  // Up to max records from sequence number from (inclusive), in order.
  std::vector<LogRecord> Read(uint64_t from, size_t max) EXCLUDES(mu_);
  // Forgets records (sent upstream, or made unnecessary by a later one).
  // sync: durable before the client is answered (a record cancelled by a change
  // the client was told about, e.g. a create undone by a remove); otherwise a
  // record may reappear after a crash and is sent again.
  // False when the store could not write.
  bool Erase(const std::vector<uint64_t> &seqs, bool sync = false)
      EXCLUDES(mu_);
  // Replaces record old_seq by r, appended at the end of the log, in one
  // synced write (a local rename of an object not yet created remotely).
  // Returns r's new sequence number, or 0 when the store failed.
  uint64_t Replace(uint64_t old_seq, LogRecord r) EXCLUDES(mu_);
  // Replaces record old_seq (0: none) by the records rs, appended in
  // order, in one synced write (a local rename that also replaces a remote
  // file: its remove, then the moved create). Assigns their seqs; false
  // when the store failed.
  bool Replace(uint64_t old_seq, std::vector<LogRecord> *rs) EXCLUDES(mu_);

  size_t records() const EXCLUDES(mu_);      // records in the log
  uint64_t bytes() const EXCLUDES(mu_);      // their encoded size
  uint64_t first_seq() const EXCLUDES(mu_);  // oldest record's seq, 0: none
  // Records discarded when the log was opened (a bad record and after).
  size_t discarded() const { return discarded_; }

  // The encoding, for tests (a record as stored: checksum first).
  static std::string Encode(const LogRecord &r);
  static bool Decode(const std::string &value, LogRecord *r);

 private:
  Store *store_;  // not owned
  mutable Mutex mu_{"oplog"};
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;  // next sequence number to assign
  // seq -> encoded size, for accounting
  std::map<uint64_t, uint32_t> size_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;  // sum of size_
  size_t discarded_ = 0;                // set at load (immutable after)
};

}  // namespace nache
