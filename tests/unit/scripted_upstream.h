// The core's unit tests' common ground: ScriptedUpstream, an in-memory
// NFSv4 server the core talks to through the Upstream interface (no
// network, no lab), with the faults a test asks for (lost requests and
// replies, kills, restarts, refusals); ForwardingUpstream, which lets a
// test restart the core on the same scripted server; and
// CoreDelegationsTest, the fixture that starts a Core on them with the
// real callback service. The tests are filed by subject:
// core_delegations_test.cc, core_access_test.cc, core_identity_test.cc,
// core_writeback_test.cc, core_flush_faults_test.cc,
// core_lost_reply_test.cc, core_reclaim_test.cc.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cb_client.h"
#include "core/convert.h"
#include "core/core.h"
#include "metrics/metrics.h"
#include "temp_dir.h"
#include "upstream/attrs.h"

namespace nache {
namespace coretest {

using upstream::Attrs;
using upstream::CallStatus;
using upstream::Compound;
using upstream::CompoundReply;
using upstream::Creds;
using upstream::DelegationType;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kRead = upstream::kShareAccessRead;
constexpr uint32_t kBoth =
    upstream::kShareAccessRead | upstream::kShareAccessWrite;

inline StateId Sid(const char *tag, uint32_t n) {
  StateId s;
  s.seqid = 1;
  snprintf(reinterpret_cast<char *>(s.other), sizeof(s.other), "%s%u", tag, n);
  return s;
}

// The scripted server: a tree of directories and regular files ("a/b/f";
// an object's handle is "f:<path it was made under>" unless a rename or a
// create after one gave it another), opens that never need OPEN_CONFIRM, and
// the delegation type the test sets granted on every OPEN. Logs each operation
// it completed, in order ("OP!": failed).
class ScriptedUpstream : public upstream::Upstream {
 public:
  DelegationType grant = DelegationType::kNone;  // given with each OPEN
  // A delegation given back by a reclaim comes with "recall" set (the
  // server cannot call us back yet).
  bool recall_reclaimed = false;
  // REMOVEs of these names fail with the status given.
  std::map<std::string, uint32_t> remove_refused;
  // The owner (uid and gid) of objects OPEN and CREATE make: the identity
  // the server maps its caller to (65534: a remote that squashes nache's
  // principal to nobody).
  std::atomic<uint32_t> new_owner{0};
  // Set by the core: called by Restart like the real client's state
  // thread after it confirmed a new client id.
  std::function<void(uint64_t)> on_new_clientid;
  // Called (under the server's lock) with each operation's name before it
  // runs; set before the core starts.
  std::function<void(const std::string &)> before_op;
  std::atomic<bool> hold_writes{false};  // WRITEs wait while true
  std::atomic<bool> hold_opens{false};   // OPENs wait while true
  // A kill of nache simulated at the server: once an op of this name is
  // executed, its reply is lost (the call times out) and every later call
  // finds no server (nache is dead) until `dead` is cleared.
  std::string die_after;  // guarded by mu_
  std::atomic<bool> dead{false};
  void DieAfter(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    die_after = op;
  }
  // A request lost on its way: the next compound with an op of this name
  // is not executed at all, and the call times out.
  std::string lose_request_with;  // guarded by mu_
  void LoseRequestWith(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    lose_request_with = op;
  }
  // A reply lost on its way back: the next compound with an op of this
  // name is executed, and the call times out; the server carries on.
  std::string lose_reply_of;  // guarded by mu_
  // And meanwhile a new client id is confirmed (the old one's state is
  // gone at the server).
  bool new_id_after_lost = false;  // guarded by mu_
  void LoseReplyOf(const std::string &op, bool new_id = false) {
    std::lock_guard<std::mutex> g(mu_);
    lose_reply_of = op;
    new_id_after_lost = new_id;
  }
  // Whether the request or reply LoseRequestWith or LoseReplyOf named is
  // still to be lost.
  bool FaultPending() {
    std::lock_guard<std::mutex> g(mu_);
    return !lose_reply_of.empty() || !lose_request_with.empty();
  }
  // No replay cache: an OPEN bearing its owner's last seqid is executed
  // anew (a server that lost it, or does not keep one).
  std::atomic<bool> no_replay{false};
  // Open-owners whose names contain part that opened something (and are
  // known to the server since).
  size_t OwnersSeen(const std::string &part) {
    std::lock_guard<std::mutex> g(mu_);
    size_t n = 0;
    for (const auto &kv : replay_)
      if (kv.first.find(part) != std::string::npos) n++;
    return n;
  }
  // The core gave up its client id (Upstream::RestartClient); the test
  // then plays the server's part (Restart).
  std::atomic<int> restarts_asked{0};
  // Callers the remote denies reading (an ACL entry "user:UID:---"):
  // ACCESS leaves READ and EXECUTE out for them and their read OPENs fail.
  std::set<uint32_t> unreadable_by;  // guarded by mu_
  void DenyReading(uint32_t uid) {
    std::lock_guard<std::mutex> g(mu_);
    unreadable_by.insert(uid);
  }
  // Callers whose ACCESS answers leave MODIFY and EXTEND out, while their
  // OPENs for writing are granted: a server that judges no upgrade of an
  // open (Ganesha 4.3 reopens for the open's owner unchecked).
  std::set<uint32_t> unwritable_by;  // guarded by mu_
  void DenyWritingButNotOpens(uint32_t uid) {
    std::lock_guard<std::mutex> g(mu_);
    unwritable_by.insert(uid);
  }
  // Callers the remote lets search no directory: ACCESS leaves LOOKUP out
  // for them, and their LOOKUPs and OPENs by name fail.
  std::set<uint32_t> unsearchable_by;  // guarded by mu_
  void DenySearching(uint32_t uid) {
    std::lock_guard<std::mutex> g(mu_);
    unsearchable_by.insert(uid);
  }
  // The same, done to the file at path at the server by someone else (a
  // chmod or an ACL entry set there): its change attribute moves.
  void ForeignDenyReading(const std::string &path, uint32_t uid) {
    std::lock_guard<std::mutex> g(mu_);
    unreadable_by.insert(uid);
    Add(path).change++;
  }
  // READDIR answered (else NFS4ERR_NOTSUPP, as the tests written before
  // it expect: their lookups go name by name).
  std::atomic<bool> readdir{false};
  // Objects the remote lets nobody read (a mode or ACL that refuses even
  // root, or root squashed): READ and READDIR of them fail with
  // NFS4ERR_ACCESS.
  void RefuseReading(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    read_refused_.insert(AtPath(path));
  }
  std::atomic<int> writes_waiting{0};  // WRITEs held right now
  std::atomic<int> opens_waiting{0};   // OPENs held right now
  // Ops named here fail with NFS4ERR_ACCESS for callers without group
  // need_group (as gid or supplementary group). Guarded by mu_.
  std::set<std::string> guarded_ops;
  uint32_t need_group = 0;
  void Guard(const std::set<std::string> &ops, uint32_t group) {
    std::lock_guard<std::mutex> g(mu_);
    guarded_ops = ops;
    need_group = group;
  }
  // Each op executed (done or failed), with the credentials it came with.
  struct Sent {
    std::string op;
    upstream::Creds cr;
  };
  std::vector<Sent> Sends(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Sent> out;
    for (const Sent &s : sent_)
      if (s.op == op) out.push_back(s);
    return out;
  }
  // The minor version of the session (minor_version()): 2 lets the core
  // send NFSv4.2's operations.
  std::atomic<uint32_t> minor{0};
  // The session's ca_maxoperations less its SEQUENCE (max_operations()):
  // a COMPOUND with more operations is refused whole with
  // NFS4ERR_TOO_MANY_OPS, as knfsd does. 0: no bound.
  std::atomic<uint32_t> max_ops{0};
  // NFSv4.2's READ_PLUS is answered; else it is NFS4ERR_NOTSUPP, as from
  // stock Ganesha VFS.
  std::atomic<bool> read_plus{false};
  // ... but answered with nothing and eof, whatever the file holds (what
  // nache saw from Ganesha 4.3 over a FSAL without READ_PLUS).
  std::atomic<bool> read_plus_empty{false};
  // NFSv4.2's COPY is done (synchronously, FILE_SYNC); else NOTSUPP.
  std::atomic<bool> copy{false};
  // Operations that change a directory (OPEN that creates, CREATE, REMOVE,
  // RENAME, LINK) report an atomic change_info from one counter, as knfsd
  // does; else none (all zeros, not atomic).
  std::atomic<bool> change_info{false};
  // What a DELEGRETURN answers (e.g. NFS4ERR_BAD_STATEID: the server
  // dropped the delegation meanwhile).
  std::atomic<uint32_t> delegreturn_status{0};
  // The change_infos reported so far, in order.
  std::vector<upstream::ChangeInfo> ChangeInfos() {
    std::lock_guard<std::mutex> g(mu_);
    return cinfos_;
  }
  // WRITEs asked UNSTABLE stay so (in memory until a COMMIT); else every
  // WRITE is FILE_SYNC.
  std::atomic<bool> unstable_writes{false};
  // A broken server: every WRITE stays UNSTABLE, whatever was asked (a
  // FILE_SYNC WRITE answered UNSTABLE is kept only in memory).
  std::atomic<bool> weak_file_sync{false};
  // The next COMMIT finds the server rebooted: the unstable data gone,
  // another write verifier.
  std::atomic<bool> reboot_before_commit{false};
  // The extended attributes of the file at path, as the server has them.
  std::map<std::string, std::string> XattrsOf(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    return files_[AtPath(path)].xattrs;
  }
  std::atomic<Clock::rep> lease_end{
      (Clock::now() + std::chrono::hours(1)).time_since_epoch().count()};

