// The core's delegation handling against a scripted upstream: an in-memory
// NFSv4.0 server that grants the delegation type a test asks for (no server
// in our lab grants write delegations: Linux knfsd before 6.6 does not), and
// the real callback service, called by a real libnfs client over loopback.
// Covered: opens a write or read delegation lets the core grant locally;
// (and, not a delegation matter, the open linger);
// attributes trusted under it past the attribute window, and no longer
// once it is recalled; a recall that flushes queued writes and turns local
// opens into upstream opens before DELEGRETURN; CB_GETATTR from the core's
// view; a read delegation returned before our own open for write; a
// lapsed lease ending the trust; after a server restart, opens, locks and
// delegations reclaimed in the grace period, or taken anew without one.
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
namespace {

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
constexpr uint32_t kBoth = upstream::kShareAccessRead |
                           upstream::kShareAccessWrite;

StateId Sid(const char *tag, uint32_t n) {
  StateId s;
  s.seqid = 1;
  snprintf(reinterpret_cast<char *>(s.other), sizeof(s.other), "%s%u", tag,
           n);
  return s;
}

// The scripted server: a tree of directories and regular files ("a/b/f";
// an object's handle is "f:<path it was made under>" unless a rename or a
// create after one gave it another), opens that never need OPEN_CONFIRM, and the delegation type the test sets granted on
// every OPEN. Logs each operation it completed, in order ("OP!": failed).
class ScriptedUpstream : public upstream::Upstream {
 public:
  DelegationType grant = DelegationType::kNone;  // given with each OPEN
  // A delegation given back by a reclaim comes with "recall" set (the
  // server cannot call us back yet).
  bool recall_reclaimed = false;
  // REMOVEs of these names fail with the status given.
  std::map<std::string, uint32_t> remove_refused;
  // Set by the core: called by Restart like the real client's state
  // thread after it confirmed a new client id.
  std::function<void(uint64_t)> on_new_clientid;
  std::atomic<bool> hold_writes{false};          // WRITEs wait while true
  // A kill of nache simulated at the server: once an op of this name is
  // executed, its reply is lost (the call times out) and every later call
  // finds no server (nache is dead) until `dead` is cleared.
  std::string die_after;                         // guarded by mu_
  std::atomic<bool> dead{false};
  void DieAfter(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    die_after = op;
  }
  // A request lost on its way: the next compound with an op of this name
  // is not executed at all, and the call times out.
  std::string lose_request_with;                 // guarded by mu_
  void LoseRequestWith(const std::string &op) {
    std::lock_guard<std::mutex> g(mu_);
    lose_request_with = op;
  }
  // A reply lost on its way back: the next compound with an op of this
  // name is executed, and the call times out; the server carries on.
  std::string lose_reply_of;                     // guarded by mu_
  // And meanwhile a new client id is confirmed (the old one's state is
  // gone at the server).
  bool new_id_after_lost = false;                // guarded by mu_
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
  std::set<uint32_t> unreadable_by;              // guarded by mu_
  void DenyReading(uint32_t uid) {
    std::lock_guard<std::mutex> g(mu_);
    unreadable_by.insert(uid);
  }
  // The same, done to the file at path at the server by someone else (a
  // chmod or an ACL entry set there): its change attribute moves.
  void ForeignDenyReading(const std::string &path, uint32_t uid) {
    std::lock_guard<std::mutex> g(mu_);
    unreadable_by.insert(uid);
    Add(path).change++;
  }
  std::atomic<int> writes_waiting{0};            // WRITEs held right now
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
  std::atomic<Clock::rep> lease_end{
      (Clock::now() + std::chrono::hours(1)).time_since_epoch().count()};

  void AddFile(const std::string &path, const std::string &data) {
    std::lock_guard<std::mutex> g(mu_);
    Add(path).data = data;
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
  uint64_t Change(const std::string &path) {
    std::lock_guard<std::mutex> g(mu_);
    return Add(path).change;
  }
  // Someone else writes the file at the server.
  void ForeignWrite(const std::string &path, const std::string &data) {
    std::lock_guard<std::mutex> g(mu_);
    File &f = Add(path);
    f.data = data;
    f.change++;
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
      locks_.erase(std::remove_if(locks_.begin(), locks_.end(),
                                  [](const HeldRange &l) {
                                    return l.owner != "foreign";
                                  }),
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
      if (l.owner != "foreign" && l.offset < end && offset < l.end)
        return true;
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
    const COMPOUND4args *args = c.Args();
    // NFSv4.0 as knfsd does it: an OPEN bearing the seqid of its owner's
    // last OPEN is a retransmission, answered from the replay cache
    // whatever it asks for; but an owner is sequenced only once confirmed,
    // and a new owner's first OPEN (seqid 0 from the core) is executed
    // anew.
    const OPEN4args *open = OpenIn(args);
    std::string open_owner;
    if (open)
      open_owner = Str(open->owner.owner.owner_val, open->owner.owner.owner_len);
    if (open && open->seqid != 0 && !no_replay && replay_.count(open_owner) &&
        replay_[open_owner].seqid == open->seqid) {
      *rep = replay_[open_owner].rep;
      log_.push_back("OPEN(replayed)");
      done_cv_.notify_all();
      return CallStatus::kOk;
    }
    Fh cur;
    rep->status = upstream::kNfs4Ok;
    for (u_int i = 0; i < args->argarray.argarray_len; i++) {
      const nfs_argop4 &a = args->argarray.argarray_val[i];
      OpResult r;
      r.op = c.op(i);
      sent_.push_back(Sent{upstream::OpName(r.op), cr});
      bool member = cr.gid == need_group ||
                    std::find(cr.groups.begin(), cr.groups.end(),
                              need_group) != cr.groups.end();
      r.status = guarded_ops.count(upstream::OpName(r.op)) && !member
                     ? uint32_t(upstream::kNfs4ErrAccess)
                     : Execute(a, &cur, &r, g, c.read_dest(i));
      rep->results.push_back(r);
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
  void Shutdown() override {}

 private:
  Creds caller_;  // of the call being executed; guarded by mu_
  struct File {
    std::string name, data;
    Fh parent = "root";
    bool dir = false;
    uint64_t change = 1;
    uint32_t uid = 0, gid = 0;  // (Own)
    uint64_t unmapped = 0;
    uint32_t mode = 0;  // 0: 0644, directories 0755
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

  // read_dest: where a READ puts its data.
  uint32_t Execute(const nfs_argop4 &a, Fh *cur, OpResult *r,
                   std::unique_lock<std::mutex> &g, char *read_dest) {
    switch (a.argop) {
      case OP_PUTROOTFH:
        *cur = "root";
        return 0;
      case OP_PUTFH:
        *cur = Str(a.nfs_argop4_u.opputfh.object.nfs_fh4_val,
                   a.nfs_argop4_u.opputfh.object.nfs_fh4_len);
        // A handle of nothing the server has (removed): stale.
        if (*cur != "root" && !files_.count(*cur))
          return upstream::kNfs4ErrStale;
        return 0;
      case OP_LOOKUP: {
        const component4 &n = a.nfs_argop4_u.oplookup.objname;
        Fh fh = Named(*cur, Str(n.utf8string_val, n.utf8string_len));
        if (fh.empty()) return upstream::kNfs4ErrNoent;
        *cur = fh;
        return 0;
      }
      case OP_SAVEFH:
        saved_ = *cur;
        return 0;
      case OP_RESTOREFH:
        *cur = saved_;
        // The object saved was removed and freed meanwhile: stale.
        if (*cur != "root" && !files_.count(*cur))
          return upstream::kNfs4ErrStale;
        return 0;
      case OP_RENAME: {
        const RENAME4args &rn = a.nfs_argop4_u.oprename;
        std::string from = Str(rn.oldname.utf8string_val,
                               rn.oldname.utf8string_len);
        std::string to = Str(rn.newname.utf8string_val,
                             rn.newname.utf8string_len);
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
        return 0;
      }
      case OP_GETFH:
        r->fh = *cur;
        return 0;
      case OP_GETATTR:
        r->attrs = AttrsOf(*cur);
        return 0;
      case OP_ACCESS:
        r->access_supported = r->access = a.nfs_argop4_u.opaccess.access;
        if (unreadable_by.count(caller_.uid))
          r->access &= ~uint32_t(upstream::kAccessRead |
                                 upstream::kAccessExecute);
        return 0;
      case OP_OPEN: {
        const OPEN4args &o = a.nfs_argop4_u.opopen;
        if ((o.share_access & OPEN4_SHARE_ACCESS_READ) &&
            unreadable_by.count(caller_.uid))
          return upstream::kNfs4ErrAccess;
        if (o.claim.claim == CLAIM_PREVIOUS) {
          if (!in_grace_) return upstream::kNfs4ErrNoGrace;
          mark_ = "OPEN(previous)";
          reclaimed_ =
              DelegationType(o.claim.open_claim4_u.delegate_type);
          r->stateid = Sid("open", ++opens_);
          if (reclaimed_ != DelegationType::kNone) {
            r->delegation.type = reclaimed_;
            r->delegation.stateid = Sid("deleg", ++delegs_);
            r->delegation.recall = recall_reclaimed;
          }
          return 0;
        }
        if (in_grace_) return upstream::kNfs4ErrGrace;
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
          aliases_[*cur + "/" + name] = fh;
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
                                  fa.attr_vals.attrlist4_len, &want,
                                  nullptr) &&
            (want.mask & upstream::kAttrSize))
          f.data.resize(size_t(want.size));
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
        return 0;
      }
      case OP_CREATE: {  // directories only
        const CREATE4args &cr = a.nfs_argop4_u.opcreate;
        if (cr.objtype.type != NF4DIR) return upstream::kNfs4ErrNotsupp;
        std::string name =
            Str(cr.objname.utf8string_val, cr.objname.utf8string_len);
        if (!Named(*cur, name).empty()) return upstream::kNfs4ErrExist;
        Fh fh = FhFor(*cur, name);
        if (files_.count(fh)) fh += "#" + std::to_string(++renamed_);
        File &f = files_[fh];
        f.name = name;
        f.parent = *cur;
        f.dir = true;
        aliases_[*cur + "/" + name] = fh;
        *cur = fh;
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
          auto it = lock_owners_.find(Str(
              l.locker.locker4_u.lock_owner.lock_stateid.other, 12));
          if (it == lock_owners_.end()) return upstream::kNfs4ErrBadStateid;
          owner = it->second;
        }
        uint64_t end = l.length == UINT64_MAX ? UINT64_MAX
                                              : l.offset + l.length;
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
        uint64_t end = l.length == UINT64_MAX ? UINT64_MAX
                                              : l.offset + l.length;
        // Whole ranges only: enough for these tests.
        for (auto h = locks_.begin(); h != locks_.end();)
          if (h->owner == it->second && h->offset >= l.offset &&
              h->end <= end)
            h = locks_.erase(h);
          else
            ++h;
        r->stateid.seqid = l.lock_stateid.seqid;
        memcpy(r->stateid.other, l.lock_stateid.other, 12);
        return 0;
      }
      case OP_CLOSE:
      case OP_OPEN_DOWNGRADE:
      case OP_DELEGRETURN:
      case OP_COMMIT:
        return 0;
      case OP_WRITE: {
        writes_waiting++;
        cv_.wait(g, [this] { return !hold_writes.load(); });
        writes_waiting--;
        const WRITE4args &w = a.nfs_argop4_u.opwrite;
        File &f = files_[*cur];
        size_t end = size_t(w.offset) + w.data.data_len;
        if (f.data.size() < end) f.data.resize(end);
        memcpy(&f.data[w.offset], w.data.data_val, w.data.data_len);
        f.change++;
        r->count = w.data.data_len;
        r->committed = upstream::StableHow::kFileSync;
        r->verifier = std::string(8, 'v');
        return 0;
      }
      case OP_LINK: {  // the saved object gets another name in cur
        const component4 &n = a.nfs_argop4_u.oplink.newname;
        std::string name = Str(n.utf8string_val, n.utf8string_len);
        if (!Named(*cur, name).empty()) return upstream::kNfs4ErrExist;
        aliases_[*cur + "/" + name] = saved_;
        files_[saved_].change++;
        return 0;
      }
      case OP_READ: {
        const READ4args &rd = a.nfs_argop4_u.opread;
        const std::string &data = files_[*cur].data;
        size_t from = std::min<size_t>(size_t(rd.offset), data.size());
        size_t n = std::min<size_t>(rd.count, data.size() - from);
        if (n) memcpy(read_dest, data.data() + from, n);
        r->count = uint32_t(n);
        r->eof = from + n == data.size();
        return 0;
      }
      default:
        return upstream::kNfs4ErrNotsupp;
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
  std::condition_variable cv_;  // hold_writes changed
  std::map<Fh, File> files_;
  std::condition_variable done_cv_;  // an op was completed
  std::vector<std::string> log_;  // ops completed, in order
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
  std::vector<HeldRange> locks_;
  std::map<std::string, std::string> lock_owners_;  // lock stateid -> owner
  DelegationType reclaimed_ = DelegationType::kNone;
  // "<dir handle>/<name>" of objects whose handle is not FhFor's.
  std::map<std::string, Fh> aliases_;
  Fh saved_;                            // SAVEFH
  uint32_t renamed_ = 0;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
uint16_t FreePort() {
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
  bool callback_path_down() const override {
    return up_->callback_path_down();
  }
  void RestartClient(const char *why) override { up_->RestartClient(why); }
  void Shutdown() override { up_->Shutdown(); }
  void ReclaimDone() override { up_->ReclaimDone(); }

 private:
  ScriptedUpstream *up_;  // not owned
};

class CoreDelegationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    up_->AddFile("f", "hello");
  }
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
    cfg.metrics = &metrics_;
    ScriptedUpstream *up = up_;
    cfg.make_upstream = [up](const upstream::UpstreamOptions &o) {
      up->on_new_clientid = o.on_new_clientid;
      return std::unique_ptr<upstream::Upstream>(new ForwardingUpstream(up));
    };
    if (tune) tune(&cfg);
    std::string err;
    core_ = Core::Open(cfg, &err);
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
    int committed = 0;
    EXPECT_EQ(core_->Write(cr, key, open, 0, data.size(), data.data(), 2, &n,
                           &committed),
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

TEST_F(CoreDelegationsTest, WriteDelegationServesOpensAndAttributesLocally) {
  Start(DelegationType::kWrite);
  NacheOpen *o = OpenF(kBoth);  // the OPEN that brings the delegation
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(core_->CloseFile(o), 0u);  // no linger: CLOSE now
  EXPECT_EQ(up_->Count("OPEN"), 1);
  EXPECT_EQ(up_->Count("CLOSE"), 1);
  int getattrs = up_->Count("GETATTR");
  for (uint32_t access : {kBoth, kRead, uint32_t(upstream::kShareAccessWrite)}) {
    NacheOpen *again = OpenF(access);
    ASSERT_NE(again, nullptr);
    Attrs a;
    EXPECT_EQ(core_->Getattr(cr_, file_, &a), 0u);
    EXPECT_EQ(a.size, 5u);
    EXPECT_EQ(core_->CloseFile(again), 0u);
  }
  EXPECT_EQ(up_->Count("OPEN"), 1) << "opens granted under the delegation";
  EXPECT_EQ(up_->Count("CLOSE"), 1);
  EXPECT_EQ(up_->Count("GETATTR"), getattrs)
      << "attributes trusted past a zero attribute window";
}

TEST_F(CoreDelegationsTest, RecallFlushesWritesAndOpensUpstreamBeforeReturn) {
  Start(DelegationType::kWrite);
  ASSERT_EQ(core_->CloseFile(OpenF(kBoth)), 0u);
  NacheOpen *o = OpenF(kBoth);  // granted locally, still open at the recall
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  up_->hold_writes = true;
  std::string data(4096, 'x');
  size_t n = 0;
  int committed = -1;
  ASSERT_EQ(core_->Write(cr_, file_, o, 0, data.size(), data.data(), 0, &n,
                         &committed),
            0u);
  EXPECT_EQ(committed, 0) << "queued (write-behind)";
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  up_->ReleaseWrites();
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("DELEGRETURN"); }));
  int write = up_->Index("WRITE"), reopen = up_->Index("OPEN", 1),
      ret = up_->Index("DELEGRETURN");
  ASSERT_GE(write, 0);
  ASSERT_GE(reopen, 0) << "the local open became an upstream open";
  EXPECT_LT(write, ret) << "queued data reaches the server first";
  EXPECT_LT(reopen, ret) << "the open exists upstream before the return";
  // Afterwards the open is an ordinary upstream open: its CLOSE goes up.
  EXPECT_EQ(core_->CloseFile(o), 0u);
  EXPECT_EQ(up_->Count("CLOSE"), 2);
}

// Under a write delegation a lock is granted here (no other client of the
// server can open the file, so none can hold a lock on it); when the
// delegation is recalled the lock is sent, on the upstream open made for
// the local one, before the DELEGRETURN; an unlock of a range granted here
// sends nothing.
TEST_F(CoreDelegationsTest, LocksUnderAWriteDelegationAreSentAtTheRecall) {
  Start(DelegationType::kWrite);
  ASSERT_EQ(core_->CloseFile(OpenF(kBoth)), 0u);
  NacheOpen *o = OpenF(kBoth);  // granted locally
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(LockF(o, "owner-1", NACHE_LOCK, true, 0, 10), 0u);
  ASSERT_EQ(LockF(o, "owner-2", NACHE_LOCK, false, 100, 10), 0u);
  ASSERT_EQ(LockF(o, "owner-2", NACHE_UNLOCK, false, 100, 10), 0u);
  nache_lock_conflict conflict{};
  EXPECT_EQ(core_->Lock(cr_, file_, o, "owner-3", NACHE_LOCK_TEST, true, 0,
                        10, false, &conflict),
            0u);
  EXPECT_EQ(up_->Count("LOCK") + up_->Count("LOCKU") + up_->Count("LOCKT"),
            0)
      << "all decided here";
  EXPECT_FALSE(up_->Locked(0, 10));
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("DELEGRETURN"); }));
  ASSERT_EQ(up_->Count("LOCK"), 1) << "owner-2's range was unlocked here";
  EXPECT_LT(up_->Index("OPEN", 1), up_->Index("LOCK"));
  EXPECT_LT(up_->Index("LOCK"), up_->Index("DELEGRETURN"));
  EXPECT_TRUE(up_->Locked(0, 10));
  EXPECT_FALSE(up_->Locked(100, 110));
  // Now the server's: the unlock goes there.
  ASSERT_EQ(LockF(o, "owner-1", NACHE_UNLOCK, true, 0, 10), 0u);
  EXPECT_EQ(up_->Count("LOCKU"), 1);
  EXPECT_FALSE(up_->Locked(0, 10));
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

TEST_F(CoreDelegationsTest, CbGetattrAnswersFromTheCoresView) {
  Start(DelegationType::kWrite);
  NacheOpen *o = OpenF(kBoth);
  std::string data(100, 'y');
  size_t n = 0;
  int committed = -1;
  ASSERT_EQ(core_->Write(cr_, file_, o, 0, data.size(), data.data(), 2, &n,
                         &committed),
            0u);
  cb_client::Args args;
  args.Getattr("f:f", (1u << 3) | (1u << 4));  // change, size
  cb_client::Reply *r = client_.Call(CB_COMPOUND, args.Get());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->ops.size(), 1u);
  ASSERT_EQ(r->ops[0].status, upstream::kNfs4Ok);
  ASSERT_EQ(r->ops[0].vals.size(), 16u);
  auto be64 = [](const std::string &s, size_t at) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) v = v << 8 | uint8_t(s[at + i]);
    return v;
  };
  EXPECT_EQ(be64(r->ops[0].vals, 0), up_->Change("f"));
  EXPECT_EQ(be64(r->ops[0].vals, 8), 100u);
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

