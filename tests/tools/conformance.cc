// conformance: sends NFSv4 COMPOUNDs to a server (nache's front, or any
// NFSv4 server as a reference) and checks the protocol behaviour a client
// relies on, case by case: share reservations, OPEN replays, create modes
// (EXCLUSIVE4_1 over NFSv4.1), an OPEN or its upgrade refused to a caller
// without rights, a create refused to one without the search right, LOCKT,
// OPEN_DOWNGRADE, the change attribute, delegations, and NFSv4.2's ALLOCATE,
// DEALLOCATE, SEEK, COPY and extended attributes. Built on nache's own client
// library (proxy/upstream), which speaks NFSv4.0, 4.1 and 4.2; a case that
// needs two clients uses two client ids (two Upstream instances).
//
//   conformance --server ADDR [--port P] [--path /export] [--minor 0|1|2]
//               [--only REGEX] [--timeout-ms N] [--delegations]
//               [--no-xattrs] [--no-copy] [--unchecked-upgrades] [--list]
//
// --no-xattrs says the server has no extended attributes (stock Ganesha's
// FSAL_VFS): the xattr case then wants NFS4ERR_NOTSUPP, as such a server
// answers, instead of the attributes working. --no-copy says the same of
// NFSv4.2's COPY (stock FSAL_VFS has none either).
//
// --unchecked-upgrades says the server lets an open's owner upgrade the
// open without judging the caller (stock Ganesha 4.3 reopens unchecked):
// the upgrade case then wants the upgrade granted, as such a server does.
//
// --delegations says the server is configured to grant delegations: the
// delegation cases run only then (NFSv4.1: the clients serve a back
// channel), and each first checks that a delegation is granted where
// nothing stands in the way, so that a server granting none fails them
// rather than passing them.
//
// Each case works on files of its own (named conf-<case>-<pid>) and prints
// one line: "PASS name" or "FAIL name: got X, want Y". The exit status is
// 0 when every case run passed, 1 when any failed, 2 on a usage or setup
// error (the server not ready). A case that does not apply to the minor
// version asked for is not run, and says so.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "callback/back_channel.h"
#include "callback/cb_ops.h"
#include "tool_util.h"
#include "upstream/upstream.h"

namespace up = nache::upstream;
using nache::tools::SplitPath;

namespace {

struct Options {
  std::string server = "127.0.0.1";  // the server under test
  int port = 2049;
  std::string path = "/export";  // directory the cases work in
  uint32_t minor = 0;            // NFSv4 minor version to speak
  std::string only;              // regex of case names to run
  int timeout_ms = 20000;        // call timeout and readiness wait
  bool delegations = false;      // the server grants delegations
  bool xattrs = true;            // the server has extended attributes
  bool copy = true;              // the server has COPY
  bool checked_upgrades = true;  // the server judges an open's upgrade
};

// Names of the statuses the cases expect or meet (others print as numbers).
std::string StatusName(uint32_t st) {
  switch (st) {
    case up::kNfs4Ok: return "NFS4_OK";
    case up::kNfs4ErrExist: return "NFS4ERR_EXIST";
    case up::kNfs4ErrDenied: return "NFS4ERR_DENIED";
    case up::kNfs4ErrLocked: return "NFS4ERR_LOCKED";
    case up::kNfs4ErrShareDenied: return "NFS4ERR_SHARE_DENIED";
    case up::kNfs4ErrDelay: return "NFS4ERR_DELAY";
    case up::kNfs4ErrBadSeqid: return "NFS4ERR_BAD_SEQID";
    case up::kNfs4ErrBadStateid: return "NFS4ERR_BAD_STATEID";
    case up::kNfs4ErrOpenmode: return "NFS4ERR_OPENMODE";
    case up::kNfs4ErrInval: return "NFS4ERR_INVAL";
    case up::kNfs4ErrLocksHeld: return "NFS4ERR_LOCKS_HELD";
    case up::kNfs4ErrServerfault: return "NFS4ERR_SERVERFAULT";
    case up::kNfs4ErrAccess: return "NFS4ERR_ACCESS";
    case up::kNfs4ErrNoent: return "NFS4ERR_NOENT";
    case up::kNfs4ErrNxio: return "NFS4ERR_NXIO";
    case up::kNfs4ErrNotsupp: return "NFS4ERR_NOTSUPP";
    case up::kNfs4ErrNoxattr: return "NFS4ERR_NOXATTR";
    default: return "nfsstat4 " + std::to_string(st);
  }
}

// A failed expectation: what was got and what was wanted.
struct Failure {
  std::string got, want;
};

// Thrown out of a case at its first failed expectation; caught by the
// runner, which prints it. Cases stay straight-line code this way.
struct CaseFailed {
  Failure f;
};

[[noreturn]] void Fail(const std::string &got, const std::string &want) {
  throw CaseFailed{{got, want}};
}

void ExpectStatus(const char *what, uint32_t got, uint32_t want) {
  if (got != want)
    Fail(std::string(what) + " " + StatusName(got),
         std::string(what) + " " + StatusName(want));
}

void ExpectTrue(bool ok, const std::string &got, const std::string &want) {
  if (!ok) Fail(got, want);
}

// One NFSv4 client (its own client id) and the seqids of its open-owners.
// The back channel's handler: recalls are acknowledged and counted (a case
// returns its delegations itself).
class CallbackRecorder : public nache::callback::CallbackHandler {
 public:
  void OnContact() override {}
  uint32_t OnRecall(const up::StateId &, bool, const up::Fh &) override {
    recalls_++;
    return up::kNfs4Ok;
  }
  uint32_t OnGetattr(const up::Fh &, uint64_t *, uint64_t *) override {
    return up::kNfs4ErrBadhandle;
  }
  int recalls() const { return recalls_.load(); }

 private:
  std::atomic<int> recalls_{0};
};

class Client {
 public:
  Client(const Options &o, const std::string &id)
      : minor_(o.minor), back_(&recorder_, 0x40000000) {
    up::UpstreamOptions uo;
    uo.server = o.server;
    uo.port = o.port;
    uo.connections = 1;
    uo.call_timeout_ms = o.timeout_ms;
    uo.connect_timeout_ms = 2000;
    uo.minor_version = o.minor;
    uo.auth_machine = "conformance";
    uo.client_id = "nache-conformance-" + id + "-" + std::to_string(getpid());
    if (o.minor >= 1) {  // a back channel, for the server's callbacks
      nache::callback::BackChannel *bc = &back_;
      uo.back_channel = [bc](const nache::rpc::PeerCall &call,
                             nache::rpc::XdrIn *args, std::string *results) {
        return bc->Serve(call, args, results);
      };
      uo.on_new_session = [bc](const std::array<uint8_t, 16> &session,
                               uint32_t slots) {
        bc->SetSession(session, slots);
      };
    }
    u_ = up::Upstream::Create(uo);
    ready_ = u_->WaitReady(o.timeout_ms);
  }
  ~Client() { u_->Shutdown(); }

  bool ready() const { return ready_; }
  uint32_t minor() const { return minor_; }
  // The minor version the session speaks (2 falls back to 1 on a server
  // without NFSv4.2).
  uint32_t session_minor() const { return u_->minor_version(); }
  int recalls() const { return recorder_.recalls(); }

  // Sends c; a transport failure fails the case (it is no protocol
  // answer). Returns the compound's status.
  uint32_t Call(up::Compound &c, up::CompoundReply *reply,
                const up::Creds &cr = up::Creds()) {
    up::CallStatus st = u_->Call(c, cr, reply);
    if (st != up::CallStatus::kOk)
      Fail(c.tag() + ": transport " + up::CallStatusName(st), "a reply");
    return reply->status;
  }