  void AddFile(const std::string &path, const std::string &data) {
    std::lock_guard<std::mutex> g(mu_);
    File &f = Add(path);
    f.data = f.stable = data;
  }
  void AddDir(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    Add(path).dir = true;
  }
  // The object at path is owned by uid:gid with mode (0: the default);
  // unmapped: the kAttr*Unmapped bits its attributes carry (an owner the
  // remote named and the core's codec could not map).
  void Own(const std::string &path, uint32_t uid, uint32_t gid,
           uint64_t unmapped, uint32_t mode = 0) {
    std::lock_guard<std::mutex> g(mu_);
    File &f = Add(path);
    f.uid = uid;
    f.gid = gid;
    f.unmapped = unmapped;
    f.mode = mode;
  }
  // Every path the server has, sorted, directories with a trailing "/".
  std::string Tree() {
    std::lock_guard<std::mutex> g(mu_);
    std::set<std::string> paths;
    for (const auto &kv : files_) {
      std::string p = kv.second.name;
      for (Fh up = kv.second.parent; up != "root"; up = files_[up].parent)
        p = files_[up].name + "/" + p;
      paths.insert(p + (kv.second.dir ? "/" : ""));
    }
    std::string out;
    for (const std::string &p : paths) out += (out.empty() ? "" : " ") + p;
    return out;
  }
  // The count each COPY asked for, in order.
  std::vector<uint64_t> CopyLengths() {
    std::lock_guard<std::mutex> g(mu_);
    return copy_lengths_;
  }
  // The "other" of each WRITE's stateid, in order (all zero: anonymous).
  std::vector<std::string> WriteStateids() {
    std::lock_guard<std::mutex> g(mu_);
    return write_stateids_;
  }
  // The COMPOUNDs received that had op among their operations, each as
  // its operations' names ("PUTFH OPEN GETFH ...").
  std::vector<std::string> Compounds(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::string> out;
    for (const std::string &c : compounds_)
      if ((" " + c + " ").find(" " + op + " ") != std::string::npos)
        out.push_back(c);
    return out;
  }
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> g(mu_);
    return log_;
  }
  int Count(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    return int(std::count(log_.begin(), log_.end(), op));
  }
  // Position of the nth (0-based) op in the log, or -1.
  int Index(const std::string &op, int nth = 0) {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t i = 0; i < log_.size(); i++)
      if (log_[i] == op && nth-- == 0) return int(i);
    return -1;
  }
  void ReleaseWrites() {
    {
      std::lock_guard<std::mutex> g(mu_);
      hold_writes = false;
    }
    cv_.notify_all();
  }
  void ReleaseOpens() {
    {
      std::lock_guard<std::mutex> g(mu_);
      hold_opens = false;
    }
    cv_.notify_all();
  }
  uint64_t Change(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    return Add(path).change;
  }
  // Someone else writes the file at the server.
  void ForeignWrite(const std::string &path, const std::string &data) {
    std::lock_guard<std::mutex> g(mu_);
    File &f = Add(path);
    f.data = f.stable = data;
    f.change++;
  }
  // Someone else renames file from of the root to to, at the server.
  void ForeignRename(const std::string &from, const std::string &to) {
    std::lock_guard<std::mutex> g(mu_);
    Fh fh = Named("root", from);
    files_[fh].name = to;
    files_[fh].change++;
    aliases_.erase("root/" + from);
    aliases_["root/" + to] = fh;
  }
  // Names of the files in the root (or in directory dir) whose name
  // starts with prefix.
  std::vector<std::string> Names(const std::string &prefix,
                                 const std::string &dir = "") {
    std::lock_guard<std::mutex> g(mu_);
    Fh parent = dir.empty() ? Fh("root") : AtPath(dir);
    std::vector<std::string> out;
    for (const auto &kv : files_)
      if (!parent.empty() && kv.second.parent == parent &&
          kv.second.name.compare(0, prefix.size(), prefix) == 0)
        out.push_back(kv.second.name);
    return out;
  }
  // The data of the file at path, or "<none>" when there is none.
  std::string Data(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    Fh fh = AtPath(path);
    return fh.empty() ? "<none>" : files_[fh].data;
  }
  // What of path's data would survive a reboot (unstable_writes: data
  // WRITEs left UNSTABLE are not in it until a COMMIT).
  std::string StableData(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    Fh fh = AtPath(path);
    return fh.empty() ? "<none>" : files_[fh].stable;
  }
  // Someone else removes path at the server (a directory with all it
  // holds): its handles go stale.
  void ForeignRemove(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Fh> doomed{AtPath(path)};
    for (size_t i = 0; i < doomed.size(); i++)
      for (const auto &kv : files_)
        if (kv.second.parent == doomed[i]) doomed.push_back(kv.first);
    for (const Fh &fh : doomed) files_.erase(fh);
    for (auto it = aliases_.begin(); it != aliases_.end();)
      it = files_.count(it->second) ? std::next(it) : aliases_.erase(it);
  }

