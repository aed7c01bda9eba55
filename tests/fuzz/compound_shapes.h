// The COMPOUNDs the compound fuzz targets decode replies for, between them
// every operation Compound can send (compound.h), and the check of what
// DecodeWire promises when it accepts a reply (CompoundReply's invariant).
// Shared by fuzz_compound_v40, fuzz_compound_v41, fuzz_readdir and
// make_corpus (which writes valid replies for them).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "upstream/compound.h"

namespace nache {
namespace fuzz {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Op;

// A compound and the READ buffers it decodes into: each exactly as large as
// its READ asked for, so that ASan sees any byte written past it.
struct Shape {
  Compound c;
  std::vector<std::unique_ptr<char[]>> bufs;
  char *Buf(uint32_t n) {
    bufs.emplace_back(new char[n == 0 ? 1 : n]);
    return bufs.back().get();
  }
};

constexpr int kShapes = 12;

// Whether shape i's READDIR asks for each entry's filehandle (both kinds
// come up among the inputs).
inline bool ReaddirWantsFh(int i) { return (i / kShapes) % 2 == 0; }

inline upstream::StateId Sid(uint32_t seqid) {
  upstream::StateId s;
  s.seqid = seqid;
  for (auto &b : s.other) b = uint8_t(seqid);
  return s;
}

// Shape i (mod kShapes).
inline void MakeShape(int i, Shape *s) {
  using namespace upstream;
  Compound &c = s->c;
  c.SetTag("fuzz");
  switch (i % kShapes) {
    case 0:
      c.Putrootfh().Getfh().Getattr(kAttrsObject | kAttrsStatfs |
                                    kAttrLeaseTime | kAttrSupported |
                                    kAttrMaxRead | kAttrMaxWrite);
      break;
    case 1: c.Putfh("dir").Lookup("name").Getfh().Getattr(kAttrsObject); break;
    case 2: {
      OpenArgs o;
      o.seqid = 1;
      o.owner = "owner";
      o.name = "file";
      o.create = OpenArgs::Create::kUnchecked;
      c.Putfh("dir")
          .Open(o)
          .Getfh()
          .Getattr(kAttrsObject)
          .Read(StateId::Anonymous(), 0, 64, s->Buf(64));
      break;
    }
    case 3:
      c.Putfh("f")
          .OpenConfirm(Sid(1), 2)
          .OpenDowngrade(Sid(2), 3, 1, 0)
          .Close(4, Sid(3));
      break;
    case 4:
      c.Putfh("f")
          .Read(Sid(1), 0, 16, s->Buf(16))
          .Getattr(kAttrSize)
          .Read(Sid(1), 16, 32, s->Buf(32));
      break;
    case 5:
      c.Putfh("f")
          .Write(Sid(1), 0, StableHow::kUnstable, "data", 4)
          .Commit(0, 4)
          .Getattr(kAttrsObject);
      break;
    case 6: {
      Attrs a;
      a.mask = kAttrMode;
      a.mode = 0755;
      c.Putfh("d")
          .Savefh()
          .Putfh("d2")
          .Rename("a", "b")
          .Link("c")
          .Restorefh()
          .Remove("x")
          .Create(FileType::kDir, "sub", a)
          .Create(FileType::kLnk, "ln", a, "target")
          .Readlink();
      break;
    }
    case 7: {
      LockArgs l;
      l.type = LockType::kWrite;
      l.new_lock_owner = true;
      l.owner = "lo";
      c.Putfh("f")
          .Lock(l)
          .Lockt(LockType::kRead, 0, 1, 0, "x")
          .Locku(LockType::kWrite, 2, Sid(5), 0, 1)
          .ReleaseLockowner(0, "lo");
      break;
    }
    case 8:
      c.Setclientid("verifier", "id", 0x40000000, "tcp", "127.0.0.1.8.1", 1)
          .SetclientidConfirm(7, "confirm!")
          .Renew(7);
      break;
    case 9: {
      Attrs a;
      a.mask = kAttrSize | kAttrAtime;
      a.atime_server = true;
      c.Putfh("f")
          .Access(0x3f)
          .Setattr(Sid(1), a)
          .VerifyChange(5)
          .NverifyChange(6)
          .DelegReturn(Sid(9))
          .Lookupp();
      break;
    }
    case 10:  // NFSv4.2's operations
      c.Putfh("f")
          .Allocate(Sid(1), 0, 4096)
          .Seek(Sid(1), 0, SeekWhat::kHole)
          .ReadPlus(Sid(1), 0, 48, s->Buf(48))
          .Copy(Sid(1), Sid(2), 0, 4096, 0)
          .Getxattr("k")
          .Setxattr(XattrOption::kEither, "k", "v")
          .Listxattrs(0, 512)
          .Removexattr("k")
          .Deallocate(Sid(1), 0, 1);
      break;
    default:
      c.Putfh("dir").Readdir(0, upstream::Verifier(8, '\0'), 8192, 32768,
                             kAttrsObject, ReaddirWantsFh(i));
      break;
  }
}

[[noreturn]] inline void Broken(const char *what) {
  std::fprintf(stderr, "CompoundReply invariant broken: %s\n", what);
  std::abort();
}

// What an accepted reply must satisfy (compound.h); aborts otherwise.
// after_sequence: NFSv4.1 with SEQUENCE OK; seq_failed: SEQUENCE failed.
inline void CheckReply(const Compound &c, const CompoundReply &r,
                       bool after_sequence, bool seq_failed) {
  if (r.results.size() > c.size()) Broken("more results than operations");
  for (size_t i = 0; i < r.results.size(); i++) {
    if (r.results[i].op != c.op(i)) Broken("result for another operation");
    if (r.results[i].op == Op::kReadPlus &&
        r.results[i].hole_bytes > r.results[i].count)
      Broken("READ_PLUS holes beyond what it covered");
    if (i + 1 < r.results.size() && r.results[i].status != 0)
      Broken("a result after a failure");
  }
  if (seq_failed) {
    if (!r.results.empty()) Broken("results after a failed SEQUENCE");
    return;
  }
  if (r.status == 0) {
    if (r.results.size() != c.size()) Broken("OK with results missing");
    for (size_t i = 0; i < c.size(); i++)
      if (r.Find(c.op(i)) == nullptr) Broken("OK and Find() null");
    if (!r.results.empty() && r.results.back().status != 0)
      Broken("OK with a failed result");
    return;
  }
  if (r.results.empty()) {
    if (after_sequence) Broken("failure without its result after SEQUENCE");
    return;
  }
  if (r.results.back().status != r.status)
    Broken("failure is not the last result's status");
}

}  // namespace fuzz
}  // namespace nache