  // The next seqid of an open- or lock-owner (0 for a new one; NFSv4.1
  // ignores them).
  uint32_t &Seqid(const std::string &owner) { return seqids_[owner]; }
  // Counts a seqid-bearing operation's outcome into owner's seqid as the
  // server does (RFC 7530 9.1.7: these errors do not advance it).
  void Advance(const std::string &owner, uint32_t status) {
    switch (status) {
      case up::kNfs4ErrStaleClientid:
      case up::kNfs4ErrStaleStateid:
      case up::kNfs4ErrBadStateid:
      case up::kNfs4ErrBadSeqid:
      case up::kNfs4ErrBadxdr:
      case up::kNfs4ErrResource:
      case up::kNfs4ErrNofilehandle:
      case up::kNfs4ErrMoved: return;
      default: seqids_[owner]++;
    }
  }

 private:
  uint32_t minor_;
  CallbackRecorder recorder_;
  nache::callback::BackChannel back_;  // serves recorder_ (NFSv4.1)
  std::unique_ptr<up::Upstream> u_;
  bool ready_ = false;
  std::map<std::string, uint32_t> seqids_;
};

// An open file as OPEN answered it.
struct Opened {
  uint32_t status = up::kNfs4Ok;  // OPEN's (or OPEN_CONFIRM's) status
  up::Fh fh;                      // the file's handle
  up::StateId stateid;            // open stateid (confirmed)
  up::Delegation delegation;      // what OPEN granted
  std::string owner;              // open-owner
};

// What a case works with: its clients, its directory, its file names.
struct Ctx {
  const Options *o;
  std::string case_name;
  up::Fh dir;  // the export directory
  Client *a, *b;

  std::string File(const char *suffix = "") const {
    return "conf-" + case_name + suffix + "-" + std::to_string(getpid());
  }
  std::string Owner(const char *who) const {
    return "conf-" + case_name + "-" + who;
  }
};

up::Fh LookupDir(Client *c, const std::string &path) {
  up::Compound cp;
  cp.SetTag("lookup_dir").Putrootfh();
  for (const std::string &part : SplitPath(path)) cp.Lookup(part);
  cp.Getfh();
  up::CompoundReply r;
  ExpectStatus("LOOKUP of the directory", c->Call(cp, &r), up::kNfs4Ok);
  return r.Find(up::Op::kGetfh)->fh;
}

// OPEN of args.name in dir by owner, confirmed when NFSv4.0 asks for it.
// args.seqid is filled from the owner's count.
Opened Open(Client *c, const up::Fh &dir, up::OpenArgs args,
            const std::string &owner, const up::Creds &cr = up::Creds()) {
  Opened out;
  out.owner = owner;
  args.owner = owner;
  args.seqid = c->Seqid(owner);
  up::Compound cp;
  cp.SetTag("open").Putfh(dir).Open(args).Getfh();
  up::CompoundReply r;
  c->Call(cp, &r, cr);
  const up::OpResult *o = r.Find(up::Op::kOpen);
  if (o) c->Advance(owner, o->status);
  out.status = r.status;
  if (r.status != up::kNfs4Ok) return out;
  out.fh = r.Find(up::Op::kGetfh)->fh;
  out.stateid = o->stateid;
  out.delegation = o->delegation;
  if (c->minor() == 0 && (o->open_rflags & 2)) {  // OPEN4_RESULT_CONFIRM
    up::Compound cc;
    cc.SetTag("open_confirm")
        .Putfh(out.fh)
        .OpenConfirm(out.stateid, c->Seqid(owner));
    up::CompoundReply cr;
    c->Call(cc, &cr);
    if (const up::OpResult *x = cr.Find(up::Op::kOpenConfirm)) {
      c->Advance(owner, x->status);
      if (x->status == up::kNfs4Ok) out.stateid = x->stateid;
    }
    out.status = cr.status;
  }
  return out;
}

up::OpenArgs OpenArgsFor(const std::string &name, uint32_t access,
                         uint32_t deny) {
  up::OpenArgs a;
  a.name = name;
  a.share_access = access;
  a.share_deny = deny;
  return a;
}

// Creates name (UNCHECKED, mode 0644) and opens it access/deny.
Opened Create(Client *c, const Ctx &x, const std::string &name, uint32_t access,
              uint32_t deny, const std::string &owner) {
  up::OpenArgs a = OpenArgsFor(name, access, deny);
  a.create = up::OpenArgs::Create::kUnchecked;
  a.create_attrs.mask = up::kAttrMode;
  a.create_attrs.mode = 0644;
  return Open(c, x.dir, a, owner);
}

Opened MustOpen(const char *what, Opened o) {
  ExpectStatus(what, o.status, up::kNfs4Ok);
  return o;
}

uint32_t CloseFile(Client *c, const Opened &f) {
  if (f.status != up::kNfs4Ok) return up::kNfs4Ok;
  up::Compound cp;
  cp.SetTag("close").Putfh(f.fh).Close(c->Seqid(f.owner), f.stateid);
  up::CompoundReply r;
  c->Call(cp, &r);
  if (const up::OpResult *o = r.Find(up::Op::kClose))
    c->Advance(f.owner, o->status);
  return r.status;
}

// Returns a delegation a case got (so that its holder is not recalled).
void ReturnDelegation(Client *c, const Opened &f) {
  if (f.delegation.type == up::DelegationType::kNone) return;
  up::Compound cp;
  cp.SetTag("delegreturn").Putfh(f.fh).DelegReturn(f.delegation.stateid);
  up::CompoundReply r;
  c->Call(cp, &r);
}

uint32_t WriteAt(Client *c, const Opened &f, uint64_t off,
                 const std::string &data, up::Attrs *after = nullptr) {
  up::Compound cp;
  cp.SetTag("write")
      .Putfh(f.fh)
      .Write(f.stateid, off, up::StableHow::kFileSync, data.data(),
             uint32_t(data.size()))
      .Getattr(up::kAttrChange | up::kAttrSize);
  up::CompoundReply r;
  uint32_t st = c->Call(cp, &r);
  if (st == up::kNfs4Ok && after) *after = r.Find(up::Op::kGetattr)->attrs;
  return st;
}

uint32_t ReadAt(Client *c, const up::Fh &fh, const up::StateId &sid,
                uint64_t off, uint32_t len, std::string *data) {
  std::vector<char> buf(len);
  up::Compound cp;
  cp.SetTag("read").Putfh(fh).Read(sid, off, len, buf.data());
  up::CompoundReply r;
  uint32_t st = c->Call(cp, &r);
  if (st == up::kNfs4Ok && data)
    data->assign(buf.data(), r.Find(up::Op::kRead)->count);
  return st;
}

up::Attrs Getattr(Client *c, const up::Fh &fh, uint64_t mask) {
  up::Compound cp;
  cp.SetTag("getattr").Putfh(fh).Getattr(mask);
  up::CompoundReply r;
  ExpectStatus("GETATTR", c->Call(cp, &r), up::kNfs4Ok);
  return r.Find(up::Op::kGetattr)->attrs;
}

// Undoes what a case registered (closes, unlocks) when it ends, passed or
// failed, in reverse order.
class Cleanup {
 public:
  ~Cleanup() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      try {
        (*it)();
      } catch (const CaseFailed &) {
        // A cleanup that fails does not change the case's verdict.
      }
    }
  }
  void Add(std::function<void()> fn) { steps_.push_back(std::move(fn)); }
  // Returns f's delegation and closes it.
  void Close(Client *c, const Opened &f) {
    Add([c, f] {
      ReturnDelegation(c, f);
      CloseFile(c, f);
    });
  }

 private:
  std::vector<std::function<void()>> steps_;
};

// --- the cases ----------------------------------------------------------

// A creates a file with an open (a_what: its modes) denying what B's
// OPEN (b_what), which denies nothing, then asks for: SHARE_DENIED.
void ExpectShareDenied(Ctx &x, const char *a_what, uint32_t a_access,
                       uint32_t a_deny, const char *b_what, uint32_t b_access) {
  Cleanup cl;
  std::string name = x.File();
  Opened a =
      MustOpen(a_what, Create(x.a, x, name, a_access, a_deny, x.Owner("a")));
  cl.Close(x.a, a);
  Opened b = Open(x.b, x.dir, OpenArgsFor(name, b_access, up::kShareDenyNone),
                  x.Owner("b"));
  cl.Close(x.b, b);
  ExpectStatus(b_what, b.status, up::kNfs4ErrShareDenied);
}