  // The server restarts: every open and lock is forgotten, and with
  // grace, reclaims (and only reclaims) are accepted until EndGrace.
  void Restart(bool grace) {
    {
      std::lock_guard<std::mutex> g(mu_);
      epoch_++;
      in_grace_ = grace;
      replay_.clear();
      locks_.erase(std::remove_if(
                       locks_.begin(), locks_.end(),
                       [](const HeldRange &l) { return l.owner != "foreign"; }),
                   locks_.end());
      lock_owners_.clear();
    }
    on_new_clientid(epoch_.load());
  }
  // Another client of the server holds [offset, end).
  void ForeignLock(uint64_t offset, uint64_t end) {
    std::lock_guard<std::mutex> g(mu_);
    locks_.push_back({"foreign", offset, end});
  }
  // Whether one of the core's lock-owners holds a lock overlapping
  // [offset, end).
  bool Locked(uint64_t offset, uint64_t end) {
    std::lock_guard<std::mutex> g(mu_);
    for (const HeldRange &l : locks_)
      if (l.owner != "foreign" && l.offset < end && offset < l.end) return true;
    return false;
  }
  // The delegation type asked back by the last CLAIM_PREVIOUS open.
  DelegationType Reclaimed() {
    std::lock_guard<std::mutex> g(mu_);
    return reclaimed_;
  }
  // Waits (bounded) until op was completed n times.
  bool WaitCount(const std::string &op, int n) {
    std::unique_lock<std::mutex> g(mu_);
    return done_cv_.wait_for(g, std::chrono::seconds(10), [&] {
      return std::count(log_.begin(), log_.end(), op) >= n;
    });
  }

  bool WaitReady(int) override { return true; }
  CallStatus Call(Compound &c, const Creds &cr, CompoundReply *rep) override {
    std::unique_lock<std::mutex> g(mu_);
    caller_ = cr;
    if (dead) return CallStatus::kDisconnected;
    if (!lose_request_with.empty()) {
      for (size_t i = 0; i < c.size(); i++) {
        if (lose_request_with == upstream::OpName(c.op(i))) {
          lose_request_with.clear();
          log_.push_back("lost");
          done_cv_.notify_all();
          return CallStatus::kTimeout;
        }
      }
    }
    if (max_ops != 0 && c.size() > max_ops) {
      rep->status = upstream::kNfs4ErrTooManyOps;
      log_.push_back("TOO_MANY_OPS");
      done_cv_.notify_all();
      return CallStatus::kOk;
    }
    const COMPOUND4args *args = c.Args();
    // NFSv4.0 as knfsd does it: an OPEN bearing the seqid of its owner's
    // last OPEN is a retransmission, answered from the replay cache
    // whatever it asks for; but an owner is sequenced only once confirmed,
    // and a new owner's first OPEN (seqid 0 from the core) is executed
    // anew.
    const OPEN4args *open = OpenIn(args);
    std::string open_owner;
    if (open)
      open_owner =
          Str(open->owner.owner.owner_val, open->owner.owner.owner_len);
    if (open && open->seqid != 0 && !no_replay && replay_.count(open_owner) &&
        replay_[open_owner].seqid == open->seqid) {
      *rep = replay_[open_owner].rep;
      log_.push_back("OPEN(replayed)");
      done_cv_.notify_all();
      return CallStatus::kOk;
    }
    Fh cur;
    rep->status = upstream::kNfs4Ok;
    std::string ops;
    for (size_t i = 0; i < c.size(); i++)
      ops += std::string(i ? " " : "") + upstream::OpName(c.op(i));
    compounds_.push_back(ops);
    // NFSv4.1's current stateid: set by an OPEN, cleared by a PUTFH.
    bool have_current = false;
    for (u_int i = 0; i < args->argarray.argarray_len; i++) {
      const nfs_argop4 &a = args->argarray.argarray_val[i];
      OpResult r;
      r.op = c.op(i);
      sent_.push_back(Sent{upstream::OpName(r.op), cr});
      bool member = cr.gid == need_group ||
                    std::find(cr.groups.begin(), cr.groups.end(), need_group) !=
                        cr.groups.end();
      if (a.argop == OP_PUTFH || a.argop == OP_PUTROOTFH) have_current = false;
      if (before_op) before_op(upstream::OpName(r.op));
      r.status =
          UsesCurrentStateid(a) && (minor == 0 || !have_current)
              ? uint32_t(upstream::kNfs4ErrBadStateid)
          : guarded_ops.count(upstream::OpName(r.op)) && !member
              ? uint32_t(upstream::kNfs4ErrAccess)
          : c.nfs42_args(i)
              ? Execute42(r.op, *c.nfs42_args(i), cur, &r, c.read_dest(i))
              : Execute(a, &cur, &r, g, c.read_dest(i), c.open_by_fh(i));
      rep->results.push_back(r);
      if (a.argop == OP_OPEN && r.status == 0) have_current = true;
      if (r.status) {
        rep->status = r.status;
        log_.push_back(std::string(upstream::OpName(r.op)) + "!");
        mark_.clear();
        break;
      }
      log_.push_back(mark_.empty() ? upstream::OpName(r.op) : mark_);
      mark_.clear();
      if (!die_after.empty() && die_after == upstream::OpName(r.op)) {
        // Done here; the reply never leaves.
        die_after.clear();
        dead = true;
        *rep = CompoundReply();
        done_cv_.notify_all();
        return CallStatus::kTimeout;
      }
    }
    if (open && rep->status == upstream::kNfs4Ok)
      replay_[open_owner] = Replay{open->seqid, *rep};
    done_cv_.notify_all();
    for (size_t i = 0; i < c.size() && !lose_reply_of.empty(); i++) {
      if (lose_reply_of == upstream::OpName(c.op(i))) {
        lose_reply_of.clear();
        *rep = CompoundReply();
        if (new_id_after_lost) {
          epoch_++;
          replay_.clear();
        }
        return CallStatus::kTimeout;
      }
    }
    return CallStatus::kOk;
  }
  void RestartClient(const char *) override { restarts_asked++; }
  void CallAsync(Compound c, const Creds &cr, Callback cb) override {
    CompoundReply rep;
    CallStatus s = Call(c, cr, &rep);
    cb(s, std::move(rep));
  }
  uint64_t clientid() const override { return 1; }
  uint64_t epoch() const override { return epoch_.load(); }
  // The connection is being made again (a reply lost with it).
  std::atomic<bool> reconnecting{false};
  upstream::UpstreamState state() const override {
    return reconnecting ? upstream::UpstreamState::kConnecting
                        : upstream::UpstreamState::kReady;
  }
  uint32_t lease_time() const override { return 4; }
  Clock::time_point lease_valid_until() const override {
    return Clock::time_point(Clock::duration(lease_end.load()));
  }
  bool callback_path_down() const override { return false; }
  uint32_t minor_version() const override { return minor.load(); }
  uint32_t max_operations() const override { return max_ops.load(); }
  void Shutdown() override {}

