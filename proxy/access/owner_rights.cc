// Owner and group rights (see owner_rights.h).
#include "access/owner_rights.h"

#include <algorithm>

namespace nache {

using upstream::Attrs;
using upstream::Creds;
using upstream::FileType;

bool CallerOwns(const Creds &cr, const Attrs &a) {
  return upstream::OwnerIs(a, cr.uid);
}

bool CallerInGroup(const Creds &cr, const Attrs &a) {
  return upstream::GroupIs(a, cr.gid) ||
         std::any_of(cr.groups.begin(), cr.groups.end(),
                     [&a](uint32_t g) { return upstream::GroupIs(a, g); });
}

uint32_t AccessByMode(const Creds &cr, const Attrs &a, uint32_t want) {
  bool dir = a.type == FileType::kDir;
  uint32_t bits;  // rwx for this caller
  if (cr.uid == 0) {
    // Root reads and writes anything; executes a file only when someone may.
    bits = 06 | ((dir || (a.mode & 0111)) ? 01 : 0);
  } else if (CallerOwns(cr, a)) {
    bits = (a.mode >> 6) & 7;
  } else if (CallerInGroup(cr, a)) {
    bits = (a.mode >> 3) & 7;
  } else {
    bits = a.mode & 7;
  }
  uint32_t allowed = 0;
  if (bits & 4) allowed |= upstream::kAccessRead;
  if (bits & 2) {
    allowed |= upstream::kAccessModify | upstream::kAccessExtend;
    if (dir) allowed |= upstream::kAccessDelete;
  }
  if (bits & 1)
    allowed |= dir ? upstream::kAccessLookup : upstream::kAccessExecute;
  return allowed & want;
}

bool MaySetLocally(const Creds &cr, const Attrs &a, const Attrs &set) {
  if (cr.uid == 0) return true;
  if (!CallerOwns(cr, a)) return false;  // let the remote judge
  if ((set.mask & upstream::kAttrOwner) && set.uid != a.uid) return false;
  if ((set.mask & upstream::kAttrOwnerGroup) && set.gid != cr.gid &&
      std::find(cr.groups.begin(), cr.groups.end(), set.gid) == cr.groups.end())
    return false;
  return true;
}

bool StickyForbids(const Creds &cr, const Attrs &dir, const Attrs &a) {
  return (dir.mode & 01000) && cr.uid != 0 && !CallerOwns(cr, a) &&
         !CallerOwns(cr, dir);
}

}  // namespace nache