TEST_F(CoreDelegationsTest, ReadDelegationIsReturnedBeforeOurOwnWriteOpen) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  NacheOpen *r = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "read open granted locally";
  EXPECT_EQ(core_->CloseFile(r), 0u);
  up_->grant = DelegationType::kNone;
  NacheOpen *w = OpenF(kBoth);
  ASSERT_NE(w, nullptr);
  int ret = up_->Index("DELEGRETURN"), open = up_->Index("OPEN", 1);
  ASSERT_GE(ret, 0) << "returned without being recalled";
  EXPECT_LT(ret, open);
  EXPECT_EQ(core_->CloseFile(w), 0u);
}

TEST_F(CoreDelegationsTest, WriteBackFlushReturnsOurReadDelegationFirst) {
  StartWriteBack(DelegationType::kRead, 0);
  // An open by name goes upstream (on a single-writer export one by
  // handle is local) and brings the delegation.
  Core::OpenRequest req;
  req.key = root_;
  req.name = "f";
  req.access = kRead;
  NacheOpen *open = nullptr;
  Key key;
  bool created;
  ASSERT_EQ(core_->OpenFile(cr_, req, &open, &key, nullptr, &created), 0u);
  ASSERT_EQ(core_->CloseFile(open), 0u);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  std::string data(10, 'w');
  size_t n = 0;
  int committed = -1;
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, data.size(), data.data(), 0,
                         &n, &committed),
            0u);
  EXPECT_EQ(committed, 2) << "durable here: FILE_SYNC";
  EXPECT_EQ(up_->Count("WRITE"), 0) << "kept local";
  // The flusher returns the read delegation (our WRITE would conflict
  // with it) and then writes: it must not wait for its own flush.
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("WRITE") > 0; }));
  ASSERT_GE(up_->Index("DELEGRETURN"), 0) << "the delegation was returned";
  EXPECT_LT(up_->Index("DELEGRETURN"), up_->Index("WRITE"));
}

// Not delegations: the open linger, against the same scripted upstream.
TEST_F(CoreDelegationsTest, UpstreamOpenLingersAfterTheLastCloseThenCloses) {
  Start(DelegationType::kNone,
        [](CoreConfig *cfg) { cfg->open_linger_ms = 2000; });
  NacheOpen *a = OpenF(kRead);
  NacheOpen *b = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "one upstream open for two local";
  EXPECT_EQ(core_->CloseFile(a), 0u);
  EXPECT_EQ(core_->CloseFile(b), 0u);
  EXPECT_EQ(up_->Count("CLOSE"), 0) << "lingering after the last close";
  NacheOpen *c = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "a reopen in the linger costs nothing";
  EXPECT_EQ(core_->CloseFile(c), 0u);
  // The linger thread closes it once the linger is over.
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Count("CLOSE") == 1; }));
  NacheOpen *d = OpenF(kRead);
  EXPECT_EQ(up_->Count("OPEN"), 2) << "after the CLOSE, a new OPEN";
  EXPECT_EQ(core_->CloseFile(d), 0u);
}

TEST_F(CoreDelegationsTest, LapsedLeaseEndsTheTrust) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);
  up_->lease_end = (Clock::now() - std::chrono::seconds(1))
                       .time_since_epoch()
                       .count();
  up_->grant = DelegationType::kNone;
  NacheOpen *o = OpenF(kRead);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(up_->Count("OPEN"), 2) << "no longer granted locally";
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

