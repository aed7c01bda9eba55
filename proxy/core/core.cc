// Operations of the core: each local operation becomes the fewest upstream
// COMPOUNDs that answer it. See core.h.
#include "core/core.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "core/convert.h"
#include "util/log.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

namespace {

constexpr uint32_t kReaddirDircount = 32 * 1024;
// Below libnfs 4.0.0's 1 MiB incoming record limit, large enough that a
// directory of a few thousand entries is one round trip.
constexpr uint32_t kReaddirMaxcount = 512 * 1024;
constexpr int kOpenOwners = 64;

bool IsStateError(uint32_t st) {
  return st == upstream::kNfs4ErrBadStateid ||
         st == upstream::kNfs4ErrOldStateid ||
         st == upstream::kNfs4ErrStaleStateid ||
         st == upstream::kNfs4ErrExpired ||
         st == upstream::kNfs4ErrAdminRevoked;
}

// Attributes that truncate a file (SETATTR size 0).
upstream::Attrs TruncateAttrs() {
  upstream::Attrs t;
  t.mask = upstream::kAttrSize;
  t.size = 0;
  return t;
}

// The status of the first op of kind op in rep, or the compound status when
// the server did not reach it.
uint32_t OpStatus(const CompoundReply &rep, Op op) {
  const OpResult *r = rep.Find(op);
  return r ? r->status : rep.status;
}

}  // namespace

Core::~Core() {
  // First, so that no scrape samples a half-destroyed core.
  if (metrics_) metrics_->ClearSampler(sampler_token_);
  if (up_) up_->Shutdown();
}

std::unique_ptr<Core> Core::Open(const CoreConfig &cfg, std::string *err) {
  std::unique_ptr<Core> c(new Core());
  c->cfg_ = cfg;
  c->max_read_ = cfg.max_io_size;
  c->max_write_ = cfg.max_io_size;
  c->store_ = Store::Open(cfg.cache_dir, err);
  if (!c->store_) return nullptr;
  c->handles_.reset(new HandleMap(c->store_.get()));

  // Open-owner names must not collide with a previous run's, whose seqids
  // the server may still remember until our new client id replaces it.
  std::random_device rd;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "nache-%u-%08x", cfg.export_id, rd());
  c->owner_prefix_ = prefix;
  c->opens_.reset(new OpenTable(kOpenOwners, c->owner_prefix_));
  // The root's key exists before the remote is reachable, so the export
  // can be served (with retryable errors) while the upstream is down.
  c->root_key_ = c->handles_->NamedKey(
      "root:" + cfg.upstream_server + ":" + std::to_string(cfg.upstream_port) +
      ":" + cfg.upstream_path);

  upstream::UpstreamOptions uo;
  uo.server = cfg.upstream_server;
  uo.port = int(cfg.upstream_port);
  uo.connections = int(cfg.connections);
  uo.call_timeout_ms = int(cfg.call_timeout_ms);
  // Stable across restarts: the server then drops our previous
  // incarnation's state as soon as we confirm a new client id.
  char host[256] = "nache";
  gethostname(host, sizeof(host) - 1);
  char id[512];
  snprintf(id, sizeof(id), "nache/%s/%016llx/export-%u", host,
           (unsigned long long)c->store_->incarnation(), cfg.export_id);
  uo.client_id = id;
  uo.auth_machine = host;
  if (!cfg.callback_address.empty() && cfg.callback_port != 0) {
    char uaddr[128];
    snprintf(uaddr, sizeof(uaddr), "%s.%u.%u", cfg.callback_address.c_str(),
             cfg.callback_port >> 8, cfg.callback_port & 0xff);
    uo.callback_uaddr = uaddr;
  }
  c->up_ = upstream::Upstream::Create(uo);
  if (!c->up_) {
    *err = "cannot start the upstream client";
    return nullptr;
  }
  metrics::Metrics *m =
      cfg.metrics ? cfg.metrics : &metrics::Metrics::Global();
  c->metrics_ = m->ForExport(cfg.export_id);
  Core *core = c.get();
  c->sampler_token_ = c->metrics_->SetSampler([core] {
    metrics::ExportGauges g;
    g.connected = core->up_->state() == upstream::UpstreamState::kReady;
    g.clientid_epoch = core->up_->epoch();
    g.open_files = core->opens_->size();
    g.callback_path_up = false;  // no callback service before delegations
    return g;
  });
  return c;
}

bool Core::KeyKnown(Key key) const {
  HandleRecord r;
  return handles_->Get(key, &r);
}

