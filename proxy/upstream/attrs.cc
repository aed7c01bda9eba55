// fattr4 encoding and decoding of Attrs (see attrs.h).
#include "upstream/attrs.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rpc/xdr.h"
#include "upstream/owners.h"

namespace nache {
namespace upstream {
namespace {

// fattr4 bit numbers (RFC 7530 section 5.8).
enum Fattr4 : uint32_t {
  kF4SupportedAttrs = 0,
  kF4Type = 1,
  kF4FhExpireType = 2,
  kF4Change = 3,
  kF4Size = 4,
  kF4LinkSupport = 5,
  kF4SymlinkSupport = 6,
  kF4NamedAttr = 7,
  kF4Fsid = 8,
  kF4UniqueHandles = 9,
  kF4LeaseTime = 10,
  kF4RdattrError = 11,
  kF4Acl = 12,
  kF4Aclsupport = 13,
  kF4Archive = 14,
  kF4Cansettime = 15,
  kF4CaseInsensitive = 16,
  kF4CasePreserving = 17,
  kF4ChownRestricted = 18,
  kF4Filehandle = 19,
  kF4Fileid = 20,
  kF4FilesAvail = 21,
  kF4FilesFree = 22,
  kF4FilesTotal = 23,
  kF4FsLocations = 24,
  kF4Hidden = 25,
  kF4Homogeneous = 26,
  kF4Maxfilesize = 27,
  kF4Maxlink = 28,
  kF4Maxname = 29,
  kF4Maxread = 30,
  kF4Maxwrite = 31,
  kF4Mimetype = 32,
  kF4Mode = 33,
  kF4NoTrunc = 34,
  kF4Numlinks = 35,
  kF4Owner = 36,
  kF4OwnerGroup = 37,
  kF4QuotaAvailHard = 38,
  kF4QuotaAvailSoft = 39,
  kF4QuotaUsed = 40,
  kF4Rawdev = 41,
  kF4SpaceAvail = 42,
  kF4SpaceFree = 43,
  kF4SpaceTotal = 44,
  kF4SpaceUsed = 45,
  kF4System = 46,
  kF4TimeAccess = 47,
  kF4TimeAccessSet = 48,
  kF4TimeBackup = 49,
  kF4TimeCreate = 50,
  kF4TimeDelta = 51,
  kF4TimeMetadata = 52,
  kF4TimeModify = 53,
  kF4TimeModifySet = 54,
  kF4MountedOnFileid = 55,
  kF4Count = 56,
};

// Our readable attributes and the fattr4 bit each is fetched with.
struct AttrMapping {
  uint64_t bit;     // AttrBit
  uint32_t fattr4;  // fattr4 bit number
};
constexpr AttrMapping kGetMappings[] = {
    {kAttrType, kF4Type},
    {kAttrChange, kF4Change},
    {kAttrSize, kF4Size},
    {kAttrFsid, kF4Fsid},
    {kAttrFileid, kF4Fileid},
    {kAttrMode, kF4Mode},
    {kAttrNlink, kF4Numlinks},
    {kAttrOwner, kF4Owner},
    {kAttrOwnerGroup, kF4OwnerGroup},
    {kAttrRawdev, kF4Rawdev},
    {kAttrSpaceUsed, kF4SpaceUsed},
    {kAttrAtime, kF4TimeAccess},
    {kAttrMtime, kF4TimeModify},
    {kAttrCtime, kF4TimeMetadata},
    {kAttrLeaseTime, kF4LeaseTime},
    {kAttrMaxRead, kF4Maxread},
    {kAttrMaxWrite, kF4Maxwrite},
    {kAttrFilesAvail, kF4FilesAvail},
    {kAttrFilesFree, kF4FilesFree},
    {kAttrFilesTotal, kF4FilesTotal},
    {kAttrSpaceAvail, kF4SpaceAvail},
    {kAttrSpaceFree, kF4SpaceFree},
    {kAttrSpaceTotal, kF4SpaceTotal},
    {kAttrMountedOnFileid, kF4MountedOnFileid},
    {kAttrRdattrError, kF4RdattrError},
    {kAttrSupported, kF4SupportedAttrs},
    {kAttrMaxName, kF4Maxname},
    {kAttrMaxLink, kF4Maxlink},
    {kAttrMaxFileSize, kF4Maxfilesize},
};

void SetBit(std::vector<uint32_t> *bitmap, uint32_t n) {
  if (bitmap->size() <= n / 32) bitmap->resize(n / 32 + 1, 0);
  (*bitmap)[n / 32] |= 1u << (n % 32);
}

// attrlist bytes are read and written with rpc/xdr.h (the reader is
// bounds-checked: a truncated attrlist fails cleanly).
using XdrWriter = nache::rpc::XdrOut;
using XdrReader = nache::rpc::XdrIn;

void PutTime(XdrWriter *w, const nache::upstream::Time &t) {
  w->U64(uint64_t(t.sec));
  w->U32(t.nsec);
}

bool GetTime(XdrReader *r, nache::upstream::Time *t) {
  uint64_t sec;
  if (!r->U64(&sec) || !r->U32(&t->nsec)) return false;
  t->sec = int64_t(sec);
  return true;
}

bool SkipOpaque(XdrReader *r, uint32_t max) {
  const char *p;
  uint32_t n;
  return r->Opaque(&p, &n, max);
}

// Upper bounds against a hostile or broken server: they keep one malformed
// attribute from allocating without limit.
constexpr uint32_t kMaxOwnerLen = 1024;
constexpr uint32_t kMaxArrayLen = 1 << 16;
constexpr uint32_t kMaxOpaqueLen = 1 << 20;

bool SkipPathname(XdrReader *r) {
  uint32_t n;
  if (!r->U32(&n) || n > kMaxArrayLen) return false;
  for (uint32_t i = 0; i < n; i++) {
    if (!SkipOpaque(r, kMaxOpaqueLen)) return false;
  }
  return true;
}

bool SkipFsLocations(XdrReader *r) {
  if (!SkipPathname(r)) return false;  // fs_root
  uint32_t nloc;
  if (!r->U32(&nloc) || nloc > kMaxArrayLen) return false;
  for (uint32_t i = 0; i < nloc; i++) {
    if (!SkipPathname(r)) return false;  // server<> has the same shape
    if (!SkipPathname(r)) return false;  // rootpath
  }
  return true;
}

bool SkipAcl(XdrReader *r) {
  uint32_t n;
  if (!r->U32(&n) || n > kMaxArrayLen) return false;
  for (uint32_t i = 0; i < n; i++) {
    if (!r->Skip(12) || !SkipOpaque(r, kMaxOpaqueLen)) return false;
  }
  return true;
}

// An owner or owner_group string s as *id; when it names no one we can
// map, the bit unmapped (kAttrOwnerUnmapped, kAttrGroupUnmapped) goes into
// a->mask too.
void DecodeOwner(IdKind kind, const std::string &s, OwnerCodec *owners,
                 uint32_t *id, uint64_t unmapped, Attrs *a) {
  OwnerCodec numeric(OwnerFormat::kNumeric, nullptr);
  if (!(owners != nullptr ? owners : &numeric)->Decode(kind, s, id))
    a->mask |= unmapped;
}

// The string to send for id.
std::string EncodeOwner(IdKind kind, uint32_t id, OwnerCodec *owners) {
  return owners != nullptr ? owners->Encode(kind, id) : FormatNumericOwner(id);
}

// Decodes one attribute. Attributes we have no field for are parsed and
// dropped: the server may return more than we asked for.
bool DecodeOne(uint32_t bit, XdrReader *r, Attrs *a, Fh *fh,
               OwnerCodec *owners) {
  uint32_t u32;
  std::string s;
  switch (bit) {
    case kF4SupportedAttrs: {
      uint32_t n;
      if (!r->U32(&n) || n > 8) return false;
      uint32_t words[8];
      for (uint32_t i = 0; i < n; i++) {
        if (!r->U32(&words[i])) return false;
      }
      a->supported = BitmapToAttrMask(words, n);
      a->mask |= kAttrSupported;
      return true;
    }
    case kF4Type:
      if (!r->U32(&u32)) return false;
      a->type = (u32 >= 1 && u32 <= 7) ? FileType(u32) : FileType::kNone;
      a->mask |= kAttrType;
      return true;
    case kF4Change: a->mask |= kAttrChange; return r->U64(&a->change);
    case kF4Size: a->mask |= kAttrSize; return r->U64(&a->size);
    case kF4Fsid:
      a->mask |= kAttrFsid;
      return r->U64(&a->fsid_major) && r->U64(&a->fsid_minor);
    case kF4LeaseTime: a->mask |= kAttrLeaseTime; return r->U32(&a->lease_time);
    case kF4RdattrError:
      a->mask |= kAttrRdattrError;
      return r->U32(&a->rdattr_error);
    case kF4Acl: return SkipAcl(r);
    case kF4Filehandle:
      if (!r->Opaque(&s, kMaxFhSize)) return false;
      if (fh != nullptr) *fh = s;
      return true;
    case kF4Fileid: a->mask |= kAttrFileid; return r->U64(&a->fileid);
    case kF4FilesAvail:
      a->mask |= kAttrFilesAvail;
      return r->U64(&a->files_avail);
    case kF4FilesFree: a->mask |= kAttrFilesFree; return r->U64(&a->files_free);
    case kF4FilesTotal:
      a->mask |= kAttrFilesTotal;
      return r->U64(&a->files_total);
    case kF4FsLocations: return SkipFsLocations(r);
    case kF4Maxfilesize:
      a->mask |= kAttrMaxFileSize;
      return r->U64(&a->maxfilesize);
    case kF4Maxlink: a->mask |= kAttrMaxLink; return r->U32(&a->maxlink);
    case kF4Maxname: a->mask |= kAttrMaxName; return r->U32(&a->maxname);
    case kF4Maxread: a->mask |= kAttrMaxRead; return r->U64(&a->maxread);
    case kF4Maxwrite: a->mask |= kAttrMaxWrite; return r->U64(&a->maxwrite);
    case kF4Mimetype: return SkipOpaque(r, kMaxOpaqueLen);
    case kF4Mode:
      if (!r->U32(&u32)) return false;
      a->mode = u32 & 07777;
      a->mask |= kAttrMode;
      return true;
    case kF4Numlinks: a->mask |= kAttrNlink; return r->U32(&a->nlink);
    case kF4Owner:
      if (!r->Opaque(&s, kMaxOwnerLen)) return false;
      DecodeOwner(IdKind::kUser, s, owners, &a->uid, kAttrOwnerUnmapped, a);
      a->mask |= kAttrOwner;
      return true;
    case kF4OwnerGroup:
      if (!r->Opaque(&s, kMaxOwnerLen)) return false;
      DecodeOwner(IdKind::kGroup, s, owners, &a->gid, kAttrGroupUnmapped, a);
      a->mask |= kAttrOwnerGroup;
      return true;
    case kF4Rawdev:
      a->mask |= kAttrRawdev;
      return r->U32(&a->rdev_major) && r->U32(&a->rdev_minor);
    case kF4SpaceAvail:
      a->mask |= kAttrSpaceAvail;
      return r->U64(&a->space_avail);
    case kF4SpaceFree: a->mask |= kAttrSpaceFree; return r->U64(&a->space_free);
    case kF4SpaceTotal:
      a->mask |= kAttrSpaceTotal;
      return r->U64(&a->space_total);
    case kF4SpaceUsed: a->mask |= kAttrSpaceUsed; return r->U64(&a->space_used);
    case kF4TimeAccess: a->mask |= kAttrAtime; return GetTime(r, &a->atime);
    case kF4TimeMetadata: a->mask |= kAttrCtime; return GetTime(r, &a->ctime);
    case kF4TimeModify: a->mask |= kAttrMtime; return GetTime(r, &a->mtime);
    case kF4MountedOnFileid:
      a->mask |= kAttrMountedOnFileid;
      return r->U64(&a->mounted_on_fileid);
    // Fixed-size attributes we do not keep.
    case kF4FhExpireType:
    case kF4LinkSupport:
    case kF4SymlinkSupport:
    case kF4NamedAttr:
    case kF4UniqueHandles:
    case kF4Aclsupport:
    case kF4Archive:
    case kF4Cansettime:
    case kF4CaseInsensitive:
    case kF4CasePreserving:
    case kF4ChownRestricted:
    case kF4Hidden:
    case kF4Homogeneous:
    case kF4NoTrunc:
    case kF4System: return r->Skip(4);
    case kF4QuotaAvailHard:
    case kF4QuotaAvailSoft:
    case kF4QuotaUsed: return r->Skip(8);
    case kF4TimeBackup:
    case kF4TimeCreate:
    case kF4TimeDelta: return r->Skip(12);
    case kF4TimeAccessSet:  // write-only, but parse it if a server echoes it
    case kF4TimeModifySet:
      if (!r->U32(&u32)) return false;
      return u32 == 1 ? r->Skip(12) : true;
    default: return false;  // an attribute whose encoding we do not know
  }
}

}  // namespace

std::vector<uint32_t> AttrRequestBitmap(uint64_t mask, bool want_fh) {
  std::vector<uint32_t> bitmap;
  for (const AttrMapping &m : kGetMappings) {
    if (mask & m.bit) SetBit(&bitmap, m.fattr4);
  }
  if (want_fh) SetBit(&bitmap, kF4Filehandle);
  return bitmap;
}

void EncodeSettableAttrs(const Attrs &attrs, std::vector<uint32_t> *bitmap,
                         std::string *attrlist, OwnerCodec *owners) {
  bitmap->clear();
  attrlist->clear();
  XdrWriter w(attrlist);
  // Values must follow ascending fattr4 bit order.
  if (attrs.mask & kAttrSize) {
    SetBit(bitmap, kF4Size);
    w.U64(attrs.size);
  }
  if (attrs.mask & kAttrMode) {
    SetBit(bitmap, kF4Mode);
    w.U32(attrs.mode & 07777);
  }
  if (attrs.mask & kAttrOwner) {
    SetBit(bitmap, kF4Owner);
    w.Opaque(EncodeOwner(IdKind::kUser, attrs.uid, owners));
  }
  if (attrs.mask & kAttrOwnerGroup) {
    SetBit(bitmap, kF4OwnerGroup);
    w.Opaque(EncodeOwner(IdKind::kGroup, attrs.gid, owners));
  }
  if (attrs.mask & kAttrAtime) {
    SetBit(bitmap, kF4TimeAccessSet);
    if (attrs.atime_server) {
      w.U32(0);  // SET_TO_SERVER_TIME4
    } else {
      w.U32(1);  // SET_TO_CLIENT_TIME4
      PutTime(&w, attrs.atime);
    }
  }
  if (attrs.mask & kAttrMtime) {
    SetBit(bitmap, kF4TimeModifySet);
    if (attrs.mtime_server) {
      w.U32(0);
    } else {
      w.U32(1);
      PutTime(&w, attrs.mtime);
    }
  }
}

void EncodeChangeAttr(uint64_t change, std::vector<uint32_t> *bitmap,
                      std::string *attrlist) {
  bitmap->clear();
  attrlist->clear();
  SetBit(bitmap, kF4Change);
  XdrWriter(attrlist).U64(change);
}

bool DecodeAttrs(const uint32_t *bitmap, size_t nwords, const char *data,
                 size_t len, Attrs *out, Fh *fh, OwnerCodec *owners) {
  *out = Attrs();
  XdrReader r(data, len);
  for (size_t w = 0; w < nwords; w++) {
    for (uint32_t b = 0; b < 32; b++) {
      if ((bitmap[w] & (1u << b)) == 0) continue;
      uint32_t bit = uint32_t(w) * 32 + b;
      if (bit >= kF4Count || !DecodeOne(bit, &r, out, fh, owners)) return false;
    }
  }
  // Trailing bytes mean the bitmap and the values disagree.
  return r.left() == 0;
}

uint64_t BitmapToAttrMask(const uint32_t *bitmap, size_t nwords) {
  uint64_t mask = 0;
  for (const AttrMapping &m : kGetMappings) {
    size_t w = m.fattr4 / 32;
    if (w < nwords && (bitmap[w] & (1u << (m.fattr4 % 32)))) mask |= m.bit;
  }
  return mask;
}

uint32_t ParseNumericOwner(const std::string &owner) {
  uint32_t id;
  OwnerCodec(OwnerFormat::kNumeric, nullptr).Decode(IdKind::kUser, owner, &id);
  return id;
}

std::string FormatNumericOwner(uint32_t id) { return std::to_string(id); }

}  // namespace upstream
}  // namespace nache