// OPEN for writing by B while A's open denies writing: SHARE_DENIED.
void ShareDenyWriteRefusesWriter(Ctx &x) {
  ExpectShareDenied(x, "A's OPEN(BOTH, DENY_WRITE)", up::kShareAccessBoth,
                    up::kShareDenyWrite, "B's OPEN(WRITE)",
                    up::kShareAccessWrite);
}

// OPEN for reading by B while A's open denies reading: SHARE_DENIED.
void ShareDenyReadRefusesReader(Ctx &x) {
  ExpectShareDenied(x, "A's OPEN(READ, DENY_READ)", up::kShareAccessRead,
                    up::kShareDenyRead, "B's OPEN(READ)", up::kShareAccessRead);
}

// A denies reading; B's write-only open (which denies nothing) is allowed,
// but a READ through it meets A's deny: LOCKED (RFC 7530 9.9).
void ReadMeetsOtherOpensDenyRead(Ctx &x) {
  Cleanup cl;
  std::string name = x.File();
  Opened a = MustOpen("A's OPEN(READ, DENY_READ)",
                      Create(x.a, x, name, up::kShareAccessRead,
                             up::kShareDenyRead, x.Owner("a")));
  cl.Close(x.a, a);
  Opened b = MustOpen(
      "B's OPEN(WRITE, DENY_NONE)",
      Open(x.b, x.dir,
           OpenArgsFor(name, up::kShareAccessWrite, up::kShareDenyNone),
           x.Owner("b")));
  cl.Close(x.b, b);
  ExpectStatus("B's READ", ReadAt(x.b, b.fh, b.stateid, 0, 16, nullptr),
               up::kNfs4ErrLocked);
}

// Share counters follow the opens: after A's denying open (and a create
// of the file) is closed, B's open that the deny would have refused is
// granted; and while B holds it, A's denying open is refused again.
void ShareReleasedOnClose(Ctx &x) {
  Cleanup cl;
  std::string name = x.File();
  Opened a = MustOpen("A's OPEN(BOTH, DENY_BOTH)",
                      Create(x.a, x, name, up::kShareAccessBoth,
                             up::kShareDenyBoth, x.Owner("a")));
  ExpectStatus("A's CLOSE", CloseFile(x.a, a), up::kNfs4Ok);
  Opened b = Open(x.b, x.dir,
                  OpenArgsFor(name, up::kShareAccessBoth, up::kShareDenyNone),
                  x.Owner("b"));
  cl.Close(x.b, b);
  ExpectStatus("B's OPEN(BOTH) after A's CLOSE", b.status, up::kNfs4Ok);
  Opened a2 = Open(x.a, x.dir,
                   OpenArgsFor(name, up::kShareAccessRead, up::kShareDenyWrite),
                   x.Owner("a"));
  cl.Close(x.a, a2);
  ExpectStatus("A's OPEN(READ, DENY_WRITE) while B writes", a2.status,
               up::kNfs4ErrShareDenied);
}

// Root creates x's file with mode, opened for reading only (closed when
// the case ends); the cases about a caller without rights start here.
Opened CreateForReading(Ctx &x, Cleanup *cl, uint32_t mode) {
  up::OpenArgs ca =
      OpenArgsFor(x.File(), up::kShareAccessRead, up::kShareDenyNone);
  ca.create = up::OpenArgs::Create::kUnchecked;
  ca.create_attrs.mask = up::kAttrMode;
  ca.create_attrs.mode = mode;
  Opened a = MustOpen("root's OPEN(READ) creating it",
                      Open(x.a, x.dir, ca, x.Owner("a")));
  cl->Close(x.a, a);
  return a;
}

// A caller who is neither the files' owner nor in their group.
up::Creds User2000() {
  up::Creds user;
  user.uid = user.gid = 2000;
  return user;
}

// A caller without the rights to a file (root's, mode 0600) is refused
// its OPEN by the server (NFS4ERR_ACCESS), not only by its own client's
// ACCESS check first: for writing, more than the open the server may
// still hold for the file's creator (reading), and for reading, which
// that open covers. By handle (CLAIM_FH) over NFSv4.1, by name over
// NFSv4.0.
void OpenRefusedToACallerWithoutRights(Ctx &x) {
  Cleanup cl;
  const std::string name = x.File();
  Opened a = CreateForReading(x, &cl, 0600);
  const up::Creds user = User2000();
  for (uint32_t access :
       {uint32_t(up::kShareAccessWrite), uint32_t(up::kShareAccessRead)}) {
    up::OpenArgs ua = OpenArgsFor(name, access, up::kShareDenyNone);
    up::Fh at = x.dir;
    if (x.b->session_minor() >= 1) {
      ua.claim = up::OpenArgs::Claim::kFh;
      ua.name.clear();
      at = a.fh;
    }
    Opened u = Open(x.b, at, ua, x.Owner("u"), user);
    cl.Close(x.b, u);
    ExpectStatus(access == up::kShareAccessWrite ? "uid 2000's OPEN(WRITE)"
                                                 : "uid 2000's OPEN(READ)",
                 u.status, up::kNfs4ErrAccess);
  }
}

// A caller who may read a file but not write it (root's, mode 0644) opens
// it for reading, then asks the same open-owner's OPEN for writing: an
// upgrade of that open, refused (NFS4ERR_ACCESS); the open it upgrades
// earns it nothing. The server's own open of the file (a proxy's) is for
// reading only, so a proxy upgrades it too. (--unchecked-upgrades: the
// server grants it, as stock Ganesha 4.3 does.)
void UpgradeRefusedToACallerWithoutRights(Ctx &x) {
  Cleanup cl;
  const std::string name = x.File();
  CreateForReading(x, &cl, 0644);
  const up::Creds user = User2000();
  Opened r =
      MustOpen("uid 2000's OPEN(READ)",
               Open(x.b, x.dir,
                    OpenArgsFor(name, up::kShareAccessRead, up::kShareDenyNone),
                    x.Owner("u"), user));
  cl.Close(x.b, r);
  Opened w = Open(x.b, x.dir,
                  OpenArgsFor(name, up::kShareAccessWrite, up::kShareDenyNone),
                  x.Owner("u"), user);
  ExpectStatus("the same open-owner's OPEN(WRITE)", w.status,
               x.o->checked_upgrades ? up::kNfs4ErrAccess : up::kNfs4Ok);
}

// An OPEN by name of a file its open-owner has open already is that open,
// upgraded: the same stateid, its seqid one on (RFC 8881 section 18.16.3,
// RFC 7530 section 16.16.5), never a second open of the owner's; also
// when the OPEN is an UNCHECKED create of it. (A server that opens such a
// create's name without looking it up first, as nache's front does, finds
// the owner's open after.)
void OpenByNameAgainUpgradesTheOwnersOpen(Ctx &x) {
  Opened last;  // the owner's open as last answered (outlives the cleanup)
  Cleanup cl;
  const std::string name = x.File();
  Opened r = MustOpen("OPEN(READ) creating it",
                      Create(x.a, x, name, up::kShareAccessRead,
                             up::kShareDenyNone, x.Owner("a")));
  // Without create, then as an UNCHECKED create that truncates nothing
  // (O_CREAT without O_EXCL or O_TRUNC) of the file that exists.
  up::OpenArgs again[2] = {
      OpenArgsFor(name, up::kShareAccessWrite, up::kShareDenyNone),
      OpenArgsFor(name, up::kShareAccessBoth, up::kShareDenyNone)};
  again[1].create = up::OpenArgs::Create::kUnchecked;
  again[1].create_attrs.mask = up::kAttrMode;
  again[1].create_attrs.mode = 0644;
  const char *what[2] = {"the same owner's OPEN(WRITE) by name",
                         "the same owner's UNCHECKED create of it"};
  last = r;
  cl.Add([&x, &last] { CloseFile(x.a, last); });
  for (int i = 0; i < 2; i++) {
    Opened o = Open(x.a, x.dir, again[i], x.Owner("a"));
    ExpectStatus(what[i], o.status, up::kNfs4Ok);
    const bool same = std::memcmp(o.stateid.other, last.stateid.other,
                                  sizeof(last.stateid.other)) == 0;
    const uint32_t before = last.stateid.seqid;
    last = o;
    ExpectTrue(same && o.stateid.seqid == before + 1,
               std::string(what[i]) + ": " +
                   (same ? "the open's stateid at seqid " +
                               std::to_string(o.stateid.seqid) + " after " +
                               std::to_string(before)
                         : std::string("another stateid, a second open")),
               "the open's stateid, its seqid one on");
  }
}

