// Internal to upstream/: the storage behind a Compound, shared by the builder
// (compound.cc) and the decoder (compound_decode.cc). Include nowhere else.
//
// A Compound owns every byte its libnfs COMPOUND4args points to: names,
// filehandles, owners, attr bitmaps and attrlists live in deques (whose
// elements never move once added), so the nfs_argop4 array may grow without
// invalidating earlier pointers. WRITE data is the one exception: it points
// to the caller's buffer, as compound.h documents.
#pragma once

// libnfs.h first: the other libnfs headers use what it defines.
// clang-format off
#include <nfsc/libnfs.h>
// clang-format on

#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-raw.h>

#include <deque>
#include <string>
#include <vector>

#include "upstream/compound.h"

namespace nache {
namespace upstream {

// What the decoder needs to know about one operation beyond its arguments.
struct OpMeta {
  Op op = Op::kPutfh;             // the operation
  char *read_dest = nullptr;      // READ: where the data goes (caller's buffer)
  uint32_t read_count = 0;        // READ: bytes requested (bound on the reply)
  uint32_t write_count = 0;       // WRITE: bytes sent (bound on the reply)
  bool want_fh = false;           // READDIR: filehandle requested per entry
  uint32_t readdir_maxcount = 0;  // READDIR: maxcount (bound on the reply)
  bool auto_clientid = false;     // the clientid is filled in by FillClientid
  bool open_by_fh = false;        // OPEN with CLAIM_FH (encoded by us)
  // OPEN EXCLUSIVE4_1 (encoded by us): the verifier and the settable
  // attributes' bitmap and list.
  bool open_excl41 = false;
  std::vector<uint32_t> excl41_bitmap;
  std::string excl41_attrs;
  Nfs42Args v42;  // an NFSv4.2 operation's arguments
  // An operation libnfs cannot encode (IsNfs42Op): the XDR of its
  // arguments, written by its builder; EncodeWire sends them after its
  // number.
  std::string wire_args;
};

// Settable attributes that carry an owner or owner_group: encoded again
// when the compound goes on the wire, in the format the export's remote
// wants then (owners.h); the numeric encoding made when it was built
// serves Args() until then.
struct OwnerFattr {
  size_t op = 0;  // index of the SETATTR, CREATE or OPEN in args
  Attrs attrs;    // as given to the builder
};

struct Compound::Impl {
  std::string tag;                            // COMPOUND tag (for logs)
  std::vector<nfs_argop4> args;               // one per operation
  std::vector<OpMeta> meta;                   // parallel to args
  std::deque<std::string> bytes;              // owned variable-length data
  std::deque<std::vector<uint32_t>> bitmaps;  // owned attr bitmaps
  COMPOUND4args compound;                     // the view Args() returns
  size_t size_hint = 0;                       // running EncodedSizeHint
  bool reclaim_complete = false;              // ReclaimComplete() (4.1)
  std::vector<OwnerFattr> owner_fattrs;       // re-encoded by EncodeWire
};

}  // namespace upstream
}  // namespace nache