 private:
  Creds caller_;  // of the call being executed; guarded by mu_
  struct File {
    std::string name, data;
    std::string stable;  // unstable_writes: what survives a reboot
    Fh parent = "root";
    bool dir = false;
    uint64_t change = 1;
    uint32_t uid = 0, gid = 0;  // (Own)
    uint64_t unmapped = 0;
    uint32_t mode = 0;                          // 0: 0644, directories 0755
    std::map<std::string, std::string> xattrs;  // user namespace
  };
  struct HeldRange {
    std::string owner;
    uint64_t offset, end;
  };
  std::vector<Sent> sent_;  // guarded by mu_

  static std::string Str(const char *p, u_int n) { return std::string(p, n); }

  Attrs AttrsOf(const Fh &fh) {
    Attrs a;
    a.mask = upstream::kAttrsObject | upstream::kAttrMaxRead |
             upstream::kAttrMaxWrite;
    a.maxread = a.maxwrite = 1 << 20;
    a.mode = 0644;
    a.nlink = 1;
    a.fileid = std::hash<std::string>()(fh);
    if (fh == "root") {
      a.type = upstream::FileType::kDir;
      a.change = 1;
      a.mode = 0755;
      return a;
    }
    const File &f = files_[fh];
    a.type = f.dir ? upstream::FileType::kDir : upstream::FileType::kReg;
    if (f.dir) {
      a.mode = 0755;
      a.nlink = 2;
    }
    a.change = f.change;
    a.size = f.data.size();
    a.uid = f.uid;
    a.gid = f.gid;
    a.mask |= f.unmapped;
    if (f.mode != 0) a.mode = f.mode;
    return a;
  }

  // An NFSv4.2 operation on the current object. Data is never sparse
  // here: SEEK finds data at any offset inside the file, a hole at its end.
  uint32_t Execute42(Op op, const upstream::Nfs42Args &a, const Fh &cur,
                     OpResult *r, char *read_dest) {
    if (minor < 2) return upstream::kNfs4ErrOpIllegal;
    File &f = files_[cur];
    switch (op) {
      case Op::kCopy: {  // from the saved object into cur, synchronous
        if (!copy) return upstream::kNfs4ErrNotsupp;
        copy_lengths_.push_back(a.length);
        const std::string from = files_[saved_].data;
        if (a.offset > from.size()) return upstream::kNfs4ErrInval;
        uint64_t n = a.length ? a.length : from.size() - a.offset;
        n = std::min<uint64_t>(n, from.size() - a.offset);
        if (f.data.size() < a.dst_offset + n) f.data.resize(a.dst_offset + n);
        f.data.replace(size_t(a.dst_offset), size_t(n), from, size_t(a.offset),
                       size_t(n));
        f.change++;
        r->copied = n;
        r->committed = upstream::StableHow::kFileSync;
        return 0;
      }
      case Op::kReadPlus: {
        if (!read_plus) return upstream::kNfs4ErrNotsupp;
        if (read_plus_empty) {  // nothing, yet "the end"
          r->eof = true;
          return 0;
        }
        size_t from = std::min<size_t>(size_t(a.offset), f.data.size());
        size_t n = std::min<size_t>(size_t(a.length), f.data.size() - from);
        // Holes and data on the wire are nfs42_wire_test's; here the
        // result the decoder gives.
        if (n) memcpy(read_dest, f.data.data() + from, n);
        r->count = uint32_t(n);
        r->eof = from + n == f.data.size();
        return 0;
      }
      case Op::kAllocate:
        if (f.data.size() < a.offset + a.length)
          f.data.resize(a.offset + a.length);
        f.change++;
        return 0;
      case Op::kDeallocate:
        if (a.offset < f.data.size())
          std::fill_n(&f.data[a.offset],
                      std::min<uint64_t>(a.length, f.data.size() - a.offset),
                      '\0');
        f.change++;
        return 0;
      case Op::kSeek:
        if (a.offset >= f.data.size()) return upstream::kNfs4ErrNxio;
        r->offset =
            a.what == upstream::SeekWhat::kData ? a.offset : f.data.size();
        r->eof = a.what == upstream::SeekWhat::kHole;
        return 0;
      case Op::kGetxattr:
        if (!f.xattrs.count(a.name)) return upstream::kNfs4ErrNoxattr;
        r->data = f.xattrs[a.name];
        return 0;
      case Op::kSetxattr:
        if (a.option == upstream::XattrOption::kCreate &&
            f.xattrs.count(a.name))
          return upstream::kNfs4ErrExist;
        if (a.option == upstream::XattrOption::kReplace &&
            !f.xattrs.count(a.name))
          return upstream::kNfs4ErrNoxattr;
        f.xattrs[a.name] = a.value;
        f.change++;
        return 0;
      case Op::kRemovexattr:
        if (!f.xattrs.erase(a.name)) return upstream::kNfs4ErrNoxattr;
        f.change++;
        return 0;
      case Op::kListxattrs:
        for (const auto &kv : f.xattrs) r->names.push_back(kv.first);
        r->eof = true;
        return 0;
      default: return upstream::kNfs4ErrNotsupp;
    }
  }

