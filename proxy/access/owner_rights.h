// The decisions nache makes itself from an object's owner and group: who
// may do what by the POSIX mode bits (objects the remote does not have yet;
// a remote that cannot be asked), who may set attributes locally
// (write-back), and a sticky directory's rule. Everything else is the
// remote's to decide (its ACCESS answers, its refusals).
//
// One rule holds in all of them: an owner or group the remote named and we
// could not map (kAttrOwnerUnmapped, kAttrGroupUnmapped: shown as nobody,
// 65534) is nobody's here. A caller whose uid is 65534 (an office client's
// root, squashed) never gets owner or group rights from it; such a
// decision goes to the remote, or is refused.
//
// Pure functions of their arguments (thread-safe).
#pragma once

#include <cstdint>

#include "upstream/types.h"

namespace nache {

// Whether cr owns the object with attributes a.
bool CallerOwns(const upstream::Creds &cr, const upstream::Attrs &a);
// Whether the object's group is cr's gid or one of its groups.
bool CallerInGroup(const upstream::Creds &cr, const upstream::Attrs &a);
// The ACCESS4 bits of want that the POSIX mode bits give cr (root reads and
// writes anything, and executes what someone may).
uint32_t AccessByMode(const upstream::Creds &cr, const upstream::Attrs &a,
                      uint32_t want);
// Whether cr may set these attributes of a file with attributes a by the
// usual POSIX rules (owner or root; only root gives a file away); when
// not, the remote judges.
bool MaySetLocally(const upstream::Creds &cr, const upstream::Attrs &a,
                   const upstream::Attrs &set);
// A sticky directory's rule: only the owner of the entry (attributes a) or
// of the directory (or root) may remove or replace it.
bool StickyForbids(const upstream::Creds &cr, const upstream::Attrs &dir,
                   const upstream::Attrs &a);

}  // namespace nache