uint32_t Core::Run(Compound &c, const Creds &cr, CompoundReply *rep) {
  auto t0 = std::chrono::steady_clock::now();
  upstream::CallStatus s = up_->Call(c, cr, rep);
  metrics_->ObserveCompound(c, s, *rep, std::chrono::steady_clock::now() - t0);
  if (s != upstream::CallStatus::kOk) {
    NACHE_LOG(kLogInfo, "NACHE_UPSTREAM", "%s: upstream %s, client retries",
              c.tag().c_str(), upstream::CallStatusName(s));
    return upstream::kNfs4ErrDelay;
  }
  if (rep->status != upstream::kNfs4Ok) {
    int i = rep->FailedIndex();
    NACHE_LOG(kLogDebug, "NACHE_UPSTREAM", "%s: %s failed: %s",
              c.tag().c_str(),
              i >= 0 ? upstream::OpName(rep->results[i].op) : "?",
              nache_status_name(rep->status));
  }
  return rep->status;
}

uint32_t Core::FhOf(Key key, Fh *fh) {
  HandleRecord r;
  if (!handles_->Get(key, &r)) return upstream::kNfs4ErrStale;
  if (r.fh.empty()) {
    if (key != root_key_) return upstream::kNfs4ErrStale;
    return ResolveRoot(fh);
  }
  *fh = r.fh;
  return upstream::kNfs4Ok;
}

uint32_t Core::ResolveRoot(Fh *fh) {
  std::lock_guard<std::mutex> g(root_mu_);
  HandleRecord r;
  if (handles_->Get(root_key_, &r) && !r.fh.empty()) {
    *fh = r.fh;  // another thread resolved it meanwhile
    return upstream::kNfs4Ok;
  }
  Compound c;
  c.SetTag("root").Putrootfh();
  const std::string &p = cfg_.upstream_path;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    if (j > i) c.Lookup(p.substr(i, j - i));
    i = j + 1;
  }
  c.Getfh().Getattr(upstream::kAttrMaxRead | upstream::kAttrMaxWrite);
  CompoundReply rep;
  uint32_t st = Run(c, Creds(), &rep);
  if (st) return st;
  *fh = rep.Find(Op::kGetfh)->fh;
  handles_->SetFh(root_key_, *fh);
  // A READ or WRITE above the server's limit is refused (knfsd may even
  // drop the connection), so never send one.
  const Attrs &a = rep.Find(Op::kGetattr)->attrs;
  uint32_t rd = cfg_.max_io_size, wr = cfg_.max_io_size;
  if ((a.mask & upstream::kAttrMaxRead) && a.maxread >= 4096 && a.maxread < rd)
    rd = uint32_t(a.maxread);
  if ((a.mask & upstream::kAttrMaxWrite) && a.maxwrite >= 4096 &&
      a.maxwrite < wr)
    wr = uint32_t(a.maxwrite);
  max_read_ = rd;
  max_write_ = wr;
  NACHE_LOG(kLogEvent, "NACHE_HANDLES",
            "export root %s resolved; I/O sizes read %u write %u",
            cfg_.upstream_path.c_str(), rd, wr);
  return upstream::kNfs4Ok;
}

// --- metadata ---------------------------------------------------------

uint32_t Core::Root(const Creds &cr, Key *key, Attrs *attrs) {
  *key = root_key_;
  Attrs a;
  uint32_t st = Getattr(cr, root_key_, &a);
  if (st == upstream::kNfs4ErrDelay) {
    // The remote is unreachable: describe the root as a plain directory
    // so the export exists; every use of it waits for the remote (clients
    // get NFS4ERR_DELAY and retry).
    a = Attrs();
    a.mask = upstream::kAttrType | upstream::kAttrMode |
             upstream::kAttrNlink | upstream::kAttrFileid;
    a.type = upstream::FileType::kDir;
    a.mode = 0755;
    a.nlink = 2;
    a.fileid = root_key_;
    st = upstream::kNfs4Ok;
  }
  if (st == upstream::kNfs4Ok && attrs) *attrs = a;
  return st;
}

uint32_t Core::Lookup(const Creds &cr, Key dir, const std::string &name,
                      Key *key, Attrs *attrs) {
  if (name == "..") return LookupParent(cr, dir, key, attrs);
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  Compound c;
  c.SetTag("lookup").Putfh(dfh);
  if (name != ".") c.Lookup(name);
  c.Getfh().Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st) return st;
  *key = name == "." ? dir
                     : handles_->Intern(rep.Find(Op::kGetfh)->fh, dir, name);
  if (attrs) *attrs = rep.Find(Op::kGetattr)->attrs;
  return st;
}

