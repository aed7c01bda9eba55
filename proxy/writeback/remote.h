// What every write-back component that sends needs of the core to reach
// the remote (NamespaceWriteBack, Conflicts and FlushSender each extend it
// in their own Host): the remote filehandle of an object, running a
// COMPOUND, and how long one may be. The core implements it once for all
// of them (core_hosts.h).
//
// Thread safety: all methods are thread-safe; FhOf and Run block on the
// upstream. They are called with no lock of write-back's held.
#pragma once

#include <cstdint>

#include "handles/handle_map.h"
#include "upstream/compound.h"
#include "upstream/types.h"

namespace nache {

class WriteBackRemote {
 public:
  virtual ~WriteBackRemote() = default;
  // The remote filehandle of key, or NFS4ERR_STALE (also for an object
  // removed here); a local object is created remotely first.
  virtual uint32_t FhOf(Key key, upstream::Fh *fh) = 0;
  // Sends c as cr; the compound's NFS status (transport failures are
  // NFS4ERR_DELAY).
  virtual uint32_t Run(upstream::Compound &c, const upstream::Creds &cr,
                       upstream::CompoundReply *rep) = 0;
  // Operations one COMPOUND given to Run may carry (a batch is cut to
  // it): the session's grant (Upstream::max_operations), or a bound every
  // server takes when that is not known.
  virtual uint32_t MaxOps() = 0;
};

}  // namespace nache