  // read_dest: where a READ puts its data.
  // by_fh: an OPEN by filehandle (CLAIM_FH).
  // Whether a's stateid is NFSv4.1's current stateid (seqid 1, other
  // zeros).
  static bool UsesCurrentStateid(const nfs_argop4 &a) {
    const stateid4 *s =
        a.argop == OP_WRITE     ? &a.nfs_argop4_u.opwrite.stateid
        : a.argop == OP_SETATTR ? &a.nfs_argop4_u.opsetattr.stateid
        : a.argop == OP_CLOSE   ? &a.nfs_argop4_u.opclose.open_stateid
                                : nullptr;
    static const char zeros[12] = {0};
    return s && s->seqid == 1 && memcmp(s->other, zeros, 12) == 0;
  }
  void ReportChange(upstream::ChangeInfo *ci) {
    if (!change_info) return;
    ci->atomic = true;
    ci->before = cinfo_counter_;
    ci->after = ++cinfo_counter_;
    cinfos_.push_back(*ci);
  }
  uint32_t Execute(const nfs_argop4 &a, Fh *cur, OpResult *r,
                   std::unique_lock<std::mutex> &g, char *read_dest,
                   bool by_fh) {
    switch (a.argop) {
      case OP_PUTROOTFH: *cur = "root"; return 0;
      case OP_PUTFH:
        *cur = Str(a.nfs_argop4_u.opputfh.object.nfs_fh4_val,
                   a.nfs_argop4_u.opputfh.object.nfs_fh4_len);
        // A handle of nothing the server has (removed): stale.
        if (*cur != "root" && !files_.count(*cur))
          return upstream::kNfs4ErrStale;
        return 0;
      case OP_LOOKUP: {
        if (unsearchable_by.count(caller_.uid)) return upstream::kNfs4ErrAccess;
        const component4 &n = a.nfs_argop4_u.oplookup.objname;
        Fh fh = Named(*cur, Str(n.utf8string_val, n.utf8string_len));
        if (fh.empty()) return upstream::kNfs4ErrNoent;
        *cur = fh;
        return 0;
      }
      case OP_SAVEFH: saved_ = *cur; return 0;
      case OP_RESTOREFH:
        *cur = saved_;
        // The object saved was removed and freed meanwhile: stale.
        if (*cur != "root" && !files_.count(*cur))
          return upstream::kNfs4ErrStale;
        return 0;
      case OP_RENAME: {
        const RENAME4args &rn = a.nfs_argop4_u.oprename;
        std::string from =
            Str(rn.oldname.utf8string_val, rn.oldname.utf8string_len);
        std::string to =
            Str(rn.newname.utf8string_val, rn.newname.utf8string_len);
        Fh fh = Named(saved_, from);
        if (fh.empty()) return upstream::kNfs4ErrNoent;
        // Never into itself or below (a cycle).
        for (Fh up = *cur; files_[fh].dir && up != "root";
             up = files_[up].parent)
          if (up == fh) return upstream::kNfs4ErrInval;
        Fh old_target = Named(*cur, to);
        if (!old_target.empty() && old_target != fh) {
          if (HasChildren(old_target)) return upstream::kNfs4ErrNotempty;
          files_.erase(old_target);
        }
        files_[fh].name = to;
        files_[fh].parent = *cur;
        files_[fh].change++;
        aliases_.erase(saved_ + "/" + from);
        aliases_[*cur + "/" + to] = fh;
        ReportChange(&r->cinfo);   // the source directory
        ReportChange(&r->cinfo2);  // the target
        return 0;
      }
      case OP_GETFH: r->fh = *cur; return 0;
      case OP_GETATTR: r->attrs = AttrsOf(*cur); return 0;
      case OP_ACCESS:
        r->access_supported = r->access = a.nfs_argop4_u.opaccess.access;
        if (unreadable_by.count(caller_.uid))
          r->access &=
              ~uint32_t(upstream::kAccessRead | upstream::kAccessExecute);
        if (unwritable_by.count(caller_.uid))
          r->access &=
              ~uint32_t(upstream::kAccessModify | upstream::kAccessExtend);
        if (unsearchable_by.count(caller_.uid))
          r->access &= ~uint32_t(upstream::kAccessLookup);
        return 0;
      case OP_OPEN: {
        opens_waiting++;
        cv_.wait(g, [this] { return !hold_opens.load(); });
        opens_waiting--;
        const OPEN4args &o = a.nfs_argop4_u.opopen;
        if ((o.share_access & OPEN4_SHARE_ACCESS_READ) &&
            unreadable_by.count(caller_.uid))
          return upstream::kNfs4ErrAccess;
        if (o.claim.claim == CLAIM_PREVIOUS) {
          if (!in_grace_) return upstream::kNfs4ErrNoGrace;
          mark_ = "OPEN(previous)";
          reclaimed_ = DelegationType(o.claim.open_claim4_u.delegate_type);
          r->stateid = Sid("open", ++opens_);
          if (reclaimed_ != DelegationType::kNone) {
            r->delegation.type = reclaimed_;
            r->delegation.stateid = Sid("deleg", ++delegs_);
            r->delegation.recall = recall_reclaimed;
          }
          return 0;
        }
        if (in_grace_) return upstream::kNfs4ErrGrace;
        if (by_fh) {
          if (minor == 0) return upstream::kNfs4ErrInval;  // 4.1 only
          if (o.openhow.opentype == OPEN4_CREATE)
            return upstream::kNfs4ErrInval;
          if (!files_.count(*cur)) return upstream::kNfs4ErrStale;
          mark_ = "OPEN(fh)";
          r->stateid = Sid("open", ++opens_);
          if (grant != DelegationType::kNone) {
            r->delegation.type = grant;
            r->delegation.stateid = Sid("deleg", ++delegs_);
          }
          return 0;
        }
        if (unsearchable_by.count(caller_.uid)) return upstream::kNfs4ErrAccess;
        const component4 &n = o.claim.open_claim4_u.file;
        std::string name = Str(n.utf8string_val, n.utf8string_len);
        Fh fh = Named(*cur, name);
        if (o.openhow.opentype == OPEN4_CREATE && !fh.empty() &&
            o.openhow.openflag4_u.how.mode == GUARDED4)
          return upstream::kNfs4ErrExist;
        if (fh.empty()) {
          if (o.openhow.opentype != OPEN4_CREATE)
            return upstream::kNfs4ErrNoent;
          // A new object: its own handle, also when another object that
          // once had this name keeps "f:<name>".
          fh = FhFor(*cur, name);
          if (files_.count(fh)) fh += "#" + std::to_string(++renamed_);
          files_[fh].name = name;
          files_[fh].parent = *cur;
          files_[fh].uid = files_[fh].gid = new_owner.load();
          aliases_[*cur + "/" + name] = fh;
          ReportChange(&r->cinfo);
        }
        *cur = fh;
        r->stateid = Sid("open", ++opens_);
        if (grant != DelegationType::kNone) {
          r->delegation.type = grant;
          r->delegation.stateid = Sid("deleg", ++delegs_);
        }
        return 0;
      }
      case OP_SETATTR: {
        // Only a size change does something here.
        File &f = files_[*cur];
        Attrs want;
        const fattr4 &fa = a.nfs_argop4_u.opsetattr.obj_attributes;
        if (upstream::DecodeAttrs(fa.attrmask.bitmap4_val,
                                  fa.attrmask.bitmap4_len,
                                  fa.attr_vals.attrlist4_val,
                                  fa.attr_vals.attrlist4_len, &want, nullptr) &&
            (want.mask & upstream::kAttrSize)) {
          f.data.resize(size_t(want.size));
          f.stable.resize(size_t(want.size));
        }
        f.change++;
        return 0;
      }
      case OP_REMOVE: {
        const component4 &n = a.nfs_argop4_u.opremove.target;
        auto refuse =
            remove_refused.find(Str(n.utf8string_val, n.utf8string_len));
        if (refuse != remove_refused.end()) return refuse->second;
        std::string name = Str(n.utf8string_val, n.utf8string_len);
        Fh fh = Named(*cur, name);
        if (fh.empty()) return upstream::kNfs4ErrNoent;
        if (HasChildren(fh)) return upstream::kNfs4ErrNotempty;
        files_.erase(fh);
        aliases_.erase(*cur + "/" + name);
        ReportChange(&r->cinfo);
        return 0;
      }
      case OP_CREATE: {  // directories, and symlinks (data: the target)
        const CREATE4args &cr = a.nfs_argop4_u.opcreate;
        if (cr.objtype.type != NF4DIR && cr.objtype.type != NF4LNK)
          return upstream::kNfs4ErrNotsupp;
        std::string name =
            Str(cr.objname.utf8string_val, cr.objname.utf8string_len);
        if (!Named(*cur, name).empty()) return upstream::kNfs4ErrExist;
        Fh fh = FhFor(*cur, name);
        if (files_.count(fh)) fh += "#" + std::to_string(++renamed_);
        File &f = files_[fh];
        f.name = name;
        f.parent = *cur;
        f.dir = cr.objtype.type == NF4DIR;
        if (!f.dir)
          f.data = Str(cr.objtype.createtype4_u.linkdata.utf8string_val,
                       cr.objtype.createtype4_u.linkdata.utf8string_len);
        f.uid = f.gid = new_owner.load();
        aliases_[*cur + "/" + name] = fh;
        *cur = fh;
        ReportChange(&r->cinfo);
        return 0;
      }
      case OP_LOCK: {
        const LOCK4args &l = a.nfs_argop4_u.oplock;
        if (in_grace_ != bool(l.reclaim))
          return in_grace_ ? upstream::kNfs4ErrGrace
                           : upstream::kNfs4ErrNoGrace;
        std::string owner;
        if (l.locker.new_lock_owner) {
          const lock_owner4 &lo = l.locker.locker4_u.open_owner.lock_owner;
          owner = Str(lo.owner.owner_val, lo.owner.owner_len);
        } else {
          auto it = lock_owners_.find(
              Str(l.locker.locker4_u.lock_owner.lock_stateid.other, 12));
          if (it == lock_owners_.end()) return upstream::kNfs4ErrBadStateid;
          owner = it->second;
        }
        uint64_t end =
            l.length == UINT64_MAX ? UINT64_MAX : l.offset + l.length;
        for (const HeldRange &h : locks_)
          if (h.owner != owner && h.offset < end && l.offset < h.end)
            return upstream::kNfs4ErrDenied;
        locks_.push_back({owner, l.offset, end});
        r->stateid = Sid("lock", ++lock_sids_);
        lock_owners_[Str(reinterpret_cast<const char *>(r->stateid.other),
                         12)] = owner;
        if (l.reclaim) mark_ = "LOCK(reclaim)";
        return 0;
      }
      case OP_LOCKU: {
        const LOCKU4args &l = a.nfs_argop4_u.oplocku;
        auto it = lock_owners_.find(Str(l.lock_stateid.other, 12));
        if (it == lock_owners_.end()) return upstream::kNfs4ErrBadStateid;
        uint64_t end =
            l.length == UINT64_MAX ? UINT64_MAX : l.offset + l.length;
        // Whole ranges only: enough for these tests.
        for (auto h = locks_.begin(); h != locks_.end();)
          if (h->owner == it->second && h->offset >= l.offset && h->end <= end)
            h = locks_.erase(h);
          else
            ++h;
        r->stateid.seqid = l.lock_stateid.seqid;
        memcpy(r->stateid.other, l.lock_stateid.other, 12);
        return 0;
      }
      case OP_CLOSE:
      case OP_OPEN_DOWNGRADE:
      case OP_DELEGRETURN: return delegreturn_status.load();
      case OP_COMMIT:
        if (reboot_before_commit.exchange(false)) {
          // What was only in memory is gone; the verifier says so.
          for (auto &kv : files_) kv.second.data = kv.second.stable;
          write_verifier_[0]++;
        }
        files_[*cur].stable = files_[*cur].data;
        r->verifier = write_verifier_;
        return 0;
      case OP_WRITE: {
        writes_waiting++;
        cv_.wait(g, [this] { return !hold_writes.load(); });
        writes_waiting--;
        const WRITE4args &w = a.nfs_argop4_u.opwrite;
        write_stateids_.push_back(
            Str(reinterpret_cast<const char *>(w.stateid.other), 12));
        File &f = files_[*cur];
        size_t end = size_t(w.offset) + w.data.data_len;
        if (f.data.size() < end) f.data.resize(end);
        memcpy(&f.data[w.offset], w.data.data_val, w.data.data_len);
        f.change++;
        r->count = w.data.data_len;
        r->committed = upstream::StableHow::kFileSync;
        r->verifier = write_verifier_;
        if ((unstable_writes && w.stable == UNSTABLE4) || weak_file_sync)
          r->committed = upstream::StableHow::kUnstable;
        else
          f.stable = f.data;
        return 0;
      }
      case OP_LINK: {  // the saved object gets another name in cur
        const component4 &n = a.nfs_argop4_u.oplink.newname;
        std::string name = Str(n.utf8string_val, n.utf8string_len);
        if (!Named(*cur, name).empty()) return upstream::kNfs4ErrExist;
        aliases_[*cur + "/" + name] = saved_;
        files_[saved_].change++;
        ReportChange(&r->cinfo);
        return 0;
      }
      case OP_READDIR: {
        // Entries in name order, their cookie their position; at most
        // four per reply (the core reads on to the end).
        if (!readdir) return upstream::kNfs4ErrNotsupp;
        if (read_refused_.count(*cur)) return upstream::kNfs4ErrAccess;
        const READDIR4args &rd = a.nfs_argop4_u.opreaddir;
        std::map<std::string, Fh> kids;
        for (const auto &kv : files_)
          if (kv.second.parent == *cur) kids[kv.second.name] = kv.first;
        uint64_t n = 0;
        for (const auto &kid : kids) {
          if (++n <= rd.cookie) continue;
          if (r->entries.size() == 4) break;
          upstream::DirEntry e;
          e.cookie = n;
          e.name = kid.first;
          e.fh = kid.second;
          e.attrs = AttrsOf(kid.second);
          r->entries.push_back(e);
        }
        r->eof = rd.cookie + r->entries.size() >= kids.size();
        r->verifier = upstream::Verifier(8, 'c');
        return 0;
      }
      case OP_READ: {
        if (read_refused_.count(*cur)) return upstream::kNfs4ErrAccess;
        const READ4args &rd = a.nfs_argop4_u.opread;
        const std::string &data = files_[*cur].data;
        size_t from = std::min<size_t>(size_t(rd.offset), data.size());
        size_t n = std::min<size_t>(rd.count, data.size() - from);
        if (n) memcpy(read_dest, data.data() + from, n);
        r->count = uint32_t(n);
        r->eof = from + n == data.size();
        return 0;
      }
      default: return upstream::kNfs4ErrNotsupp;
    }
  }