// Root makes a directory of mode 0700 in the export holding a file "f" of
// mode 0666, open for reading by root (closed, and both removed, by cl):
// the directory's handle.
up::Fh UnsearchableDirWithAFile(Ctx &x, Cleanup *cl) {
  const std::string dname = x.File("-dir");
  up::Attrs dmode;
  dmode.mask = up::kAttrMode;
  dmode.mode = 0700;
  up::Compound mk;
  mk.SetTag("mkdir")
      .Putfh(x.dir)
      .Create(up::FileType::kDir, dname, dmode)
      .Getfh();
  up::CompoundReply mr;
  ExpectStatus("root's CREATE of the directory", x.a->Call(mk, &mr),
               up::kNfs4Ok);
  const up::Fh d = mr.Find(up::Op::kGetfh)->fh;
  cl->Add([x, d, dname] {
    up::Compound rm;
    rm.SetTag("remove").Putfh(d).Remove("f");
    up::CompoundReply rr;
    x.a->Call(rm, &rr);
    up::Compound rd;
    rd.SetTag("remove").Putfh(x.dir).Remove(dname);
    x.a->Call(rd, &rr);
  });
  up::OpenArgs ca = OpenArgsFor("f", up::kShareAccessRead, up::kShareDenyNone);
  ca.create = up::OpenArgs::Create::kUnchecked;
  ca.create_attrs.mask = up::kAttrMode;
  ca.create_attrs.mode = 0666;
  Opened a = MustOpen("root's OPEN(READ) creating the file in it",
                      Open(x.a, d, ca, x.Owner("a")));
  cl->Close(x.a, a);
  return d;
}

// A caller without the search right to a directory (root's, mode 0700) is
// refused an OPEN by name of a file in it (NFS4ERR_ACCESS), though the
// file's own mode (0666) would let it in, and though the file is open for
// its creator: also where the server checks the directory after opening
// (nache's front, for a name it does not hold).
void OpenByNameNeedsTheSearchRight(Ctx &x) {
  Cleanup cl;
  const up::Fh d = UnsearchableDirWithAFile(x, &cl);
  Opened u =
      Open(x.b, d, OpenArgsFor("f", up::kShareAccessRead, up::kShareDenyNone),
           x.Owner("u"), User2000());
  cl.Close(x.b, u);
  ExpectStatus("uid 2000's OPEN(READ) by name", u.status, up::kNfs4ErrAccess);
}

// A caller without the search right to a directory (root's, mode 0700) is
// refused a GUARDED or EXCLUSIVE create by name in it (NFS4ERR_ACCESS),
// of a name that is taken as of one that is not: whether a name is taken
// is not told to it. Also where the server answers a create of a name it
// knows is taken without asking its own server (nache's front: the
// directory listed first, by root), and once the caller's ACCESS answer
// for the directory is kept there.
void CreateByNameNeedsTheSearchRight(Ctx &x) {
  Cleanup cl;
  const up::Fh d = UnsearchableDirWithAFile(x, &cl);
  // Root looks up a name that is not there (a proxy lists the directory).
  up::Compound lk;
  lk.SetTag("lookup").Putfh(d).Lookup("absent");
  up::CompoundReply lr;
  ExpectStatus("root's LOOKUP of a name not there", x.a->Call(lk, &lr),
               up::kNfs4ErrNoent);
  const up::Creds user = User2000();
  const bool v41 = x.b->session_minor() >= 1;
  auto creates = [&](const char *when) {
    for (const char *name : {"f", "g"}) {
      for (up::OpenArgs::Create mode :
           {up::OpenArgs::Create::kGuarded,
            v41 ? up::OpenArgs::Create::kExclusive41
                : up::OpenArgs::Create::kExclusive}) {
        up::OpenArgs ua =
            OpenArgsFor(name, up::kShareAccessWrite, up::kShareDenyNone);
        ua.create = mode;
        if (mode == up::OpenArgs::Create::kGuarded) {
          ua.create_attrs.mask = up::kAttrMode;
          ua.create_attrs.mode = 0644;
        } else {
          ua.create_verf = up::Verifier("\x11\x22\x33\x44\x55\x66\x77\x88", 8);
        }
        Opened u = Open(x.b, d, ua, x.Owner("u"), user);
        cl.Close(x.b, u);
        const std::string what =
            std::string("uid 2000's ") +
            (mode == up::OpenArgs::Create::kGuarded ? "GUARDED" : "EXCLUSIVE") +
            " create of " +
            (std::string(name) == "f" ? "the taken name" : "a free name") +
            ", " + when;
        ExpectStatus(what.c_str(), u.status, up::kNfs4ErrAccess);
      }
    }
  };
  creates("nothing asked before");
  // uid 2000 asks its rights to the directory (a proxy keeps the answer).
  up::Compound ac;
  ac.SetTag("access").Putfh(d).Access(up::kAccessLookup | up::kAccessRead);
  up::CompoundReply ar;
  ExpectStatus("uid 2000's ACCESS of the directory", x.b->Call(ac, &ar, user),
               up::kNfs4Ok);
  creates("its ACCESS answered");
}

// NFSv4.0: an OPEN sent again with the same owner and seqid is a replay,
// answered from the server's cache with the same reply.
void OpenReplayGetsCachedReply(Ctx &x) {
  Cleanup cl;
  std::string owner = x.Owner("a");
  // Confirm the owner with an open of a file of its own.
  Opened first = MustOpen("OPEN of the first file",
                          Create(x.a, x, x.File("-1"), up::kShareAccessBoth,
                                 up::kShareDenyNone, owner));
  cl.Close(x.a, first);
  up::OpenArgs args =
      OpenArgsFor(x.File(), up::kShareAccessBoth, up::kShareDenyWrite);
  args.create = up::OpenArgs::Create::kUnchecked;
  args.create_attrs.mask = up::kAttrMode;
  args.create_attrs.mode = 0644;
  args.owner = owner;
  uint32_t seqid = x.a->Seqid(owner);
  args.seqid = seqid;
  up::CompoundReply r1, r2;
  up::Compound c1, c2;
  c1.SetTag("open").Putfh(x.dir).Open(args).Getfh();
  c2.SetTag("open_replay").Putfh(x.dir).Open(args).Getfh();
  x.a->Call(c1, &r1);
  ExpectStatus("OPEN", r1.status, up::kNfs4Ok);
  x.a->Advance(owner, r1.status);
  Opened f;
  f.fh = r1.Find(up::Op::kGetfh)->fh;
  f.stateid = r1.Find(up::Op::kOpen)->stateid;
  f.owner = owner;
  cl.Close(x.a, f);
  x.a->Call(c2, &r2);
  ExpectStatus("the same OPEN again (replay)", r2.status, up::kNfs4Ok);
  ExpectTrue(r2.Find(up::Op::kOpen)->stateid == f.stateid,
             "replay answered with another stateid",
             "the cached reply's stateid");
}

