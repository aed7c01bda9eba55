// owner and owner_group strings on the wire <-> local uids and gids, for
// one export's remote.
//
// Coming in (GETATTR, READDIR, every decoded fattr4): "1000" and
// "1000@domain" are the id itself; any other string is a name, mapped by
// the process-wide IdMapper (idmap.h). A name that maps to nobody we know
// becomes kNobodyId for display, and the caller is told, so that the
// attributes say "owner unmapped" (types.h): nobody is then never taken
// for the owner of what it did not create (README, "Identity and access").
//
// Going out (SETATTR, CREATE and OPEN create attributes, write-back
// flushes): Upstream_Owner_Format decides. numeric sends "1000"; names
// sends "alice@domain" (numeric when the id has no name); auto sends
// numeric until the remote has been seen sending a name, or refusing an
// owner (NFS4ERR_BADOWNER), then names: Linux knfsd with id mapping on
// (nfs4_disable_idmapping=N) sends names and refuses numeric owners from
// AUTH_SYS callers. (The refused call is not resent here: its caller's
// retry, or the client's, goes out with names.)
//
// Thread safety: all methods are thread-safe (the learned format is an
// atomic flag; the mapper locks itself). Decode and Encode run on the
// connections' loop threads as replies are decoded and requests encoded:
// a name not cached costs one NSS lookup there.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "upstream/idmap.h"

namespace nache {
namespace upstream {

enum class OwnerFormat { kAuto, kNumeric, kNames };

// Parses Upstream_Owner_Format ("auto", "numeric", "names"); false when s
// is none of them.
bool ParseOwnerFormat(const char *s, OwnerFormat *out);

class OwnerCodec {
 public:
  // mapper may be null: names then map to nobody and go out numeric.
  OwnerCodec(OwnerFormat format, IdMapper *mapper);

  // The id of an owner (kUser) or owner_group (kGroup) string. False when
  // it names no one we can map: *id is then kNobodyId.
  bool Decode(IdKind kind, const std::string &owner, uint32_t *id);
  // The string to send for id.
  std::string Encode(IdKind kind, uint32_t id);
  // The remote refused an owner we sent (NFS4ERR_BADOWNER): auto sends
  // names from now on.
  void NoteOwnerRefused();
  // Whether Encode sends names now.
  bool SendsNames() const;

 private:
  const OwnerFormat format_;
  IdMapper *const mapper_;  // not owned; may be null
  // auto: the remote sent a name, or refused an owner.
  std::atomic<bool> remote_wants_names_{false};
};

}  // namespace upstream
}  // namespace nache