uint32_t Core::LookupParent(const Creds &cr, Key dir, Key *key,
                            Attrs *attrs) {
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  if (dir == root_key_) {  // never walk above the export's root
    *key = dir;
    return Getattr(cr, dir, attrs ? attrs : nullptr);
  }
  Compound c;
  c.SetTag("lookupp").Putfh(dfh).Lookupp().Getfh().Getattr(
      upstream::kAttrsObject);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st) return st;
  *key = handles_->Intern(rep.Find(Op::kGetfh)->fh, kNoKey, "");
  if (attrs) *attrs = rep.Find(Op::kGetattr)->attrs;
  return st;
}

uint32_t Core::Getattr(const Creds &cr, Key key, Attrs *attrs) {
  return FetchAttrs(cr, key, upstream::kAttrsObject, "getattr", attrs);
}

uint32_t Core::FetchAttrs(const Creds &cr, Key key, uint64_t mask,
                          const char *tag, Attrs *out) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag(tag).Putfh(fh).Getattr(mask);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok && out) *out = rep.Find(Op::kGetattr)->attrs;
  return st;
}

uint32_t Core::Setattr(const Creds &cr, Key key, NacheOpen *open,
                       const Attrs &set, Attrs *out) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  // Only a size change needs the open's stateid (for share reservations).
  StateId sid = (set.mask & upstream::kAttrSize) ? IoStateid(open)
                                                 : StateId::Anonymous();
  for (int attempt = 0; attempt < 2; attempt++) {
    Compound c;
    c.SetTag("setattr").Putfh(fh).Setattr(sid, set).Getattr(
        upstream::kAttrsObject);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (st == upstream::kNfs4Ok) {
      if (out) *out = rep.Find(Op::kGetattr)->attrs;
      return st;
    }
    if (!IsStateError(st)) return st;
    sid = StateId::Anonymous();  // our open went away: retry stateless
  }
  return st;
}

uint32_t Core::Access(const Creds &cr, Key key, uint32_t want,
                      uint32_t *allowed) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("access").Putfh(fh).Access(want);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok) *allowed = rep.Find(Op::kAccess)->access;
  return st;
}

upstream::Verifier Core::CookieVerf(Key dir) {
  std::lock_guard<std::mutex> g(misc_mu_);
  auto it = cookie_verfs_.find(dir);
  return it == cookie_verfs_.end() ? upstream::Verifier(8, '\0') : it->second;
}

void Core::SetCookieVerf(Key dir, const upstream::Verifier &v) {
  std::lock_guard<std::mutex> g(misc_mu_);
  cookie_verfs_[dir] = v;
}

uint32_t Core::Readdir(const Creds &cr, Key dir, uint64_t cookie,
                       nache_dirent_cb cb, void *ctx, bool *eof) {
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  *eof = false;
  upstream::Verifier verf =
      cookie == 0 ? upstream::Verifier(8, '\0') : CookieVerf(dir);
  for (;;) {
    Compound c;
    c.SetTag("readdir").Putfh(dfh).Readdir(cookie, verf, kReaddirDircount,
                                           kReaddirMaxcount,
                                           upstream::kAttrsObject, true);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (st) return st;
    const OpResult *r = rep.Find(Op::kReaddir);
    verf = r->verifier;
    SetCookieVerf(dir, verf);
    for (const auto &e : r->entries) {
      Key k;
      upstream::Attrs a = e.attrs;
      if (!e.fh.empty()) {
        k = handles_->Intern(e.fh, dir, e.name);
      } else {
        // The server could not give this entry's handle (e.g. a mount
        // point): look it up on its own.
        st = Lookup(cr, dir, e.name, &k, &a);
        if (st) continue;
      }
      nache_attrs ca;
      AttrsToC(a, &ca);
      if (!cb(ctx, e.name.c_str(), k, &ca, e.cookie)) return upstream::kNfs4Ok;
      cookie = e.cookie;
    }
    if (r->eof) {
      *eof = true;
      return upstream::kNfs4Ok;
    }
    if (r->entries.empty()) return upstream::kNfs4ErrServerfault;
  }
}

uint32_t Core::Create(const Creds &cr, Key dir, const std::string &name,
                      upstream::FileType type, const Attrs &attrs,
                      const std::string &link_text, Key *key, Attrs *out) {
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  Compound c;
  c.SetTag("create")
      .Putfh(dfh)
      .Create(type, name, attrs, link_text)
      .Getfh()
      .Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st) return st;
  *key = handles_->Intern(rep.Find(Op::kGetfh)->fh, dir, name);
  if (out) *out = rep.Find(Op::kGetattr)->attrs;
  return st;
}

uint32_t Core::Readlink(const Creds &cr, Key key, std::string *text) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("readlink").Putfh(fh).Readlink();
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok) *text = rep.Find(Op::kReadlink)->data;
  return st;
}

