// The verifier of an exclusive create (OPEN EXCLUSIVE4 / EXCLUSIVE4_1),
// kept where servers keep it: in the new file's access and modify times
// (seconds: 31 bits of the verifier's first four bytes, then of its last
// four; no nanoseconds). A client's retry of the create whose reply was lost
// finds the file with its own verifier and opens it (NFS4_OK); any other client
// finds another verifier and gets NFS4ERR_EXIST (RFC 7530 16.16.5). The
// client's SETATTR of the times that follows every exclusive create
// (knfsd and Ganesha say the times were set, so the client sets them)
// replaces the verifier, as at any server.
//
// nache creates such a file at the remote as GUARDED with these times, or
// locally (write-back) with them: the times travel with the file either
// way, so no separate record is needed and a restart keeps them.
//
// Pure functions of their arguments (thread-safe).
#pragma once

#include <cstdint>

#include "upstream/types.h"

namespace nache {

constexpr size_t kCreateVerifierSize = 8;  // NFS4_VERIFIER_SIZE

// Sets attrs' atime and mtime (and their mask bits) to the verifier.
void StampCreateVerifier(const uint8_t verf[kCreateVerifierSize],
                         upstream::Attrs *attrs);

// Whether a file with attributes a (atime and mtime known) carries verf.
bool CarriesCreateVerifier(const upstream::Attrs &a,
                           const uint8_t verf[kCreateVerifierSize]);

}  // namespace nache