  // The handle of the object at path ("" when none). mu_ held.
  Fh AtPath(const std::string &path) {
    Fh fh = "root";
    for (size_t from = 0; !fh.empty() && from <= path.size();) {
      size_t slash = std::min(path.find('/', from), path.size());
      fh = Named(fh, path.substr(from, slash - from));
      from = slash + 1;
    }
    return fh;
  }
  // The handle an object made as name in dir gets: "f:<its path>".
  static Fh FhFor(const Fh &dir, const std::string &name) {
    return dir == "root" ? "f:" + name : dir + "/" + name;
  }
  // The object at path (made if missing, its directories too). mu_ held.
  File &Add(const std::string &path) {
    size_t slash = path.rfind('/');
    Fh dir = "root";
    std::string name = path;
    if (slash != std::string::npos) {
      dir = FhFor("root", path.substr(0, slash));
      files_[dir].dir = true;
      Add(path.substr(0, slash));
      name = path.substr(slash + 1);
    }
    File &f = files_[FhFor(dir, name)];
    f.name = name;
    f.parent = dir;
    return f;
  }
  bool HasChildren(const Fh &dir) {
    for (const auto &kv : files_)
      if (kv.second.parent == dir) return true;
    return false;
  }
  // The handle of the object named name in dir now ("" when none):
  // FhFor(dir, name) unless a rename or a create after one gave it
  // another. mu_ held.
  Fh Named(const Fh &dir, const std::string &name) {
    auto a = aliases_.find(dir + "/" + name);
    if (a != aliases_.end()) return a->second;
    auto it = files_.find(FhFor(dir, name));
    return it != files_.end() && it->second.name == name &&
                   it->second.parent == dir
               ? it->first
               : Fh();
  }