uint32_t Core::Link(const Creds &cr, Key key, Key dir,
                    const std::string &name) {
  Fh fh, dfh;
  uint32_t st = FhOf(key, &fh);
  if (st || (st = FhOf(dir, &dfh))) return st;
  Compound c;
  c.SetTag("link").Putfh(fh).Savefh().Putfh(dfh).Link(name);
  CompoundReply rep;
  return Run(c, cr, &rep);
}

uint32_t Core::Rename(const Creds &cr, Key olddir, const std::string &oldname,
                      Key newdir, const std::string &newname) {
  Fh ofh, nfh;
  uint32_t st = FhOf(olddir, &ofh);
  if (st || (st = FhOf(newdir, &nfh))) return st;
  // The trailing LOOKUP+GETFH names the moved object, so its recorded
  // (parent, name) follows it at no extra round trip.
  Compound c;
  c.SetTag("rename")
      .Putfh(ofh)
      .Savefh()
      .Putfh(nfh)
      .Rename(oldname, newname)
      .Lookup(newname)
      .Getfh();
  CompoundReply rep;
  st = Run(c, cr, &rep);
  uint32_t rst = OpStatus(rep, Op::kRename);
  if (rst == upstream::kNfs4Ok && rep.Find(Op::kGetfh))
    handles_->Intern(rep.Find(Op::kGetfh)->fh, newdir, newname);
  // A failure after the RENAME itself (the object moved on meanwhile) does
  // not undo the rename.
  return rep.Find(Op::kRename) ? rst : st;
}

uint32_t Core::Remove(const Creds &cr, Key dir, const std::string &name) {
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  Compound c;
  c.SetTag("remove").Putfh(dfh).Remove(name);
  CompoundReply rep;
  return Run(c, cr, &rep);
}

uint32_t Core::Statfs(const Creds &cr, Key key, Attrs *out) {
  return FetchAttrs(cr, key, upstream::kAttrsStatfs, "statfs", out);
}

// --- opens --------------------------------------------------------------

void Core::ResetIfStale(FileOpen *f) {
  uint64_t epoch = up_->epoch();
  if (f->owner->epoch != epoch) {
    // A new client id: the server knows none of our owners any more.
    f->owner->seqid = 0;
    f->owner->epoch = epoch;
  }
  if (f->open && f->epoch != epoch) {
    std::lock_guard<std::mutex> g(state_mu_);
    f->open = false;
    f->up_access = f->up_deny = 0;
    f->lock_owners.clear();
  }
}

uint32_t Core::ConfirmIfAsked(const Creds &cr, const OpResult &open,
                              const Fh &fh, OwnerSlot *owner, StateId *sid) {
  if (!(open.open_rflags & 2 /* OPEN4_RESULT_CONFIRM */))
    return upstream::kNfs4Ok;
  // A new open-owner must confirm its first OPEN (RFC 7530 16.18.5); the
  // owner pool makes this a once-per-owner round trip.
  Compound c;
  c.SetTag("open_confirm").Putfh(fh).OpenConfirm(*sid, owner->seqid);
  CompoundReply rep;
  uint32_t st = Run(c, cr, &rep);
  const OpResult *r = rep.Find(Op::kOpenConfirm);
  if (r) OpenTable::AdvanceSeqid(&owner->seqid, r->status);
  if (st) return st;
  *sid = r->stateid;
  return upstream::kNfs4Ok;
}

uint32_t Core::UpstreamOpenByHandle(const Creds &cr, FileOpen *f,
                                    uint32_t access, uint32_t deny,
                                    Attrs *attrs) {
  HandleRecord rec, prec;
  if (!handles_->Get(f->key, &rec)) return upstream::kNfs4ErrStale;
  if (rec.parent == kNoKey || !handles_->Get(rec.parent, &prec)) {
    // No known name to open by (NFSv4.0 has no open by filehandle): serve
    // this file statelessly (anonymous stateid).
    return upstream::kNfs4ErrNoent;
  }
  upstream::OpenArgs a;
  a.seqid = f->owner->seqid;
  a.share_access = access;
  a.share_deny = deny;
  a.owner = f->owner->name;
  a.name = rec.name;
  Compound c;
  c.SetTag("open").Putfh(prec.fh).Open(a).Getfh().Getattr(
      upstream::kAttrsObject);
  CompoundReply rep;
  uint32_t st = Run(c, cr, &rep);
  const OpResult *o = rep.Find(Op::kOpen);
  if (o) OpenTable::AdvanceSeqid(&f->owner->seqid, o->status);
  if (st) return o && o->status ? o->status : st;
  StateId sid = o->stateid;
  if ((st = ConfirmIfAsked(cr, *o, rec.fh, f->owner, &sid))) return st;
  const Fh &got = rep.Find(Op::kGetfh)->fh;
  {
    std::lock_guard<std::mutex> g(state_mu_);
    f->stateid = sid;
    f->open = true;
    f->epoch = up_->epoch();
    f->up_access |= access;
    f->up_deny |= deny;
  }
  if (got != rec.fh) {
    // The name now denotes another file (renamed or replaced outside):
    // give that open back and serve ours statelessly.
    UpstreamCloseLocked(cr, f);
    return upstream::kNfs4ErrNoent;
  }
  if (attrs) *attrs = rep.Find(Op::kGetattr)->attrs;
  return upstream::kNfs4Ok;
}