// Write-back of the namespace (single writer), against the same scripted
// upstream: files created here stay here until something needs them at
// the remote; one removed before that is never sent, one renamed is sent
// once, under its last name.
TEST_F(CoreDelegationsTest, LocalCreatesAreSentOnlyAsTheyEndUp) {
  // Nothing by age in this test.
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  int opens = up_->Count("OPEN");
  CreateWritten("tmp", "short-lived");
  Key a = CreateWritten("a", "kept");
  Key k;
  Attrs attrs;
  ASSERT_EQ(core_->Lookup(cr_, root_, "tmp", &k, &attrs), 0u);
  EXPECT_EQ(attrs.size, 11u);
  EXPECT_EQ(core_->Remove(cr_, root_, "tmp"), 0u);
  EXPECT_EQ(core_->Lookup(cr_, root_, "tmp", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  ASSERT_EQ(core_->Rename(cr_, root_, "a", root_, "b"), 0u);
  ASSERT_EQ(core_->Lookup(cr_, root_, "b", &k, nullptr), 0u);
  EXPECT_EQ(k, a) << "the same object under its new name";
  EXPECT_EQ(up_->Count("OPEN"), opens) << "nothing sent yet";
  EXPECT_EQ(up_->Count("WRITE"), 0);
  EXPECT_EQ(up_->Count("REMOVE") + up_->Count("RENAME"), 0);
  // A size change goes upstream: b is created there first, with its data.
  TruncateTo(a, 3);
  EXPECT_EQ(up_->Data("b"), "kep");
  EXPECT_EQ(up_->Data("a"), "<none>");
  EXPECT_EQ(up_->Data("tmp"), "<none>");
  EXPECT_EQ(up_->Count("OPEN"), opens + 1) << "one create, as b";
}

// Write-back conflict: the file changed at the remote while we held
// unflushed writes. The remote's version stays; ours is written beside it
// as NAME.nache-conflict-<time>, and the file follows the remote again.
TEST_F(CoreDelegationsTest, ConflictKeepsBothVersions) {
  StartWriteBack(DelegationType::kNone, 0);
  // Someone else writes f after we read its attributes: our write is on
  // top of a version the remote no longer has.
  up_->ForeignWrite("f", "theirs, longer");
  size_t n = 0;
  int committed = 0;
  // (Whole-file writes: the scripted server has no READ.)
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "ours!", 2, &n,
                         &committed),
            0u);
  std::vector<std::string> copies;
  ASSERT_TRUE(cb_client::WaitFor([&] {
    copies = up_->Names("f.nache-conflict-");
    return copies.size() == 1 && up_->Data(copies[0]) == "ours!";
  })) << "conflict copies: " << copies.size();
  EXPECT_EQ(up_->Data("f"), "theirs, longer") << "the remote's version stays";
  Key k;
  Attrs attrs;
  ASSERT_EQ(core_->Lookup(cr_, root_, "f", &k, &attrs), 0u);
  EXPECT_EQ(k, file_);
  EXPECT_EQ(attrs.size, 14u) << "f follows the remote again";
  // A later write of ours to f is based on the remote's version: no new
  // conflict, it is written to f itself.
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 14, "OURS, ALSO 14!", 2,
                         &n, &committed),
            0u);
  ASSERT_TRUE(cb_client::WaitFor(
      [&] { return up_->Data("f") == "OURS, ALSO 14!"; }));
  EXPECT_EQ(up_->Names("f.nache-conflict-").size(), 1u);
}

// The value of a counter of metrics, summed over its series that have
// every label given.
double CounterValue(metrics::Metrics &m, const std::string &name,
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

// A truncate of a file whose flush is on its way, then a new write: the
// remote ends with exactly the new bytes. Before the fix the truncate
// dropped the old data without waiting for the flush: its WRITE landed
// at the remote after the truncate, and the flush, finding the block's
// epoch restarted at 1, marked the new write clean (never sent).
TEST_F(CoreDelegationsTest, ATruncateRacingAFlushLosesNothing) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  up_->hold_writes = true;
  size_t n = 0;
  int committed = 0;
  // (Whole-file writes: the scripted server has no READ.)
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 9, "old data!", 2, &n,
                         &committed),
            0u);
  // The flusher sends it; the WRITE is on the wire.
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->writes_waiting == 1; }));
  std::atomic<bool> done{false};
  std::thread truncate_then_write([&] {
    TruncateTo(file_, 0);
    size_t n2 = 0;
    int committed2 = 0;
    EXPECT_EQ(core_->Write(cr_, file_, nullptr, 0, 3, "new", 2, &n2,
                           &committed2),
              0u);
    done = true;
  });
  // The truncate waits for the flush in flight (or, before the fix, went
  // ahead of it): either way the held WRITE may land now.
  ASSERT_TRUE(cb_client::WaitFor([&] {
    return done || CounterValue(metrics_,
                                "nache_writeback_flush_waits_total") >= 1;
  }));
  up_->ReleaseWrites();
  truncate_then_write.join();
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("f") == "new"; }))
      << "the remote holds \"" << up_->Data("f") << "\"";
  ASSERT_TRUE(cb_client::WaitFor([&] {
    Attrs a;
    return core_->Getattr(cr_, file_, &a) == 0 && a.size == 3 &&
           up_->Data("f") == "new";
  }));
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
}

// Our own RENAME of a file with unflushed data moves its change attribute
// at the remote (its ctime): the flush that follows must not take it for
// someone else's write. Before, it made a conflict copy and left the
// remote with the old content (the crash loop over knfsd saw this).
TEST_F(CoreDelegationsTest, OurOwnRenameOfADirtyFileIsNoConflict) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // sent when needed
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "HELLO", 2, &n,
                         &committed),
            0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "f", root_, "g"), 0u);  // logged
  EXPECT_EQ(up_->Count("RENAME"), 0);
  // A new f needs the name at the remote: the RENAME goes out now.
  Key fresh = CreateWritten("f", "new");
  TruncateTo(fresh, 2);
  ASSERT_EQ(up_->Count("RENAME"), 1);
  // A size change of g flushes its data first.
  TruncateTo(file_, 4);
  EXPECT_TRUE(up_->Names("g.nache-conflict-").empty());
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
  EXPECT_EQ(up_->Data("g"), "HELL");
  EXPECT_EQ(up_->Data("f"), "ne");
}

// A file removed at the remote (by someone else, or its handles changed)
// while we hold acknowledged data of it: the data is saved at the remote,
// visibly, beside where the file was, or in nache-lost+found when its
// directory is gone too; never dropped. Before, the flusher dropped it
// with an INFO line.
TEST_F(CoreDelegationsTest, DataOfAFileGoneAtTheRemoteIsSavedVisibly) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // sent when needed
  up_->AddFile("d/x", "old");
  Key d, x;
  ASSERT_EQ(core_->Lookup(cr_, root_, "d", &d, nullptr), 0u);
  ASSERT_EQ(core_->Lookup(cr_, d, "x", &x, nullptr), 0u);
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "ours!", 2, &n,
                         &committed),
            0u);
  ASSERT_EQ(core_->Write(cr_, x, nullptr, 0, 3, "new", 2, &n, &committed),
            0u);
  up_->ForeignRemove("f");
  up_->ForeignRemove("d");
  // Size changes flush first: the flush finds each file gone.
  EXPECT_NE(SetSize(file_, 1), 0u);
  EXPECT_NE(SetSize(x, 1), 0u);
  std::vector<std::string> saved = up_->Names("f.nache-lost-");
  ASSERT_EQ(saved.size(), 1u) << "beside where it was";
  EXPECT_EQ(up_->Data(saved[0]), "ours!");
  saved = up_->Names("x.nache-lost-", "nache-lost+found");
  ASSERT_EQ(saved.size(), 1u) << "its directory is gone too";
  EXPECT_EQ(up_->Data("nache-lost+found/" + saved[0]), "new");
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_lost_files_total"), 2);
  EXPECT_EQ(up_->Names("f.nache-conflict-").size(), 0u);
}

// A kill of nache at each step of a flush (simulated at the server: the
// op is done there, its reply never arrives, nothing more reaches the
// server), then a restart on the same cache: the remote ends with exactly
// the acknowledged data, and our own half-done flush is never taken for
// someone else's write (no conflict copy).
class FlushKillTest : public CoreDelegationsTest,
                      public ::testing::WithParamInterface<const char *> {
 protected:
  void StartFlushingAtOnce(bool probe_callbacks) {
    Start(DelegationType::kNone,
          [](CoreConfig *cfg) {
            cfg->write_back = true;
            cfg->single_writer = true;
            cfg->flush_age_ms = 0;
          },
          probe_callbacks);
  }
};

TEST_P(FlushKillTest, AKillAtThisStepLosesNothingAndMakesNoConflict) {
  const std::string ours = "ours, and longer than theirs";
  StartFlushingAtOnce(true);
  up_->DieAfter(GetParam());
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, ours.size(), ours.data(), 2,
                         &n, &committed),
            0u);
  // And its mtime, as tar sets it after the data (kept here, sent last).
  Attrs set, attrs;
  set.mask = upstream::kAttrMtime;
  set.mtime.sec = 1234567890;
  ASSERT_EQ(core_->Setattr(cr_, file_, nullptr, set, &attrs), 0u);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->dead.load(); }))
      << "the flush never reached " << GetParam();
  core_.reset();  // killed: what it wrote to its store is all that is left
  up_->dead = false;
  StartFlushingAtOnce(false);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("f") == ours; }))
      << "the remote holds \"" << up_->Data("f") << "\"";
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
}

// The flush's steps for a file the remote has: the conflict check's
// GETATTR, the WRITE of the data, the SETATTR of the mtime after it.
INSTANTIATE_TEST_SUITE_P(EveryStep, FlushKillTest,
                         ::testing::Values("GETATTR", "WRITE", "SETATTR"));

// Faults at each step of a flush, nache running on: the request lost on
// its way (not done); or the op done at the server, its reply lost, and
// the server having forgotten our client id and its state meanwhile (with
// an NFSv4.1 upstream, the session and the client id behind it: a lease
// that lapsed in a WAN cut). The flush carries on (under the new client
// id): the remote ends with exactly the acknowledged data, and the
// half-done flush is not taken for someone else's write.
enum class FlushFault { kRequestLost, kReplyAndStateLost };
class FlushFaultTest
    : public CoreDelegationsTest,
      public ::testing::WithParamInterface<
          std::tuple<const char *, FlushFault>> {
 protected:
  void StartFlushingAtOnce() {
    Start(DelegationType::kNone, [](CoreConfig *cfg) {
      cfg->write_back = true;
      cfg->single_writer = true;
      cfg->flush_age_ms = 0;
    });
  }
};

TEST_P(FlushFaultTest, AFaultAtThisStepLosesNothingAndMakesNoConflict) {
  const std::string ours = "ours, and longer than theirs";
  const std::string op = std::get<0>(GetParam());
  StartFlushingAtOnce();
  if (std::get<1>(GetParam()) == FlushFault::kRequestLost)
    up_->LoseRequestWith(op);
  else
    up_->LoseReplyOf(op, true);
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, ours.size(), ours.data(), 2,
                         &n, &committed),
            0u);
  Attrs set, attrs;
  set.mask = upstream::kAttrMtime;
  set.mtime.sec = 1234567890;
  ASSERT_EQ(core_->Setattr(cr_, file_, nullptr, set, &attrs), 0u);
  ASSERT_TRUE(cb_client::WaitFor([&] {
    return up_->Data("f") == ours && up_->Count("SETATTR") >= 1;
  })) << "the remote holds \"" << up_->Data("f") << "\"";
  EXPECT_FALSE(up_->FaultPending()) << "the flush never reached " << op;
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryStep, FlushFaultTest,
    ::testing::Combine(::testing::Values("GETATTR", "WRITE", "SETATTR"),
                       ::testing::Values(FlushFault::kRequestLost,
                                         FlushFault::kReplyAndStateLost)));

// Lost replies of operations that are not idempotent. NFSv4.0 open-owner
// seqids first: an OPEN whose reply is lost may have been
// executed: the owner's seqid at the server is unknown. Resent unchanged, it
// is answered from the server's replay cache; were the owner's next OPEN
// (another file) sent with the same seqid instead, the server would answer
// it with the lost OPEN's reply, and writes to the second file would go to
// the first.
class LostReplyTest : public CoreDelegationsTest {
 protected:
  void SetUp() override {
    CoreDelegationsTest::SetUp();
    up_->AddFile("a", "AAA");
    up_->AddFile("b", "BBB");
  }
  // Opens name (in the root) for reading and writing; the status.
  uint32_t OpenName(const char *name, NacheOpen **open, Key *key) {
    bool created = false;
    return OpenNamed(cr_, name, NACHE_OPEN_NOCREATE, open, key, &created);
  }
  // Writes data at 0 through an open of name (write-through), closes it.
  void WriteThrough(const char *name, const std::string &data) {
    bool created = false;
    ASSERT_NE(WriteNamed(cr_, name, NACHE_OPEN_NOCREATE, data, &created),
              kNoKey);
  }
};

TEST_F(LostReplyTest, AnOpenWhoseReplyWasLostIsResentUnchanged) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->LoseReplyOf("OPEN");
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), 0u) << "the lost OPEN's resend";
  EXPECT_EQ(up_->Count("OPEN(replayed)"), 1);
  if (a) {
    EXPECT_EQ(core_->CloseFile(a), 0u);
  }
  WriteThrough("b", "b-wrote");
  EXPECT_EQ(up_->Data("b"), "b-wrote");
  EXPECT_EQ(up_->Data("a"), "AAA");
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "answered"}}),
            1);
  EXPECT_EQ(core_->CloseFile(f), 0u);
}