// UNCHECKED create of an existing file opens it: its attributes are left
// alone, but a size of 0 truncates it (RFC 7530 16.16.5); also when the
// same open-owner already holds it open (an open upgrade).
void UncheckedCreateOfExistingTruncates(Ctx &x) {
  Cleanup cl;
  std::string name = x.File();
  Opened w = MustOpen("OPEN creating the file",
                      Create(x.a, x, name, up::kShareAccessBoth,
                             up::kShareDenyNone, x.Owner("a")));
  cl.Close(x.a, w);
  ExpectStatus("WRITE", WriteAt(x.a, w, 0, "0123456789"), up::kNfs4Ok);

  up::OpenArgs a = OpenArgsFor(name, up::kShareAccessBoth, up::kShareDenyNone);
  a.create = up::OpenArgs::Create::kUnchecked;
  a.create_attrs.mask = up::kAttrMode | up::kAttrSize;
  a.create_attrs.mode = 0600;
  a.create_attrs.size = 0;
  // By another owner: a new open of the file.
  Opened z = MustOpen("UNCHECKED OPEN(size 0) by another owner",
                      Open(x.b, x.dir, a, x.Owner("b")));
  cl.Close(x.b, z);
  up::Attrs at = Getattr(x.b, z.fh, up::kAttrSize | up::kAttrMode);
  ExpectTrue(
      at.size == 0 && at.mode == 0644,
      "size " + std::to_string(at.size) + " mode " + std::to_string(at.mode),
      "size 0 mode " + std::to_string(0644));
  ExpectStatus("WRITE", WriteAt(x.b, z, 0, "abcdefgh"), up::kNfs4Ok);
  // By the owner that holds it open.
  Opened u = MustOpen("UNCHECKED OPEN(size 0) by the owner holding it open",
                      Open(x.a, x.dir, a, x.Owner("a")));
  at = Getattr(x.a, u.fh, up::kAttrSize | up::kAttrMode);
  ExpectTrue(
      at.size == 0 && at.mode == 0644,
      "size " + std::to_string(at.size) + " mode " + std::to_string(at.mode),
      "size 0 mode " + std::to_string(0644));
}

// After an exclusive create a (mode: its name) made first: the same
// create sent again by a new owner (so no replay cache answers it) opens
// the file it made; with another verifier (8 bytes), from the other
// client, it meets NFS4ERR_EXIST.
void ExpectTheVerifierDecides(Ctx &x, Cleanup *cl, up::OpenArgs a,
                              const Opened &first, const std::string &mode,
                              const char *other_verf) {
  Opened again = Open(x.a, x.dir, a, x.Owner("a-retry"));
  cl->Close(x.a, again);
  ExpectStatus((mode + " create again, same verifier").c_str(), again.status,
               up::kNfs4Ok);
  ExpectTrue(again.fh == first.fh, "another file", "the file it created");
  a.create_verf = up::Verifier(other_verf, 8);
  Opened other = Open(x.b, x.dir, a, x.Owner("b"));
  cl->Close(x.b, other);
  ExpectStatus((mode + " create, another verifier").c_str(), other.status,
               up::kNfs4ErrExist);
}

// An EXCLUSIVE4 create sent again with the same verifier (a retry whose
// reply was lost) opens the file it made; another verifier gets EXIST.
void ExclusiveCreateResentSameVerifier(Ctx &x) {
  Cleanup cl;
  std::string name = x.File();
  up::OpenArgs a = OpenArgsFor(name, up::kShareAccessBoth, up::kShareDenyNone);
  a.create = up::OpenArgs::Create::kExclusive;
  a.create_verf = up::Verifier("\x11\x22\x33\x44\x55\x66\x77\x08", 8);
  Opened first =
      MustOpen("EXCLUSIVE4 create", Open(x.a, x.dir, a, x.Owner("a")));
  cl.Close(x.a, first);
  ExpectTheVerifierDecides(x, &cl, a, first, "EXCLUSIVE4",
                           "\x99\x88\x77\x66\x55\x44\x33\x02");
}

// NFSv4.1's EXCLUSIVE4_1: the verifier and the attributes in one create
// (RFC 8881 18.16.3). The attributes are applied; a retry with the same
// verifier opens the file it made; another verifier meets NFS4ERR_EXIST.
void Exclusive41CreateResentSameVerifier(Ctx &x) {
  Cleanup cl;
  std::string name = x.File();
  up::OpenArgs a = OpenArgsFor(name, up::kShareAccessBoth, up::kShareDenyNone);
  a.create = up::OpenArgs::Create::kExclusive41;
  a.create_verf = up::Verifier("\x21\x32\x43\x54\x65\x76\x07\x18", 8);
  a.create_attrs.mask = up::kAttrMode;
  a.create_attrs.mode = 0640;
  Opened first =
      MustOpen("EXCLUSIVE4_1 create", Open(x.a, x.dir, a, x.Owner("a")));
  cl.Close(x.a, first);
  up::Attrs at = Getattr(x.a, first.fh, up::kAttrMode);
  ExpectTrue(at.mode == 0640, "mode " + std::to_string(at.mode),
             "mode " + std::to_string(0640));
  ExpectTheVerifierDecides(x, &cl, a, first, "EXCLUSIVE4_1",
                           "\x98\x87\x76\x65\x54\x43\x32\x01");
}

// A write lock of [0, length) by a new lock-owner of open f, through c;
// its LOCKU goes into cl. A failure is reported (and ends the case).
void WriteLockNewOwner(Client *c, Cleanup *cl, const Opened &f,
                       const std::string &lock_owner, uint64_t length) {
  up::LockArgs l;
  l.type = up::LockType::kWrite;
  l.offset = 0;
  l.length = length;
  l.new_lock_owner = true;
  l.open_seqid = c->Seqid(f.owner);
  l.open_stateid = f.stateid;
  l.lock_seqid = 0;
  l.owner = lock_owner;
  up::Compound cp;
  cp.SetTag("lock").Putfh(f.fh).Lock(l);
  up::CompoundReply r;
  c->Call(cp, &r);
  if (const up::OpResult *o = r.Find(up::Op::kLock))
    c->Advance(f.owner, o->status);
  ExpectStatus(("LOCK(WRITE, 0, " + std::to_string(length) + ")").c_str(),
               r.status, up::kNfs4Ok);
  up::StateId lsid = r.Find(up::Op::kLock)->stateid;
  cl->Add([c, fh = f.fh, lsid, length] {
    up::Compound u;
    u.SetTag("locku").Putfh(fh).Locku(up::LockType::kWrite, 1, lsid, 0, length);
    up::CompoundReply ur;
    c->Call(u, &ur);
  });
}

// LOCKT by the owner of the only lock in the range: no conflict.
void LocktOwnLockIsNoConflict(Ctx &x) {
  Cleanup cl;
  Opened f =
      MustOpen("OPEN(BOTH)", Create(x.a, x, x.File(), up::kShareAccessBoth,
                                    up::kShareDenyNone, x.Owner("a")));
  cl.Close(x.a, f);
  std::string lock_owner = x.Owner("lock");
  WriteLockNewOwner(x.a, &cl, f, lock_owner, 100);
  up::Compound t;
  t.SetTag("lockt").Putfh(f.fh).Lockt(up::LockType::kWrite, 0, 100, 0,
                                      lock_owner);
  up::CompoundReply tr;
  ExpectStatus("LOCKT(WRITE, 0, 100) by the lock's owner", x.a->Call(t, &tr),
               up::kNfs4Ok);
}

// OPEN_DOWNGRADE, while a lock-owner of the open holds a lock, back to
// the access of the first of the owner's two OPENs (READ, then WRITE).
void OpenDowngradeWithLocksHeld(Ctx &x) {
  Cleanup cl;
  std::string name = x.File();
  Opened rd = MustOpen("OPEN(READ)", Create(x.a, x, name, up::kShareAccessRead,
                                            up::kShareDenyNone, x.Owner("a")));
  Opened f = MustOpen(
      "OPEN(WRITE) by the same owner",
      Open(x.a, x.dir,
           OpenArgsFor(name, up::kShareAccessWrite, up::kShareDenyNone),
           x.Owner("a")));
  ExpectTrue(std::memcmp(f.stateid.other, rd.stateid.other, 12) == 0,
             "another open stateid for the same owner and file",
             "the open upgraded");
  // Closed with the stateid the downgrade returns, when it returns one.
  auto live = std::make_shared<Opened>(f);
  cl.Add([c = x.a, live] { CloseFile(c, *live); });
  WriteLockNewOwner(x.a, &cl, f, x.Owner("lock"), 10);
  up::Compound d;
  d.SetTag("open_downgrade")
      .Putfh(f.fh)
      .OpenDowngrade(f.stateid, x.a->Seqid(f.owner), up::kShareAccessRead,
                     up::kShareDenyNone);
  up::CompoundReply dr;
  x.a->Call(d, &dr);
  if (const up::OpResult *o = dr.Find(up::Op::kOpenDowngrade))
    x.a->Advance(f.owner, o->status);
  ExpectStatus("OPEN_DOWNGRADE(READ)", dr.status, up::kNfs4Ok);
  live->stateid = dr.Find(up::Op::kOpenDowngrade)->stateid;
}

