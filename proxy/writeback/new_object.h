// An object that write-back creates at the remote (FlushSender::
// CreateObjects): a logged create being sent (a regular file, a directory,
// a symlink), a conflict copy. A regular file is created by OPEN and
// closed at once; the others by CREATE. What goes with a file in its
// COMPOUND (its data, the attributes set here) is the caller's; the result
// says how far the server got.
//
// Plain value types: no locks, no thread safety of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "handles/handle_map.h"
#include "upstream/compound.h"
#include "upstream/types.h"

namespace nache {

struct NewObject {
  upstream::FileType type = upstream::FileType::kReg;
  std::string name;  // in the directory the batch is for
  std::string text;  // a symlink's target
  // A regular file's create mode (a CREATE is always exclusive).
  upstream::OpenArgs::Create how = upstream::OpenArgs::Create::kGuarded;
  upstream::Attrs ca;  // its create attributes
  Key key = kNoKey;    // the object it is for (chooses the open-owner)
  // A regular file's operations after its GETFH (WRITEs, a SETATTR), under
  // sid: the open's stateid within the COMPOUND (NFSv4.1's current
  // stateid; NFSv4.0 has none and gets the anonymous one). Null: none.
  std::function<void(upstream::Compound *, const upstream::StateId &sid)> more;
  size_t more_ops = 0;    // how many operations `more` adds
  size_t more_bytes = 0;  // and the bytes of data they carry
  size_t writes = 0;      // how many of them are WRITEs (at most one)
};

// At most one WRITE in a COMPOUND, whatever the server: Linux knfsd 6.1
// (Debian 12's) writes the wrong bytes for every WRITE of a COMPOUND but
// the first (the data of a later one starts at a page boundary of the
// request, not where it is), and says it wrote them.
// (writeback_batches_knfsd_test.sh
// small_files_in_one_compound_keep_their_bytes.)
constexpr size_t kMaxWritesPerCompound = 1;

// The operations o takes in its COMPOUND: PUTFH, OPEN, GETFH, its own,
// GETATTR, CLOSE for a regular file; PUTFH, CREATE, GETFH, GETATTR for
// the others.
inline size_t NewObjectOps(const NewObject &o) {
  return (o.type == upstream::FileType::kReg ? 5 : 4) + o.more_ops;
}

// A bound on the bytes of an object's own operations in a COMPOUND (a
// name, a filehandle, an OPEN's owner and attributes, the operations'
// headers), besides the data its WRITEs carry.
constexpr size_t kNewObjectBytes = 1024;

struct NewObjectResult {
  // The OPEN's or CREATE's status; NFS4ERR_DELAY when the server did not
  // reach it.
  uint32_t status = upstream::kNfs4ErrDelay;
  // The server answered the COMPOUND the object went in. When it did not
  // (a reply lost), the OPEN or CREATE may have been executed all the same.
  bool answered = false;
  // Its own operations' results, from its PUTFH on, and their status
  // (the first failure; OK when every one went through).
  upstream::CompoundReply rep;
  upstream::Fh fh;             // when the OPEN or CREATE went through
  upstream::Delegation deleg;  // one the OPEN brought (for NoteGrant)
};

}  // namespace nache
