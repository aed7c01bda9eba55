// See convert.h.
#include "core/convert.h"

#include <cstring>

namespace nache {

static_assert(NACHE_ATTR_TYPE == upstream::kAttrType &&
                  NACHE_ATTR_CHANGE == upstream::kAttrChange &&
                  NACHE_ATTR_SIZE == upstream::kAttrSize &&
                  NACHE_ATTR_FSID == upstream::kAttrFsid &&
                  NACHE_ATTR_FILEID == upstream::kAttrFileid &&
                  NACHE_ATTR_MODE == upstream::kAttrMode &&
                  NACHE_ATTR_NLINK == upstream::kAttrNlink &&
                  NACHE_ATTR_OWNER == upstream::kAttrOwner &&
                  NACHE_ATTR_GROUP == upstream::kAttrOwnerGroup &&
                  NACHE_ATTR_RAWDEV == upstream::kAttrRawdev &&
                  NACHE_ATTR_SPACE_USED == upstream::kAttrSpaceUsed &&
                  NACHE_ATTR_ATIME == upstream::kAttrAtime &&
                  NACHE_ATTR_MTIME == upstream::kAttrMtime &&
                  NACHE_ATTR_CTIME == upstream::kAttrCtime,
              "nache.h attribute bits must equal upstream::AttrBit");

constexpr uint64_t kCMask = (NACHE_ATTR_CTIME << 1) - 1;

void AttrsToC(const upstream::Attrs &in, nache_attrs *out) {
  memset(out, 0, sizeof(*out));
  out->mask = in.mask & kCMask;
  out->type = nache_type(in.type);
  out->change = in.change;
  out->size = in.size;
  out->fsid_major = in.fsid_major;
  out->fsid_minor = in.fsid_minor;
  out->fileid = in.fileid;
  out->mode = in.mode;
  out->nlink = in.nlink;
  out->uid = in.uid;
  out->gid = in.gid;
  out->rdev_major = in.rdev_major;
  out->rdev_minor = in.rdev_minor;
  out->space_used = in.space_used;
  out->atime = {in.atime.sec, in.atime.nsec};
  out->mtime = {in.mtime.sec, in.mtime.nsec};
  out->ctime = {in.ctime.sec, in.ctime.nsec};
  out->owner_unmapped = (in.mask & upstream::kAttrOwnerUnmapped) != 0;
  out->group_unmapped = (in.mask & upstream::kAttrGroupUnmapped) != 0;
}

void AttrsToC(const upstream::Attrs &in, uint64_t key, nache_attrs *out) {
  AttrsToC(in, out);
  out->fileid = key;
}

upstream::Attrs AttrsFromC(const nache_attrs &in) {
  upstream::Attrs a;
  a.mask = in.mask & kCMask;
  a.type = upstream::FileType(in.type);
  a.size = in.size;
  a.mode = in.mode;
  a.uid = in.uid;
  a.gid = in.gid;
  a.rdev_major = in.rdev_major;
  a.rdev_minor = in.rdev_minor;
  a.atime = {in.atime.sec, in.atime.nsec};
  a.mtime = {in.mtime.sec, in.mtime.nsec};
  a.atime_server = in.atime_server;
  a.mtime_server = in.mtime_server;
  return a;
}

upstream::Creds CredsFromC(const nache_creds *in) {
  upstream::Creds c;
  if (in == nullptr) return c;
  c.uid = in->uid;
  c.gid = in->gid;
  if (in->groups != nullptr)
    c.groups.assign(in->groups, in->groups + in->ngroups);
  return c;
}

}  // namespace nache
