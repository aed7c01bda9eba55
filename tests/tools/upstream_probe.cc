// upstream_probe: drives nache's Upstream client against a real NFSv4.0
// server, one scenario per subcommand. Used by the integration tests (which
// check its exit status and, for write1m, the file it leaves on the server)
// and handy when debugging the upstream layer by hand.
//
//   upstream_probe --server ADDR [--port P] [--path /export/sub] CMD [ARGS]
//     write1m FILE      create FILE, one COMPOUND PUTFH+WRITE(1 MiB,
//                       FILE_SYNC)+GETATTR(size), check count and size, CLOSE
//     read FILE         read FILE back in one 1 MiB READ and verify it
//     ls                READDIR of the path (with per-entry filehandles)
//     reconnect SECS    GETATTR loop: survive a server restart within SECS,
//                       then OPEN (recovering the client id) and CLOSE
//     read-anon FILE    READ of FILE's first 4 KiB with the anonymous
//                       stateid (no OPEN), as --uid/--gid (default root):
//                       prints the data; exit 0 when read, 3 when the
//                       server refuses it (NFS4ERR_ACCESS, NFS4ERR_PERM)
//
// The 1 MiB pattern is byte i = (7*i + (i >> 12)) & 0xff, which the tests
// regenerate independently.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tool_util.h"
#include "upstream/upstream.h"
#include "util/log.h"

namespace up = nache::upstream;
using nache::tools::SplitPath;