uint32_t Core::UpstreamUnlockAll(const Creds &cr, FileOpen *f,
                                 const Fh &fh) {
  for (auto &lo : f->lock_owners) {
    if (!lo.second.established) continue;
    Compound c;
    c.SetTag("locku_all")
        .Putfh(fh)
        .Locku(upstream::LockType::kWrite, lo.second.seqid, lo.second.stateid,
               0, UINT64_MAX);
    CompoundReply rep;
    Run(c, cr, &rep);
    if (const OpResult *r = rep.Find(Op::kLocku))
      OpenTable::AdvanceSeqid(&lo.second.seqid, r->status);
  }
  return upstream::kNfs4Ok;
}

uint32_t Core::UpstreamCloseLocked(const Creds &cr, FileOpen *f) {
  Fh fh;
  uint32_t st = FhOf(f->key, &fh);
  if (st) return st;
  for (int attempt = 0; attempt < 2; attempt++) {
    StateId sid;
    {
      std::lock_guard<std::mutex> g(state_mu_);
      sid = f->stateid;
    }
    Compound c;
    c.SetTag("close").Putfh(fh).Close(f->owner->seqid, sid);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    const OpResult *r = rep.Find(Op::kClose);
    if (r) OpenTable::AdvanceSeqid(&f->owner->seqid, r->status);
    if (st == upstream::kNfs4ErrLocksHeld && attempt == 0) {
      UpstreamUnlockAll(cr, f, fh);
      continue;
    }
    break;
  }
  // Whatever the outcome, the open is gone for us: a failed CLOSE leaves
  // state the server will expire with our lease (or already dropped).
  {
    std::lock_guard<std::mutex> g(state_mu_);
    f->open = false;
    f->up_access = f->up_deny = 0;
  }
  f->lock_owners.clear();
  if (st && st != upstream::kNfs4ErrDelay)
    NACHE_LOG(kLogInfo, "NACHE_UPSTREAM", "close of %llu: %s",
              (unsigned long long)f->key, nache_status_name(st));
  return st;
}

uint32_t Core::UpstreamDowngrade(const Creds &cr, FileOpen *f,
                                 uint32_t access, uint32_t deny) {
  Fh fh;
  uint32_t st = FhOf(f->key, &fh);
  if (st) return st;
  StateId sid;
  {
    std::lock_guard<std::mutex> g(state_mu_);
    sid = f->stateid;
  }
  Compound c;
  c.SetTag("open_downgrade")
      .Putfh(fh)
      .OpenDowngrade(sid, f->owner->seqid, access, deny);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  const OpResult *r = rep.Find(Op::kOpenDowngrade);
  if (r) OpenTable::AdvanceSeqid(&f->owner->seqid, r->status);
  if (st == upstream::kNfs4Ok) {
    std::lock_guard<std::mutex> g(state_mu_);
    f->stateid = r->stateid;
    f->up_access = access;
    f->up_deny = deny;
  }
  return st;
}