// A new owner's first OPEN is not sequenced by the server: resent, it would
// be executed anew, and a flushed create (GUARDED) would find its own file
// and make a false conflict. It is left to the flusher's retry, which
// knows the create may have happened (UNCHECKED).
TEST_F(LostReplyTest, ALostFirstOpenOfAFlushOwnerMakesNoConflict) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  up_->LoseReplyOf("OPEN");
  Key n = CreateWritten("n", "new-data");
  ASSERT_NE(n, kNoKey);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("n") == "new-data"; }))
      << "the remote holds \"" << up_->Data("n") << "\"";
  EXPECT_TRUE(up_->Names("n.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
}

// A flushed create (GUARDED) resent after its reply was lost, which the
// remote executes anew instead of answering from a replay cache: EXIST
// then means the file the first send made, not somebody else's. No
// conflict copy. (Files are flushed first until every flush owner is
// known to the server: n's OPEN is then resent, not left to the
// flusher's retry as a new owner's first OPEN is.)
TEST_F(LostReplyTest, AResentFlushCreateMeetingItsOwnFileMakesNoConflict) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  for (int i = 0; i < 8 * int(Core::kFlushOwners) &&
                  up_->OwnersSeen("-flush") < Core::kFlushOwners;
       i++) {
    std::string name = "p" + std::to_string(i);
    CreateWritten(name.c_str(), "p");
    ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data(name) == "p"; }));
  }
  ASSERT_EQ(up_->OwnersSeen("-flush"), Core::kFlushOwners);
  up_->no_replay = true;
  up_->LoseReplyOf("OPEN");
  CreateWritten("n", "new-data");
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("n") == "new-data"; }))
      << "the remote holds \"" << up_->Data("n") << "\"";
  EXPECT_TRUE(up_->Names("n.nache-conflict-").empty());
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_conflicts_total"), 0);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "answered"}}),
            1);
}

// The client's retry of an exclusive create (O_EXCL) whose reply was lost,
// which the remote did: the retry finds the name taken (EXIST) by the
// file this very create made, and opens it instead of failing; someone
// else's retry does not. (The first OPEN of an owner: Run does not resend
// it, as with NFSv4.1, whose session retires the slot instead.)
TEST_F(LostReplyTest, ARetryOfAnExclusiveCreateWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  const nache_createmode excl = NACHE_OPEN_EXCLUSIVE;
  NacheOpen *open = nullptr;
  Key key = kNoKey;
  bool created = false;
  up_->DieAfter("OPEN");
  EXPECT_EQ(OpenNamed(cr_, "x", excl, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrDelay));
  up_->dead = false;
  ASSERT_EQ(up_->Data("x"), "") << "made at the remote";
  ASSERT_EQ(OpenNamed(cr_, "x", excl, &open, &key, &created), 0u)
      << "the retry";
  EXPECT_TRUE(created);
  EXPECT_EQ(core_->CloseFile(open), 0u);
  up_->DieAfter("OPEN");
  EXPECT_NE(OpenNamed(cr_, "y", excl, &open, &key, &created), 0u);
  up_->dead = false;
  if (up_->restarts_asked.load() > 0)
    up_->Restart(false);  // the new client id the core asked for
  Creds someone;
  someone.uid = someone.gid = 4000;
  EXPECT_EQ(OpenNamed(someone, "y", excl, &open, &key, &created),
            uint32_t(upstream::kNfs4ErrExist)) << "not someone else's";
}

// The same for a hard link (write-through): the retry of a LINK done once
// finds the name holding the very object, and succeeds.
TEST_F(LostReplyTest, ARetryOfALinkWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  up_->DieAfter("LINK");
  EXPECT_EQ(core_->Link(cr_, file_, root_, "f2"), uint32_t(upstream::kNfs4ErrDelay));
  up_->dead = false;
  EXPECT_EQ(core_->Link(cr_, file_, root_, "f2"), 0u) << "the retry";
  EXPECT_EQ(core_->Link(cr_, file_, root_, "f2"), uint32_t(upstream::kNfs4ErrExist))
      << "once only";
  Key a = kNoKey;
  Attrs at;
  ASSERT_EQ(core_->Lookup(cr_, root_, "a", &a, &at), 0u);
  up_->DieAfter("LINK");
  EXPECT_NE(core_->Link(cr_, a, root_, "a2"), 0u);
  up_->dead = false;
  EXPECT_EQ(core_->Link(cr_, file_, root_, "a2"), uint32_t(upstream::kNfs4ErrExist))
      << "another object's name";
}

// A lost reply, and meanwhile a new client id (the server forgot the old
// one and its owners): the request is not resent under the new id, which
// would only earn STALE_CLIENTID and cost the new id too.
TEST_F(LostReplyTest, NothingIsResentUnderANewClientId) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->LoseReplyOf("OPEN", true);
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->Count("OPEN"), 2) << "resent under the new client id";
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total"), 0);
  EXPECT_EQ(up_->restarts_asked.load(), 0);
  core_->CloseFile(f);  // (its upstream open went with the old client id)
}

// A connection dropped with the reply and being made again is no lapsed
// lease: the request is resent once it is back, the client id kept.
TEST_F(LostReplyTest, AReconnectingUpstreamIsWaitedForNotGivenUp) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->reconnecting = true;
  up_->LoseReplyOf("OPEN");
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), 0u);
  EXPECT_EQ(up_->Count("OPEN(replayed)"), 1);
  EXPECT_EQ(up_->restarts_asked.load(), 0);
  up_->reconnecting = false;
  if (a) {
    EXPECT_EQ(core_->CloseFile(a), 0u);
  }
  EXPECT_EQ(core_->CloseFile(f), 0u);
}

// Once our lease has lapsed (a WAN cut) an unanswered request is not
// resent: the client id is given up at once. And once given up, no
// request of that client id bearing a seqid goes out until the new one is
// confirmed (the owner's next OPEN could be taken for the lost one's
// retransmission), nor is the client id given up twice.
TEST_F(LostReplyTest, AfterTheLeaseLapsedOrOnceGivenUpNothingIsResent) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);  // an owner the server knows (seqid 1)
  ASSERT_NE(f, nullptr);
  up_->lease_end = Clock::now().time_since_epoch().count();  // lapsed
  up_->LoseReplyOf("OPEN");
  NacheOpen *o = nullptr;
  Key k = kNoKey;
  EXPECT_EQ(OpenName("a", &o, &k), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->restarts_asked.load(), 1);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "gave_up"}}),
            1);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total"), 1)
      << "resent after the lease lapsed";
  EXPECT_EQ(OpenName("b", &o, &k), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->Count("OPEN"), 2) << "an OPEN went out after giving up";
  EXPECT_EQ(up_->Count("OPEN(replayed)"), 0);
  EXPECT_EQ(up_->restarts_asked.load(), 1);
  core_->CloseFile(f);  // (its CLOSE waits for the new client id)
}

// The remote stays away longer than a lease after the lost reply: the
// seqid cannot be settled, so the client id is given up (the server then
// forgets the owner), and the next OPEN starts the owner afresh.
TEST_F(LostReplyTest, AnOpenUnansweredForALeaseGivesUpTheClientId) {
  Start(DelegationType::kNone);
  NacheOpen *f = OpenF(kRead);
  ASSERT_NE(f, nullptr);
  up_->DieAfter("OPEN");
  NacheOpen *a = nullptr;
  Key ka = kNoKey;
  EXPECT_EQ(OpenName("a", &a, &ka), uint32_t(upstream::kNfs4ErrDelay));
  EXPECT_EQ(up_->restarts_asked.load(), 1);
  EXPECT_EQ(CounterValue(metrics_, "nache_upstream_seqid_resends_total",
                         {{"outcome", "gave_up"}}),
            1);
  up_->dead = false;
  up_->Restart(false);  // the new client id: the old one's state is gone
  WriteThrough("b", "b-wrote");
  EXPECT_EQ(up_->Data("b"), "b-wrote");
  EXPECT_EQ(up_->Data("a"), "AAA");
  core_->CloseFile(f);
}

// A kill right after our RENAME of a file with unflushed data reached the
// remote (its change attribute moved by our doing, and we never heard):
// after the restart its flush is still no conflict.
TEST_F(CoreDelegationsTest, AKillAfterOurRenameOfADirtyFileMakesNoConflict) {
  auto start = [this](bool probe) {
    Start(DelegationType::kNone,
          [](CoreConfig *cfg) {
            cfg->write_back = true;
            cfg->single_writer = true;
            cfg->flush_age_ms = 3600 * 1000;  // sent when needed
          },
          probe);
  };
  start(true);
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "HELLO", 2, &n,
                         &committed),
            0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "f", root_, "g"), 0u);  // logged
  up_->DieAfter("RENAME");
  // A new f needs the name at the remote: the RENAME goes out, and nache
  // dies with it.
  Key fresh = CreateWritten("f", "new");
  EXPECT_NE(SetSize(fresh, 2), 0u);
  ASSERT_TRUE(up_->dead.load());
  core_.reset();
  up_->dead = false;
  start(false);
  Key g;
  ASSERT_EQ(core_->Lookup(cr_, root_, "g", &g, nullptr), 0u);
  ASSERT_EQ(SetSize(g, 4), 0u);  // flushes g's data first
  EXPECT_EQ(up_->Data("g"), "HELL");
  EXPECT_TRUE(up_->Names("g.nache-conflict-").empty());
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
}

// A file made here, truncated (its create goes out first), then renamed:
// the remote ends with it under its new name, empty.
TEST_F(CoreDelegationsTest, AFileMadeHereTruncatedThenRenamedReachesTheRemote) {
  StartWriteBack(DelegationType::kNone, 0);
  Key w = CreateWritten("w55", "some data");
  TruncateTo(w, 0);
  ASSERT_EQ(core_->Rename(cr_, root_, "w55", root_, "r55"), 0u);
  ASSERT_TRUE(cb_client::WaitFor([&] {
    return up_->Data("r55") == "" && up_->Data("w55") == "<none>";
  })) << "r55: " << up_->Data("r55") << ", w55: " << up_->Data("w55");
}

// A file renamed here (the RENAME logged, not sent yet), then opened by
// its new name with O_CREAT (a shell's `>>`, dd) and written: the data
// goes to that file, and the remote ends with it under the new name.
TEST_F(CoreDelegationsTest, AnOpenByTheNewNameOfALoggedRenameWritesThatFile) {
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // sent when needed
  ASSERT_EQ(core_->Rename(cr_, root_, "f", root_, "g"), 0u);  // logged
  ASSERT_EQ(up_->Count("RENAME"), 0);
  Core::OpenRequest req;
  req.key = root_;
  req.name = "g";
  req.access = kBoth;
  req.mode = NACHE_OPEN_UNCHECKED;
  NacheOpen *open = nullptr;
  Key key = kNoKey;
  bool created = true;
  ASSERT_EQ(core_->OpenFile(cr_, req, &open, &key, nullptr, &created), 0u);
  EXPECT_FALSE(created);
  EXPECT_EQ(key, file_) << "the renamed file, not a new one";
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(cr_, key, open, 0, 5, "HELLO", 2, &n, &committed),
            0u);
  ASSERT_EQ(core_->CloseFile(open), 0u);
  core_.reset();  // a clean stop sends everything
  std::string ops;
  for (const std::string &op : up_->Log()) ops += op + " ";
  EXPECT_EQ(up_->Data("g"), "HELLO") << ops;
  EXPECT_EQ(up_->Data("f"), "<none>");
}

// No conflict without a foreign change: a file written twice, flushed in
// between, is written in place both times.
TEST_F(CoreDelegationsTest, OwnFlushesAreNoConflict) {
  StartWriteBack(DelegationType::kNone, 0);
  size_t n = 0;
  int committed = 0;
  // (Whole-file writes: the scripted server has no READ.)
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "HELLO", 2, &n,
                         &committed),
            0u);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("f") == "HELLO"; }));
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 6, "HELLO!", 2, &n,
                         &committed),
            0u);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Data("f") == "HELLO!"; }));
  EXPECT_TRUE(up_->Names("f.nache-conflict-").empty());
}

// A file created here whose name was taken at the remote before its
// create was sent: theirs stays, ours is created beside it and keeps its
// handle.
TEST_F(CoreDelegationsTest, ANameTakenAtTheRemoteMeanwhileIsAConflict) {
  // Sent only when needed below.
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  Key g = CreateWritten("g", "ours");
  up_->AddFile("g", "theirs");
  // A size change needs g at the remote: its create is sent now.
  TruncateTo(g, 3);
  std::vector<std::string> copies = up_->Names("g.nache-conflict-");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(up_->Data(copies[0]), "our") << "our file, with our change";
  EXPECT_EQ(up_->Data("g"), "theirs");
  Key k;
  ASSERT_EQ(core_->Lookup(cr_, root_, copies[0], &k, nullptr), 0u);
  EXPECT_EQ(k, g) << "ours keeps its handle under the new name";
}