// Each WRITE moves the change attribute, as the writer sees it: in the
// GETATTR after it in the same COMPOUND, in a GETATTR of its own, and for
// two WRITEs in one COMPOUND.
void ChangeMovesOnEveryWrite(Ctx &x) {
  Cleanup cl;
  Opened f =
      MustOpen("OPEN(BOTH)", Create(x.a, x, x.File(), up::kShareAccessBoth,
                                    up::kShareDenyNone, x.Owner("a")));
  cl.Close(x.a, f);
  std::vector<uint64_t> seen{Getattr(x.a, f.fh, up::kAttrChange).change};
  up::Attrs a;
  ExpectStatus("first WRITE", WriteAt(x.a, f, 0, "first", &a), up::kNfs4Ok);
  seen.push_back(a.change);
  ExpectStatus("second WRITE", WriteAt(x.a, f, 5, "second", &a), up::kNfs4Ok);
  seen.push_back(a.change);
  seen.push_back(Getattr(x.a, f.fh, up::kAttrChange).change);
  ExpectStatus("third WRITE", WriteAt(x.a, f, 11, "third"), up::kNfs4Ok);
  seen.push_back(Getattr(x.a, f.fh, up::kAttrChange).change);
  const char d1[] = "fourth", d2[] = "fifth";
  up::Compound cp;
  cp.SetTag("write_write")
      .Putfh(f.fh)
      .Write(f.stateid, 16, up::StableHow::kFileSync, d1, 6)
      .Getattr(up::kAttrChange)
      .Write(f.stateid, 22, up::StableHow::kFileSync, d2, 5)
      .Getattr(up::kAttrChange);
  up::CompoundReply r;
  ExpectStatus("WRITE, GETATTR, WRITE, GETATTR", x.a->Call(cp, &r),
               up::kNfs4Ok);
  seen.push_back(r.Find(up::Op::kGetattr, 0)->attrs.change);
  seen.push_back(r.Find(up::Op::kGetattr, 1)->attrs.change);
  // Moved by every WRITE: all differ but the GETATTR right after the
  // second WRITE's (index 2 and 3: no WRITE in between).
  std::string got;
  bool ok = true;
  for (size_t i = 0; i < seen.size(); i++) {
    got += (i ? " " : "") + std::to_string(seen[i]);
    if (i > 0 && i != 3 && seen[i] == seen[i - 1]) ok = false;
  }
  ExpectTrue(ok && seen[3] == seen[2], "change values " + got,
             "a new change value after each WRITE (and the same one "
             "without a WRITE in between)");
}

const char *DelegationName(up::DelegationType t) {
  switch (t) {
    case up::DelegationType::kNone: return "no";
    case up::DelegationType::kRead: return "a read";
    case up::DelegationType::kWrite: return "a write";
  }
  return "an unknown";
}

// A read delegation lets its holder serve the file's data and attributes
// from its own cache without asking: the server must not grant one while
// another client has the file open for writing (RFC 8881 section 10.4), or
// the holder goes on serving what the writer has since changed.
void NoReadDelegationWhileAnotherWrites(Ctx &x) {
  // The control: alone on the file, b is delegated (this server grants
  // delegations to b at all).
  Opened alone = MustOpen("b's create (read)",
                          Create(x.b, x, x.File(), up::kShareAccessRead,
                                 up::kShareDenyNone, x.Owner("b")));
  const up::DelegationType control = alone.delegation.type;
  ReturnDelegation(x.b, alone);
  CloseFile(x.b, alone);
  ExpectTrue(control != up::DelegationType::kNone,
             "no delegation for the file's only opener",
             "a delegation (the control: the server grants them to b)");
  Opened writer = MustOpen(
      "a's open for write",
      Open(x.a, x.dir,
           OpenArgsFor(x.File(), up::kShareAccessWrite, up::kShareDenyNone),
           x.Owner("a")));
  Opened reader = MustOpen(
      "b's open for read",
      Open(x.b, x.dir,
           OpenArgsFor(x.File(), up::kShareAccessRead, up::kShareDenyNone),
           x.Owner("b")));
  const up::DelegationType got = reader.delegation.type;
  ReturnDelegation(x.b, reader);
  CloseFile(x.b, reader);
  CloseFile(x.a, writer);
  ExpectTrue(got == up::DelegationType::kNone,
             std::string(DelegationName(got)) +
                 " delegation while a has the file open for writing",
             "no delegation");
}

// A read delegation is recalled before another client's OPEN for writing
// by name is granted (RFC 8881 section 10.4.1), also where the server opens
// the name before it knows the file (nache's front, for a name it does not
// hold): NFS4ERR_DELAY while b holds it, b recalled, and the OPEN granted
// once b has returned it. wa is a's OPEN: without create, or an UNCHECKED
// create of the file (O_CREAT without O_EXCL or O_TRUNC); what names it.
void WriteOpenRecallsAReadDelegation(Ctx &x, up::OpenArgs wa,
                                     const char *what) {
  Cleanup cl;
  Opened held = MustOpen("b's create (read)",
                         Create(x.b, x, wa.name, up::kShareAccessRead,
                                up::kShareDenyNone, x.Owner("b")));
  cl.Close(x.b, held);
  ExpectTrue(held.delegation.type == up::DelegationType::kRead,
             std::string(DelegationName(held.delegation.type)) +
                 " delegation for the file's only opener",
             "a read delegation (the control: the server grants them to b)");
  const int recalls = x.b->recalls();
  Opened w = Open(x.a, x.dir, wa, x.Owner("a"));
  cl.Close(x.a, w);
  const std::string held_what =
      std::string("a's ") + what + " (WRITE) while b holds a read delegation";
  ExpectStatus(held_what.c_str(), w.status, up::kNfs4ErrDelay);
  // The recall comes on b's back channel, from another thread.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (x.b->recalls() == recalls && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ExpectTrue(x.b->recalls() > recalls, "b not recalled within 10 s",
             "b's delegation recalled");
  ReturnDelegation(x.b, held);
  Opened w2 = Open(x.a, x.dir, wa, x.Owner("a"));
  cl.Close(x.a, w2);
  ExpectStatus("a's OPEN(WRITE) once b returned its delegation", w2.status,
               up::kNfs4Ok);
}

void OpenByNameForWritingRecallsAReadDelegation(Ctx &x) {
  WriteOpenRecallsAReadDelegation(
      x, OpenArgsFor(x.File(), up::kShareAccessWrite, up::kShareDenyNone),
      "OPEN by name");
}

void UncheckedCreateForWritingRecallsAReadDelegation(Ctx &x) {
  up::OpenArgs wa =
      OpenArgsFor(x.File(), up::kShareAccessWrite, up::kShareDenyNone);
  wa.create = up::OpenArgs::Create::kUnchecked;
  wa.create_attrs.mask = up::kAttrMode;
  wa.create_attrs.mode = 0644;
  WriteOpenRecallsAReadDelegation(x, wa, "UNCHECKED create");
}

// --- NFSv4.2 (RFC 7862, RFC 8276) ---------------------------------------

// Creates a file of the case's, open for reading and writing, written with
// data at 0 (none when empty).
Opened CreateWritten(Ctx &x, Cleanup *cl, const std::string &data,
                     const char *suffix = "") {
  Opened f = MustOpen("OPEN(BOTH)",
                      Create(x.a, x, x.File(suffix), up::kShareAccessBoth,
                             up::kShareDenyNone, x.Owner("a")));
  cl->Close(x.a, f);
  if (!data.empty())
    ExpectStatus("WRITE", WriteAt(x.a, f, 0, data), up::kNfs4Ok);
  return f;
}

