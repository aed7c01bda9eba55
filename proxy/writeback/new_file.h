// A regular file that write-back creates at the remote and closes at once
// (FlushSender::CreateClosedFiles): a logged create being sent, a conflict
// copy. What goes with it in its COMPOUND (its data, the attributes set
// here) is the caller's; the result says how far the server got.
//
// A plain value type: no locks, no thread safety of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "handles/handle_map.h"
#include "upstream/compound.h"
#include "upstream/types.h"

namespace nache {

struct NewFile {
  std::string name;  // in the directory the batch is for
  upstream::OpenArgs::Create how = upstream::OpenArgs::Create::kGuarded;
  upstream::Attrs ca;  // its create attributes
  Key key = kNoKey;    // the object it is for (chooses the open-owner)
  // Adds the operations that go after its GETFH (WRITEs, a SETATTR),
  // under sid: the open's stateid within the COMPOUND (NFSv4.1's current
  // stateid; NFSv4.0 has none and gets the anonymous one). Null: none.
  std::function<void(upstream::Compound *, const upstream::StateId &sid)> more;
  size_t more_ops = 0;    // how many operations `more` adds
  size_t more_bytes = 0;  // and the bytes of data they carry
};

// Operations a NewFile takes in its COMPOUND besides its own (`more`'s):
// PUTFH, OPEN, GETFH, GETATTR, CLOSE.
constexpr size_t kNewFileOps = 5;

struct NewFileResult {
  // The OPEN's status; NFS4ERR_DELAY when the server did not reach it.
  uint32_t status = upstream::kNfs4ErrDelay;
  // The server answered the COMPOUND the file went in. When it did not
  // (a reply lost), the OPEN may have been executed all the same.
  bool answered = false;
  // Its own operations' results, from its PUTFH on, and their status
  // (the first failure; OK when every one went through).
  upstream::CompoundReply rep;
  upstream::Fh fh;             // when the OPEN went through
  upstream::Delegation deleg;  // one the OPEN brought (for NoteGrant)
};

}  // namespace nache