// Write-back of removes (single writer): a file the remote has is removed
// here at once (gone for our clients) and at the remote later, before its
// name is used there again.
TEST_F(CoreDelegationsTest, RemovesAreLoggedAndSentBeforeTheNameIsReused) {
  // Sent only when needed below.
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  up_->AddFile("old", "remote data");
  Key k;
  ASSERT_EQ(core_->Lookup(cr_, root_, "old", &k, nullptr), 0u);
  ASSERT_EQ(core_->Remove(cr_, root_, "old"), 0u);
  EXPECT_EQ(up_->Count("REMOVE"), 0) << "logged, not sent";
  EXPECT_EQ(up_->Data("old"), "remote data");
  Key again;
  EXPECT_EQ(core_->Lookup(cr_, root_, "old", &again, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  Attrs attrs;
  EXPECT_EQ(core_->Getattr(cr_, k, &attrs), uint32_t(upstream::kNfs4ErrStale))
      << "the removed object is gone for our clients";
  EXPECT_EQ(core_->Remove(cr_, root_, "old"),
            uint32_t(upstream::kNfs4ErrNoent));
  // The name reused here, then needed at the remote (a size change): the
  // REMOVE goes first, and the new file is no conflict.
  Key n = CreateWritten("old", "new!");
  EXPECT_NE(n, k);
  TruncateTo(n, 3);
  ASSERT_EQ(up_->Count("REMOVE"), 1);
  EXPECT_LT(up_->Index("REMOVE"), up_->Index("OPEN"));
  EXPECT_EQ(up_->Data("old"), "new");
  EXPECT_TRUE(up_->Names("old.nache-conflict-").empty());
}

// A rename of a file the remote has: logged, nothing sent; the new name
// shows the same object at once and the old one is gone; a file it
// replaces has its remove logged with it. When the old name is needed at
// the remote (a new file created under it), the replaced file's REMOVE,
// then one RENAME, then the create go out, in that order.
TEST_F(CoreDelegationsTest, RenamesOfRemoteFilesAreLoggedThenSentOnce) {
  // Sent only when needed below.
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  up_->AddFile("log", "L");
  up_->AddFile("dst", "D");
  Key k, got;
  ASSERT_EQ(core_->Lookup(cr_, root_, "log", &k, nullptr), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "log", root_, "dst"), 0u);
  EXPECT_EQ(up_->Count("RENAME") + up_->Count("REMOVE"), 0) << "logged";
  EXPECT_EQ(up_->Data("log"), "L");
  EXPECT_EQ(up_->Data("dst"), "D");
  ASSERT_EQ(core_->Lookup(cr_, root_, "dst", &got, nullptr), 0u);
  EXPECT_EQ(got, k) << "the same object under its new name";
  EXPECT_EQ(core_->Lookup(cr_, root_, "log", &got, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  Attrs a;
  EXPECT_EQ(core_->Getattr(cr_, k, &a), 0u) << "its handle stays valid";
  Key fresh = CreateWritten("log", "new");
  TruncateTo(fresh, 2);
  ASSERT_EQ(up_->Count("RENAME"), 1);
  ASSERT_EQ(up_->Count("REMOVE"), 1);
  EXPECT_LT(up_->Index("REMOVE"), up_->Index("RENAME"));
  EXPECT_LT(up_->Index("RENAME"), up_->Index("WRITE"));
  EXPECT_EQ(up_->Data("dst"), "L");
  EXPECT_EQ(up_->Data("log"), "ne");
  // A chain of renames keeps one record; one that ends under the name
  // the remote knows leaves none.
  ASSERT_EQ(core_->Rename(cr_, root_, "dst", root_, "dst.1"), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "dst.1", root_, "dst.2"), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "dst.2", root_, "dst"), 0u);
  ASSERT_EQ(core_->Lookup(cr_, root_, "dst", &got, nullptr), 0u);
  EXPECT_EQ(got, k);
  EXPECT_EQ(core_->Lookup(cr_, root_, "dst.1", &got, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  // Renamed, then removed: the remote is told only of the remove, under
  // the name it knows (logged, sent with the directory's flush).
  ASSERT_EQ(core_->Rename(cr_, root_, "dst", root_, "x"), 0u);
  ASSERT_EQ(core_->Remove(cr_, root_, "x"), 0u);
  EXPECT_EQ(core_->Lookup(cr_, root_, "x", &got, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  EXPECT_EQ(core_->Lookup(cr_, root_, "dst", &got, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  EXPECT_EQ(core_->Getattr(cr_, k, &a), uint32_t(upstream::kNfs4ErrStale));
  EXPECT_EQ(up_->Count("RENAME"), 1) << "no RENAME for the chains";
  EXPECT_EQ(up_->Data("dst"), "L") << "the remove is logged";
  Key again = CreateWritten("dst", "NN");
  TruncateTo(again, 1);
  EXPECT_EQ(up_->Count("RENAME"), 1);
  EXPECT_EQ(up_->Count("REMOVE"), 2);
  EXPECT_EQ(up_->Data("dst"), "N");
}

// The remote decides who may read: an open that joins another caller's
// upstream open, or is granted under our delegation, sends no OPEN, so
// the remote's ACCESS answer for this caller decides it; answers are kept
// per caller (one ACCESS each while they hold), never shared.
TEST_F(CoreDelegationsTest, OpensWithoutAnUpstreamOpenAreAskedPerCaller) {
  Start(DelegationType::kRead);
  up_->DenyReading(2000);
  NacheOpen *first = OpenF(kRead);  // the upstream OPEN, and a delegation
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  auto open_as = [this](uint32_t uid, NacheOpen **out) {
    Creds who;
    who.uid = who.gid = uid;
    return OpenFAs(who, kRead, out);
  };
  NacheOpen *denied = nullptr, *allowed = nullptr;
  EXPECT_EQ(open_as(2000, &denied), uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(denied, nullptr);
  const int asked = up_->Count("ACCESS");
  EXPECT_EQ(open_as(2000, &denied), uint32_t(upstream::kNfs4ErrAccess))
      << "asked again: still denied";
  EXPECT_EQ(up_->Count("ACCESS"), asked) << "the answer is kept";
  ASSERT_EQ(open_as(3000, &allowed), 0u);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "granted under the delegation";
  uint32_t bits = 0;
  ASSERT_EQ(core_->Access(cr_, file_, upstream::kAccessRead, &bits), 0u);
  EXPECT_EQ(bits, uint32_t(upstream::kAccessRead));
  Creds other;
  other.uid = other.gid = 2000;
  ASSERT_EQ(core_->Access(other, file_, upstream::kAccessRead, &bits), 0u);
  EXPECT_EQ(bits, 0u) << "2000's answer, not the first reader's";
  EXPECT_EQ(core_->CloseFile(allowed), 0u);
  EXPECT_EQ(core_->CloseFile(first), 0u);
}

// A user the remote lets write a file but not read it opens it write-only
// while another user's read open is upstream: the upgrade of that open
// asks for this caller's access only (WRITE), which the remote grants;
// asking for the union (READ|WRITE) as this caller was refused. And an
// upgrade that the upstream open already covers is still the remote's to
// judge for this caller (its ACCESS answer), not granted for free.
TEST_F(CoreDelegationsTest, AnUpgradeAsksTheRemoteForTheCallersAccessOnly) {
  Start(DelegationType::kNone);
  up_->DenyReading(2000);
  NacheOpen *reader = OpenF(kRead);
  ASSERT_NE(reader, nullptr);
  Creds writer;
  writer.uid = writer.gid = 2000;
  const uint32_t kWrite = upstream::kShareAccessWrite;
  NacheOpen *wo = nullptr;
  ASSERT_EQ(OpenFAs(writer, kWrite, &wo), 0u)
      << "a write-only open by a user who may not read";
  EXPECT_EQ(up_->Count("OPEN"), 2) << "the reader's OPEN, then the upgrade";
  // Now the upstream open reads and writes: 2000 asking to read too is
  // covered, but the remote's answer to ACCESS refuses it.
  EXPECT_EQ(core_->Reopen(writer, wo, kBoth, 0),
            uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_EQ(core_->Reopen(writer, wo, kWrite, 0), 0u) << "its modes kept";
  EXPECT_EQ(core_->CloseFile(wo), 0u);
  EXPECT_EQ(core_->CloseFile(reader), 0u);
}

// A recall ends the trust the delegation gave at once: the server recalls
// it before a change (Linux knfsd when a chmod or an ACL entry is set at
// the remote), so an ACCESS answer kept while it was held is not used
// after the return, however fresh the attribute window (60 s here) would
// call it, and the FSAL is told to drop its own copy of the attributes
// (Ganesha's MDCACHE), once the DELEGRETURN is done. Without that, a
// reader the change revokes kept reading through the shared upstream open
// until the window ended.
TEST_F(CoreDelegationsTest, ARecallEndsTheAccessAnswersKeptUnderIt) {
  Start(DelegationType::kRead,
        [](CoreConfig *cfg) { cfg->cache.attr_timeout_ms = 60000; });
  std::atomic<int> stale_calls{0}, returned_before{-1};
  std::atomic<Key> stale_key{kNoKey};
  core_->SetAttrsStale([&](Key k) {
    stale_key = k;
    returned_before = up_->Count("DELEGRETURN");
    stale_calls++;
  });
  NacheOpen *first = OpenF(kRead);  // the upstream OPEN, and a delegation
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(up_->Count("OPEN"), 1);
  Creds reader;
  reader.uid = reader.gid = 2000;
  auto open_as_reader = [&](NacheOpen **out) {
    return OpenFAs(reader, kRead, out);
  };
  NacheOpen *o = nullptr;
  ASSERT_EQ(open_as_reader(&o), 0u);  // asked once, kept
  ASSERT_EQ(core_->CloseFile(o), 0u);
  ASSERT_EQ(open_as_reader(&o), 0u);
  ASSERT_EQ(core_->CloseFile(o), 0u);
  EXPECT_EQ(up_->Count("OPEN"), 1) << "granted under the delegation";
  // At the remote, 2000 loses the right to read: the server recalls the
  // delegation first, and the change lands once it is returned.
  auto returns = [this] {
    double n = 0;
    for (const prometheus::MetricFamily &f : metrics_.Collect())
      if (f.name == "nache_delegation_return_seconds")
        for (const prometheus::ClientMetric &m : f.metric)
          for (const prometheus::ClientMetric::Label &l : m.label)
            if (l.name == "reason" && l.value == "recall")
              n += double(m.histogram.sample_count);
    return n;
  };
  cb_client::Reply *r = Recall(1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nfs_status, upstream::kNfs4Ok);
  ASSERT_TRUE(cb_client::WaitFor([&] { return returns() >= 1; }))
      << "the delegation was returned";
  EXPECT_EQ(stale_calls.load(), 1) << "the FSAL's attributes were not dropped";
  EXPECT_EQ(stale_key.load(), file_);
  EXPECT_EQ(returned_before.load(), 1) << "dropped after the DELEGRETURN";
  up_->ForeignDenyReading("f", 2000);
  const int asked = up_->Count("ACCESS");
  o = nullptr;
  EXPECT_EQ(open_as_reader(&o), uint32_t(upstream::kNfs4ErrAccess))
      << "the answer kept under the delegation was used after its recall";
  EXPECT_EQ(o, nullptr);
  if (o) core_->CloseFile(o);
  EXPECT_GT(up_->Count("ACCESS"), asked) << "the remote was asked again";
  // The first reader's open, an upstream open again, is unaffected.
  EXPECT_EQ(core_->CloseFile(first), 0u);
  core_->SetAttrsStale(nullptr);  // its captures end here
}

// A logged rename whose RENAME gets no answer is sent again: when the
// request was lost, the retry renames; when only the reply was, the retry
// finds the name gone and our object under the new one (done, not a
// refusal). Either way the remote ends with the rename, once.
class LostRenameTest : public CoreDelegationsTest,
                       public ::testing::WithParamInterface<bool> {};

TEST_P(LostRenameTest, ARenameWithoutAnAnswerIsSentAgain) {
  const bool reply_lost = GetParam();
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // sent when needed
  up_->AddFile("log", "L");
  up_->AddFile("dst", "D");
  Key k;
  ASSERT_EQ(core_->Lookup(cr_, root_, "log", &k, nullptr), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "log", root_, "dst"), 0u);  // logged
  if (reply_lost)
    up_->DieAfter("RENAME");
  else
    up_->LoseRequestWith("RENAME");
  // A new "log" needs the name at the remote: the RENAME goes out first
  // and gets no answer, so the truncate (which sends the create) fails.
  Key fresh = CreateWritten("log", "new");
  EXPECT_NE(SetSize(fresh, 2), 0u);
  // (The remote's dst is removed first: the rename replaces it.)
  EXPECT_EQ(up_->Data(reply_lost ? "dst" : "log"), "L");
  up_->dead = false;
  ASSERT_EQ(SetSize(fresh, 2), 0u);
  EXPECT_EQ(up_->Data("dst"), "L");
  EXPECT_EQ(up_->Data("log"), "ne");
  double refused = 0;
  for (const prometheus::MetricFamily &f : metrics_.Collect())
    if (f.name == "nache_writeback_renames_total")
      for (const prometheus::ClientMetric &m : f.metric)
        for (const prometheus::ClientMetric::Label &l : m.label)
          if (l.name == "outcome" && l.value == "refused")
            refused += m.counter.value;
  EXPECT_EQ(refused, 0) << "done, not refused";
}

INSTANTIATE_TEST_SUITE_P(RequestOrReply, LostRenameTest, ::testing::Bool());

// Write-through: a REMOVE or CREATE done at the remote whose reply was
// lost is retried by the client (told NFS4ERR_DELAY); the retry meets
// NOENT or EXIST, and is answered as the first try's success, for the
// same caller only.
TEST_F(CoreDelegationsTest, ARetryOfARemoveOrCreateWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  up_->AddFile("gone", "G");
  up_->AddFile("other", "O");
  up_->DieAfter("REMOVE");
  EXPECT_EQ(core_->Remove(cr_, root_, "gone"), uint32_t(upstream::kNfs4ErrDelay));
  ASSERT_TRUE(up_->dead.load());
  up_->dead = false;
  EXPECT_EQ(up_->Data("gone"), "<none>") << "done at the remote";
  EXPECT_EQ(core_->Remove(cr_, root_, "gone"), 0u) << "the retry";
  EXPECT_EQ(core_->Remove(cr_, root_, "gone"), uint32_t(upstream::kNfs4ErrNoent))
      << "once only";
  Creds someone;
  someone.uid = someone.gid = 4000;
  up_->DieAfter("REMOVE");
  EXPECT_NE(core_->Remove(cr_, root_, "other"), 0u);
  up_->dead = false;
  EXPECT_EQ(core_->Remove(someone, root_, "other"),
            uint32_t(upstream::kNfs4ErrNoent)) << "not someone else's";

  Attrs mode, got;
  mode.mask = upstream::kAttrMode;
  mode.mode = 0755;
  Key k = kNoKey;
  up_->DieAfter("CREATE");
  EXPECT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode, "",
                          &k, &got),
            uint32_t(upstream::kNfs4ErrDelay));
  up_->dead = false;
  ASSERT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode, "",
                          &k, &got),
            0u) << "the retry";
  EXPECT_NE(k, kNoKey);
  EXPECT_EQ(got.type, upstream::FileType::kDir);
  EXPECT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode, "",
                          &k, &got),
            uint32_t(upstream::kNfs4ErrExist)) << "once only";
}

// The same for a RENAME: done at the remote, its reply lost, the client's
// retry meets NOENT (the old name is gone) and must hear that its rename
// succeeded, once, when the new name holds the file it moved. Not when the
// new name holds another file, nor for another caller.
TEST_F(CoreDelegationsTest, ARetryOfARenameWhoseReplyWasLostSucceeds) {
  Start(DelegationType::kNone);
  up_->AddFile("from", "F");
  Key got = kNoKey;
  ASSERT_EQ(core_->Lookup(cr_, root_, "from", &got, nullptr), 0u);
  up_->DieAfter("RENAME");
  EXPECT_EQ(core_->Rename(cr_, root_, "from", root_, "to", got),
            uint32_t(upstream::kNfs4ErrDelay));
  ASSERT_TRUE(up_->dead.load());
  up_->dead = false;
  EXPECT_EQ(up_->Data("to"), "F") << "done at the remote";
  EXPECT_EQ(core_->Rename(cr_, root_, "from", root_, "to", got), 0u) << "the retry";
  EXPECT_EQ(core_->Rename(cr_, root_, "from", root_, "to", got),
            uint32_t(upstream::kNfs4ErrNoent))
      << "once only";
  Key to = kNoKey;
  ASSERT_EQ(core_->Lookup(cr_, root_, "to", &to, nullptr), 0u);
  EXPECT_EQ(to, got) << "the same file, under its new name";

  // Lost, and then the new name was replaced by someone else's file: the
  // retry's NOENT stands.
  up_->AddFile("a", "A");
  ASSERT_EQ(core_->Lookup(cr_, root_, "a", &got, nullptr), 0u);
  up_->DieAfter("RENAME");
  EXPECT_NE(core_->Rename(cr_, root_, "a", root_, "b", got), 0u);
  up_->dead = false;
  up_->ForeignRemove("b");
  up_->AddFile("b", "someone else's");
  EXPECT_EQ(core_->Rename(cr_, root_, "a", root_, "b", got),
            uint32_t(upstream::kNfs4ErrNoent));
  // And another caller's rename is not taken for ours.
  up_->AddFile("c", "C");
  ASSERT_EQ(core_->Lookup(cr_, root_, "c", &got, nullptr), 0u);
  Creds someone;
  someone.uid = someone.gid = 4000;
  up_->DieAfter("RENAME");
  EXPECT_NE(core_->Rename(cr_, root_, "c", root_, "d", got), 0u);
  up_->dead = false;
  EXPECT_EQ(core_->Rename(someone, root_, "c", root_, "d", got),
            uint32_t(upstream::kNfs4ErrNoent));
}

// Renames of directories the remote has are logged too, and their RENAMEs
// reach the remote in log order: "a" moved out of "b", then "b" moved into
// "a" is a cycle at the remote if sent the other way round. A move into
// the directory's own subtree is refused here, as the remote would.
TEST_F(CoreDelegationsTest, DirectoryRenamesAreLoggedAndSentInOrder) {
  // Sent only when needed below.
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  up_->AddFile("b/a/f", "F");
  Key a, b, got;
  ASSERT_EQ(core_->Lookup(cr_, root_, "b", &b, nullptr), 0u);
  ASSERT_EQ(core_->Lookup(cr_, b, "a", &a, nullptr), 0u);
  ASSERT_EQ(core_->Rename(cr_, b, "a", root_, "a"), 0u);
  ASSERT_EQ(core_->Rename(cr_, root_, "b", a, "b"), 0u);
  EXPECT_EQ(core_->Rename(cr_, root_, "a", b, "a"),
            uint32_t(upstream::kNfs4ErrInval))
      << "a into b, which is in a now";
  EXPECT_EQ(core_->Rename(cr_, root_, "a", a, "x"),
            uint32_t(upstream::kNfs4ErrInval))
      << "a into itself";
  EXPECT_EQ(up_->Count("RENAME") + up_->Count("RENAME!"), 0) << "logged";
  EXPECT_EQ(up_->Tree(), "b/ b/a/ b/a/f f");  // (f: the fixture's)
  ASSERT_EQ(core_->Lookup(cr_, root_, "a", &got, nullptr), 0u);
  EXPECT_EQ(got, a);
  ASSERT_EQ(core_->Lookup(cr_, a, "b", &got, nullptr), 0u);
  EXPECT_EQ(got, b);
  ASSERT_EQ(core_->Lookup(cr_, a, "f", &got, nullptr), 0u)
      << "what the moved directory holds is found in it";
  ASSERT_EQ(core_->Lookup(cr_, b, "..", &got, nullptr), 0u);
  EXPECT_EQ(got, a) << "the parent of a moved directory is its new one";
  EXPECT_EQ(core_->Lookup(cr_, root_, "b", &got, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  // A new "b" in the root needs the name free at the remote: b's RENAME
  // goes first, and a's before it.
  Key nb = CreateWritten("b", "new");
  TruncateTo(nb, 1);
  EXPECT_EQ(up_->Count("RENAME!"), 0);
  ASSERT_EQ(up_->Count("RENAME"), 2);
  EXPECT_EQ(up_->Tree(), "a/ a/b/ a/f b f");
  EXPECT_EQ(up_->Data("a/f"), "F");
  EXPECT_EQ(up_->Data("b"), "n");
}

// A logged remove the remote refuses for good (its permissions changed,
// say) is dropped, not retried forever: the object stays, at the remote
// and for our clients; the other removes sent with it go through.
TEST_F(CoreDelegationsTest, ARemoveTheRemoteRefusesIsDroppedNotRetried) {
  StartWriteBack(DelegationType::kNone, 0);
  up_->AddFile("keep", "theirs");
  up_->AddFile("gone", "x");
  up_->remove_refused["keep"] = upstream::kNfs4ErrAccess;
  ASSERT_EQ(core_->Remove(cr_, root_, "keep"), 0u);
  ASSERT_EQ(core_->Remove(cr_, root_, "gone"), 0u);
  // The directory's flush sends both, then sets its mtime: it is not
  // held back by the refused one.
  ASSERT_TRUE(up_->WaitCount("SETATTR", 1)) << "the directory's flush stuck";
  EXPECT_EQ(up_->Count("REMOVE"), 1);
  EXPECT_EQ(up_->Data("gone"), "<none>");
  EXPECT_EQ(up_->Data("keep"), "theirs");
  Key k;
  EXPECT_EQ(core_->Lookup(cr_, root_, "keep", &k, nullptr), 0u)
      << "the remote kept it: so do we";
  EXPECT_EQ(up_->Count("REMOVE!"), 1);
}

// An editor's save: the new version written to a temporary file, renamed
// over the remote's file. Nothing is sent; the old file is gone for our
// clients at once; when the name is needed at the remote, the REMOVE of
// the old file goes first, then the create of the new one under its
// final name (the temporary name never reaches the remote).
TEST_F(CoreDelegationsTest, ASaveOverARemoteFileIsLoggedAsRemoveAndCreate) {
  // Sent only when needed below.
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  up_->AddFile("doc", "v1");
  Key old;
  ASSERT_EQ(core_->Lookup(cr_, root_, "doc", &old, nullptr), 0u);
  int opens = up_->Count("OPEN");
  Key tmp = CreateWritten("doc.tmp", "v2!");
  ASSERT_EQ(core_->Rename(cr_, root_, "doc.tmp", root_, "doc"), 0u);
  EXPECT_EQ(up_->Count("OPEN"), opens);
  EXPECT_EQ(up_->Count("REMOVE") + up_->Count("RENAME"), 0) << "all logged";
  EXPECT_EQ(up_->Data("doc"), "v1");
  Key k;
  Attrs attrs;
  ASSERT_EQ(core_->Lookup(cr_, root_, "doc", &k, &attrs), 0u);
  EXPECT_EQ(k, tmp);
  EXPECT_EQ(attrs.size, 3u);
  EXPECT_EQ(core_->Lookup(cr_, root_, "doc.tmp", &k, nullptr),
            uint32_t(upstream::kNfs4ErrNoent));
  EXPECT_EQ(core_->Getattr(cr_, old, &attrs),
            uint32_t(upstream::kNfs4ErrStale));
  TruncateTo(tmp, 2);
  ASSERT_EQ(up_->Count("REMOVE"), 1);
  EXPECT_LT(up_->Index("REMOVE"), up_->Index("OPEN", opens));
  EXPECT_EQ(up_->Data("doc"), "v2");
  EXPECT_EQ(up_->Data("doc.tmp"), "<none>");
  EXPECT_EQ(up_->Count("RENAME"), 0);
  EXPECT_TRUE(up_->Names("doc.nache-conflict-").empty());
}

// The remote restarts while a local client holds the file open with two
// lock ranges and nache holds a read delegation on it: the open is
// reclaimed with CLAIM_PREVIOUS asking the read delegation back, each
// range with a reclaiming LOCK, and the local client's later unlock
// reaches the remote under the new lock stateid.
TEST_F(CoreDelegationsTest, ServerRestartReclaimsOpenLocksAndDelegation) {
  Start(DelegationType::kRead);
  NacheOpen *open = OpenF(kRead);
  ASSERT_NE(open, nullptr);
  ASSERT_EQ(LockF(open, "owner-1", NACHE_LOCK, false, 0, 100), 0u);
  ASSERT_EQ(LockF(open, "owner-1", NACHE_LOCK, false, 200, 0), 0u);
  ASSERT_TRUE(up_->Locked(0, 100));
  up_->Restart(true);
  ASSERT_TRUE(up_->WaitCount("LOCK(reclaim)", 2)) << "locks not reclaimed";
  EXPECT_EQ(up_->Count("OPEN(previous)"), 1);
  EXPECT_EQ(up_->Reclaimed(), DelegationType::kRead);
  EXPECT_TRUE(up_->Locked(0, 100));
  EXPECT_TRUE(up_->Locked(1000, 1001)) << "the range to the end of the file";
  // The delegation came back: attributes need no GETATTR (the attribute
  // window is 0), and a local client may be delegated the file again.
  int getattrs = up_->Count("GETATTR");
  Attrs a;
  EXPECT_EQ(core_->Getattr(cr_, file_, &a), 0u);
  EXPECT_EQ(up_->Count("GETATTR"), getattrs);
  // (The last reclaim's reply may still be on its way to the core: local
  // delegations wait until it is in.)
  EXPECT_TRUE(cb_client::WaitFor([&] {
    if (core_->AcquireLocalDelegation(file_, false) != 0) return false;
    core_->ReleaseLocalDelegation(file_);
    return true;
  }));
  ASSERT_EQ(LockF(open, "owner-1", NACHE_UNLOCK, false, 0, 100), 0u);
  EXPECT_FALSE(up_->Locked(0, 100));
  EXPECT_TRUE(up_->Locked(1000, 1001));
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// A file open here only under our read delegation (its upstream open
// closed, its local open granted under the delegation) still gets the
// delegation back after a server restart: an open is reclaimed for it,
// asking for the delegation.
TEST_F(CoreDelegationsTest, ADelegationOfALocallyOpenFileIsReclaimed) {
  Start(DelegationType::kRead);
  ASSERT_EQ(core_->CloseFile(OpenF(kRead)), 0u);  // upstream open closed
  int opens = up_->Count("OPEN");
  NacheOpen *open = OpenF(kRead);  // under the delegation
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(up_->Count("OPEN"), opens) << "granted here";
  up_->Restart(true);
  ASSERT_TRUE(up_->WaitCount("OPEN(previous)", 1)) << "not reclaimed";
  EXPECT_EQ(up_->Reclaimed(), DelegationType::kRead);
  // The server logs the reclaim before its reply reaches the core; until
  // the core has taken it in, local delegations wait (DELAY).
  EXPECT_TRUE(cb_client::WaitFor([&] {
    if (core_->AcquireLocalDelegation(file_, false) != 0) return false;
    core_->ReleaseLocalDelegation(file_);
    return true;
  })) << "the delegation is ours again";
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// A reclaimed delegation the server wants back at once (RFC 7530
// 16.16.5, "recall": knfsd sets it while its callback path is not up yet)
// is returned, not trusted.
TEST_F(CoreDelegationsTest, AReclaimedDelegationMarkedRecallIsReturned) {
  Start(DelegationType::kRead);
  NacheOpen *open = OpenF(kRead);
  ASSERT_NE(open, nullptr);
  up_->recall_reclaimed = true;
  up_->Restart(true);
  ASSERT_TRUE(up_->WaitCount("OPEN(previous)", 1));
  ASSERT_TRUE(up_->WaitCount("DELEGRETURN", 1)) << "not returned";
  int getattrs = up_->Count("GETATTR");
  Attrs a;
  EXPECT_EQ(core_->Getattr(cr_, file_, &a), 0u);
  EXPECT_EQ(up_->Count("GETATTR"), getattrs + 1) << "still trusted";
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// Without a grace period (the server answers NO_GRACE to reclaims) the
// open and its locks are taken anew; a range someone else took meanwhile
// is lost, and only that one.
TEST_F(CoreDelegationsTest, WithoutAGracePeriodOpensAndLocksAreTakenAnew) {
  Start(DelegationType::kNone);
  NacheOpen *open = OpenF(kBoth);
  ASSERT_NE(open, nullptr);
  ASSERT_EQ(LockF(open, "owner-1", NACHE_LOCK, true, 0, 100), 0u);
  ASSERT_EQ(LockF(open, "owner-2", NACHE_LOCK, true, 500, 10), 0u);
  int opens = up_->Count("OPEN");
  up_->ForeignLock(500, 510);  // taken while our state was gone
  up_->Restart(false);
  ASSERT_TRUE(up_->WaitCount("OPEN", opens + 1)) << "not opened again";
  ASSERT_TRUE(up_->WaitCount("LOCK", 3)) << "lock not taken again";
  ASSERT_TRUE(up_->WaitCount("LOCK!", 1)) << "the taken range not tried";
  EXPECT_EQ(up_->Count("OPEN(previous)"), 0);
  EXPECT_TRUE(up_->Locked(0, 100));
  EXPECT_FALSE(up_->Locked(500, 510));
  EXPECT_EQ(core_->CloseFile(open), 0u);
}

// Write-back on a small tmpfs cache disk, filled up by writes of f.
class FullCacheDiskTest : public CoreDelegationsTest {
 protected:
  void TearDown() override {
    CoreDelegationsTest::TearDown();  // the core closes its store first
    if (!mnt_.empty()) umount2(mnt_.c_str(), MNT_DETACH);
  }
  void StartOnTmpfs() {
    ASSERT_EQ(geteuid(), 0u) << "needs root to mount a tmpfs (make test runs as root)";
    const std::string mnt = dir_.path() + "/mnt";
    ASSERT_EQ(mkdir(mnt.c_str(), 0700), 0);
    ASSERT_EQ(mount(("nache-unit-tmpfs-" + std::to_string(getpid())).c_str(),
                    mnt.c_str(), "tmpfs", 0, "size=16m"),
              0)
        << strerror(errno);
    mnt_ = mnt;
    Start(DelegationType::kNone, [&mnt](CoreConfig *cfg) {
      cfg->write_back = true;
      cfg->single_writer = true;
      cfg->flush_age_ms = 3600 * 1000;  // nothing leaves meanwhile
      cfg->cache_dir = mnt + "/cache";
    });
    // Room RocksDB needs to flush what it holds in memory, freed later.
    std::string chunk(1 << 20, 'r');
    FILE *f = fopen(Reserve().c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 7; i++) fwrite(chunk.data(), 1, chunk.size(), f);
    fclose(f);
  }
  std::string Reserve() const { return mnt_ + "/reserve"; }
  // Writes f through open in 64 KiB pieces until a write fails; the bytes
  // acknowledged, and *st the failure.
  uint64_t FillWithF(NacheOpen *open, uint32_t *st) {
    std::string data(64 << 10, 'w');
    size_t n = 0;
    int committed = -1;
    uint64_t acked = 0;
    while (acked < (64u << 20)) {
      *st = core_->Write(cr_, file_, open, acked, data.size(), data.data(), 2,
                         &n, &committed);
      if (*st) break;
      acked += data.size();
    }
    return acked;
  }
  std::string mnt_;  // the tmpfs, unmounted (lazily) by TearDown
};

// A full cache disk under write-back: the write that does not fit gets
// NFS4ERR_NOSPC (nothing of it taken; f has unflushed data, which would
// be sent after it), what was acknowledged stays readable, and once space
// is freed writes go in again, without a restart (the store's side:
// store_test.cc).
TEST_F(FullCacheDiskTest, AWriteToADirtyFileIsNoSpaceUntilFreed) {
  StartOnTmpfs();
  NacheOpen *o = OpenF(kBoth);
  ASSERT_NE(o, nullptr);
  uint32_t st = 0;
  uint64_t acked = FillWithF(o, &st);
  EXPECT_EQ(st, uint32_t(upstream::kNfs4ErrNospc));
  ASSERT_GT(acked, 0u);
  std::string back(4096, '\0');
  size_t n = 0;
  int committed = -1;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, file_, o, acked - 4096, 4096, &back[0], &n, &eof),
            0u);
  EXPECT_EQ(back, std::string(4096, 'w'));
  ASSERT_EQ(unlink(Reserve().c_str()), 0);
  std::string data(64 << 10, 'w');
  EXPECT_EQ(core_->Write(cr_, file_, o, acked, data.size(), data.data(), 2,
                         &n, &committed),
            0u);
  EXPECT_EQ(up_->Count("WRITE"), 0) << "all of it stayed local";
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

// On a full cache disk, a write to a file with nothing unflushed, which
// the remote has, goes to the remote at once (write-through, FILE_SYNC)
// instead of failing; read back, it is the written bytes.
TEST_F(FullCacheDiskTest, AWriteToACleanFileGoesThroughToTheRemote) {
  up_->AddFile("g", "0123456789");
  StartOnTmpfs();
  Key g = kNoKey;
  Attrs a;
  ASSERT_EQ(core_->Lookup(cr_, root_, "g", &g, &a), 0u);
  NacheOpen *o = OpenF(kBoth);
  ASSERT_NE(o, nullptr);
  uint32_t st = 0;
  FillWithF(o, &st);
  ASSERT_EQ(st, uint32_t(upstream::kNfs4ErrNospc));
  size_t n = 0;
  int committed = -1;
  EXPECT_EQ(core_->Write(cr_, g, nullptr, 2, 3, "abc", 2, &n, &committed), 0u);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(committed, 2);
  EXPECT_EQ(up_->Data("g"), "01abc56789");
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_full_disk_writes_total"), 1);
  std::string back(10, '\0');
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, g, nullptr, 0, 10, &back[0], &n, &eof), 0u);
  EXPECT_EQ(back.substr(0, n), "01abc56789");
  // A remove to log finds no room either: NFS4ERR_NOSPC, not EIO (the
  // client can free space and retry), and the name stays.
  EXPECT_EQ(core_->Remove(cr_, root_, "g"), uint32_t(upstream::kNfs4ErrNospc));
  EXPECT_EQ(core_->Lookup(cr_, root_, "g", &g, &a), 0u);
  EXPECT_EQ(core_->CloseFile(o), 0u);
}

// Records of objects gone at the remote do not pile up in the store: a
// file we removed (its last link) and one the remote answers NFS4ERR_STALE
// for lose their handle record and cached state; one we hold open keeps
// them (the remote keeps it alive for us).
TEST_F(CoreDelegationsTest, RecordsOfAnObjectGoneAtTheRemoteAreDeleted) {
  Start(DelegationType::kNone);
  ASSERT_TRUE(core_->KeyKnown(file_));
  Attrs a;
  ASSERT_EQ(core_->Getattr(cr_, file_, &a), 0u);
  ASSERT_EQ(core_->Remove(cr_, root_, "f"), 0u);
  EXPECT_FALSE(core_->KeyKnown(file_)) << "its handle record stayed";
  EXPECT_FALSE(core_->cache()->KnownAttrs(file_, &a));
  EXPECT_EQ(core_->Getattr(cr_, file_, &a), uint32_t(upstream::kNfs4ErrStale));

  up_->AddFile("g", "gone elsewhere");
  Key g;
  ASSERT_EQ(core_->Lookup(cr_, root_, "g", &g, &a), 0u);
  up_->ForeignRemove("g");
  EXPECT_EQ(core_->Getattr(cr_, g, &a), uint32_t(upstream::kNfs4ErrStale));
  EXPECT_FALSE(core_->KeyKnown(g));
  EXPECT_FALSE(core_->cache()->KnownAttrs(g, &a));
}

TEST_F(CoreDelegationsTest, AFileRemovedWhileOpenHereKeepsItsHandle) {
  Start(DelegationType::kNone);
  NacheOpen *o = OpenF(kRead);
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(core_->Remove(cr_, root_, "f"), 0u);
  EXPECT_TRUE(core_->KeyKnown(file_));
  EXPECT_EQ(core_->CloseFile(o), 0u);
}


// Write-back under the caller's identity (issue 16): what a user did here
// reaches the remote as that user, supplementary groups and all, also
// after a restart; and the remote's refusal is counted.
class WriteBackIdentityTest : public CoreDelegationsTest {
 protected:
  static Creds User(uint32_t uid, uint32_t gid,
                    std::vector<uint32_t> groups) {
    Creds cr;
    cr.uid = uid;
    cr.gid = gid;
    cr.groups = std::move(groups);
    return cr;
  }
  void StartSentWhenNeeded(bool probe = true) {
    Start(DelegationType::kNone,
          [](CoreConfig *cfg) {
            cfg->write_back = true;
            cfg->single_writer = true;
            cfg->flush_age_ms = 3600 * 1000;  // sent when needed
          },
          probe);
  }
  // Kills nache (nothing more reaches the server) and restarts it on the
  // same cache.
  void KillAndRestart() {
    up_->dead = true;
    core_.reset();
    up_->dead = false;
    StartSentWhenNeeded(false);
  }
  static void ExpectCreds(const Creds &got, uint32_t uid, uint32_t gid,
                          std::vector<uint32_t> groups) {
    EXPECT_EQ(got.uid, uid);
    EXPECT_EQ(got.gid, gid);
    EXPECT_EQ(got.groups, groups);
  }
};

TEST_F(WriteBackIdentityTest, ALocalCreateIsSentAsItsCreatorWithItsGroups) {
  StartSentWhenNeeded();
  // Only members of group 3000 may create here, at the remote.
  up_->Guard({"OPEN"}, 3000);
  Key k = CreateAs(User(2000, 2000, {3000}), "mine", "data");
  EXPECT_EQ(up_->Sends("OPEN").size(), 0u) << "logged, not sent";
  ASSERT_EQ(SetSize(k, 2), 0u);
  std::vector<ScriptedUpstream::Sent> opens = up_->Sends("OPEN");
  ASSERT_EQ(opens.size(), 1u);
  ExpectCreds(opens[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("mine"), "da");
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_refused_total"), 0);
}

TEST_F(WriteBackIdentityTest, ACreateLoggedBeforeARestartIsSentAsItsCreator) {
  StartSentWhenNeeded();
  up_->Guard({"OPEN"}, 3000);
  CreateAs(User(2000, 2000, {3000}), "mine", "data");
  KillAndRestart();
  Key k;
  ASSERT_EQ(core_->Lookup(cr_, root_, "mine", &k, nullptr), 0u);
  ASSERT_EQ(SetSize(k, 2), 0u);
  std::vector<ScriptedUpstream::Sent> opens = up_->Sends("OPEN");
  ASSERT_EQ(opens.size(), 1u);
  ExpectCreds(opens[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("mine"), "da");
}

// Directories' times, moved here by a local mkdir, sent as a caller the
// remote does not let set them (SETATTR refused): given up, the remote's
// times stand and the directories are clean, not retried for ever.
TEST_F(CoreDelegationsTest, RefusedDirectoryTimesAreGivenUp) {
  StartWriteBack(DelegationType::kNone, 0);  // flushed at once
  up_->Guard({"SETATTR"}, 3000);
  Attrs mode, got;
  mode.mask = upstream::kAttrMode;
  mode.mode = 0755;
  Key sub = kNoKey;
  ASSERT_EQ(core_->Create(cr_, root_, "sub", upstream::FileType::kDir, mode,
                          "", &sub, &got),
            0u);
  ASSERT_TRUE(cb_client::WaitFor([&] { return up_->Tree().find("sub/") != std::string::npos; }));
  EXPECT_TRUE(cb_client::WaitFor([&] {
    return !core_->cache()->IsDirty(root_) && !core_->cache()->IsDirty(sub);
  })) << "a directory stays dirty (its times retried)";
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_refused_total"), 0);
}

TEST_F(WriteBackIdentityTest, DataWrittenBeforeARestartIsSentAsItsWriter) {
  StartSentWhenNeeded();
  up_->Guard({"WRITE"}, 3000);
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(User(2000, 2000, {3000}), file_, nullptr, 0, 5,
                         "OURS!", 2, &n, &committed),
            0u);
  KillAndRestart();
  ASSERT_EQ(SetSize(file_, 4), 0u);  // flushes the data first
  std::vector<ScriptedUpstream::Sent> writes = up_->Sends("WRITE");
  ASSERT_GE(writes.size(), 1u);
  ExpectCreds(writes[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("f"), "OURS");
}

TEST_F(WriteBackIdentityTest, RemovesAndRenamesAreSentAsTheirCaller) {
  StartSentWhenNeeded();
  up_->AddFile("old", "x");
  up_->AddFile("moved", "y");
  up_->Guard({"REMOVE", "RENAME"}, 3000);
  const Creds u = User(2000, 2000, {3000});
  ASSERT_EQ(core_->Remove(u, root_, "old"), 0u);
  ASSERT_EQ(core_->Rename(u, root_, "moved", root_, "there"), 0u);
  EXPECT_EQ(up_->Sends("REMOVE").size() + up_->Sends("RENAME").size(), 0u)
      << "logged, not sent";
  // New files under the old names need them free at the remote.
  ASSERT_EQ(SetSize(CreateWritten("old", "new"), 1), 0u);
  ASSERT_EQ(SetSize(CreateWritten("moved", "new"), 1), 0u);
  std::vector<ScriptedUpstream::Sent> removes = up_->Sends("REMOVE");
  std::vector<ScriptedUpstream::Sent> renames = up_->Sends("RENAME");
  ASSERT_EQ(removes.size(), 1u);
  ASSERT_EQ(renames.size(), 1u);
  ExpectCreds(removes[0].cr, 2000, 2000, {3000});
  ExpectCreds(renames[0].cr, 2000, 2000, {3000});
  EXPECT_EQ(up_->Data("there"), "y");
  EXPECT_EQ(CounterValue(metrics_, "nache_writeback_refused_total"), 0);
}

TEST_F(WriteBackIdentityTest, ARefusalAtFlushIsCounted) {
  StartSentWhenNeeded();
  // The creator lacks the group the remote asks for: allowed here (our
  // ACCESS says yes), refused at the flush.
  up_->Guard({"OPEN", "WRITE"}, 3000);
  Key k = CreateAs(User(2000, 2000, {}), "theirs", "data");
  EXPECT_EQ(SetSize(k, 2), uint32_t(upstream::kNfs4ErrAccess));
  EXPECT_GE(CounterValue(metrics_, "nache_writeback_refused_total"), 1);
  // Data of a file the remote has, written by a non-member.
  size_t n = 0;
  int committed = 0;
  ASSERT_EQ(core_->Write(User(2001, 2001, {}), file_, nullptr, 0, 5, "OURS!",
                         2, &n, &committed),
            0u);
  double before = CounterValue(metrics_, "nache_writeback_refused_total");
  EXPECT_NE(SetSize(file_, 4), 0u);
  EXPECT_GT(CounterValue(metrics_, "nache_writeback_refused_total"), before);
  EXPECT_EQ(up_->Data("f"), "hello");
}

// An owner or group the remote named and the core could not map shows as
// nobody (65534), and nobody (an office client's root, squashed) gets no
// owner or group rights from it here: a chmod it makes is not kept
// locally but sent to the remote to judge, Ganesha's owner_skip shortcut
// does not apply, and a file made in a set-group-id directory of such a
// group gives no group rights either. The remote's own nobody (65534 by
// number) keeps its rights.
class UnmappedOwnerTest : public WriteBackIdentityTest {
 protected:
  static constexpr uint32_t kNobody = upstream::kNobodyId;
  static constexpr uint64_t kUnmapped =
      upstream::kAttrOwnerUnmapped | upstream::kAttrGroupUnmapped;
  const Creds nobody_ = User(kNobody, kNobody, {});
  Key LookupRoot(const char *name) {
    Key k = kNoKey;
    EXPECT_EQ(core_->Lookup(cr_, root_, name, &k, nullptr), 0u);
    return k;
  }
  uint32_t Chmod(const Creds &cr, Key k, uint32_t mode) {
    Attrs set, out;
    set.mask = upstream::kAttrMode;
    set.mode = mode;
    return core_->Setattr(cr, k, nullptr, set, &out);
  }
};

TEST_F(UnmappedOwnerTest, NobodysChmodOfTheirFileGoesToTheRemote) {
  up_->AddFile("theirs", "x");
  up_->Own("theirs", kNobody, kNobody, kUnmapped);
  up_->AddFile("nobodys", "y");
  up_->Own("nobodys", kNobody, kNobody, 0);
  StartSentWhenNeeded();
  Key theirs = LookupRoot("theirs"), nobodys = LookupRoot("nobodys");
  ASSERT_EQ(Chmod(nobody_, nobodys, 0600), 0u);
  EXPECT_EQ(up_->Sends("SETATTR").size(), 0u) << "its owner: kept here";
  ASSERT_EQ(Chmod(nobody_, theirs, 0600), 0u);
  std::vector<ScriptedUpstream::Sent> sent = up_->Sends("SETATTR");
  ASSERT_EQ(sent.size(), 1u) << "not its owner: the remote judges";
  ExpectCreds(sent[0].cr, kNobody, kNobody, {});
}

TEST_F(UnmappedOwnerTest, OwnerSkipNeverTakesNobodyForAnUnmappedOwner) {
  up_->AddFile("theirs", "x");
  up_->Own("theirs", kNobody, kNobody, kUnmapped);
  up_->AddFile("nobodys", "y");
  up_->Own("nobodys", kNobody, kNobody, 0);
  StartSentWhenNeeded();
  Key theirs = LookupRoot("theirs"), nobodys = LookupRoot("nobodys");
  EXPECT_FALSE(core_->CallerOwnsKnown(nobody_, theirs));
  EXPECT_TRUE(core_->CallerOwnsKnown(nobody_, nobodys));
  EXPECT_FALSE(core_->CallerOwnsKnown(User(1000, 1000, {}), nobodys));
  Attrs a;
  ASSERT_EQ(core_->Getattr(cr_, theirs, &a), 0u);
  EXPECT_EQ(a.uid, kNobody) << "shown as nobody";
  nache_attrs c;
  AttrsToC(a, &c);
  EXPECT_TRUE(c.owner_unmapped);
  EXPECT_TRUE(c.group_unmapped);
}

// Root gives the file to alice, kept here (write-back): the owner is a
// local id from then on, no longer unmapped.
TEST_F(UnmappedOwnerTest, AChownHereMakesTheOwnerMapped) {
  up_->AddFile("theirs", "x");
  up_->Own("theirs", kNobody, kNobody, kUnmapped);
  StartSentWhenNeeded();
  Key theirs = LookupRoot("theirs");
  Attrs set, a;
  set.mask = upstream::kAttrOwner;
  set.uid = 1000;
  ASSERT_EQ(core_->Setattr(cr_, theirs, nullptr, set, &a), 0u);
  EXPECT_EQ(up_->Sends("SETATTR").size(), 0u) << "root's: kept here";
  ASSERT_EQ(core_->Getattr(cr_, theirs, &a), 0u);
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.mask & kUnmapped, upstream::kAttrGroupUnmapped);
  EXPECT_TRUE(core_->CallerOwnsKnown(User(1000, 1000, {}), theirs));
}

TEST_F(UnmappedOwnerTest, ASetgidDirectorysUnmappedGroupPassesOnUnmapped) {
  up_->AddDir("shared");
  up_->Own("shared", 0, kNobody, upstream::kAttrGroupUnmapped, 02777);
  StartSentWhenNeeded();
  Key dir = LookupRoot("shared");
  Core::OpenRequest req;
  req.key = dir;
  req.name = "new";
  req.access = kBoth;
  req.mode = NACHE_OPEN_GUARDED;
  req.create_attrs.mask = upstream::kAttrMode;
  req.create_attrs.mode = 0660;
  NacheOpen *open = nullptr;
  Key k = kNoKey;
  bool created = false;
  const Creds alice = User(1000, 1000, {});
  ASSERT_EQ(core_->OpenFile(alice, req, &open, &k, nullptr, &created), 0u);
  ASSERT_EQ(core_->CloseFile(open), 0u);
  EXPECT_EQ(up_->Sends("OPEN").size(), 0u) << "made here, not sent";
  Attrs a;
  ASSERT_EQ(core_->Getattr(alice, k, &a), 0u);
  EXPECT_EQ(a.gid, kNobody);
  EXPECT_NE(a.mask & upstream::kAttrGroupUnmapped, 0u);
  uint32_t allowed = 0;
  ASSERT_EQ(
      core_->Access(User(2000, kNobody, {}), k,
                    upstream::kAccessRead | upstream::kAccessModify, &allowed),
      0u);
  EXPECT_EQ(allowed, 0u) << "no group rights from an unmapped group";
  ASSERT_EQ(core_->Access(alice, k, upstream::kAccessRead, &allowed), 0u);
  EXPECT_EQ(allowed, upstream::kAccessRead) << "its creator owns it";
}

}  // namespace
}  // namespace nache