uint32_t Fallocate(Client *c, const Opened &f, bool allocate, uint64_t off,
                   uint64_t len) {
  up::Compound cp;
  cp.SetTag(allocate ? "allocate" : "deallocate").Putfh(f.fh);
  if (allocate)
    cp.Allocate(f.stateid, off, len);
  else
    cp.Deallocate(f.stateid, off, len);
  up::CompoundReply r;
  return c->Call(cp, &r);
}

// ALLOCATE past the end makes the file that long, reading as zeros.
void AllocateExtendsWithZeros(Ctx &x) {
  Cleanup cl;
  Opened f = CreateWritten(x, &cl, "");
  ExpectStatus("ALLOCATE [0, 8192)", Fallocate(x.a, f, true, 0, 8192),
               up::kNfs4Ok);
  const uint64_t size = Getattr(x.a, f.fh, up::kAttrSize).size;
  ExpectTrue(size == 8192, "size " + std::to_string(size), "size 8192");
  std::string data;
  ExpectStatus("READ", ReadAt(x.a, f.fh, f.stateid, 4000, 16, &data),
               up::kNfs4Ok);
  ExpectTrue(data == std::string(16, '\0'),
             std::to_string(data.size()) + " bytes, not all zero",
             "16 zero bytes");
}

// DEALLOCATE makes a hole: its bytes read as zeros, the rest and the size
// stay; a reader that had read them before (another client) sees zeros.
void DeallocateReadsZeros(Ctx &x) {
  Cleanup cl;
  Opened f = CreateWritten(x, &cl, "0123456789abcdef");
  std::string before;
  ExpectStatus("b's READ before",
               ReadAt(x.b, f.fh, up::StateId::Anonymous(), 0, 16, &before),
               up::kNfs4Ok);
  ExpectStatus("DEALLOCATE [4, 12)", Fallocate(x.a, f, false, 4, 8),
               up::kNfs4Ok);
  const std::string want = "0123" + std::string(8, '\0') + "cdef";
  std::string data;
  ExpectStatus("READ", ReadAt(x.a, f.fh, f.stateid, 0, 16, &data), up::kNfs4Ok);
  ExpectTrue(data == want, "other bytes", "0123, 8 zeros, cdef");
  ExpectStatus("b's READ after",
               ReadAt(x.b, f.fh, up::StateId::Anonymous(), 0, 16, &data),
               up::kNfs4Ok);
  ExpectTrue(data == want, "other bytes for b", "0123, 8 zeros, cdef");
  const uint64_t size = Getattr(x.a, f.fh, up::kAttrSize).size;
  ExpectTrue(size == 16, "size " + std::to_string(size), "size 16");
}

// SEEK: data where the data is, the hole at the end of the file, nothing
// past it.
void SeekFindsDataAndTheHoleAtTheEnd(Ctx &x) {
  Cleanup cl;
  Opened f = CreateWritten(x, &cl, "0123456789");
  auto seek = [&](uint64_t off, up::SeekWhat what, uint64_t *at) {
    up::Compound cp;
    cp.SetTag("seek").Putfh(f.fh).Seek(f.stateid, off, what);
    up::CompoundReply r;
    uint32_t st = x.a->Call(cp, &r);
    if (st == up::kNfs4Ok) *at = r.Find(up::Op::kSeek)->offset;
    return st;
  };
  uint64_t at = 99;
  ExpectStatus("SEEK(DATA, 0)", seek(0, up::SeekWhat::kData, &at), up::kNfs4Ok);
  ExpectTrue(at == 0, "data at " + std::to_string(at), "data at 0");
  ExpectStatus("SEEK(HOLE, 0)", seek(0, up::SeekWhat::kHole, &at), up::kNfs4Ok);
  ExpectTrue(at == 10, "hole at " + std::to_string(at), "hole at 10");
  ExpectStatus("SEEK(DATA, 20)", seek(20, up::SeekWhat::kData, &at),
               up::kNfs4ErrNxio);
}

uint32_t SetXattr(Client *c, const up::Fh &fh, up::XattrOption opt,
                  const std::string &name, const std::string &value) {
  up::Compound cp;
  cp.SetTag("setxattr").Putfh(fh).Setxattr(opt, name, value);
  up::CompoundReply r;
  return c->Call(cp, &r);
}

uint32_t GetXattr(Client *c, const up::Fh &fh, const std::string &name,
                  std::string *value) {
  up::Compound cp;
  cp.SetTag("getxattr").Putfh(fh).Getxattr(name);
  up::CompoundReply r;
  uint32_t st = c->Call(cp, &r);
  if (st == up::kNfs4Ok) *value = r.Find(up::Op::kGetxattr)->data;
  return st;
}

// COPY (RFC 7862 15.2) of src's bytes from src_off into dst_fh at dst_off
// (count 0: to the end); the bytes copied in *copied.
uint32_t CopyRange(Client *c, const Opened &src, const up::Fh &dst_fh,
                   const up::StateId &dst_sid, uint64_t src_off,
                   uint64_t dst_off, uint64_t count, uint64_t *copied) {
  up::Compound cp;
  cp.SetTag("copy").Putfh(src.fh).Savefh().Putfh(dst_fh).Copy(
      src.stateid, dst_sid, src_off, dst_off, count);
  up::CompoundReply r;
  uint32_t st = c->Call(cp, &r);
  if (st == up::kNfs4Ok) *copied = r.Find(up::Op::kCopy)->copied;
  return st;
}

// A server-side COPY within the server, to the end of the source: the
// bytes are in the destination, synchronously; a destination stateid
// that was not opened for writing is refused (NFS4ERR_OPENMODE). A server
// without COPY refuses it (NFS4ERR_NOTSUPP).
void CopyWithinTheServer(Ctx &x) {
  Cleanup cl;
  Opened src = CreateWritten(x, &cl, "0123456789abcdef", "-src");
  Opened dst = CreateWritten(x, &cl, "zzzz", "-dst");
  uint64_t copied = 0;
  uint32_t st = CopyRange(x.a, src, dst.fh, dst.stateid, 4, 2, 0, &copied);
  if (!x.o->copy) {
    ExpectStatus("COPY on a server without it", st, up::kNfs4ErrNotsupp);
    return;
  }
  ExpectStatus("COPY [4, end) to 2", st, up::kNfs4Ok);
  ExpectTrue(copied == 12, "copied " + std::to_string(copied), "copied 12");
  std::string data;
  ExpectStatus("READ", ReadAt(x.a, dst.fh, dst.stateid, 0, 32, &data),
               up::kNfs4Ok);
  ExpectTrue(data == "zz456789abcdef", "'" + data + "'", "'zz456789abcdef'");
  ExpectStatus("b's READ",
               ReadAt(x.b, dst.fh, up::StateId::Anonymous(), 0, 32, &data),
               up::kNfs4Ok);
  ExpectTrue(data == "zz456789abcdef", "b reads '" + data + "'",
             "'zz456789abcdef'");
  // Into a file opened for reading only, through that open.
  Opened ro =
      MustOpen("OPEN(READ)", Create(x.a, x, x.File(), up::kShareAccessRead,
                                    up::kShareDenyNone, x.Owner("ro")));
  cl.Close(x.a, ro);
  ExpectStatus("COPY into a read-only open",
               CopyRange(x.a, src, ro.fh, ro.stateid, 0, 0, 4, &copied),
               up::kNfs4ErrOpenmode);
}