namespace {

constexpr uint32_t kPatternSize = 1 << 20;

struct ProbeOptions {
  std::string server = "127.0.0.1";  // upstream address
  int port = 2049;                   // upstream port
  std::string path = "/";            // directory the commands work in
  int timeout_ms = 10000;            // call timeout and readiness wait
  int connections = 2;               // pool size
  up::Creds creds;                   // read-anon's caller (AUTH_SYS)
};

char PatternByte(uint32_t i) { return char((7 * i + (i >> 12)) & 0xff); }

// A Call whose failure (transport or NFS) is printed with its context.
bool CallOk(up::Upstream *u, up::Compound &c, up::CompoundReply *reply) {
  up::Creds root;
  up::CallStatus st = u->Call(c, root, reply);
  if (st != up::CallStatus::kOk) {
    std::fprintf(stderr, "%s: transport: %s\n", c.tag().c_str(),
                 up::CallStatusName(st));
    return false;
  }
  if (reply->status != up::kNfs4Ok) {
    int i = reply->FailedIndex();
    std::fprintf(stderr, "%s: %s failed with nfs status %u\n", c.tag().c_str(),
                 i >= 0 ? up::OpName(reply->results[i].op) : "?",
                 reply->status);
    return false;
  }
  return true;
}

bool LookupPath(up::Upstream *u, const std::string &path, up::Fh *fh) {
  up::Compound c;
  c.SetTag("lookup_path").Putrootfh();
  for (const std::string &part : SplitPath(path)) c.Lookup(part);
  c.Getfh();
  up::CompoundReply reply;
  if (!CallOk(u, c, &reply)) return false;
  *fh = reply.Find(up::Op::kGetfh)->fh;
  return true;
}

// An open file: what CLOSE needs.
struct OpenFile {
  up::Fh fh;            // the file's handle
  up::StateId stateid;  // open stateid
  uint32_t seqid = 0;   // next open-owner seqid
};

// OPENs name in dir (creating it, truncated, when create), confirming the
// open when the server asks to. A fresh open-owner each time keeps the
// seqid bookkeeping trivial.
bool Open(up::Upstream *u, const up::Fh &dir, const std::string &name,
          bool create, uint32_t access, OpenFile *out, uint32_t *nfs_status) {
  static int owner_counter = 0;
  up::OpenArgs args;
  args.seqid = 0;
  args.share_access = access;
  args.owner = "probe-" + std::to_string(getpid()) + "-" +
               std::to_string(owner_counter++);
  args.name = name;
  if (create) {
    args.create = up::OpenArgs::Create::kUnchecked;
    args.create_attrs.mask = up::kAttrMode | up::kAttrSize;
    args.create_attrs.mode = 0644;
    args.create_attrs.size = 0;
  }
  up::Compound c;
  c.SetTag("open").Putfh(dir).Open(args).Getfh();
  up::CompoundReply reply;
  bool ok = CallOk(u, c, &reply);
  if (nfs_status != nullptr) *nfs_status = reply.status;
  if (!ok) return false;
  const up::OpResult *open = reply.Find(up::Op::kOpen);
  out->fh = reply.Find(up::Op::kGetfh)->fh;
  out->stateid = open->stateid;
  out->seqid = 1;
  if (open->open_rflags & 2) {  // OPEN4_RESULT_CONFIRM
    up::Compound cc;
    cc.SetTag("open_confirm").Putfh(out->fh).OpenConfirm(out->stateid, 1);
    up::CompoundReply creply;
    if (!CallOk(u, cc, &creply)) return false;
    out->stateid = creply.Find(up::Op::kOpenConfirm)->stateid;
    out->seqid = 2;
  }
  return true;
}

bool Close(up::Upstream *u, const OpenFile &f) {
  up::Compound c;
  c.SetTag("close").Putfh(f.fh).Close(f.seqid, f.stateid);
  up::CompoundReply reply;
  return CallOk(u, c, &reply);
}

int CmdWrite1m(up::Upstream *u, const ProbeOptions &o,
               const std::string &name) {
  up::Fh dir;
  if (!LookupPath(u, o.path, &dir)) return 1;
  OpenFile f;
  if (!Open(u, dir, name, true, up::kShareAccessBoth, &f, nullptr)) return 1;
  std::string data(kPatternSize, '\0');
  for (uint32_t i = 0; i < kPatternSize; i++) data[i] = PatternByte(i);
  up::Compound c;
  c.SetTag("write1m")
      .Putfh(f.fh)
      .Write(f.stateid, 0, up::StableHow::kFileSync, data.data(),
             uint32_t(data.size()))
      .Getattr(up::kAttrSize);
  std::printf("write1m: one COMPOUND of %zu ops, encoded size hint %zu bytes\n",
              c.size(), c.EncodedSizeHint());
  up::CompoundReply reply;
  if (!CallOk(u, c, &reply)) return 1;
  const up::OpResult *w = reply.Find(up::Op::kWrite);
  const up::OpResult *g = reply.Find(up::Op::kGetattr);
  std::printf("write1m: count=%u committed=%u size=%llu\n", w->count,
              unsigned(w->committed), (unsigned long long)g->attrs.size);
  bool ok = w->count == kPatternSize && g->attrs.size == kPatternSize;
  if (!Close(u, f)) return 1;
  if (!ok) {
    std::fprintf(stderr, "write1m: short write or wrong size\n");
    return 1;
  }
  return 0;
}

int CmdRead(up::Upstream *u, const ProbeOptions &o, const std::string &name) {
  up::Fh dir;
  if (!LookupPath(u, o.path, &dir)) return 1;
  OpenFile f;
  if (!Open(u, dir, name, false, up::kShareAccessRead, &f, nullptr)) return 1;
  std::vector<char> buf(kPatternSize);
  up::Compound c;
  c.SetTag("read1m").Putfh(f.fh).Read(f.stateid, 0, kPatternSize, buf.data());
  up::CompoundReply reply;
  if (!CallOk(u, c, &reply)) return 1;
  const up::OpResult *r = reply.Find(up::Op::kRead);
  std::printf("read: count=%u eof=%d\n", r->count, int(r->eof));
  if (!Close(u, f)) return 1;
  if (r->count != kPatternSize) {
    std::fprintf(stderr, "read: expected %u bytes in one READ\n", kPatternSize);
    return 1;
  }
  for (uint32_t i = 0; i < kPatternSize; i++) {
    if (buf[i] != PatternByte(i)) {
      std::fprintf(stderr, "read: mismatch at byte %u\n", i);
      return 1;
    }
  }
  std::printf("read: pattern verified\n");
  return 0;
}

int CmdLs(up::Upstream *u, const ProbeOptions &o) {
  up::Fh dir;
  if (!LookupPath(u, o.path, &dir)) return 1;
  uint64_t cookie = 0;
  up::Verifier verf(8, '\0');
  // Bounded: a server that never says eof cannot keep us here.
  for (int round = 0; round < 10000; round++) {
    up::Compound c;
    c.SetTag("readdir").Putfh(dir).Readdir(
        cookie, verf, 8192, 65536,
        up::kAttrType | up::kAttrSize | up::kAttrFileid | up::kAttrMode, true);
    up::CompoundReply reply;
    if (!CallOk(u, c, &reply)) return 1;
    const up::OpResult *r = reply.Find(up::Op::kReaddir);
    for (const up::DirEntry &e : r->entries) {
      std::printf("%c %04o %10llu fileid=%llu fh=%zuB %s\n",
                  e.attrs.type == up::FileType::kDir ? 'd' : '-', e.attrs.mode,
                  (unsigned long long)e.attrs.size,
                  (unsigned long long)e.attrs.fileid, e.fh.size(),
                  e.name.c_str());
      cookie = e.cookie;
    }
    verf = r->verifier;
    if (r->eof || r->entries.empty()) return 0;
  }
  return 1;
}

// What Ganesha's anonymous READ path checks (a READ with no open, as
// NFSv3 reads are): READ of name in the path, stateid all zeros, as
// o.creds.
int CmdReadAnon(up::Upstream *u, const ProbeOptions &o,
                const std::string &name) {
  up::Fh dir;
  if (!LookupPath(u, o.path, &dir)) return 1;
  std::vector<char> buf(4096);
  up::Compound c;
  c.SetTag("read_anon")
      .Putfh(dir)
      .Lookup(name)
      .Read(up::StateId::Anonymous(), 0, uint32_t(buf.size()), buf.data());
  up::CompoundReply reply;
  up::CallStatus st = u->Call(c, o.creds, &reply);
  if (st != up::CallStatus::kOk) {
    std::fprintf(stderr, "read-anon: transport: %s\n", up::CallStatusName(st));
    return 1;
  }
  std::printf("read-anon: uid %u gid %u: nfs status %u\n", o.creds.uid,
              o.creds.gid, reply.status);
  if (reply.status == up::kNfs4ErrAccess || reply.status == up::kNfs4ErrPerm)
    return 3;
  if (reply.status != up::kNfs4Ok) return 1;
  const up::OpResult *r = reply.Find(up::Op::kRead);
  std::printf("read-anon: data: %.*s\n", int(r->count), buf.data());
  return 0;
}

int64_t MsLeft(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             deadline - std::chrono::steady_clock::now())
      .count();
}