uint32_t Core::OpenFile(const Creds &cr, const OpenRequest &req,
                        NacheOpen **out, Key *key_out, Attrs *attrs,
                        bool *created) {
  *created = false;
  Key key = req.key;
  bool have_attrs = false;

  if (req.name != nullptr) {
    // Open by name (always the path of a create): OPEN in the directory.
    Fh dfh;
    uint32_t st = FhOf(req.key, &dfh);
    if (st) return st;
    OwnerSlot *owner = opens_->OwnerFor(req.key, req.name);
    std::unique_lock<std::mutex> og(owner->mu);
    uint64_t epoch = up_->epoch();
    if (owner->epoch != epoch) {
      owner->seqid = 0;
      owner->epoch = epoch;
    }
    upstream::OpenArgs a;
    a.seqid = owner->seqid;
    a.share_access = req.access;
    a.share_deny = req.deny;
    a.owner = owner->name;
    a.name = req.name;
    switch (req.mode) {
      case NACHE_OPEN_NOCREATE:
        a.create = upstream::OpenArgs::Create::kNoCreate;
        break;
      case NACHE_OPEN_UNCHECKED:
        a.create = upstream::OpenArgs::Create::kUnchecked;
        break;
      // Exclusive creates go upstream as GUARDED with the attributes: we
      // never retransmit to the upstream, and Ganesha's duplicate request
      // cache answers our clients' retransmissions.
      case NACHE_OPEN_GUARDED:
      case NACHE_OPEN_EXCLUSIVE:
        a.create = upstream::OpenArgs::Create::kGuarded;
        break;
    }
    a.create_attrs = req.create_attrs;
    Compound c;
    c.SetTag("open_name").Putfh(dfh).Open(a).Getfh();
    if (req.truncate) c.Setattr(StateId::Anonymous(), TruncateAttrs());
    c.Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    const OpResult *o = rep.Find(Op::kOpen);
    if (o) OpenTable::AdvanceSeqid(&owner->seqid, o->status);
    if (!o || o->status) return o ? o->status : st;
    if (!rep.Find(Op::kGetfh)) return st ? st : upstream::kNfs4ErrServerfault;
    StateId sid = o->stateid;
    if ((st = ConfirmIfAsked(cr, *o, rep.Find(Op::kGetfh)->fh, owner, &sid)))
      return st;
    key = handles_->Intern(rep.Find(Op::kGetfh)->fh, req.key, req.name);
    *created = req.mode != NACHE_OPEN_NOCREATE &&
               (req.mode != NACHE_OPEN_UNCHECKED ||
                o->cinfo.before != o->cinfo.after);
    if (const OpResult *g = rep.Find(Op::kGetattr)) {
      if (!g->status && attrs) {
        *attrs = g->attrs;
        have_attrs = true;
      }
    }
    std::shared_ptr<FileOpen> f = opens_->GetOrAdopt(key, owner);
    if (f->owner == owner) {
      ResetIfStale(f.get());
      {
        std::lock_guard<std::mutex> g(state_mu_);
        f->stateid = sid;  // same owner, same file: the server merged
        f->open = true;
        f->epoch = epoch;
        f->up_access |= req.access;
        f->up_deny |= req.deny;
      }
      f->Count(req.access, req.deny, +1);
      *out = new NacheOpen{f, req.access, req.deny};
      *key_out = key;
      return have_attrs ? upstream::kNfs4Ok : Getattr(cr, key, attrs);
    }
    // The file is pinned to another owner (it was already open by handle):
    // give this open back and join the file's own upstream open below.
    Compound cl;
    cl.SetTag("close_dup").Putfh(rep.Find(Op::kGetfh)->fh).Close(owner->seqid,
                                                                 sid);
    CompoundReply clrep;
    Run(cl, cr, &clrep);
    if (const OpResult *r = clrep.Find(Op::kClose))
      OpenTable::AdvanceSeqid(&owner->seqid, r->status);
    og.unlock();
    opens_->Unpin(f);
  }

  // Open by handle: join the file's upstream open, upgrading it if needed.
  std::shared_ptr<FileOpen> f = opens_->Get(key);
  std::unique_lock<std::mutex> fg(f->owner->mu);
  ResetIfStale(f.get());
  uint32_t want_access = f->WantAccess() | req.access;
  uint32_t want_deny = f->WantDeny() | req.deny;
  uint32_t st = upstream::kNfs4Ok;
  bool covered = f->open && (f->up_access & want_access) == want_access &&
                 (f->up_deny & want_deny) == want_deny;
  if (!covered) {
    st = UpstreamOpenByHandle(cr, f.get(), want_access, want_deny, attrs);
    if (st == upstream::kNfs4Ok) {
      have_attrs = attrs != nullptr;
    } else if (st == upstream::kNfs4ErrNoent) {
      st = upstream::kNfs4Ok;  // no usable name: stateless I/O
    } else {
      fg.unlock();
      opens_->Unpin(f);
      return st;
    }
  }
  f->Count(req.access, req.deny, +1);
  fg.unlock();
  *out = new NacheOpen{f, req.access, req.deny};
  *key_out = key;
  if (req.truncate) {
    st = Setattr(cr, key, *out, TruncateAttrs(), attrs);
    have_attrs = st == upstream::kNfs4Ok && attrs != nullptr;
    if (st) {
      CloseFile(*out);
      *out = nullptr;
      return st;
    }
  }
  // Close-to-open: an open always returns fresh attributes.
  if (!have_attrs && attrs) st = Getattr(cr, key, attrs);
  return st;
}

