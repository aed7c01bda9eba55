// fattr4 <-> Attrs: the attribute half of the NFSv4 XDR work.
//
// Owns the mapping between our AttrBit set and fattr4 bit numbers, and the
// encoding of attribute values in an attrlist4 (RFC 7530 section 5). Works on
// bitmap words and raw attrlist bytes, so it needs no libnfs types and is
// unit-tested alone. compound.cc wraps the results in libnfs structures.
//
// Owners travel as strings: an OwnerCodec (owners.h) turns them into ids
// and back, numeric ("1000") or names ("alice@example.org") as the export
// is configured. A name we cannot map becomes nobody (65534) rather than an
// error, as with the Linux client, and is marked kAttrOwnerUnmapped
// (kAttrGroupUnmapped) so that nobody never gets its owner's rights. Without
// a codec (null), owners are numeric and names map to nobody, marked too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "upstream/types.h"

namespace nache {
namespace upstream {

class OwnerCodec;

// fattr4 bit number of the filehandle attribute (READDIR with want_fh).
constexpr uint32_t kFattr4Filehandle = 19;
// The id a name we cannot parse maps to.
constexpr uint32_t kNobodyId = 65534;

// Bitmap words requesting the attributes of mask (GETATTR, READDIR), plus
// the filehandle when want_fh. Bits of mask with no fattr4 meaning are
// ignored.
std::vector<uint32_t> AttrRequestBitmap(uint64_t mask, bool want_fh);

// Encodes the settable subset of attrs.mask (kAttrSize, kAttrMode,
// kAttrOwner, kAttrOwnerGroup, kAttrAtime, kAttrMtime) for SETATTR, CREATE
// and OPEN(create), owners as owners->Encode makes them (numeric when
// owners is null). Other bits are not settable in NFSv4 and are ignored.
void EncodeSettableAttrs(const Attrs &attrs, std::vector<uint32_t> *bitmap,
                         std::string *attrlist, OwnerCodec *owners = nullptr);

// Encodes the change attribute alone (VERIFY / NVERIFY).
void EncodeChangeAttr(uint64_t change, std::vector<uint32_t> *bitmap,
                      std::string *attrlist);

// Decodes an attrlist whose content is described by bitmap into out (which
// is reset first; out->mask says what was present) and, when the filehandle
// attribute is present and fh is not null, into *fh. Owners are decoded by
// owners (numeric only when null). Returns false when the bytes are
// malformed or an attribute we cannot parse is present.
bool DecodeAttrs(const uint32_t *bitmap, size_t nwords, const char *data,
                 size_t len, Attrs *out, Fh *fh, OwnerCodec *owners = nullptr);

// The AttrBit set of the fattr4 bits in bitmap (supported_attrs).
uint64_t BitmapToAttrMask(const uint32_t *bitmap, size_t nwords);

// "1000" and "1000@domain" give 1000; anything else gives kNobodyId (as
// OwnerCodec decodes numeric owners).
uint32_t ParseNumericOwner(const std::string &owner);
std::string FormatNumericOwner(uint32_t id);

}  // namespace upstream
}  // namespace nache