// SETXATTR's create and replace modes, GETXATTR by another client,
// LISTXATTRS, REMOVEXATTR; a server without xattrs refuses them all alike.
void XattrsSetGetListRemove(Ctx &x) {
  Cleanup cl;
  Opened f = CreateWritten(x, &cl, "x");
  const std::string value("v\0one", 5);
  if (!x.o->xattrs) {
    ExpectStatus("SETXATTR on a server without xattrs",
                 SetXattr(x.a, f.fh, up::XattrOption::kCreate, "conf", value),
                 up::kNfs4ErrNotsupp);
    return;
  }
  ExpectStatus("SETXATTR(CREATE)",
               SetXattr(x.a, f.fh, up::XattrOption::kCreate, "conf", value),
               up::kNfs4Ok);
  ExpectStatus("SETXATTR(CREATE) again",
               SetXattr(x.a, f.fh, up::XattrOption::kCreate, "conf", "two"),
               up::kNfs4ErrExist);
  ExpectStatus("SETXATTR(REPLACE) of none",
               SetXattr(x.a, f.fh, up::XattrOption::kReplace, "none", "v"),
               up::kNfs4ErrNoxattr);
  std::string got;
  ExpectStatus("b's GETXATTR", GetXattr(x.b, f.fh, "conf", &got), up::kNfs4Ok);
  ExpectTrue(got == value, "value of " + std::to_string(got.size()) + " bytes",
             "the 5 bytes set");
  up::Compound lc;
  lc.SetTag("listxattrs").Putfh(f.fh).Listxattrs(0, 4096);
  up::CompoundReply lr;
  ExpectStatus("LISTXATTRS", x.b->Call(lc, &lr), up::kNfs4Ok);
  const std::vector<std::string> &names = lr.Find(up::Op::kListxattrs)->names;
  ExpectTrue(names == std::vector<std::string>{"conf"},
             std::to_string(names.size()) + " names", "the one name conf");
  up::Compound rc;
  rc.SetTag("removexattr").Putfh(f.fh).Removexattr("conf");
  up::CompoundReply rr;
  ExpectStatus("REMOVEXATTR", x.a->Call(rc, &rr), up::kNfs4Ok);
  ExpectStatus("b's GETXATTR after", GetXattr(x.b, f.fh, "conf", &got),
               up::kNfs4ErrNoxattr);
}

struct Case {
  const char *name;
  int minor_only;  // -1: every minor version; else that one only
  void (*fn)(Ctx &);
  bool delegations = false;  // runs only with --delegations
};

const Case kCases[] = {
    {"share_deny_write_refuses_writer", -1, ShareDenyWriteRefusesWriter},
    {"share_deny_read_refuses_reader", -1, ShareDenyReadRefusesReader},
    {"read_meets_other_opens_deny_read", -1, ReadMeetsOtherOpensDenyRead},
    {"share_released_on_close", -1, ShareReleasedOnClose},
    {"open_replay_gets_cached_reply", 0, OpenReplayGetsCachedReply},
    {"unchecked_create_of_existing_truncates", -1,
     UncheckedCreateOfExistingTruncates},
    {"exclusive_create_resent_same_verifier", -1,
     ExclusiveCreateResentSameVerifier},
    {"exclusive41_create_resent_same_verifier", 1,
     Exclusive41CreateResentSameVerifier},
    {"open_refused_to_a_caller_without_rights", -1,
     OpenRefusedToACallerWithoutRights},
    {"upgrade_refused_to_a_caller_without_rights", -1,
     UpgradeRefusedToACallerWithoutRights},
    {"open_by_name_again_upgrades_the_owners_open", -1,
     OpenByNameAgainUpgradesTheOwnersOpen},
    {"open_by_name_needs_the_search_right", -1, OpenByNameNeedsTheSearchRight},
    {"create_by_name_needs_the_search_right", -1,
     CreateByNameNeedsTheSearchRight},
    {"lockt_own_lock_is_no_conflict", -1, LocktOwnLockIsNoConflict},
    {"open_downgrade_with_locks_held", -1, OpenDowngradeWithLocksHeld},
    {"change_moves_on_every_write", -1, ChangeMovesOnEveryWrite},
    {"no_read_delegation_while_another_writes", 1,
     NoReadDelegationWhileAnotherWrites, true},
    {"open_by_name_for_writing_recalls_a_read_delegation", 1,
     OpenByNameForWritingRecallsAReadDelegation, true},
    {"unchecked_create_for_writing_recalls_a_read_delegation", 1,
     UncheckedCreateForWritingRecallsAReadDelegation, true},
    {"nfs42_allocate_extends_with_zeros", 2, AllocateExtendsWithZeros},
    {"nfs42_deallocate_reads_zeros", 2, DeallocateReadsZeros},
    {"nfs42_seek_finds_data_and_the_hole_at_the_end", 2,
     SeekFindsDataAndTheHoleAtTheEnd},
    {"nfs42_xattrs_set_get_list_remove", 2, XattrsSetGetListRemove},
    {"nfs42_copy_within_the_server", 2, CopyWithinTheServer},
};

void Usage() {
  std::fprintf(stderr,
               "usage: conformance --server ADDR [--port P] [--path DIR] "
               "[--minor 0|1|2] [--only REGEX] [--timeout-ms N] "
               "[--delegations] [--no-xattrs] [--no-copy] "
               "[--unchecked-upgrades] [--list]\n");
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    if (flag == "--list") {
      for (const Case &c : kCases) std::printf("%s\n", c.name);
      return 0;
    }
    if (flag == "--delegations") {
      o.delegations = true;
      continue;
    }
    if (flag == "--no-xattrs") {
      o.xattrs = false;
      continue;
    }
    if (flag == "--no-copy") {
      o.copy = false;
      continue;
    }
    if (flag == "--unchecked-upgrades") {
      o.checked_upgrades = false;
      continue;
    }
    if (i + 1 >= argc) {
      Usage();
      return 2;
    }
    std::string value = argv[++i];
    if (flag == "--server") {
      o.server = value;
    } else if (flag == "--port") {
      o.port = std::atoi(value.c_str());
    } else if (flag == "--path") {
      o.path = value;
    } else if (flag == "--minor") {
      o.minor = uint32_t(std::atoi(value.c_str()));
    } else if (flag == "--only") {
      o.only = value;
    } else if (flag == "--timeout-ms") {
      o.timeout_ms = std::atoi(value.c_str());
    } else {
      Usage();
      return 2;
    }
  }
  if (o.minor > 2) {
    Usage();
    return 2;
  }
  Client a(o, "a"), b(o, "b");
  if (!a.ready() || !b.ready()) {
    std::fprintf(stderr, "conformance: %s:%d not ready within %d ms\n",
                 o.server.c_str(), o.port, o.timeout_ms);
    return 2;
  }
  if (a.session_minor() != o.minor) {
    std::fprintf(stderr, "conformance: %s:%d does not speak NFSv4.%u\n",
                 o.server.c_str(), o.port, o.minor);
    return 2;
  }
  Ctx x;
  x.o = &o;
  x.a = &a;
  x.b = &b;
  try {
    x.dir = LookupDir(&a, o.path);
  } catch (const CaseFailed &e) {
    std::fprintf(stderr, "conformance: %s\n", e.f.got.c_str());
    return 2;
  }
  std::regex only(o.only.empty() ? ".*" : o.only);
  int passed = 0, failed = 0;
  for (const Case &c : kCases) {
    if (!std::regex_search(c.name, only)) continue;
    if (c.minor_only >= 0 && uint32_t(c.minor_only) != o.minor) {
      std::printf("---- %s: NFSv4.%d only, not run over NFSv4.%u\n", c.name,
                  c.minor_only, o.minor);
      continue;
    }
    if (c.delegations && !o.delegations) {
      std::printf(
          "---- %s: needs a server that grants delegations "
          "(--delegations), not run\n",
          c.name);
      continue;
    }
    x.case_name = c.name;
    try {
      c.fn(x);
      std::printf("PASS %s (v4.%u)\n", c.name, o.minor);
      passed++;
    } catch (const CaseFailed &e) {
      std::printf("FAIL %s (v4.%u): got %s, want %s\n", c.name, o.minor,
                  e.f.got.c_str(), e.f.want.c_str());
      failed++;
    }
    std::fflush(stdout);
  }
  std::printf("conformance v4.%u: %d passed, %d failed\n", o.minor, passed,
              failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