// GETATTRs the root until it has seen a failure and then three successes in
// a row (the server went away and came back), then proves the client id is
// usable again with an OPEN, re-establishing it if the server lost it.
int CmdReconnect(up::Upstream *u, const ProbeOptions &o, int seconds) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int ok = 0, failed = 0, ok_after_failure = 0;
  uint64_t epoch_before = u->epoch();
  while (MsLeft(deadline) > 0) {
    up::Compound c;
    c.SetTag("getattr_root")
        .Putrootfh()
        .Getattr(up::kAttrType | up::kAttrChange);
    up::CompoundReply reply;
    up::CallStatus st = u->Call(c, up::Creds(), &reply);
    if (st == up::CallStatus::kOk && reply.status == up::kNfs4Ok) {
      if (ok == 0) std::printf("reconnect: first GETATTR ok\n");
      ok++;
      if (failed > 0 && ++ok_after_failure == 3) break;
      std::fflush(stdout);
      // Paces the loop without a sleep: returns at once while ready.
      u->WaitReady(int(std::max<int64_t>(MsLeft(deadline), 0)));
      continue;
    }
    if (failed == 0) {
      std::printf(
          "reconnect: call failed (%s, nfs %u); waiting for the "
          "upstream to come back\n",
          up::CallStatusName(st), reply.status);
      std::fflush(stdout);
    }
    failed++;
    ok_after_failure = 0;
    // Blocks until a connection is back (and the client id confirmed).
    u->WaitReady(int(std::max<int64_t>(MsLeft(deadline), 0)));
  }
  std::printf("reconnect: %d ok, %d failed\n", ok, failed);
  if (failed == 0 || ok_after_failure < 3) {
    std::fprintf(stderr, "reconnect: did not see the server go and return\n");
    return 1;
  }
  // The server restarted, so its state (our client id) is gone: the first
  // OPEN gets NFS4ERR_STALE_CLIENTID, which makes Upstream re-establish the
  // id; retry until the new one is in place.
  up::Fh dir;
  if (!LookupPath(u, o.path, &dir)) return 1;
  for (int attempt = 0; attempt < 5 && MsLeft(deadline) > 0; attempt++) {
    OpenFile f;
    uint32_t status = 0;
    if (Open(u, dir, "reconnect-probe", true, up::kShareAccessBoth, &f,
             &status)) {
      std::printf(
          "reconnect: OPEN ok after %d attempt(s); epoch %llu -> %llu\n",
          attempt + 1, (unsigned long long)epoch_before,
          (unsigned long long)u->epoch());
      return Close(u, f) ? 0 : 1;
    }
    if (status != up::kNfs4ErrStaleClientid && status != up::kNfs4ErrExpired) {
      return 1;
    }
    // Returns once the re-established id is confirmed.
    u->WaitReady(int(std::max<int64_t>(MsLeft(deadline), 0)));
  }
  return 1;
}