uint32_t Core::Reopen(const Creds &cr, NacheOpen *open, uint32_t access,
                      uint32_t deny) {
  FileOpen *f = open->file.get();
  std::lock_guard<std::mutex> fg(f->owner->mu);
  ResetIfStale(f);
  f->Count(open->access, open->deny, -1);
  f->Count(access, deny, +1);
  uint32_t want_access = f->WantAccess(), want_deny = f->WantDeny();
  uint32_t st = upstream::kNfs4Ok;
  if (!f->open || (f->up_access & want_access) != want_access ||
      (f->up_deny & want_deny) != want_deny) {
    st = UpstreamOpenByHandle(cr, f, want_access, want_deny, nullptr);
    if (st == upstream::kNfs4ErrNoent) st = upstream::kNfs4Ok;
  } else if (f->up_access != want_access || f->up_deny != want_deny) {
    st = UpstreamDowngrade(cr, f, want_access, want_deny);
  }
  if (st) {  // keep the old modes
    f->Count(access, deny, -1);
    f->Count(open->access, open->deny, +1);
    return st;
  }
  open->access = access;
  open->deny = deny;
  return st;
}

uint32_t Core::CloseFile(NacheOpen *open) {
  std::shared_ptr<FileOpen> f = open->file;
  Creds root;  // CLOSE and OPEN_DOWNGRADE check no permission
  uint32_t st = upstream::kNfs4Ok;
  {
    std::lock_guard<std::mutex> fg(f->owner->mu);
    ResetIfStale(f.get());
    f->Count(open->access, open->deny, -1);
    if (f->open) {
      if (f->n_local == 0) {
        st = UpstreamCloseLocked(root, f.get());
      } else if (f->up_access != f->WantAccess() ||
                 f->up_deny != f->WantDeny()) {
        st = UpstreamDowngrade(root, f.get(), f->WantAccess(),
                               f->WantDeny());
      }
    }
  }
  delete open;
  opens_->Unpin(f);
  // A failed CLOSE is not the client's problem: the state dies with the
  // lease. Only report transport trouble, so the client may retry.
  return st == upstream::kNfs4ErrDelay ? st : upstream::kNfs4Ok;
}

// --- data -----------------------------------------------------------------

StateId Core::IoStateid(NacheOpen *open) {
  if (open == nullptr) return StateId::Anonymous();
  std::lock_guard<std::mutex> g(state_mu_);
  FileOpen *f = open->file.get();
  if (!f->open || f->epoch != up_->epoch()) return StateId::Anonymous();
  return f->stateid;
}

uint32_t Core::Read(const Creds &cr, Key key, NacheOpen *open,
                    uint64_t offset, size_t len, char *buf, size_t *nread,
                    bool *eof) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  *nread = 0;
  *eof = false;
  StateId sid = IoStateid(open);
  while (*nread < len && !*eof) {
    uint32_t chunk = uint32_t(std::min<size_t>(len - *nread, max_read_));
    Compound c;
    c.SetTag("read").Putfh(fh).Read(sid, offset + *nread, chunk,
                                     buf + *nread);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (IsStateError(st)) {
      StateId fresh = IoStateid(open);
      sid = fresh == sid ? StateId::Anonymous() : fresh;
      continue;  // bounded: the anonymous stateid is never a state error
    }
    if (st) return *nread ? upstream::kNfs4Ok : st;
    const OpResult *r = rep.Find(Op::kRead);
    *nread += r->count;
    *eof = r->eof;
    if (r->count == 0) break;
  }
  return upstream::kNfs4Ok;
}

void Core::NoteWriteVerifier(const upstream::Verifier &v) {
  std::lock_guard<std::mutex> g(misc_mu_);
  write_verf_ = v;
}

void Core::WriteVerifier(uint8_t out[8]) {
  std::lock_guard<std::mutex> g(misc_mu_);
  memset(out, 0, 8);
  memcpy(out, write_verf_.data(), std::min<size_t>(8, write_verf_.size()));
}

uint32_t Core::Write(const Creds &cr, Key key, NacheOpen *open,
                     uint64_t offset, size_t len, const char *buf, int stable,
                     size_t *nwritten, int *committed) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  *nwritten = 0;
  *committed = 2;
  StateId sid = IoStateid(open);
  while (*nwritten < len) {
    uint32_t chunk =
        uint32_t(std::min<size_t>(len - *nwritten, max_write_));
    Compound c;
    c.SetTag("write").Putfh(fh).Write(sid, offset + *nwritten,
                                       upstream::StableHow(stable),
                                       buf + *nwritten, chunk);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (IsStateError(st)) {
      StateId fresh = IoStateid(open);
      sid = fresh == sid ? StateId::Anonymous() : fresh;
      continue;
    }
    if (st) return *nwritten ? upstream::kNfs4Ok : st;
    const OpResult *r = rep.Find(Op::kWrite);
    NoteWriteVerifier(r->verifier);
    *nwritten += r->count;
    *committed = std::min(*committed, int(r->committed));
    if (r->count == 0) return upstream::kNfs4ErrIo;
  }
  return upstream::kNfs4Ok;
}