  std::mutex mu_;  // guards everything below; Call holds it throughout
  std::condition_variable cv_;  // hold_writes or hold_opens changed
  std::map<Fh, File> files_;
  std::condition_variable done_cv_;  // an op was completed
  std::vector<std::string> log_;     // ops completed, in order
  std::string mark_;  // the current op's name in the log, when special
  uint32_t opens_ = 0, delegs_ = 0, lock_sids_ = 0;
  // The OPEN of a compound, if it has one.
  static const OPEN4args *OpenIn(const COMPOUND4args *args) {
    for (u_int i = 0; i < args->argarray.argarray_len; i++)
      if (args->argarray.argarray_val[i].argop == OP_OPEN)
        return &args->argarray.argarray_val[i].nfs_argop4_u.opopen;
    return nullptr;
  }
  // Per open-owner: its last OPEN's seqid and reply (guarded by mu_).
  struct Replay {
    uint32_t seqid = 0;
    CompoundReply rep;
  };
  std::map<std::string, Replay> replay_;
  std::atomic<uint64_t> epoch_{0};  // client ids confirmed before this one
  bool in_grace_ = false;
  upstream::Verifier write_verifier_ = std::string(8, 'v');  // WRITE, COMMIT
  std::vector<HeldRange> locks_;
  std::map<std::string, std::string> lock_owners_;  // lock stateid -> owner
  std::vector<std::string> write_stateids_;         // WriteStateids
  std::vector<std::string> compounds_;  // each COMPOUND's ops (Compounds)
  std::vector<uint64_t> copy_lengths_;  // CopyLengths
  DelegationType reclaimed_ = DelegationType::kNone;
  // "<dir handle>/<name>" of objects whose handle is not FhFor's.
  std::map<std::string, Fh> aliases_;
  Fh saved_;                   // SAVEFH
  std::set<Fh> read_refused_;  // RefuseReading
  uint32_t renamed_ = 0;
  uint64_t cinfo_counter_ = 1000;             // ReportChange
  std::vector<upstream::ChangeInfo> cinfos_;  // ChangeInfos
};

// A TCP port on 127.0.0.1 that was free a moment ago.
inline uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// What the core owns as its upstream: the test's ScriptedUpstream, which
// outlives it (a core killed and started again meets the same server).
class ForwardingUpstream : public upstream::Upstream {
 public:
  explicit ForwardingUpstream(ScriptedUpstream *up) : up_(up) {}
  bool WaitReady(int ms) override { return up_->WaitReady(ms); }
  CallStatus Call(Compound &c, const Creds &cr, CompoundReply *rep) override {
    return up_->Call(c, cr, rep);
  }
  void CallAsync(Compound c, const Creds &cr, Callback cb) override {
    up_->CallAsync(std::move(c), cr, std::move(cb));
  }
  uint64_t clientid() const override { return up_->clientid(); }
  uint64_t epoch() const override { return up_->epoch(); }
  upstream::UpstreamState state() const override { return up_->state(); }
  uint32_t lease_time() const override { return up_->lease_time(); }
  Clock::time_point lease_valid_until() const override {
    return up_->lease_valid_until();
  }
  bool callback_path_down() const override { return up_->callback_path_down(); }
  uint32_t minor_version() const override { return up_->minor_version(); }
  uint32_t max_operations() const override { return up_->max_operations(); }
  void RestartClient(const char *why) override { up_->RestartClient(why); }
  void Shutdown() override { up_->Shutdown(); }
  void ReclaimDone() override { up_->ReclaimDone(); }

 private:
  ScriptedUpstream *up_;  // not owned
};

class CoreDelegationsTest : public ::testing::Test {
 protected:
  void SetUp() override { up_->AddFile("f", "hello"); }
  void TearDown() override {
    core_.reset();
    delete up_;
  }