void Usage() {
  std::fprintf(stderr,
               "usage: upstream_probe --server ADDR [--port P] [--path DIR] "
               "[--timeout-ms N] [--connections N] [--uid U --gid G] "
               "write1m FILE | read FILE | ls | reconnect SECONDS | "
               "read-anon FILE\n");
}

}  // namespace

int main(int argc, char **argv) {
  ProbeOptions o;
  int i = 1;
  for (; i + 1 < argc && std::strncmp(argv[i], "--", 2) == 0; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--server") {
      o.server = value;
    } else if (flag == "--port") {
      o.port = std::atoi(value.c_str());
    } else if (flag == "--path") {
      o.path = value;
    } else if (flag == "--timeout-ms") {
      o.timeout_ms = std::atoi(value.c_str());
    } else if (flag == "--connections") {
      o.connections = std::atoi(value.c_str());
    } else if (flag == "--uid") {
      o.creds.uid = uint32_t(std::strtoul(value.c_str(), nullptr, 10));
    } else if (flag == "--gid") {
      o.creds.gid = uint32_t(std::strtoul(value.c_str(), nullptr, 10));
    } else {
      Usage();
      return 2;
    }
  }
  if (i >= argc) {
    Usage();
    return 2;
  }
  std::string cmd = argv[i++];
  std::string arg = i < argc ? argv[i] : "";
  if (getenv("NACHE_PROBE_DEBUG") != nullptr) nache_log_set_level(kLogDebug);

  up::UpstreamOptions uo;
  uo.server = o.server;
  uo.port = o.port;
  uo.connections = o.connections;
  uo.call_timeout_ms = o.timeout_ms;
  uo.connect_timeout_ms = 2000;
  uo.client_id = "nache-upstream-probe-" + std::to_string(getpid());
  std::unique_ptr<up::Upstream> u = up::Upstream::Create(uo);
  if (!u->WaitReady(o.timeout_ms)) {
    std::fprintf(stderr, "upstream %s:%d not ready within %d ms\n",
                 o.server.c_str(), o.port, o.timeout_ms);
    return 1;
  }
  std::printf("ready: clientid %016llx lease %u s\n",
              (unsigned long long)u->clientid(), u->lease_time());

  int rc;
  if (cmd == "write1m" && !arg.empty()) {
    rc = CmdWrite1m(u.get(), o, arg);
  } else if (cmd == "read" && !arg.empty()) {
    rc = CmdRead(u.get(), o, arg);
  } else if (cmd == "ls") {
    rc = CmdLs(u.get(), o);
  } else if (cmd == "read-anon" && !arg.empty()) {
    rc = CmdReadAnon(u.get(), o, arg);
  } else if (cmd == "reconnect" && !arg.empty()) {
    rc = CmdReconnect(u.get(), o, std::atoi(arg.c_str()));
  } else {
    Usage();
    rc = 2;
  }
  u->Shutdown();
  std::printf("%s: %s\n", cmd.c_str(),
              rc == 0   ? "OK"
              : rc == 3 ? "REFUSED"
                        : "FAILED");
  return rc;
}
