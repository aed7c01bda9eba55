// Writes the fuzz targets' seed corpora: valid inputs built with our own
// XDR writer (rpc/xdr.h) and encoders (nfs41.h), and the reproductions of
// issue 15 (a bitmap count of 0x40000001, a result count of 0xffffffff,
// "OK" replies short of results). usage: fuzz_make_corpus DIR (DIR: where
// the corpus/<target>/ directories are, normally tests/fuzz/corpus).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compound_shapes.h"
#include "rpc/xdr.h"
#include "upstream/nfs41.h"

namespace {

using namespace nache;
using rpc::XdrOut;
using upstream::Op;

std::string root;

void Put(const std::string &target, const std::string &name,
         const std::string &bytes) {
  const std::string dir = root + "/" + target;
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE *f = fopen(path.c_str(), "wb");
  if (f == nullptr || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    abort();
  fclose(f);
}

std::string Byte(int b) { return std::string(1, char(b)); }

void Stateid(XdrOut *x, uint32_t seqid) {
  x->U32(seqid);
  x->Fixed(std::string(12, char(seqid)).data(), 12);
}
void Cinfo(XdrOut *x) {
  x->U32(1);
  x->U64(10);
  x->U64(11);
}
void Verf(XdrOut *x, const char *v) { x->Fixed(v, 8); }

// type, change, size, [filehandle], mode, owner, owner_group.
void Fattr(XdrOut *x, bool fh) {
  x->U32(2);
  x->U32((1u << 1) | (1u << 3) | (1u << 4) | (fh ? 1u << 19 : 0));
  x->U32((1u << 1) | (1u << 4) | (1u << 5));
  std::string list;
  XdrOut l(&list);
  l.U32(1);
  l.U64(42);
  l.U64(4096);
  if (fh) l.Opaque(std::string("fh-of-entry"));
  l.U32(0644);
  l.Opaque(std::string("1000"));
  l.Opaque(std::string("1000@example.com"));
  x->Opaque(list);
}

void Readdir(XdrOut *x, int entries, bool fh) {
  Verf(x, "cookieve");
  for (int i = 0; i < entries; i++) {
    x->U32(1);
    x->U64(uint64_t(i + 1));
    x->Opaque("entry" + std::to_string(i));
    Fattr(x, fh);
  }
  x->U32(0);
  x->U32(1);  // eof
}

// The result body of op when OK.
void OkBody(Op op, XdrOut *x, bool readdir_fh) {
  switch (op) {
    case Op::kAccess:
      x->U32(0x3f);
      x->U32(0x1f);
      break;
    case Op::kClose:
    case Op::kOpenConfirm:
    case Op::kOpenDowngrade:
    case Op::kLocku:
    case Op::kLock: Stateid(x, 2); break;
    case Op::kCommit: Verf(x, "wverf001"); break;
    case Op::kCreate:
      Cinfo(x);
      x->U32(1);
      x->U32(1u << 1);
      break;
    case Op::kGetattr: Fattr(x, false); break;
    case Op::kGetfh: x->Opaque(std::string("a-filehandle")); break;
    case Op::kLink:
    case Op::kRemove: Cinfo(x); break;
    case Op::kRename:
      Cinfo(x);
      Cinfo(x);
      break;
    case Op::kOpen:
      Stateid(x, 1);
      Cinfo(x);
      x->U32(2);  // rflags: confirm
      x->U32(0);  // attrset
      x->U32(1);  // a read delegation
      Stateid(x, 7);
      x->U32(0);
      x->U32(0);
      x->U32(0);
      x->U32(0);
      x->Opaque(std::string("EVERYONE@"));
      break;
    case Op::kRead:
      x->U32(1);
      x->Opaque(std::string("0123456789abcdef"));
      break;
    case Op::kReaddir: Readdir(x, 3, readdir_fh); break;
    case Op::kReadlink: x->Opaque(std::string("../target")); break;
    case Op::kSetattr:
      x->U32(1);
      x->U32(1u << 4);
      break;
    case Op::kSetclientid:
      x->U64(0x1234);
      Verf(x, "confirm!");
      break;
    case Op::kWrite:
      x->U32(4);
      x->U32(2);
      Verf(x, "wverf001");
      break;
    case Op::kSeek:
      x->Bool(false);
      x->U64(8192);
      break;
    case Op::kCopy:  // done: no callback id, 4096 bytes, FILE_SYNC
      x->U32(0);
      x->U64(4096);
      x->U32(2);
      Verf(x, "wverf001");
      x->Bool(true);
      x->Bool(true);
      break;
    case Op::kReadPlus:  // of [0, 48): 4 bytes of data, then a hole
      x->Bool(false);
      x->U32(2);
      x->U32(0);  // NFS4_CONTENT_DATA
      x->U64(0);
      x->Opaque(std::string("abcd"));
      x->U32(1);  // NFS4_CONTENT_HOLE
      x->U64(4);
      x->U64(44);
      break;
    case Op::kGetxattr: x->Opaque(std::string("value")); break;
    case Op::kSetxattr:
    case Op::kRemovexattr: Cinfo(x); break;
    case Op::kListxattrs:
      x->U64(9);
      x->U32(2);
      x->Opaque(std::string("k"));
      x->Opaque(std::string("other"));
      x->Bool(true);
      break;
    default: break;  // status only
  }
}

std::string Header(uint32_t status, uint32_t nres) {
  std::string b;
  XdrOut x(&b);
  x.U32(status);
  x.Opaque(std::string("fuzz"));
  x.U32(nres);
  return b;
}

void SequenceOk(XdrOut *x) {
  x->U32(upstream::nfs41::kOpSequence);
  x->U32(0);
  x->Fixed(std::string(16, 's').data(), 16);
  for (uint32_t v : {1u, 0u, 7u, 7u, 0u}) x->U32(v);
}

// A reply to shape i: all OK, or failing at op fail_at (with status).
std::string ShapeReply(int i, bool seq, int fail_at, uint32_t status) {
  fuzz::Shape s;
  fuzz::MakeShape(i, &s);
  const size_t n = fail_at < 0 ? s.c.size() : size_t(fail_at) + 1;
  std::string b = Header(fail_at < 0 ? 0 : status, uint32_t(n + (seq ? 1 : 0)));
  XdrOut x(&b);
  if (seq) SequenceOk(&x);
  for (size_t k = 0; k < n; k++) {
    const Op op = s.c.op(k);
    const bool failed = int(k) == fail_at;
    x.U32(uint32_t(op));
    x.U32(failed ? status : 0);
    if (!failed)
      OkBody(op, &x, fuzz::ReaddirWantsFh(i));
    else if (op == Op::kSetattr)
      x.U32(0);
  }
  return b;
}

void CompoundSeeds(const std::string &target, bool seq) {
  const std::string p = seq ? "" : "";
  for (int i = 0; i < fuzz::kShapes; i++) {
    Put(target, "ok-shape" + std::to_string(i),
        Byte(i) + ShapeReply(i, seq, -1, 0));
    Put(target, "fail-shape" + std::to_string(i),
        Byte(i) + ShapeReply(i, seq, 1, upstream::kNfs4ErrAccess));
  }
  // Issue 15's reproductions. A GETATTR bitmap of 0x40000001 words.
  {
    std::string b = Header(0, seq ? 4 : 3);
    XdrOut x(&b);
    if (seq) SequenceOk(&x);
    x.U32(uint32_t(Op::kPutrootfh));
    x.U32(0);
    x.U32(uint32_t(Op::kGetfh));
    x.U32(0);
    x.Opaque(std::string("fh"));
    x.U32(uint32_t(Op::kGetattr));
    x.U32(0);
    x.U32(0x40000001);
    for (int k = 0; k < 256; k++) x.U32(0xffffffffu);
    Put(target, "repro-bitmap-0x40000001", Byte(0) + b);
  }
  // A result count of 0xffffffff.
  {
    std::string b = Header(0, 0xffffffffu);
    XdrOut x(&b);
    if (seq) SequenceOk(&x);
    x.U32(uint32_t(Op::kPutrootfh));
    x.U32(0);
    Put(target, "repro-nres-0xffffffff", Byte(0) + b);
  }
  // OK with fewer results than operations (LOOKUP's compound, PUTFH only).
  {
    std::string b = Header(0, seq ? 2 : 1);
    XdrOut x(&b);
    if (seq) SequenceOk(&x);
    x.U32(uint32_t(Op::kPutfh));
    x.U32(0);
    Put(target, "repro-short-ok", Byte(1) + b);
  }
  if (seq) {
    std::string b = Header(upstream::kNfs4ErrBadSession, 1);
    XdrOut x(&b);
    x.U32(upstream::nfs41::kOpSequence);
    x.U32(upstream::kNfs4ErrBadSession);
    Put(target, "sequence-failed", Byte(0) + b);
    std::string r = Header(0, 2);
    XdrOut y(&r);
    SequenceOk(&y);
    y.U32(upstream::nfs41::kOpReclaimComplete);
    y.U32(0);
    Put(target, "reclaim-complete", Byte(0xff) + r);
  } else {
    Put(target, "refused-whole",
        Byte(0) + Header(upstream::kNfs4ErrResource, 0));
  }
}

void ReaddirSeeds() {
  for (int fh = 0; fh < 2; fh++) {
    for (int n : {0, 1, 5}) {
      std::string b = Header(0, 2);
      XdrOut x(&b);
      x.U32(uint32_t(Op::kPutfh));
      x.U32(0);
      x.U32(uint32_t(Op::kReaddir));
      x.U32(0);
      Readdir(&x, n, fh != 0);
      Put("readdir", "entries" + std::to_string(n) + (fh ? "-fh" : ""),
          Byte(fh) + b);
    }
  }
  std::string b = Header(upstream::kNfs4ErrBadCookie, 2);
  XdrOut x(&b);
  x.U32(uint32_t(Op::kPutfh));
  x.U32(0);
  x.U32(uint32_t(Op::kReaddir));
  x.U32(upstream::kNfs4ErrBadCookie);
  Put("readdir", "bad-cookie", Byte(0) + b);
}

void AttrsSeeds() {
  // The words, then the attrlist, as fuzz_attrs reads them.
  auto attrs = [](std::vector<uint32_t> words, const std::string &list,
                  bool fh) {
    std::string b = Byte(int(words.size()) | (fh ? 0x80 : 0));
    XdrOut x(&b);
    for (uint32_t w : words) x.U32(w);
    return b + list;
  };
  std::string obj;
  {
    std::string fattr;
    XdrOut x(&fattr);
    Fattr(&x, true);
    // Fattr wrote: count, 2 words, attrlist opaque; take the list.
    rpc::XdrIn in(fattr.data(), fattr.size());
    uint32_t n, w0, w1;
    std::string list;
    in.U32(&n);
    in.U32(&w0);
    in.U32(&w1);
    in.Opaque(&list, 1 << 20);
    Put("attrs", "object-with-fh", attrs({w0, w1}, list, true));
  }
  {
    std::string list;
    XdrOut x(&list);
    x.U32(2);
    x.U32(0xffffffffu);
    x.U32(0xffffffffu);  // supported_attrs
    x.U32(90);           // lease_time
    Put("attrs", "supported-lease",
        attrs({(1u << 0) | (1u << 10)}, list, false));
  }
  {
    std::string list;
    XdrOut x(&list);
    for (int i = 0; i < 6; i++) x.U64(uint64_t(1000 * (i + 1)));  // statfs
    Put("attrs", "statfs",
        attrs({(1u << 21) | (1u << 22) | (1u << 23),
               (1u << 10) | (1u << 11) | (1u << 12)},
              list, false));
  }
  {
    std::string list;
    XdrOut x(&list);
    x.U32(0);  // fs_locations: empty root
    x.U32(1);  // one location
    x.U32(1);
    x.Opaque(std::string("server"));
    x.U32(1);
    x.Opaque(std::string("export"));
    Put("attrs", "fs-locations", attrs({1u << 24}, list, false));
  }
  Put("attrs", "huge-acl-count",
      attrs({1u << 12}, std::string("\x40\0\0\1", 4), false));
}

void Nfs41Seeds() {
  auto put = [](int which, const std::string &name, const std::string &b) {
    Put("nfs41_session", name, Byte(which) + b);
  };
  {
    std::string b;
    XdrOut x(&b);
    x.U32(upstream::nfs41::kOpExchangeId);
    x.U32(0);
    x.U64(0xc11e);
    x.U32(1);
    x.U32(0x10001);
    x.U32(0);
    x.U64(1);
    x.Opaque(std::string("major"));
    x.Opaque(std::string("scope"));
    x.U32(1);
    x.Opaque(std::string("kernel.org"));
    x.Opaque(std::string("Linux"));
    x.U64(0);
    x.U32(0);
    put(0, "exchange-id", b);
  }
  {
    std::string b;
    XdrOut x(&b);
    x.U32(upstream::nfs41::kOpCreateSession);
    x.U32(0);
    x.Fixed(std::string(16, 's').data(), 16);
    x.U32(1);
    x.U32(2);
    for (int c = 0; c < 2; c++) {
      for (uint32_t v : {0u, 1048576u, 1048576u, 8192u, 16u, 64u}) x.U32(v);
      x.U32(0);
    }
    put(1, "create-session", b);
  }
  {
    std::string b;
    XdrOut x(&b);
    SequenceOk(&x);
    put(2, "sequence", b);
  }
  {
    std::string b;
    XdrOut x(&b);
    x.U32(upstream::nfs41::kOpBindConnToSession);
    x.U32(0);
    x.Fixed(std::string(16, 's').data(), 16);
    x.U32(3);
    x.U32(0);
    put(3, "bind-conn", b);
  }
  {
    std::string b;
    XdrOut x(&b);
    x.U32(upstream::nfs41::kOpDestroySession);
    x.U32(0);
    put(4, "destroy-session", b);
  }
  put(5, "reply-header", Header(0, 3));
  {
    std::string b;
    XdrOut x(&b);
    x.Fixed(std::string(16, 's').data(), 16);
    x.U32(1);
    x.U32(0);
    x.U32(0);
    x.U32(0);
    x.U32(1);  // one referring call list
    x.Fixed(std::string(16, 's').data(), 16);
    x.U32(1);
    x.U32(5);
    x.U32(0);
    put(6, "cb-sequence-args", b);
  }
}

// CB_COMPOUND arguments, minor version 1 (the back channel).
std::string CbCompound41(const std::vector<std::string> &ops) {
  std::string b;
  XdrOut x(&b);
  x.Opaque(std::string("cb"));
  x.U32(1);
  x.U32(0);
  x.U32(uint32_t(ops.size()));
  for (const std::string &op : ops) b += op;
  return b;
}

std::string CbSequenceOp(uint32_t seqid) {
  std::string b;
  XdrOut x(&b);
  x.U32(upstream::nfs41::kCbOpSequence);
  x.Fixed(std::string(16, 's').data(), 16);
  x.U32(seqid);
  x.U32(0);
  x.U32(0);
  x.U32(0);
  x.U32(0);
  return b;
}
std::string CbRecallOp() {
  std::string b;
  XdrOut x(&b);
  x.U32(4);
  x.U32(1);
  x.Fixed(std::string(12, 'd').data(), 12);
  x.U32(0);
  x.Opaque(std::string("recalled-fh"));
  return b;
}
std::string CbGetattrOp(uint32_t count) {
  std::string b;
  XdrOut x(&b);
  x.U32(3);
  x.Opaque(std::string("getattr-fh"));
  x.U32(count);
  x.U32((1u << 3) | (1u << 4));
  return b;
}

void BackChannelSeeds() {
  auto put = [](int b, const std::string &name, const std::string &args) {
    Put("back_channel", name, Byte(b) + args);
  };
  put(0, "cb-null", "");
  put(1, "recall", CbCompound41({CbSequenceOp(1), CbRecallOp()}));
  put(3, "getattr-twice", CbCompound41({CbSequenceOp(1), CbGetattrOp(1)}));
  std::string any;
  XdrOut x(&any);
  x.U32(upstream::nfs41::kCbOpRecallAny);
  x.U32(0);
  x.U32(1);
  x.U32(1);
  put(1, "recall-any", CbCompound41({CbSequenceOp(1), any}));
  put(1, "no-sequence", CbCompound41({CbRecallOp()}));
  put(1, "huge-bitmap",
      CbCompound41({CbSequenceOp(1), CbGetattrOp(0x40000001)}));
  std::string illegal;
  XdrOut y(&illegal);
  y.U32(99);
  put(1, "illegal", CbCompound41({CbSequenceOp(1), illegal}));
}

// An RPC call header to the callback program, AUTH_SYS.
std::string CallHeader(uint32_t xid, uint32_t proc) {
  std::string b;
  XdrOut x(&b);
  for (uint32_t v : {xid, 0u, 2u, 0x40000000u, 1u, proc}) x.U32(v);
  std::string cred;
  XdrOut c(&cred);
  c.U32(1);
  c.Opaque(std::string("server"));
  c.U32(0);
  c.U32(0);
  c.U32(0);
  x.U32(1);
  x.Opaque(cred);
  x.U32(0);
  x.U32(0);
  return b;
}

std::string CbCompound40(const std::vector<std::string> &ops, uint32_t ident) {
  std::string b;
  XdrOut x(&b);
  x.Opaque(std::string("cb40"));
  x.U32(0);
  x.U32(ident);
  x.U32(uint32_t(ops.size()));
  for (const std::string &op : ops) b += op;
  return b;
}

void CallbackServerSeeds() {
  Put("callback_server", "cb-null", CallHeader(1, 0));
  Put("callback_server", "recall",
      CallHeader(2, 1) + CbCompound40({CbRecallOp()}, 1));
  Put("callback_server", "getattr",
      CallHeader(3, 1) + CbCompound40({CbGetattrOp(1)}, 1));
  Put("callback_server", "recall-other-ident",
      CallHeader(4, 1) + CbCompound40({CbRecallOp(), CbGetattrOp(2)}, 9));
  Put("callback_server", "huge-bitmap",
      CallHeader(5, 1) + CbCompound40({CbGetattrOp(0x40000001)}, 1));
  std::vector<std::string> many(17, CbRecallOp());
  Put("callback_server", "too-many-ops",
      CallHeader(6, 1) + CbCompound40(many, 1));
  Put("callback_server", "illegal-op",
      CallHeader(7, 1) + CbCompound40({std::string("\0\0\0\x63", 4)}, 1));
  // Issue 15's reproduction: a CB_NULL whose AUTH_SYS credential claims
  // 0x80000000 bytes (libnfs' RPC server, which once decoded the callback
  // service's call headers, read far outside its buffer). The fuzzer's
  // original, found-by-fuzzer-cred-length-0xe6e6e6e6, is kept as found.
  {
    std::string b;
    XdrOut x(&b);
    for (uint32_t v : {1u, 0u, 2u, 0x40000000u, 1u, 0u, 1u, 0x80000000u})
      x.U32(v);
    b.append(64, '\0');
    Put("callback_server", "cb-null-cred-length-0x80000000", b);
  }
}

void TransportSeeds() {
  auto record = [](const std::string &body, bool last = true) {
    std::string r;
    XdrOut x(&r);
    x.U32((last ? 0x80000000u : 0) | uint32_t(body.size()));
    return r + body;
  };
  auto reply = [](uint32_t xid, uint32_t accept, const std::string &results) {
    std::string b;
    XdrOut x(&b);
    for (uint32_t v : {xid, 1u, 0u, 0u, 0u, accept}) x.U32(v);
    return b + results;
  };
  std::string ok = reply(0, 0, ShapeReply(1, false, -1, 0));
  Put("rpc_transport", "reply-ok", record(ok));
  Put("rpc_transport", "replies-out-of-order",
      record(reply(2, 0, "")) + record(reply(0, 1, "")) +
          record(reply(1, 4, "")));
  Put("rpc_transport", "reply-fragmented",
      record(ok.substr(0, 10), false) + record(ok.substr(10)));
  std::string denied;
  XdrOut d(&denied);
  for (uint32_t v : {1u, 1u, 1u, 1u}) d.U32(v);
  Put("rpc_transport", "reply-denied", record(denied));
  Put("rpc_transport", "peer-call-back-channel",
      record(CallHeader(77, 1) +
             CbCompound41({CbSequenceOp(1), CbRecallOp()})) +
          record(reply(0, 0, "")));
  Put("rpc_transport", "peer-call-null", record(CallHeader(78, 0)));
  Put("rpc_transport", "unknown-xid", record(reply(12345, 0, "")));
  Put("rpc_transport", "huge-marker", std::string("\x7f\xff\xff\xff", 4));
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  mkdir(root.c_str(), 0755);
  CompoundSeeds("compound_v40", false);
  CompoundSeeds("compound_v41", true);
  ReaddirSeeds();
  AttrsSeeds();
  Nfs41Seeds();
  BackChannelSeeds();
  CallbackServerSeeds();
  TransportSeeds();
  return 0;
}