uint32_t Core::Commit(const Creds &cr, Key key, uint64_t offset,
                      uint64_t len) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("commit").Putfh(fh).Commit(offset, uint32_t(std::min<uint64_t>(
                                                  len, UINT32_MAX)));
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok) NoteWriteVerifier(rep.Find(Op::kCommit)->verifier);
  return st;
}

// --- locks ----------------------------------------------------------------

uint32_t Core::Lock(const Creds &cr, Key key, NacheOpen *open,
                    const std::string &owner, nache_lock_op op, bool write,
                    uint64_t offset, uint64_t length, bool reclaim,
                    nache_lock_conflict *conflict) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  uint64_t up_len = length == 0 ? UINT64_MAX : length;
  upstream::LockType type =
      write ? upstream::LockType::kWrite : upstream::LockType::kRead;
  auto fill_conflict = [&](const CompoundReply &rep, Op kind) {
    const OpResult *r = rep.Find(kind);
    if (r && conflict) {
      conflict->offset = r->denied.offset;
      conflict->length =
          r->denied.length == UINT64_MAX ? 0 : r->denied.length;
      conflict->write = r->denied.type == upstream::LockType::kWrite ||
                        r->denied.type == upstream::LockType::kWriteWait;
    }
  };

  if (op == NACHE_LOCK_TEST) {
    std::string name;
    {
      std::lock_guard<std::mutex> g(misc_mu_);
      name = owner_prefix_ + "-t" + std::to_string(key);
    }
    Compound c;
    c.SetTag("lockt").Putfh(fh).Lockt(type, offset, up_len, 0, name);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (st == upstream::kNfs4ErrDenied) fill_conflict(rep, Op::kLockt);
    return st;
  }
  if (open == nullptr) return upstream::kNfs4ErrOpenmode;

  FileOpen *f = open->file.get();
  std::lock_guard<std::mutex> fg(f->owner->mu);
  ResetIfStale(f);
  if (!f->open) {
    // Locks hang off an upstream open; a file we could not open by name
    // upstream cannot carry them.
    return op == NACHE_UNLOCK ? upstream::kNfs4Ok
                              : upstream::kNfs4ErrLockNotsupp;
  }
  auto it = f->lock_owners.find(owner);
  if (it == f->lock_owners.end()) {
    if (op == NACHE_UNLOCK) return upstream::kNfs4Ok;
    LockOwnerState lo;
    {
      std::lock_guard<std::mutex> g(misc_mu_);
      lo.name = owner_prefix_ + "-l" + std::to_string(++lock_serial_);
    }
    it = f->lock_owners.emplace(owner, lo).first;
  }
  LockOwnerState &lo = it->second;

  if (op == NACHE_UNLOCK) {
    if (!lo.established) return upstream::kNfs4Ok;
    Compound c;
    c.SetTag("locku").Putfh(fh).Locku(type, lo.seqid, lo.stateid, offset,
                                      up_len);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (const OpResult *r = rep.Find(Op::kLocku)) {
      OpenTable::AdvanceSeqid(&lo.seqid, r->status);
      if (!r->status) lo.stateid = r->stateid;
    }
    return st;
  }

  upstream::LockArgs a;
  a.type = type;
  a.reclaim = reclaim;
  a.offset = offset;
  a.length = up_len;
  if (!lo.established) {
    a.new_lock_owner = true;
    a.open_seqid = f->owner->seqid;
    {
      std::lock_guard<std::mutex> g(state_mu_);
      a.open_stateid = f->stateid;
    }
    a.lock_seqid = 0;
    a.owner = lo.name;
  } else {
    a.lock_stateid = lo.stateid;
    a.lock_seqid = lo.seqid;
  }
  Compound c;
  c.SetTag("lock").Putfh(fh).Lock(a);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  const OpResult *r = rep.Find(Op::kLock);
  if (r) {
    if (a.new_lock_owner) {
      OpenTable::AdvanceSeqid(&f->owner->seqid, r->status);
      if (!r->status) {
        lo.established = true;
        lo.seqid = 1;
      }
    } else {
      OpenTable::AdvanceSeqid(&lo.seqid, r->status);
    }
    if (!r->status) lo.stateid = r->stateid;
  }
  if (st == upstream::kNfs4ErrDenied) fill_conflict(rep, Op::kLock);
  return st;
}

}  // namespace nache
