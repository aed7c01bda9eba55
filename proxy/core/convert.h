// Conversions between the C API's plain structs (nache.h) and the core's
// upstream types. The attribute mask bits are the same numbers on both sides.
#pragma once

#include "nache/nache.h"
#include "upstream/types.h"

namespace nache {

void AttrsToC(const upstream::Attrs &in, nache_attrs *out);
// The same for the object key: its fileid is the key. The remote's fileid
// is not stable for objects created here (they have none until flushed),
// while the key is, and is unique within the export like a fileid must be.
void AttrsToC(const upstream::Attrs &in, uint64_t key, nache_attrs *out);
upstream::Attrs AttrsFromC(const nache_attrs &in);
upstream::Creds CredsFromC(const nache_creds *in);

}  // namespace nache