  // probe_callbacks: the server probes the callback path once the core is
  // up (not on a restart, which needs no callbacks).
  void Start(DelegationType grant,
             const std::function<void(CoreConfig *)> &tune = nullptr,
             bool probe_callbacks = true) {
    up_->grant = grant;
    CoreConfig cfg;
    cfg.upstream_server = "127.0.0.1";
    cfg.upstream_path = "/";
    cfg.callback_address = "127.0.0.1";
    cfg.callback_port = port_;
    cfg.cache_dir = dir_.path() + "/cache";
    cfg.cache.attr_timeout_ms = 0;  // fresh only under a delegation
    cfg.cache.size_bytes = 16 << 20;
    cfg.cache.block_size = 4096;
    cfg.open_linger_ms = 0;  // CLOSE at the last local close
    // NFSv4.0 unless a test tunes it (CoreConfig's default is the C API's).
    cfg.minor_version = 0;
    cfg.metrics = &metrics_;
    ScriptedUpstream *up = up_;
    cfg.make_upstream = [up](const upstream::UpstreamOptions &o) {
      up->on_new_clientid = o.on_new_clientid;
      return std::unique_ptr<upstream::Upstream>(new ForwardingUpstream(up));
    };
    if (tune) tune(&cfg);
    std::string err;
    core_ = Core::Open(cfg, &err);
    // The port FreePort found may be taken meanwhile by another test
    // process (ctest runs them in parallel): another one then. (Nothing
    // else makes Core::Open fail here.)
    for (int i = 0; !core_ && i < 20 &&
                    err.find("Address already in use") != std::string::npos;
         i++) {
      cfg.callback_port = port_ = FreePort();
      core_ = Core::Open(cfg, &err);
    }
    ASSERT_TRUE(core_) << err;
    ASSERT_EQ(core_->Root(cr_, &root_, nullptr), 0u);
    ASSERT_EQ(core_->Lookup(cr_, root_, "f", &file_, nullptr), 0u);
    if (!probe_callbacks) return;
    // The server probes the callback path: the core then knows it may
    // delegate.
    ASSERT_TRUE(client_.Connect(port_));
    ASSERT_NE(client_.Call(CB_NULL, nullptr), nullptr);
  }
  // Start with write-back on a single-writer export (namespace logged);
  // flush_age_ms 0: flushed at once, large: only when something needs it.
  void StartWriteBack(DelegationType grant, uint32_t flush_age_ms) {
    Start(grant, [flush_age_ms](CoreConfig *cfg) {
      cfg->write_back = true;
      cfg->single_writer = true;
      cfg->flush_age_ms = flush_age_ms;
    });
  }
  // A byte-range lock (or unlock) of file_ by local owner, through open.
  uint32_t LockF(NacheOpen *open, const char *owner, nache_lock_op op,
                 bool write, uint64_t offset, uint64_t length) {
    nache_lock_conflict conflict{};
    return core_->Lock(cr_, file_, open, owner, op, write, offset, length,
                       false, &conflict);
  }
  // Reads the root's listing (cached while the attribute window lasts).
  void ListRoot() { ListDir(root_); }
  // Reads directory dir's entries as cr_: nache keeps its listing.
  void ListDir(Key dir) {
    bool eof = false;
    ASSERT_EQ(core_->Readdir(
                  cr_, dir, 0,
                  [](void *, const char *, nache_key, const nache_attrs *,
                     uint64_t) { return true; },
                  nullptr, &eof),
              0u);
    ASSERT_NE(core_->cache()->Listing(dir), nullptr)
        << "the directory is listed";
  }
  // Truncates key to size: a size change goes upstream, so key (and what
  // its create depends on) is sent first.
  void TruncateTo(Key key, uint64_t size) { ASSERT_EQ(SetSize(key, size), 0u); }
  // Sets key's size (sending key, its create then its data, first when it
  // is written back); the status.
  uint32_t SetSize(Key key, uint64_t size) {
    Attrs set, attrs;
    set.mask = upstream::kAttrSize;
    set.size = size;
    return core_->Setattr(cr_, key, nullptr, set, &attrs);
  }
  // Opens name in the root as cr, for reading and writing, created as
  // mode says; the status.
  // An EXCLUSIVE create of the root's "f" as cr, for reading and writing;
  // the status.
  uint32_t ExclusiveCreateOfF(const Creds &cr, NacheOpen **open, Key *key,
                              bool *created) {
    static const uint8_t verifier[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    Core::OpenRequest req;
    req.key = root_;
    req.name = "f";
    req.access = kBoth;
    req.mode = NACHE_OPEN_EXCLUSIVE;
    req.verifier = verifier;
    return core_->OpenFile(cr, req, open, key, nullptr, created);
  }
  uint32_t OpenNamed(const Creds &cr, const char *name, nache_createmode mode,
                     NacheOpen **open, Key *key, bool *created) {
    Core::OpenRequest req;
    req.key = root_;
    req.name = name;
    req.access = kBoth;
    req.mode = mode;
    return core_->OpenFile(cr, req, open, key, nullptr, created);
  }
  // Opens f (by handle) as cr for access; the status.
  uint32_t OpenFAs(const Creds &cr, uint32_t access, NacheOpen **out) {
    Core::OpenRequest req;
    req.key = file_;
    req.access = access;
    Key key;
    bool created;
    return core_->OpenFile(cr, req, out, &key, nullptr, &created);
  }
  // Makes directory name (mode 0755) in the root as cr_: its status;
  // *key, the new directory's key.
  uint32_t Mkdir(const std::string &name, Key *key) {
    Attrs mode, got;
    mode.mask = upstream::kAttrMode;
    mode.mode = 0755;
    return core_->Create(cr_, root_, name, upstream::FileType::kDir, mode, "",
                         key, &got);
  }
  NacheOpen *OpenF(uint32_t access) {
    Core::OpenRequest req;
    req.key = file_;
    req.access = access;
    NacheOpen *open = nullptr;
    Key key;
    bool created;
    EXPECT_EQ(core_->OpenFile(cr_, req, &open, &key, nullptr, &created), 0u);
    return open;
  }
  // Opens name in the root as cr (created as mode says), writes data at 0
  // (FILE_SYNC) and closes it; its key. *created: whether the open made it.
  Key WriteNamed(const Creds &cr, const char *name, nache_createmode mode,
                 const std::string &data, bool *created) {
    NacheOpen *open = nullptr;
    Key key = kNoKey;
    EXPECT_EQ(OpenNamed(cr, name, mode, &open, &key, created), 0u);
    if (!open) return kNoKey;
    size_t n = 0;
    upstream::StableHow committed{};
    EXPECT_EQ(core_->Write(cr, key, open, 0, data.size(), data.data(),
                           upstream::StableHow::kFileSync, &n, &committed),
              0u);
    EXPECT_EQ(core_->CloseFile(open), 0u);
    return key;
  }
  // Creates name in the root as cr, writes data into it and closes it.
  Key CreateAs(const Creds &cr, const char *name, const std::string &data) {
    bool created = false;
    Key key = WriteNamed(cr, name, NACHE_OPEN_GUARDED, data, &created);
    EXPECT_TRUE(created);
    return key;
  }
  Key CreateWritten(const char *name, const std::string &data) {
    return CreateAs(cr_, name, data);
  }
  cb_client::Reply *Recall(int n) {
    cb_client::Args args;
    args.Recall(Sid("deleg", n), false, "f:f");
    return client_.Call(CB_COMPOUND, args.Get());
  }

  testing_util::TempDir dir_;
  metrics::Metrics metrics_;
  ScriptedUpstream *up_ = new ScriptedUpstream();  // deleted by TearDown
  uint16_t port_ = FreePort();
  std::unique_ptr<Core> core_;
  cb_client::Client client_;
  Creds cr_;
  Key root_ = kNoKey, file_ = kNoKey;
};

// The value of a counter of metrics, summed over its series that have
// every label given.
inline double CounterValue(
    metrics::Metrics &m, const std::string &name,
    const std::map<std::string, std::string> &labels = {}) {
  double v = 0;
  for (const prometheus::MetricFamily &f : m.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric &c : f.metric) {
      size_t matched = 0;
      for (const prometheus::ClientMetric::Label &l : c.label) {
        auto it = labels.find(l.name);
        if (it != labels.end() && it->second == l.value) matched++;
      }
      if (matched == labels.size()) v += c.counter.value;
    }
  }
  return v;
}

}  // namespace coretest
}  // namespace nache
