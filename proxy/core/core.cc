// Operations of the core: each local operation becomes the fewest upstream
// COMPOUNDs that answer it. See core.h.
#include "core/core.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>

#include "core/convert.h"
#include "core/core_hosts.h"
#include "core/create_verifier.h"
#include "core/own_return.h"
#include "rpc/gss_krb5.h"
#include "upstream/attrs.h"
#include "upstream/idmap.h"
#include "upstream/user_identity.h"
#include "util/log.h"
#include "util/round_trips.h"

namespace nache {

using upstream::Compound;
using upstream::CompoundReply;
using upstream::DelegationType;
using upstream::Fh;
using upstream::Op;
using upstream::OpResult;
using upstream::StateId;

namespace {

// A create by name (mode) that meets an existing object with attributes
// a: NFS4ERR_EXIST unless the mode opens what exists (UNCHECKED) or it is
// the client's own EXCLUSIVE retry (own_retry: its verifier in a's
// times); then ISDIR or SYMLINK for what is not a regular file; NFS4_OK:
// the file is opened by its handle.
uint32_t OpenOfExisting(nache_createmode mode, bool own_retry,
                        const upstream::Attrs &a) {
  if (mode == NACHE_OPEN_GUARDED ||
      (mode == NACHE_OPEN_EXCLUSIVE && !own_retry))
    return upstream::kNfs4ErrExist;
  if (a.type != upstream::FileType::kReg)
    return a.type == upstream::FileType::kDir ? upstream::kNfs4ErrIsdir
                                              : upstream::kNfs4ErrSymlink;
  return upstream::kNfs4Ok;
}

constexpr uint32_t kReaddirDircount = 32 * 1024;
// Below libnfs 4.0.0's 1 MiB incoming record limit, large enough that a
// directory of a few thousand entries is one round trip.
constexpr uint32_t kReaddirMaxcount = 512 * 1024;
// Open-owners upstream: each file in the open table (open, or its CLOSE
// lingering for Open_Linger) gets one of its own while any is free
// (OpenTable::OwnerFor). Eight clients untarring keep about 70 files in
// the table (stop 44, bench/README.md).
constexpr int kOpenOwners = 256;
// Directories larger than this are not kept as listings (a caller that
// stops early does not make us read further).
constexpr size_t kListingMaxEntries = 100000;
// Directories up to this size (in bytes, as the remote reports it: about
// a thousand entries on ext4) are listed whole on a lookup miss.
constexpr uint64_t kListingPrefetchMaxBytes = 64 << 10;

// Attributes that truncate a file (SETATTR size 0).
upstream::Attrs TruncateAttrs() {
  upstream::Attrs t;
  t.mask = upstream::kAttrSize;
  t.size = 0;
  return t;
}

}  // namespace

uint32_t OpStatus(const CompoundReply &rep, Op op) {
  const OpResult *r = rep.Find(op);
  if (r) return r->status;
  // Not answered: an earlier operation failed, or no reply came at all (a
  // lost or garbled reply leaves the status OK and no results) and the
  // operation may or may not have been done.
  return rep.status ? rep.status : upstream::kNfs4ErrServerfault;
}

bool IsStateError(uint32_t st) {
  return st == upstream::kNfs4ErrBadStateid ||
         st == upstream::kNfs4ErrOldStateid ||
         st == upstream::kNfs4ErrStaleStateid ||
         st == upstream::kNfs4ErrExpired ||
         st == upstream::kNfs4ErrAdminRevoked;
}

Core::~Core() {
  // First, so that no scrape samples a half-destroyed core, and no
  // nachectl reads or flushes one (this waits for one under way).
  if (metrics_) metrics_->ClearSampler(sampler_token_);
  admin_stopping_ = true;  // a pin's walk under way ends
  if (admin_token_) admin::Registry::Global().Remove(admin_token_);
  if (warmer_) warmer_->Stop();
  // No more recalls; those queued are still answered with a DELEGRETURN.
  if (delegations_) delegations_->StopCallbacks();
  if (reclaim_) reclaim_->Stop();
  if (lingering_) {
    lingering_->Stop();
    // The remote sees a CLOSE for every OPEN, also at shutdown (when it is
    // reachable; otherwise the state dies with our lease).
    if (up_ && up_->state() == upstream::UpstreamState::kReady)
      lingering_->CloseAll();
  }
  unstable_writes_.reset();  // sends what clients were told is queued
  if (flusher_) {
    // Durable here anyway; the remote gets what it can in a few seconds.
    if (up_ && up_->state() == upstream::UpstreamState::kReady &&
        !flusher_->FlushAll(std::chrono::steady_clock::now() +
                            std::chrono::seconds(10)))
      NACHE_LOG(kLogEvent, "NACHE_WRITEBACK",
                "%llu dirty bytes left to flush at the next start",
                (unsigned long long)cache_->dirty_bytes());
    flusher_->Stop();
  }
  if (up_) up_->Shutdown();
  reader_.reset();  // joins readahead threads (their calls fail fast now)
}

std::unique_ptr<Core> Core::Open(const CoreConfig &cfg, std::string *err) {
  std::unique_ptr<Core> c(new Core());
  c->cfg_ = cfg;
  c->max_read_ = cfg.max_io_size;
  c->max_write_ = cfg.max_io_size;
  metrics::Metrics *m = cfg.metrics ? cfg.metrics : &metrics::Metrics::Global();
  c->metrics_ = m->ForExport(cfg.export_id);
  StoreOptions so;
  so.upstream_server = cfg.upstream_server;
  so.upstream_port = cfg.upstream_port;
  so.upstream_path = cfg.upstream_path;
  so.reset_if_corrupt = cfg.cache_reset_if_corrupt;
  so.reset_on_upstream_change = cfg.cache_reset_on_upstream_change;
  so.metrics = c->metrics_;
  c->store_ = Store::Open(cfg.cache_dir, so, err);
  if (!c->store_) return nullptr;
  c->handles_.reset(new HandleMap(c->store_.get()));
  c->cache_.reset(new Cache(c->store_.get(), cfg.cache, c->metrics_));
  c->writeback_host_.reset(new WriteBackHost(c.get()));
  c->writeback_.reset(new WriteBack(c->store_.get(), c->writeback_host_.get()));

  // Open-owner names must not collide with a previous run's, whose seqids
  // the server may still remember until our new client id replaces it.
  std::random_device rd;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "nache-%u-%08x", cfg.export_id, rd());
  c->owner_prefix_ = prefix;
  Core *core = c.get();
  c->opens_.reset(new OpenTable(
      kOpenOwners, c->owner_prefix_,
      [core] { return core->up_ ? core->up_->epoch() : 0; },
      [core] { return core->up_ && core->up_->minor_version() == 0; }));
  // The root's key exists before the remote is reachable, so the export
  // can be served (with retryable errors) while the upstream is down.
  c->root_key_ = c->handles_->NamedKey("root:" + cfg.upstream_server + ":" +
                                       std::to_string(cfg.upstream_port) + ":" +
                                       cfg.upstream_path);

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
  // Under Kerberos the server binds the id to the principal that made it
  // (RFC 8881 18.35.5): an id made with AUTH_SYS before Upstream_Sec
  // changed would refuse our EXCHANGE_ID (NFS4ERR_CLID_INUSE) until its
  // lease ends. So the security is part of the id.
  snprintf(id, sizeof(id), "nache/%s/%016llx/export-%u%s", host,
           (unsigned long long)c->store_->incarnation(), cfg.export_id,
           cfg.gss ? "/krb5" : "");
  uo.client_id = id;
  uo.auth_machine = host;
  uo.owners = std::make_shared<upstream::OwnerCodec>(
      cfg.owner_format, upstream::GlobalIdMapper());
  // The callback service listens before SETCLIENTID advertises it (the
  // server probes it right after the client id is confirmed).
  if (!c->StartCallbackService(&uo.callback_uaddr, err)) return nullptr;
  // On the upstream's state thread, before held calls go out: every
  // delegation is gone; the state of the previous client id is handed to
  // the reclaim thread.
  uo.on_new_clientid = [core](uint64_t epoch) {
    core->reclaim_->OnNewClientId(epoch, core->delegations_->DropAll());
  };
  uo.minor_version = cfg.minor_version;
  if (cfg.gss) {
    rpc::KrbOptions ko;
    ko.keytab = cfg.gss_keytab;
    ko.client_principal = cfg.gss_client_principal;
    ko.service = cfg.gss_principal.empty() ? "nfs@" + cfg.upstream_server
                                           : cfg.gss_principal;
    ko.ccache_name = "nache-export-" + std::to_string(cfg.export_id);
    std::string why, deferred;
    std::shared_ptr<rpc::KrbCredentials> creds =
        rpc::KrbCredentials::Acquire(ko, &why, &deferred);
    if (!creds) {
      *err = "Upstream_Keytab: " + why;
      return nullptr;
    }
    if (!deferred.empty())
      NACHE_LOG(kLogWarn, "NACHE_UPSTREAM",
                "the KDC is out of reach (%s): the export starts anyway, "
                "as %s; its upstream calls fail retryably until a ticket "
                "is had, tried at each connection attempt",
                deferred.c_str(), creds->principal().c_str());
    uo.gss_initiator = [creds] { return creds->NewInitiator(); };
    uo.gss_service = cfg.gss_service;
    NACHE_LOG(kLogEvent, "NACHE_UPSTREAM",
              "upstream calls under RPCSEC_GSS (%s) to %s as %s",
              rpc::GssServiceName(cfg.gss_service), ko.service.c_str(),
              cfg.gss_per_user ? "each caller's principal (root's as ours)"
                               : "our principal");
    if (cfg.gss_per_user) {
      // The same names as owners get: the LAN side's id mapping.
      auto users = std::make_shared<upstream::UserIdentities>(
          creds,
          [](uint32_t uid, std::string *name) {
            return upstream::GlobalIdMapper()->IdToName(upstream::IdKind::kUser,
                                                        uid, name);
          },
          [&] {
            upstream::UserIdentities::Options o;
            // A worker waits for a user's credentials no longer than for
            // a reply; then NFS4ERR_DELAY, and the client retries.
            o.wait = std::chrono::milliseconds(cfg.call_timeout_ms);
            metrics::ExportMetrics *m = c->metrics_;
            o.on_wait_expired = [m] { m->CountIdentityWaitExpired(); };
            return o;
          }());
      uo.user_identity = [users](const Creds &cr) { return users->Get(cr); };
    }
  }
  if (c->delegations_->back_channel()) {
    callback::BackChannel *bc = c->delegations_->back_channel();
    uo.back_channel = [bc](const rpc::PeerCall &call, rpc::XdrIn *args,
                           std::string *results) {
      return bc->Serve(call, args, results);
    };
    // Each new session starts the back channel's slots afresh; calls
    // naming another session are refused (BADSESSION).
    uo.on_new_session = [bc](const std::array<uint8_t, 16> &session,
                             uint32_t slots) {
      bc->SetSession(session, slots);
    };
  }
  c->up_ = cfg.make_upstream ? cfg.make_upstream(uo)
                             : upstream::Upstream::Create(uo);
  if (!c->up_) {
    *err = "cannot start the upstream client";
    return nullptr;
  }
  if (c->delegations_->CallbacksPossible()) c->delegations_->StartRecalls();
  c->reclaim_->Start();
  uint32_t ra_blocks = cfg.readahead_max / cfg.cache.block_size;
  c->reader_.reset(new BlockReader(
      c->cache_.get(),
      [core](Key key, uint64_t idx, const Creds &cr, const StateId &sid,
             std::string *data) {
        return core->FetchBlock(key, idx, cr, sid, data);
      },
      ra_blocks, ra_blocks > 0 ? int(std::min<uint32_t>(ra_blocks, 8)) : 0));
  c->lingering_host_.reset(new LingeringHost(core));
  c->lingering_.reset(
      new LingeringOpens(std::chrono::milliseconds(cfg.open_linger_ms),
                         c->opens_.get(), c->lingering_host_.get()));
  c->lingering_->Start();
  // Our own write verifier: a restart (which loses queued writes) changes
  // it, so clients resend what they had not seen committed.
  for (auto &b : c->boot_verf_) b = uint8_t(rd());
  if (cfg.write_behind_max > 0) {
    // The most WRITEs in flight (UnstableWrites keeps about 2 MiB's worth):
    // 32 of the 32 KiB a small knfsd takes, twice a 50 Mbit/s, 80 ms link's
    // bandwidth-delay product, so a server's pause does not idle the link.
    constexpr int kWriteBehindMaxInFlight = 32;
    c->unstable_writes_.reset(new UnstableWrites(
        [core](Key key, const Creds &cr, const StateId &sid, uint64_t off,
               const std::string &data, upstream::StableHow stable,
               upstream::Verifier *verf) {
          size_t n = 0;
          upstream::StableHow committed;
          uint32_t st = core->WriteUpstream(
              cr, key, [sid] { return sid; }, off, data.size(), data.data(),
              stable, &n, &committed, verf);
          if (st == upstream::kNfs4Ok && n < data.size())
            st = upstream::kNfs4ErrIo;
          return st;
        },
        [core](Key key, const Creds &cr, upstream::Verifier *verf) {
          return core->CommitUpstream(cr, key, verf);
        },
        // As known now: Write learns it before it queues anything.
        [core] { return size_t(core->max_write_.load()); },
        cfg.write_behind_max, kWriteBehindMaxInFlight));
  }
  if (cfg.write_back && cfg.single_writer) {
    // Before the flusher starts: it may need the log at once.
    // (Its unsent removes' directories are marked dirty again.)
    c->namespace_.reset(new NamespaceWriteBack(
        c->store_.get(), c->cache_.get(), c->handles_.get(),
        c->writeback_.get(), c->metrics_, c->writeback_host_.get()));
  }
  if (cfg.write_back) {
    c->conflicts_.reset(new Conflicts(
        c->cache_.get(), c->handles_.get(), c->writeback_.get(), c->metrics_,
        c->writeback_host_.get(), cfg.single_writer));
    FlushSender::Options fso;
    fso.owner_prefix = c->owner_prefix_;
    fso.flush_age_ms = cfg.flush_age_ms;
    c->flush_sender_.reset(new FlushSender(
        c->cache_.get(), c->writeback_.get(), c->namespace_.get(),
        c->conflicts_.get(), c->metrics_, c->writeback_host_.get(), fso));
    FlusherOptions fo;
    fo.age = std::chrono::milliseconds(cfg.flush_age_ms);
    fo.dirty_max = cfg.dirty_max;
    fo.metrics = c->metrics_;
    c->flusher_ = c->flush_sender_->NewFlusher(fo);
    NACHE_LOG(kLogEvent, "NACHE_WRITEBACK",
              "write-back on for %s; flush after %u s or beyond %llu dirty "
              "bytes",
              cfg.single_writer ? "every file (single writer)"
                                : "files under our write delegations",
              cfg.flush_age_ms / 1000, (unsigned long long)cfg.dirty_max);
  }
  c->sampler_token_ = c->metrics_->SetSampler([core] {
    metrics::ExportGauges g;
    // Connected and the lease renewed in time (a WAN cut that keeps the
    // TCP connection up counts as disconnected once the lease is over).
    g.connected = !core->Disconnected();
    g.clientid_epoch = core->up_->epoch();
    g.open_files = core->opens_->size();
    g.callback_path_up = core->CallbackPathUp();
    g.delegations_read = core->delegations_->Count(DelegationType::kRead);
    g.delegations_write = core->delegations_->Count(DelegationType::kWrite);
    g.local_delegations = core->LocalDelegations();
    g.dirty_bytes = core->cache_->dirty_bytes();
    g.flush_lag_s = core->cache_->flush_lag().count() / 1000.0;
    g.cache_bytes = core->cache_->bytes();
    g.cache_blocks = core->cache_->blocks();
    g.lease_time_s = core->up_->lease_time();
    g.lease_age_s = core->LeaseAge();
    g.dirty_max = core->flusher_ ? core->cfg_.dirty_max : 0;
    return g;
  });
  c->warmer_.reset(new Warmer(core));
  c->RegisterAdmin();
  return c;
}

bool Core::KeyKnown(Key key) const {
  HandleRecord r;
  return handles_->Get(key, &r);
}

bool Core::Disconnected() const {
  if (!up_ || up_->state() != upstream::UpstreamState::kReady) return true;
  return LeaseLapsed();
}

bool Core::LeaseLapsed() const {
  auto until = up_->lease_valid_until();
  return until != std::chrono::steady_clock::time_point() &&
         std::chrono::steady_clock::now() >= until;
}

uint32_t Core::MaxOps() const {
  if (uint32_t n = up_->max_operations()) return n;
  return up_->minor_version() >= 1 ? 15 : 33;
}

uint32_t Core::Run(Compound &c, const Creds &cr, CompoundReply *rep) {
  // Serving stale while disconnected: what the cache cannot answer fails
  // at once (retryable) instead of after a call timeout; the upstream
  // client's lease renewal notices when the remote is back.
  if (ServingStale()) {
    metrics_->ObserveCompound(c, upstream::CallStatus::kDisconnected, *rep,
                              std::chrono::steady_clock::duration(0));
    return upstream::kNfs4ErrDelay;
  }
  const uint64_t epoch = up_->epoch();  // of the state c names
  // Seqids of this client id given up: until the new one is confirmed, an
  // owner's next request could be taken for the lost one's retransmission.
  if (gave_up_epoch_.load() == epoch && SeqidBearing(c)) {
    metrics_->ObserveCompound(c, upstream::CallStatus::kDisconnected, *rep,
                              std::chrono::steady_clock::duration(0));
    return upstream::kNfs4ErrDelay;
  }
  auto t0 = std::chrono::steady_clock::now();
  NoteUpstreamWait();  // this operation cost a round trip
  upstream::CallStatus s = up_->Call(c, cr, rep);
  const auto took = std::chrono::steady_clock::now() - t0;
  NoteUpstreamWaitTime(took);
  metrics_->ObserveCompound(c, s, *rep, took);
  if (s != upstream::CallStatus::kOk && SeqidBearing(c))
    s = ResendSeqidBearing(c, cr, rep, s, epoch);
  if (s != upstream::CallStatus::kOk) {
    NACHE_LOG(kLogInfo, "NACHE_UPSTREAM", "%s: upstream %s, client retries",
              c.tag().c_str(), upstream::CallStatusName(s));
    NoteUpstreamError(c.tag() + ": upstream " + upstream::CallStatusName(s));
    return upstream::kNfs4ErrDelay;
  }
  if (rep->status != upstream::kNfs4Ok) {
    int i = rep->FailedIndex();
    NACHE_LOG(kLogDebug, "NACHE_UPSTREAM", "%s: %s failed: %s", c.tag().c_str(),
              i >= 0 ? upstream::OpName(rep->results[i].op) : "?",
              nache_status_name(rep->status));
  }
  return rep->status;
}

bool Core::SeqidBearing(const Compound &c) const {
  if (up_->minor_version() != 0) return false;  // sessions sequence calls
  for (size_t i = 0; i < c.size(); i++) {
    switch (c.op(i)) {
      case Op::kOpen:
        // Seqid 0: a new owner's first OPEN. The server does not sequence
        // an owner until its OPEN_CONFIRM: a retransmission is executed
        // anew (a GUARDED create then finds its own file), and a caller's
        // retry is no different from a resend.
        if (c.open_seqid(i) == 0) break;
        return true;
      case Op::kOpenConfirm:
      case Op::kOpenDowngrade:
      case Op::kClose:
      case Op::kLock:
      case Op::kLocku: return true;
      default: break;
    }
  }
  return false;
}

upstream::CallStatus Core::ResendSeqidBearing(Compound &c, const Creds &cr,
                                              CompoundReply *rep,
                                              upstream::CallStatus s,
                                              uint64_t epoch) {
  // The request may have been executed: its owner's seqid at the server is
  // unknown. Anything else sent by the owner now would be wrong: the same
  // seqid is taken for a retransmission of this request and answered from
  // the server's replay cache (another file's open), the next one is
  // refused while the server has not seen this one. Only this request,
  // unchanged, is right: the server executes it, or answers it again from
  // its replay cache. So it is resent (the caller holds the owner's lock)
  // while the connection comes back, for up to a lease: a longer outage
  // most likely cost the client id anyway (a new one resets every owner).
  // If it cannot be settled, the client id and all its state are given up
  // (RestartClient), which makes every seqid known again. Never under a
  // client id other than the one c was sent under (epoch): the server
  // forgot that one's owners, and would answer the resend STALE_CLIENTID,
  // which would cost the new id too.
  const auto budget = std::chrono::seconds(
      std::clamp<uint32_t>(up_->lease_time(), 1, kMaxSeqidResendSeconds));
  const auto deadline = std::chrono::steady_clock::now() + budget;
  auto pause = std::chrono::milliseconds(50);
  for (int n = 1; s != upstream::CallStatus::kOk; n++) {
    if (s == upstream::CallStatus::kShutdown ||
        s == upstream::CallStatus::kEncodeError)
      return s;
    if (up_->epoch() != epoch) return s;  // the server forgot the owner
    // Given up already (another request of this client id): the new id
    // settles this one too. Each waiting its own lease would hold its
    // owner's lock, and the opens waiting for it, a lease each.
    if (gave_up_epoch_.load() == epoch) return s;
    auto now = std::chrono::steady_clock::now();
    // Our lease lapsed (a WAN cut): the remote drops our state, or keeps
    // it only until someone conflicts; waiting longer settles nothing.
    if (now >= deadline || LeaseLapsed()) break;
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (!up_->WaitReady(int(left.count()))) continue;  // (the deadline ends it)
    if (up_->epoch() != epoch) return s;
    if (n > 1) {
      // A connection that is up but drops the request again: do not spin.
      std::this_thread::sleep_for(std::min(pause, left));
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
    NACHE_LOG(kLogInfo, "NACHE_UPSTREAM",
              "%s: upstream %s, resending it unchanged (seqid)",
              c.tag().c_str(), upstream::CallStatusName(s));
    *rep = CompoundReply();
    rep->sends = n + 1;
    auto t0 = std::chrono::steady_clock::now();
    s = up_->Call(c, cr, rep);
    metrics_->ObserveCompound(c, s, *rep,
                              std::chrono::steady_clock::now() - t0);
    metrics_->CountSeqidResend(s == upstream::CallStatus::kOk ? "answered"
                                                              : "unanswered");
  }
  if (s == upstream::CallStatus::kOk) return s;
  uint64_t not_yet = kNoEpoch;
  if (up_->epoch() == epoch &&
      gave_up_epoch_.compare_exchange_strong(not_yet, epoch)) {
    metrics_->CountSeqidResend("gave_up");
    up_->RestartClient(
        "an NFSv4.0 open or lock request stayed unanswered; "
        "its owner's seqid is unknown");
  }
  return s;
}

uint32_t Core::FhOf(Key key, Fh *fh) {
  // Removed here (the remote is told later): gone for our clients.
  if (LocalNamespace() && namespace_->names().IsRemovedKey(key))
    return upstream::kNfs4ErrStale;
  return FhOfAny(key, fh);
}

uint32_t Core::FhOfAny(Key key, Fh *fh) {
  HandleRecord r;
  if (!handles_->Get(key, &r)) return upstream::kNfs4ErrStale;
  if (r.fh.empty()) {
    if (key == root_key_) return ResolveRoot(fh);
    // Created locally: the remote gets it (and what it depends on) first.
    if (!NotAtRemote(key)) return upstream::kNfs4ErrStale;
    uint32_t st = namespace_->CreateRemotely(key);
    if (st) return st;
    if (!handles_->Get(key, &r) || r.fh.empty())
      return upstream::kNfs4ErrStale;  // removed meanwhile
  }
  *fh = r.fh;
  return upstream::kNfs4Ok;
}

void Core::ForgetGone(Key key) {
  if (key == kNoKey || key == root_key_) return;
  if (LocalNamespace()) {
    LocalNames::Entry e;
    if (namespace_->names().Get(key, &e) ||
        namespace_->names().IsRemovedKey(key) ||
        namespace_->names().LastChildSeq(key) != 0 ||
        !namespace_->names().RemovedIn(key).empty())
      return;  // the log still names it
  }
  // An open of ours keeps a removed file alive at the remote, and its
  // state must be given back by handle.
  if (opens_->Contains(key)) return;
  if (delegations_->HasLocal(key)) return;
  if (!cache_->ForgetGone(key)) return;  // dirty or in use
  handles_->Remove(key);
}

uint32_t Core::ResolveRoot(Fh *fh) {
  // Callers that come while another resolves it take that outcome.
  uint32_t st = root_attempt_.Run([this] { return WalkToRoot(); });
  if (st) return st;
  HandleRecord r;
  if (!handles_->Get(root_key_, &r) || r.fh.empty())
    return upstream::kNfs4ErrDelay;
  *fh = r.fh;
  return upstream::kNfs4Ok;
}

uint32_t Core::WalkToRoot() {
  HandleRecord r;
  if (handles_->Get(root_key_, &r) && !r.fh.empty())
    return upstream::kNfs4Ok;  // another thread resolved it meanwhile
  std::vector<std::string> names;
  const std::string &p = cfg_.upstream_path;
  for (size_t i = 0; i < p.size();) {
    size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    if (j > i) names.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  // The path's LOOKUPs in as few COMPOUNDs as the session takes (a deep
  // path against a server of short COMPOUNDs is walked in steps).
  const size_t per = std::max<size_t>(MaxOps(), 4) - 3;
  Fh at;
  CompoundReply rep;
  size_t next = 0;
  do {
    Compound c;
    c.SetTag("root");
    if (at.empty())
      c.Putrootfh();
    else
      c.Putfh(at);
    const size_t end = std::min(names.size(), next + per);
    for (; next < end; next++) c.Lookup(names[next]);
    c.Getfh();
    if (next == names.size())
      c.Getattr(upstream::kAttrMaxRead | upstream::kAttrMaxWrite);
    rep = CompoundReply();
    uint32_t st = Run(c, Creds(), &rep);
    if (st) return st;
    at = rep.Find(Op::kGetfh)->fh;
  } while (next < names.size());
  handles_->SetFh(root_key_, at);
  ApplyIoLimits(rep.Find(Op::kGetattr)->attrs);
  return upstream::kNfs4Ok;
}

void Core::LearnIoLimits() {
  if (io_limits_known_.load()) return;
  // The root's handle is known from an earlier run (else resolving it
  // learns the limits): ask for them once (callers that come meanwhile
  // take that outcome).
  io_limits_attempt_.Run([this]() -> uint32_t {
    Fh fh;
    if (io_limits_known_.load()) return upstream::kNfs4Ok;
    if (uint32_t st = FhOf(root_key_, &fh)) return st;
    if (io_limits_known_.load()) return upstream::kNfs4Ok;
    Compound c;
    c.SetTag("io_limits")
        .Putfh(fh)
        .Getattr(upstream::kAttrMaxRead | upstream::kAttrMaxWrite);
    CompoundReply rep;
    uint32_t st = Run(c, Creds(), &rep);
    if (st == upstream::kNfs4Ok) ApplyIoLimits(rep.Find(Op::kGetattr)->attrs);
    return st;
  });
}

void Core::ApplyIoLimits(const Attrs &a) {
  // A READ or WRITE above the server's limit is refused (knfsd even drops
  // the connection: "RPC fragment too large"), so never send one.
  uint32_t rd = cfg_.max_io_size, wr = cfg_.max_io_size;
  if ((a.mask & upstream::kAttrMaxRead) && a.maxread >= 4096 && a.maxread < rd)
    rd = uint32_t(a.maxread);
  if ((a.mask & upstream::kAttrMaxWrite) && a.maxwrite >= 4096 &&
      a.maxwrite < wr)
    wr = uint32_t(a.maxwrite);
  max_read_ = rd;
  max_write_ = wr;
  io_limits_known_ = true;
  NACHE_LOG(kLogEvent, "NACHE_HANDLES",
            "export root %s: I/O sizes read %u write %u",
            cfg_.upstream_path.c_str(), rd, wr);
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
    a.mask = upstream::kAttrType | upstream::kAttrMode | upstream::kAttrNlink |
             upstream::kAttrFileid;
    a.type = upstream::FileType::kDir;
    a.mode = 0755;
    a.nlink = 2;
    a.fileid = root_key_;
    st = upstream::kNfs4Ok;
  }
  if (st == upstream::kNfs4Ok && attrs) *attrs = a;
  return st;
}

namespace {
// The remote's last "no such name" heard by this thread (Core::Lookup).
// Ganesha looks a name up twice within one request before an UNCHECKED
// create (nfs4_op_open's lookup, then MDCACHE's own): the second is
// answered with the first's answer when it follows at once, the
// directory unchanged here meanwhile. Used once.
struct RecentAbsence {
  Key dir = kNoKey;
  std::string name;
  bool have_change = false;
  uint64_t dir_change = 0;
  std::chrono::steady_clock::time_point at;
};
thread_local RecentAbsence tl_absence;
// Far below a WAN round trip: nothing made at the remote meanwhile could
// have been heard of here anyway.
constexpr std::chrono::milliseconds kAbsenceReuse{50};
}  // namespace

bool Core::TakeRecentAbsence(Key dir, const std::string &name) {
  if (tl_absence.dir == kNoKey) return false;  // (most lookups: no lock)
  RecentAbsence a = std::move(tl_absence);
  tl_absence = RecentAbsence();
  if (a.dir != dir || a.name != name ||
      std::chrono::steady_clock::now() - a.at >= kAbsenceReuse)
    return false;
  Attrs da;
  const bool have = cache_->KnownAttrs(dir, &da);
  return have == a.have_change && (!have || da.change == a.dir_change);
}

void Core::NoteRecentAbsence(Key dir, const std::string &name) {
  Attrs da;
  tl_absence.dir = dir;
  tl_absence.name = name;
  tl_absence.have_change = cache_->KnownAttrs(dir, &da);
  tl_absence.dir_change = da.change;
  tl_absence.at = std::chrono::steady_clock::now();
}

void Core::ForgetRecentAbsence() { tl_absence = RecentAbsence(); }

uint32_t Core::Lookup(const Creds &cr, Key dir, const std::string &name,
                      Key *key, Attrs *attrs) {
  if (name == "..") return LookupParent(cr, dir, key, attrs);
  if (name != "." && LocalNamespace()) {
    // Names created here and not yet at the remote; in a directory that
    // is not at the remote either, nothing else.
    LocalNames::Entry e;
    Attrs a;
    if (namespace_->names().Find(dir, name, &e) &&
        (e.moved ? Getattr(cr, e.key, &a) == upstream::kNfs4Ok
                 : cache_->KnownAttrs(e.key, &a))) {
      *key = e.key;
      if (attrs) *attrs = a;
      return upstream::kNfs4Ok;
    }
    // Not at the remote, or removed here and not told yet.
    if (namespace_->names().IsLocal(dir) ||
        namespace_->names().FindRemoved(dir, name, nullptr))
      return upstream::kNfs4ErrNoent;
  }
  if (name != ".") {
    // Read the whole listing (with every entry's handle and attributes)
    // instead of asking name by name: one round trip answers the lookups
    // of a whole directory while its attributes are fresh, which over a
    // WAN is most of a cold start (Ganesha looks names up one at a time
    // per directory). With the namespace written back, creates keep the
    // listing current (the directory stays ours while it has unflushed
    // changes).
    if (!cache_->Listing(dir) && WorthListing(dir)) PrefetchListing(cr, dir);
    // A fresh listing of dir answers the lookup of a name it has. Not one
    // it lacks: a file just created at the remote must be found at once,
    // as by a direct mount that never looked the name up.
    Key k = ListedKey(dir, name);
    Attrs a;
    // (Not a file known to be unlinked: replaced at the remote since.)
    if (k != kNoKey && cache_->FreshAttrs(k, &a) && !Unlinked(a)) {
      *key = k;
      if (attrs) *attrs = a;
      return upstream::kNfs4Ok;
    }
    // On a single-writer export nothing but us adds names, so a fresh
    // listing that lacks the name answers too (a create's lookup first).
    if (k == kNoKey && cfg_.single_writer && cache_->Listing(dir))
      return upstream::kNfs4ErrNoent;
  }
  if (name != "." && TakeRecentAbsence(dir, name))
    return upstream::kNfs4ErrNoent;
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  Compound c;
  c.SetTag("lookup").Putfh(dfh);
  if (name != ".") c.Lookup(name);
  c.Getfh().Getattr(upstream::kAttrsObject);
  const size_t at = AskAccess(c);
  CompoundReply rep;
  st = UnlessOnlyAccessFailed(at, Run(c, cr, &rep), rep);
  if (st == upstream::kNfs4ErrNoent && OpStatus(rep, Op::kLookup) == st)
    NoteRecentAbsence(dir, name);
  if (st) return st;
  *key =
      name == "." ? dir : handles_->Intern(rep.Find(Op::kGetfh)->fh, dir, name);
  cache_->Validated(*key, rep.Find(Op::kGetattr)->attrs);
  NoteAccessAnswer(*key, cr, rep);
  if (attrs) *attrs = rep.Find(Op::kGetattr)->attrs;
  return st;
}

uint32_t Core::LookupParent(const Creds &cr, Key dir, Key *key, Attrs *attrs) {
  LocalNames::Entry e;
  if (LocalNamespace() && namespace_->names().Get(dir, &e)) {
    *key = e.dir;
    return Getattr(cr, e.dir, attrs);
  }
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
  cache_->Validated(*key, rep.Find(Op::kGetattr)->attrs);
  if (attrs) *attrs = rep.Find(Op::kGetattr)->attrs;
  return st;
}

uint32_t Core::Getattr(const Creds &cr, Key key, Attrs *attrs) {
  Attrs a;
  if (cache_->FreshAttrs(key, &a)) {
    if (attrs) *attrs = a;
    return upstream::kNfs4Ok;
  }
  return Revalidate(cr, key, attrs);
}

uint32_t Core::Revalidate(const Creds &cr, Key key, Attrs *out) {
  return FetchAttrs(cr, key, upstream::kAttrsObject, "getattr", out);
}

uint32_t Core::FetchAttrs(const Creds &cr, Key key, uint64_t mask,
                          const char *tag, Attrs *out) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  const bool object = mask == upstream::kAttrsObject;
  Compound c;
  c.SetTag(tag).Putfh(fh).Getattr(mask);
  // The caller's rights to the object come along: no round trip of their
  // own when its access is checked next.
  const size_t at = object ? AskAccess(c) : c.size();
  CompoundReply rep;
  st = UnlessOnlyAccessFailed(at, Run(c, cr, &rep), rep);
  // The remote has no such object any more: nor do we (handle_map.h).
  if (st == upstream::kNfs4ErrStale && rep.FailedIndex() == 0) ForgetGone(key);
  if (st) return st;
  const Attrs &a = rep.Find(Op::kGetattr)->attrs;
  if (object) {
    cache_->Validated(key, a);
    NoteAccessAnswer(key, cr, rep);
  }
  if (out) *out = a;
  return st;
}

uint32_t Core::Setattr(const Creds &cr, Key key, NacheOpen *open,
                       const Attrs &set_in, Attrs *out) {
  Attrs known;
  Attrs set = set_in;
  bool known_ok = cache_->KnownAttrs(key, &known);
  // A size it already has changes nothing (an O_TRUNC open of a file
  // created empty here).
  if (known_ok && (set.mask & upstream::kAttrSize) && cache_->IsDirty(key) &&
      set.size == known.size)
    set.mask &= ~upstream::kAttrSize;
  if (known_ok && set.mask == 0) {
    if (out) *out = known;
    return upstream::kNfs4Ok;
  }
  if (WriteBackFor(key) && !(set.mask & upstream::kAttrSize) && known_ok &&
      (known.type == upstream::FileType::kReg ||
       (LocalNamespace() && (known.type == upstream::FileType::kDir ||
                             known.type == upstream::FileType::kLnk))) &&
      MaySetLocally(cr, known, set) &&
      (writeback_->NoteWriter(key, cr), cache_->LocalSetattr(key, set))) {
    if (out) cache_->KnownAttrs(key, out);
    return upstream::kNfs4Ok;
  }
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  // Our read delegation goes back first, in the SETATTR's COMPOUND.
  OwnReturn own(delegations_.get(), key, up_->epoch());
  // A size change owns the file's flushing until the new size is at the
  // remote: no send of older data of ours can land after it there, and a
  // flush in flight cannot take bytes written after it for its own.
  std::optional<Flusher::Ownership> owned;
  if (flusher_ && (set.mask & upstream::kAttrSize))
    owned.emplace(flusher_->Own(key));
  if (flusher_ && cache_->IsDirty(key)) {
    // Truncated to nothing, our unflushed data is garbage; otherwise the
    // remote must have it before the attributes change.
    if ((set.mask & upstream::kAttrSize) && set.size == 0) {
      cache_->Forget(key);
    } else if ((st = owned ? owned->Flush() : flusher_->FlushFile(key))) {
      return st;
    }
  }
  // Queued writes must not land after a truncate.
  if (unstable_writes_ && (set.mask & upstream::kAttrSize))
    unstable_writes_->Drain(key);
  // Only a size change needs the open's stateid (for share reservations).
  StateId sid =
      (set.mask & upstream::kAttrSize) ? IoStateid(open) : StateId::Anonymous();
  for (int attempt = 0; attempt < 2; attempt++) {
    // The change attribute just before and the attributes just after:
    // the cache learns whether the change was ours alone.
    cache_->BeginOwnChange(key);
    Compound c;
    c.SetTag("setattr").Putfh(fh);
    own.AddTo(&c);
    c.Getattr(upstream::kAttrChange)
        .Setattr(sid, set)
        .Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (!own.Done(rep, st)) {
      // Refused (the server dropped it meanwhile): the SETATTR never ran,
      // and goes alone.
      cache_->AfterOwnChange(key, false, 0, Attrs());
      attempt--;
      continue;
    }
    if (st == upstream::kNfs4Ok) {
      const Attrs &post = rep.Find(Op::kGetattr, 1)->attrs;
      cache_->AfterOwnChange(key, true, rep.Find(Op::kGetattr)->attrs.change,
                             post);
      if (out) *out = post;
      return st;
    }
    cache_->AfterOwnChange(key, false, 0, Attrs());  // outcome unknown
    if (rep.Find(Op::kSetattr) && !OpStatus(rep, Op::kSetattr))
      return st;  // set, but the attributes after are unknown
    if (!IsStateError(st)) return st;
    sid = StateId::Anonymous();  // our open went away: retry stateless
  }
  return st;
}

uint32_t Core::Access(const Creds &cr, Key key, uint32_t want,
                      uint32_t *allowed) {
  uint32_t st = AccessAsTheRemoteSays(cr, key, want, allowed);
  if (st || !cfg_.remote_sees_machine) return st;
  // The remote answered for nache's own principal (Upstream_Sec krb5*),
  // which it trusts as a machine: the caller gets no more than the mode
  // bits give it (config/README.md, "Kerberos to the remote").
  Attrs a;
  *allowed =
      cache_->KnownAttrs(key, &a) ? *allowed & AccessByMode(cr, a, want) : 0;
  return upstream::kNfs4Ok;
}

uint32_t Core::AccessAsTheRemoteSays(const Creds &cr, Key key, uint32_t want,
                                     uint32_t *allowed) {
  if (cache_->CachedAccess(key, Cache::CredId(cr), want, allowed))
    return upstream::kNfs4Ok;
  Attrs la;
  if (NotAtRemote(key) && cache_->KnownAttrs(key, &la)) {
    // Made here: the remote has no say yet, its mode bits are ours.
    *allowed = AccessByMode(cr, la, want);
    return upstream::kNfs4Ok;
  }
  if (ServingStale() && cache_->KnownAttrs(key, &la)) {
    // The remote cannot be asked and never answered for this caller: the
    // mode bits, with root as the remote's root squash would make it
    // (its ACLs are unknown here: see config/README.md).
    *allowed = AccessByMode(cr.uid == 0 ? SquashedRoot() : cr, la, want);
    return upstream::kNfs4Ok;
  }
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  // Every bit, with the attributes: the answer serves every later question
  // of this caller while the attributes it came with hold.
  Compound c;
  c.SetTag("access").Putfh(fh).Getattr(upstream::kAttrsObject);
  const size_t at = AskAccess(c);
  CompoundReply rep;
  st = UnlessOnlyAccessFailed(at, Run(c, cr, &rep), rep);
  if (st) return st;
  cache_->Validated(key, rep.Find(Op::kGetattr)->attrs);
  NoteAccessAnswer(key, cr, rep);
  // (The remote refusing the ACCESS alone: nothing allowed.)
  const OpResult *r = rep.Find(Op::kAccess);
  *allowed = r && r->status == 0 ? r->access & want : 0;
  return upstream::kNfs4Ok;
}

bool Core::CallerOwnsKnown(const Creds &cr, Key key) {
  Attrs a;
  return cache_->KnownAttrs(key, &a) && CallerOwns(cr, a);
}

uint32_t Core::MayOpen(const Creds &cr, Key key, uint32_t share_access) {
  // As a server's OPEN judges: reading needs READ (or EXECUTE: a program
  // is read to be run), writing needs MODIFY.
  const bool read = share_access & upstream::kShareAccessRead;
  const uint32_t want = (read ? uint32_t(upstream::kAccessRead) : 0u) |
                        ((share_access & upstream::kShareAccessWrite)
                             ? uint32_t(upstream::kAccessModify)
                             : 0u);
  uint32_t allowed = 0;
  uint32_t st = Access(cr, key, want, &allowed);
  if (st) return st;
  if (read && !(allowed & upstream::kAccessRead)) {
    uint32_t exec = 0;
    if ((st = Access(cr, key, upstream::kAccessExecute, &exec))) return st;
    if (exec) allowed |= upstream::kAccessRead;
  }
  return (allowed & want) == want ? upstream::kNfs4Ok
                                  : upstream::kNfs4ErrAccess;
}

size_t Core::AskAccess(Compound &c) {
  c.Access(upstream::kAccessAll);
  return c.size() - 1;
}

uint32_t Core::UnlessOnlyAccessFailed(size_t at, uint32_t st,
                                      const CompoundReply &rep) {
  const int failed = rep.FailedIndex();
  return st && failed >= 0 && size_t(failed) == at &&
                 rep.results[failed].op == Op::kAccess
             ? upstream::kNfs4Ok
             : st;
}

void Core::NoteAccessAnswer(Key key, const Creds &cr, const CompoundReply &rep,
                            int nth) {
  const OpResult *r = rep.Find(Op::kAccess, nth);
  if (r && r->status == 0)
    cache_->NoteAccess(key, Cache::CredId(cr), r->access_supported, r->access);
}

Core::Creds Core::SquashedRoot() {
  Creds nobody;
  nobody.uid = nobody.gid = upstream::kNobodyId;
  return nobody;
}

bool Core::WorthListing(Key dir) {
  if (cache_->Unlistable(dir)) return false;
  if (LocalNamespace()) return true;  // kept current by our own creates
  // Elsewhere a listing lives one attribute window: read it at most once
  // per window, and only a small directory (a big one costs more than the
  // lookups it saves; POSIX file systems report a directory's size in
  // bytes of entries).
  Attrs da;
  if (!cache_->KnownAttrs(dir, &da) || da.size > kListingPrefetchMaxBytes)
    return false;
  return cache_->ListingDue(dir, std::chrono::milliseconds(std::max<uint32_t>(
                                     1000, cfg_.cache.attr_timeout_ms)));
}

void Core::PrefetchListing(const Creds &cr, Key dir) {
  bool eof = false;
  uint32_t st = ReaddirRemote(
      cr, dir, 0,
      [](void *, const char *, nache_key, const nache_attrs *, uint64_t) {
        return false;  // only the listing it records is wanted
      },
      nullptr, &eof);
  if ((st == upstream::kNfs4Ok && !cache_->Listing(dir)) ||
      st == upstream::kNfs4ErrAccess) {
    // Read and still not kept: too big to cache (or it changed while
    // read), or not listable (search permission only). Name by name
    // from now on (while the cache keeps the directory in memory).
    cache_->SetUnlistable(dir);
  }
}

upstream::Verifier Core::CookieVerf(Key dir) { return cache_->CookieVerf(dir); }

void Core::SetCookieVerf(Key dir, const upstream::Verifier &v) {
  cache_->SetCookieVerf(dir, v);
}

uint32_t Core::Readdir(const Creds &cr, Key dir, uint64_t cookie,
                       nache_dirent_cb cb, void *ctx, bool *eof) {
  *eof = false;
  if (LocalNamespace()) {
    // Entries not at the remote yet come after the remote's, with cookies
    // of their own (see ReaddirLocal).
    if (IsLocalCookie(cookie) || namespace_->names().IsLocal(dir))
      return ReaddirLocal(cr, dir, cookie, cb, ctx, eof);
    if (namespace_->names().LastChildSeq(dir) != 0) {
      bool remote_eof = false;
      uint32_t st = ReaddirRemote(cr, dir, cookie, cb, ctx, &remote_eof);
      if (st || !remote_eof) return st;
      return ReaddirLocal(cr, dir, 0, cb, ctx, eof);
    }
  }
  return ReaddirRemote(cr, dir, cookie, cb, ctx, eof);
}

uint32_t Core::ReaddirRemote(const Creds &cr, Key dir, uint64_t cookie,
                             nache_dirent_cb cb, void *ctx, bool *eof) {
  *eof = false;
  // From a fresh listing when every entry's attributes are fresh too (an
  // entry's own change does not move its directory's change attribute).
  // Only one read from the remote: its cookies are the server's. While
  // disconnected, also one we edited: its entries from the remote (those
  // with the server's cookies; our own local ones ReaddirLocal lists).
  bool stale = ServingStale();
  std::shared_ptr<const std::vector<CachedDirent>> l =
      cache_->Listing(dir, !stale);
  if (l && stale) {
    auto remote = std::make_shared<std::vector<CachedDirent>>();
    for (const CachedDirent &e : *l)
      if (e.cookie != 0) remote->push_back(e);
    l = remote;
  }
  if (l) {
    size_t i = 0;
    if (cookie != 0) {
      while (i < l->size() && (*l)[i].cookie != cookie) i++;
      i++;  // the entry after the one the cookie names
    }
    std::vector<Attrs> attrs;
    bool usable = i <= l->size();
    for (size_t j = i; usable && j < l->size(); j++) {
      attrs.emplace_back();
      usable = cache_->FreshAttrs((*l)[j].key, &attrs.back());
    }
    if (usable) {
      for (size_t j = i; j < l->size(); j++) {
        nache_attrs ca;
        AttrsToC(attrs[j - i], (*l)[j].key, &ca);
        if (!cb(ctx, (*l)[j].name.c_str(), (*l)[j].key, &ca, (*l)[j].cookie))
          return upstream::kNfs4Ok;
      }
      *eof = true;
      return upstream::kNfs4Ok;
    }
  }

  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  upstream::Verifier verf =
      cookie == 0 ? upstream::Verifier(8, '\0') : CookieVerf(dir);
  // A listing from the start is read to its end even when the caller stops
  // early (Ganesha reads in chunks), so that the rest is served locally.
  bool whole = cookie == 0;
  bool delivering = true;
  std::vector<CachedDirent> listing;
  uint64_t dir_change = 0;
  // Taken before the first READDIR: a change of ours to dir's names while
  // it is read makes the listing unfit to keep.
  const uint64_t listing_epoch = cache_->ListingEpoch(dir);
  for (;;) {
    // The directory's attributes come along: its listing is recorded
    // under its change attribute, and every entry's attributes are
    // prefetched (one round trip for `ls -l`).
    Compound c;
    c.SetTag("readdir")
        .Putfh(dfh)
        .Getattr(upstream::kAttrsObject)
        .Readdir(cookie, verf, kReaddirDircount, kReaddirMaxcount,
                 upstream::kAttrsObject, true);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (st) return delivering ? st : upstream::kNfs4Ok;
    const Attrs &da = rep.Find(Op::kGetattr)->attrs;
    if (listing.empty() && dir_change == 0) dir_change = da.change;
    if (da.change != dir_change) whole = false;  // changed while reading
    cache_->Validated(dir, da);
    const OpResult *r = rep.Find(Op::kReaddir);
    verf = r->verifier;
    SetCookieVerf(dir, verf);
    for (const auto &e : r->entries) {
      // Removed here, the remote not told yet.
      if (LocalNamespace() &&
          namespace_->names().FindRemoved(dir, e.name, nullptr)) {
        cookie = e.cookie;
        continue;
      }
      Key k;
      upstream::Attrs a = e.attrs;
      if (!e.fh.empty()) {
        k = handles_->Intern(e.fh, dir, e.name);
        cache_->Validated(k, a);
      } else {
        // The server could not give this entry's handle (e.g. a mount
        // point): look it up on its own.
        if (Lookup(cr, dir, e.name, &k, &a)) {
          whole = false;
          continue;
        }
      }
      if (whole) listing.push_back(CachedDirent{e.name, k, e.cookie});
      if (delivering) {
        nache_attrs ca;
        AttrsToC(a, k, &ca);
        if (!cb(ctx, e.name.c_str(), k, &ca, e.cookie)) {
          delivering = false;
          if (!whole || listing.size() > kListingMaxEntries)
            return upstream::kNfs4Ok;
        }
      }
      cookie = e.cookie;
    }
    if (r->eof) {
      *eof = delivering;
      if (whole)
        cache_->PutListing(dir, dir_change, std::move(listing), listing_epoch);
      return upstream::kNfs4Ok;
    }
    if (r->entries.empty())
      return delivering ? upstream::kNfs4ErrServerfault : upstream::kNfs4Ok;
  }
}

uint32_t Core::Create(const Creds &cr, Key dir, const std::string &name,
                      upstream::FileType type, const Attrs &attrs,
                      const std::string &link_text, Key *key, Attrs *out) {
  ForgetRecentAbsence();  // a name may be made now
  if (LocalNamespace()) {
    // (Draining: new objects go to the remote at once, as without
    // write-back; the names known here are still checked.)
    if ((type == upstream::FileType::kDir ||
         type == upstream::FileType::kLnk) &&
        !Draining())
      return namespace_->CreateLocal(cr, dir, name, type, attrs, link_text, key,
                                     out);
    if (namespace_->names().Find(dir, name, nullptr))
      return upstream::kNfs4ErrExist;
    if (uint32_t st = namespace_->SendRemoveOf(dir, name)) return st;
  }
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  // The new object's attributes and the caller's rights to it (a new
  // directory is filled next: its rights are asked at once), then the
  // directory's attributes.
  Compound c;
  c.SetTag("create")
      .Putfh(dfh)
      .Create(type, name, attrs, link_text)
      .Getfh()
      .Getattr(upstream::kAttrsObject);
  AskAccess(c);
  c.Putfh(dfh).Getattr(upstream::kAttrsObject);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (!rep.Find(Op::kGetattr)) {
    cache_->ExpireAttrs(dir);
    const uint64_t who = Cache::CredId(cr);
    if (!rep.Find(Op::kCreate) && st == upstream::kNfs4ErrDelay) {
      unanswered_.Note(UnansweredNames::Op::kCreate, dir, name, who);
    } else if (OpStatus(rep, Op::kCreate) == upstream::kNfs4ErrExist &&
               unanswered_.TakeRecent(UnansweredNames::Op::kCreate, dir, name,
                                      who)) {
      // The client's retry of a create done once: what the name holds,
      // when it is of the type asked for.
      Attrs a;
      if (Lookup(cr, dir, name, key, &a) == upstream::kNfs4Ok &&
          a.type == type) {
        if (out) *out = a;
        return upstream::kNfs4Ok;
      }
    }
    return st;
  }
  st = upstream::kNfs4Ok;
  *key = handles_->Intern(rep.Find(Op::kGetfh)->fh, dir, name);
  const Attrs &na = rep.Find(Op::kGetattr)->attrs;
  cache_->Validated(*key, na);
  NoteAccessAnswer(*key, cr, rep);
  NoteNewObjectOwner(*key, na);
  NoteDirAfter(dir, rep, 1, rep.Find(Op::kCreate)->cinfo, "", name, *key);
  // A new directory is empty: lookups in it need not ask.
  if (type == upstream::FileType::kDir && (na.mask & upstream::kAttrChange))
    cache_->PutListing(*key, na.change, {}, cache_->ListingEpoch(*key));
  if (out) *out = rep.Find(Op::kGetattr)->attrs;
  return st;
}

void Core::NoteNewObjectOwner(Key key, const Attrs &a) {
  if (!cfg_.remote_sees_machine || !(a.mask & upstream::kAttrOwner) ||
      a.uid != upstream::kNobodyId)
    return;
  metrics_->CountCreatedAsNobody();
  if (warned_created_as_nobody_.exchange(true)) return;
  // Whatever the caller asked for, the remote sees nache's principal
  // (Upstream_Sec krb5*, Upstream_Identity = machine) and gave the object
  // to its anonymous user: nache's writes, chmods and chowns of what it
  // makes there may then be refused, and the remote's owners mean nothing.
  NACHE_LOG(kLogWarn, "NACHE_UPSTREAM",
            "the remote %s made key %llu for nache's own principal owned by "
            "nobody (uid %u%s): it maps that principal to its anonymous "
            "user. Map nache's principal to a trusted identity at the "
            "remote (Linux knfsd: an idmapd or gssproxy mapping to root), "
            "or set Upstream_Identity = user. Logged once; counted in "
            "nache_upstream_created_as_nobody_total",
            cfg_.upstream_server.c_str(), (unsigned long long)key, a.uid,
            (a.mask & upstream::kAttrOwnerUnmapped)
                ? ", an owner nache cannot map, shown as nobody"
                : "");
}

uint32_t Core::Readlink(const Creds &cr, Key key, std::string *text) {
  LocalNames::Entry e;
  if (LocalNamespace() && namespace_->names().Get(key, &e)) {
    if (e.type != upstream::FileType::kLnk) return upstream::kNfs4ErrInval;
    *text = e.text;
    return upstream::kNfs4Ok;
  }
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
  ForgetRecentAbsence();  // a name may be made now
  // A name only we know of: the remote would link over it.
  if (LocalNamespace() && namespace_->names().Find(dir, name, nullptr))
    return upstream::kNfs4ErrExist;
  // A name removed here: the remote must drop it before it is reused.
  if (LocalNamespace())
    if (uint32_t st = namespace_->SendRemoveOf(dir, name)) return st;
  Fh fh, dfh;
  uint32_t st = FhOf(key, &fh);
  if (st || (st = FhOf(dir, &dfh))) return st;
  // Before it is sent: its nlink and ctime move at the remote by our doing.
  cache_->OwnChangeUnseen(key);
  Compound c;
  c.SetTag("link").Putfh(fh).Savefh().Putfh(dfh).Link(name);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  cache_->ExpireAttrs(dir);  // also on failure: the outcome may be unknown
  if (const OpResult *l = rep.Find(Op::kLink); l && l->status == 0)
    NoteDirChange(dir, l->cinfo);
  const uint64_t who = Cache::CredId(cr);
  if (!rep.Find(Op::kLink) && st == upstream::kNfs4ErrDelay) {
    unanswered_.Note(UnansweredNames::Op::kLink, dir, name, who);
  } else if (st == upstream::kNfs4ErrExist &&
             unanswered_.TakeRecent(UnansweredNames::Op::kLink, dir, name,
                                    who)) {
    // The client's retry of a link done once: the name holds this object.
    Key k = kNoKey;
    if (Lookup(cr, dir, name, &k, nullptr) == upstream::kNfs4Ok && k == key)
      return upstream::kNfs4Ok;
  }
  return st;
}

uint32_t Core::Rename(const Creds &cr, Key olddir, const std::string &oldname,
                      Key newdir, const std::string &newname, Key source) {
  ForgetRecentAbsence();  // a name may be made now
  if (LocalNamespace()) {
    LocalNames::Entry src, target;
    if (namespace_->names().Find(olddir, oldname, &src)) {
      bool done = false;
      uint32_t st = upstream::kNfs4Ok;
      if (src.moved)
        st = namespace_->RenameMoved(cr, src, newdir, newname, &done);
      else if (src.type != upstream::FileType::kDir)
        st = namespace_->RenameLocal(cr, src, newdir, newname, &done);
      if (st || done) return st;
      // Otherwise the object must be at the remote under this name first
      // (a moved one: its pending RENAME is sent).
      if (uint32_t st = namespace_->CreateRemotely(src.key)) return st;
    }
    // Something the remote has: logged when it may be (not while
    // draining).
    bool done = false;
    if (!Draining())
      if (uint32_t st = namespace_->RenameLogged(cr, olddir, oldname, newdir,
                                                 newname, &done))
        return st;
    if (done) return upstream::kNfs4Ok;
    // A target only we know of: the remote must know it to replace it.
    if (namespace_->names().Find(newdir, newname, &target))
      if (uint32_t st = namespace_->CreateRemotely(target.key)) return st;
    // A target removed here: the remote drops it first.
    if (uint32_t st = namespace_->SendRemoveOf(newdir, newname)) return st;
    // Directories moved here go first: this one, sent before them, could
    // make a cycle at the remote.
    if (uint32_t st = namespace_->SendDirRenamesBefore(UINT64_MAX)) return st;
  }
  Fh ofh, nfh;
  uint32_t st = FhOf(olddir, &ofh);
  if (st || (st = FhOf(newdir, &nfh))) return st;
  if (source == kNoKey) source = ListedKey(olddir, oldname);
  delegations_->ReturnIfReadDelegated(source);
  delegations_->ReturnIfReadDelegated(ListedKey(newdir, newname));
  // Before it is sent: the moved object's ctime moves by our doing.
  if (source != kNoKey) cache_->OwnChangeUnseen(source);
  // The trailing LOOKUP+GETFH names the moved object, so its recorded
  // (parent, name) follows it at no extra round trip.
  Compound c;
  c.SetTag("rename")
      .Putfh(ofh)
      .Savefh()
      .Putfh(nfh)
      .Rename(oldname, newname)
      .Getattr(upstream::kAttrsObject)
      .Putfh(ofh)
      .Getattr(upstream::kAttrsObject)
      .Putfh(nfh)
      .Lookup(newname)
      .Getfh();
  Key replaced = ListedKey(newdir, newname);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  uint32_t rst = OpStatus(rep, Op::kRename);
  const uint64_t who = Cache::CredId(cr);
  const std::string noted =
      UnansweredNames::RenameName(oldname, newdir, newname);
  if (!rep.Find(Op::kRename) && st == upstream::kNfs4ErrDelay) {
    unanswered_.Note(UnansweredNames::Op::kRename, olddir, noted, who);
  } else if (rst == upstream::kNfs4ErrNoent &&
             unanswered_.TakeRecent(UnansweredNames::Op::kRename, olddir, noted,
                                    who) &&
             RenamedOnce(cr, source, nfh, newname)) {
    // The client's retry of a rename done once: the new name holds what
    // the old one did.
    cache_->ExpireAttrs(olddir);
    cache_->ExpireAttrs(newdir);
    return upstream::kNfs4Ok;
  }
  if (replaced != kNoKey) cache_->ExpireAttrs(replaced);  // nlink
  Key moved = kNoKey;
  if (rst == upstream::kNfs4Ok && rep.Find(Op::kGetfh)) {
    moved = handles_->Intern(rep.Find(Op::kGetfh)->fh, newdir, newname);
    cache_->OwnChangeUnseen(moved);  // ctime
  }
  if (rst != upstream::kNfs4Ok || moved == kNoKey) {
    cache_->ExpireAttrs(olddir);
    cache_->ExpireAttrs(newdir);
  } else if (olddir == newdir) {
    // Both directories' attributes after the rename, and their listings
    // edited: one edit when they are the same directory.
    NoteDirAfter(newdir, rep, 0, rep.Find(Op::kRename)->cinfo, oldname, newname,
                 moved);
  } else {
    NoteDirAfter(newdir, rep, 0, rep.Find(Op::kRename)->cinfo2, "", newname,
                 moved);
    NoteDirAfter(olddir, rep, 1, rep.Find(Op::kRename)->cinfo, oldname, "",
                 kNoKey);
  }
  // A failure after the RENAME itself (the object moved on meanwhile) does
  // not undo the rename.
  return rep.Find(Op::kRename) ? rst : st;
}

bool Core::RenamedOnce(const Creds &cr, Key source, const Fh &newdir_fh,
                       const std::string &newname) {
  HandleRecord rec;
  const bool known =
      source != kNoKey && handles_->Get(source, &rec) && !rec.fh.empty();
  Compound c;
  c.SetTag("rename_done").Putfh(newdir_fh).Lookup(newname).Getfh();
  CompoundReply rep;
  if (Run(c, cr, &rep) || !rep.Find(Op::kGetfh)) return false;
  // Without the source's handle, a file under the new name is all there
  // is to go by (as a server's duplicate request cache would have said).
  return !known || rep.Find(Op::kGetfh)->fh == rec.fh;
}

uint32_t Core::Remove(const Creds &cr, Key dir, const std::string &name,
                      Key object) {
  if (LocalNamespace()) {
    LocalNames::Entry e;
    if (namespace_->names().Find(dir, name, &e)) {
      if (e.moved) {
        // Renamed here: the remote is told only of the remove.
        uint32_t st = namespace_->RemoveMoved(cr, dir, e);
        if (st != upstream::kNfs4ErrDelay) return st;
      } else {
        uint32_t st = namespace_->RemoveLocal(cr, dir, e);
        if (st != upstream::kNfs4ErrDelay) return st;
        // Sent to the remote meanwhile: remove it there.
      }
    }
  }
  Key target = kNoKey;
  if (LocalNamespace() && !Draining()) {
    // What the remote has is removed here too, and told later.
    bool done = false;
    uint32_t st = namespace_->RemoveLogged(cr, dir, name, &done, &target);
    if (done) return st;
  }
  Fh dfh;
  uint32_t st = FhOf(dir, &dfh);
  if (st) return st;
  Key gone = ListedKey(dir, name);
  if (gone == kNoKey) gone = target;
  if (LocalNamespace()) {
    // A directory with entries only we know of is not empty: the remote
    // says so once it has them; one whose removes we have not told it
    // yet is empty only once it has them. (Such a directory is known to
    // us by name: no LOOKUP needed to find it.)
    Key k = gone != kNoKey ? gone
                           : namespace_->names().DirNamed(dir, name, *handles_);
    if (k != kNoKey && ((st = namespace_->SendRemovesIn(k)) ||
                        (st = namespace_->CreateEntriesRemotely(k))))
      return st;
  }
  // The object removed must be known (with write-back its unflushed data
  // is then dropped; and its records here go once it is gone): name it in
  // the same COMPOUND when no listing does. After the REMOVE, in the same
  // round trip, the object is asked whether it is gone (its handle stale,
  // or no link left), so that its records here can go too (ForgetGone).
  HandleRecord gone_rec;
  const bool name_it = gone == kNoKey;
  const bool by_handle =
      !name_it && handles_->Get(gone, &gone_rec) && !gone_rec.fh.empty();
  // Our read delegation on it goes back first, in the same COMPOUND (the
  // object as the caller looked it up, when no listing names it).
  const Key deleg_key = gone != kNoKey ? gone : object;
  HandleRecord deleg_rec;
  OwnReturn own(delegations_.get(), deleg_key, up_->epoch());
  CompoundReply rep;
  int putfhs_before = 0;  // of the COMPOUND sent last, before the directory's
  for (;;) {
    Compound c;
    c.SetTag("remove");
    putfhs_before = 0;
    if (own.pending() && handles_->Get(deleg_key, &deleg_rec) &&
        !deleg_rec.fh.empty()) {
      c.Putfh(deleg_rec.fh);
      own.AddTo(&c);
      putfhs_before = 1;
    }
    c.Putfh(dfh);
    if (name_it) c.Lookup(name).Getfh().Savefh().Putfh(dfh);
    c.Remove(name).Getattr(upstream::kAttrsObject);
    if (name_it)
      c.Restorefh().Getattr(upstream::kAttrNlink);
    else if (by_handle)
      c.Putfh(gone_rec.fh).Getattr(upstream::kAttrNlink);
    rep = CompoundReply();
    st = Run(c, cr, &rep);
    // The DELEGRETURN refused (the server dropped the delegation
    // meanwhile): the REMOVE never ran, and goes alone.
    if (own.Done(rep, st)) break;
  }
  const uint64_t who = Cache::CredId(cr);
  if (!rep.Find(Op::kRemove) && st == upstream::kNfs4ErrDelay) {
    unanswered_.Note(UnansweredNames::Op::kRemove, dir, name, who);
  } else if (OpStatus(rep, Op::kRemove) == upstream::kNfs4ErrNoent &&
             unanswered_.TakeRecent(UnansweredNames::Op::kRemove, dir, name,
                                    who)) {
    cache_->ExpireAttrs(dir);
    return upstream::kNfs4Ok;  // the client's retry of a remove done once
  }
  if (name_it && rep.Find(Op::kGetfh))
    gone = handles_->Find(rep.Find(Op::kGetfh)->fh);
  bool gone_for_good = false;
  if ((name_it || by_handle) && rep.Find(Op::kRemove) &&
      !OpStatus(rep, Op::kRemove)) {
    const OpResult *p = name_it ? rep.Find(Op::kRestorefh)
                                : rep.Find(Op::kPutfh, 1 + putfhs_before);
    const OpResult *n = rep.Find(Op::kGetattr, 1);
    gone_for_good =
        (p && p->status == upstream::kNfs4ErrStale) ||
        (n && n->status == upstream::kNfs4Ok &&
         (n->attrs.mask & upstream::kAttrNlink) && n->attrs.nlink == 0);
  }
  if (rep.Find(Op::kRemove) && !OpStatus(rep, Op::kRemove)) {
    NoteDirAfter(dir, rep, 0, rep.Find(Op::kRemove)->cinfo, name, "", kNoKey);
    st = upstream::kNfs4Ok;  // removed; only the GETATTR after failed
  } else {
    cache_->ExpireAttrs(dir);
  }
  // Its nlink dropped; when it was the last link its cached data is
  // garbage (an open file's data stays readable through the remote), and
  // its unflushed data need never be sent.
  Attrs ga;
  if (st == upstream::kNfs4Ok && gone != kNoKey && cache_->IsDirty(gone) &&
      cache_->KnownAttrs(gone, &ga) && ga.nlink <= 1)
    cache_->Forget(gone);
  else if (gone != kNoKey)
    cache_->ExpireAttrs(gone);
  if (gone_for_good) ForgetGone(gone);
  return st;
}

namespace {
// The DirChangeScope's list of this thread, if any.
thread_local std::vector<Core::DirChange> *tl_dir_changes = nullptr;
}  // namespace

Core::DirChangeScope::DirChangeScope(std::vector<DirChange> *out)
    : outer_(tl_dir_changes) {
  tl_dir_changes = out;
}

Core::DirChangeScope::~DirChangeScope() { tl_dir_changes = outer_; }

void Core::NoteDirChange(Key dir, const upstream::ChangeInfo &ci) {
  if (tl_dir_changes && !LocalNamespace())
    tl_dir_changes->push_back(DirChange{dir, ci});
}

void Core::NoteDirAfter(Key dir, const CompoundReply &rep, int nth,
                        const upstream::ChangeInfo &ci,
                        const std::string &removed, const std::string &added,
                        Key added_key) {
  NoteDirChange(dir, ci);
  const OpResult *g = rep.Find(Op::kGetattr, nth);
  cache_->OwnDirChange(dir, ci,
                       g && g->status == upstream::kNfs4Ok ? g->attrs : Attrs(),
                       removed, added, added_key, cfg_.single_writer);
}

bool Core::OpenIsLocal(Key key, uint32_t access, uint32_t deny) {
  if (delegations_->Covers(key, access, deny, nullptr) || DecidedLocally(key))
    return true;
  if (!opens_->Contains(key)) return false;
  std::shared_ptr<FileOpen> f = opens_->Get(key);
  bool covered;
  {
    MutexLock g(&f->owner->mu);
    covered = f->open() && (f->up_access & access) == access &&
              (f->up_deny & deny) == deny;
  }
  opens_->Unpin(f);
  return covered;
}

uint32_t Core::MaySearch(const Creds &cr, Key dir) {
  uint32_t allowed = 0;
  if (uint32_t st = Access(cr, dir, upstream::kAccessLookup, &allowed))
    return st;
  return allowed & upstream::kAccessLookup ? upstream::kNfs4Ok
                                           : upstream::kNfs4ErrAccess;
}

Key Core::ListedKey(Key dir, const std::string &name) {
  if (auto l = cache_->Listing(dir)) {
    for (const CachedDirent &e : *l)
      if (e.name == name) return e.key;
  }
  return kNoKey;
}

uint32_t Core::Statfs(const Creds &cr, Key key, Attrs *out) {
  // One file system: an object not at the remote yet asks through the
  // export's root.
  if (NotAtRemote(key)) key = root_key_;
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
  // Our open under an earlier client id: reclaimed (delegations/reclaim.h), or
  // dropped and reopened on demand.
  if (f->open() && f->epoch() != epoch) reclaim_->ReclaimFile(f, epoch);
}

uint32_t Core::ConfirmIfAsked(const Creds &cr, const OpResult &open,
                              const Fh &fh, OwnerSlot *owner, StateId *sid,
                              const ReopenAfterConfirm &again,
                              upstream::Delegation *deleg) {
  *deleg = open.delegation;
  if (!(open.open_rflags & 2 /* OPEN4_RESULT_CONFIRM */))
    return upstream::kNfs4Ok;
  // A new open-owner must confirm its first OPEN (RFC 7530 16.18.5); the
  // owner pool makes this a once-per-owner round trip. Servers delegate
  // only to confirmed owners (knfsd), so once the server has called our
  // callback service (it may delegate) the same COMPOUND opens the file
  // once more, now by a confirmed owner: the same open (its seqid
  // advanced), possibly with a delegation.
  bool reopen = delegations_->Contacted() && !again.dir.empty();
  Compound c;
  c.SetTag("open_confirm").Putfh(fh).OpenConfirm(*sid, owner->seqid);
  if (reopen) {
    upstream::OpenArgs a;
    a.seqid = owner->seqid + 1;
    a.share_access = again.access;
    a.share_deny = again.deny;
    a.owner = owner->name;
    a.name = again.name;
    c.Putfh(again.dir).Open(a).Getfh();
  }
  CompoundReply rep;
  uint32_t st = Run(c, cr, &rep);
  const OpResult *r = rep.Find(Op::kOpenConfirm);
  if (r) OpenTable::AdvanceSeqid(&owner->seqid, r->status);
  if (!r || r->status) return st;
  *sid = r->stateid;
  const OpResult *o = rep.Find(Op::kOpen);
  if (o) OpenTable::AdvanceSeqid(&owner->seqid, o->status);
  const OpResult *g = rep.Find(Op::kGetfh);
  if (o && !o->status && g && g->fh == fh) {
    *sid = o->stateid;
    *deleg = o->delegation;
  } else if (o && !o->status && g) {
    // The name now denotes another file: give that open back.
    Compound cl;
    cl.SetTag("close_other").Putfh(g->fh).Close(owner->seqid, o->stateid);
    CompoundReply clrep;
    Run(cl, cr, &clrep);
    if (const OpResult *x = clrep.Find(Op::kClose))
      OpenTable::AdvanceSeqid(&owner->seqid, x->status);
  }
  return upstream::kNfs4Ok;
}

uint32_t Core::UpstreamOpenByHandle(const Creds &cr, FileOpen *f,
                                    uint32_t access, uint32_t deny,
                                    Attrs *attrs, OwnReturn *own) {
  HandleRecord rec, prec;
  if (!handles_->Get(f->key, &rec)) return upstream::kNfs4ErrStale;
  // NFSv4.1 opens the file itself (CLAIM_FH): no name to know, and no name
  // that may denote another file by now. NFSv4.0 opens a name in its
  // directory.
  const bool by_fh = up_->minor_version() >= 1;
  if (!by_fh && (rec.parent == kNoKey || !handles_->Get(rec.parent, &prec))) {
    // No known name to open by: serve this file statelessly (anonymous
    // stateid).
    return upstream::kNfs4ErrNoent;
  }
  if (f->open() && (f->up_access & access) != access &&
      ((f->up_deny | deny) & (f->up_access | access)) != 0) {
    // One upstream open serves every local open, so one office client
    // denying reads while another opens for writing makes an upgrade
    // after which the open denies what it accesses itself: some servers
    // (Ganesha) refuse it, and refuse a downgrade to a deny the open never
    // had. A fresh OPEN with both is accepted: close and open again (not
    // with locks held, which hang off this open).
    if (!f->lock_owners.empty()) return upstream::kNfs4ErrShareDenied;
    access |= f->up_access;
    deny |= f->up_deny;
    UpstreamCloseLocked(cr, f);
  }
  upstream::OpenArgs a;
  a.seqid = f->owner->seqid;
  a.share_access = access;
  a.share_deny = deny;
  a.owner = f->owner->name;
  // A read-only open of a file whose first block we do not hold reads it
  // in the same COMPOUND: most files opened for reading are read from the
  // start (small ones whole), so the client's first READ needs no round
  // trip of its own. With the anonymous stateid: in NFSv4.0 the open's is
  // not known within its COMPOUND.
  std::string first;
  const bool read_first =
      access == upstream::kShareAccessRead && !cache_->HasBlock(f->key, 0);
  if (read_first) {
    LearnIoLimits();
    first.resize(std::min<uint32_t>(cache_->block_size(), max_read_));
  }
  CompoundReply rep;
  uint32_t st;
  for (;;) {
    Compound c;
    // Our read delegation, given back for this open, first.
    if (own && own->pending()) {
      c.Putfh(rec.fh);
      own->AddTo(&c);
    }
    if (by_fh) {
      a.claim = upstream::OpenArgs::Claim::kFh;
      c.SetTag("open_fh").Putfh(rec.fh).Open(a).Getattr(upstream::kAttrsObject);
    } else {
      a.name = rec.name;
      c.SetTag("open").Putfh(prec.fh).Open(a).Getfh().Getattr(
          upstream::kAttrsObject);
    }
    const size_t at = AskAccess(c);  // before any READ (FetchBlock)
    if (read_first)
      c.Read(StateId::Anonymous(), 0, uint32_t(first.size()), &first[0]);
    rep = CompoundReply();
    st = UnlessOnlyAccessFailed(at, Run(c, cr, &rep), rep);
    // Refused (the server dropped it meanwhile): the OPEN never ran.
    if (!own || own->Done(rep, st)) break;
  }
  const OpResult *o = rep.Find(Op::kOpen);
  if (o) OpenTable::AdvanceSeqid(&f->owner->seqid, o->status);
  // (A failed READ, the last op, leaves the open done.)
  if (st && !rep.Find(Op::kRead)) return o && o->status ? o->status : st;
  StateId sid = o->stateid;
  const Fh &got = by_fh ? rec.fh : rep.Find(Op::kGetfh)->fh;
  upstream::Delegation deleg;
  // (NFSv4.1 confirms nothing: ConfirmIfAsked only takes the delegation.)
  if ((st = ConfirmIfAsked(cr, *o, got, f->owner, &sid,
                           {prec.fh, by_fh ? "" : rec.name, access, deny},
                           &deleg)))
    return st;
  if (got == rec.fh) delegations_->NoteGrant(f->key, deleg);
  if (f->open()) metrics_->CountOpenJoin();  // an upgrade: merged
  f->SetOpen(sid, up_->epoch());
  f->up_access |= access;
  f->up_deny |= deny;
  f->NoteUpstreamModes(access, deny);
  f->open_creds = cr;
  if (got != rec.fh) {
    // The name now denotes another file (renamed or replaced outside):
    // give that open back; ours is served statelessly if it still exists
    // (the caller revalidates it).
    UpstreamCloseLocked(cr, f);
    return upstream::kNfs4ErrNoent;
  }
  const Attrs &got_attrs = rep.Find(Op::kGetattr)->attrs;
  cache_->Validated(f->key, got_attrs);
  NoteAccessAnswer(f->key, cr, rep);
  if (const OpResult *r = rep.Find(Op::kRead)) {
    // Kept when it is the whole block (or the whole file).
    first.resize(r->status == upstream::kNfs4Ok ? r->count : 0);
    uint64_t expect = std::min<uint64_t>(cache_->block_size(), got_attrs.size);
    if (!first.empty() && first.size() == expect)
      cache_->PutBlock(f->key, 0, cache_->Generation(f->key), first);
  }
  if (attrs) *attrs = got_attrs;
  return upstream::kNfs4Ok;
}

uint32_t Core::UpstreamUnlockAll(const Creds &cr, FileOpen *f, const Fh &fh) {
  for (auto &lo : f->lock_owners) {
    if (!lo.second.established) continue;
    Compound c;
    c.SetTag("locku_all")
        .Putfh(fh)
        .Locku(upstream::LockType::kWrite, lo.second.seqid, lo.second.stateid,
               0, UINT64_MAX);
    CompoundReply rep;
    Run(c, cr, &rep);
    if (const OpResult *r = rep.Find(Op::kLocku)) {
      OpenTable::AdvanceSeqid(&lo.second.seqid, r->status);
      if (!r->status) lo.second.held.clear();
    }
  }
  return upstream::kNfs4Ok;
}

uint32_t Core::UpstreamCloseLocked(const Creds &cr, FileOpen *f) {
  Fh fh;
  uint32_t st = FhOfAny(f->key, &fh);
  if (st) return st;
  for (int attempt = 0; attempt < 2; attempt++) {
    StateId sid;
    { sid = f->stateid(); }
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
  f->SetClosed();
  f->up_access = f->up_deny = 0;
  f->up_seen_access = f->up_seen_deny = 0;
  f->lock_owners.clear();
  if (st && st != upstream::kNfs4ErrDelay)
    NACHE_LOG(kLogInfo, "NACHE_UPSTREAM", "close of %llu: %s",
              (unsigned long long)f->key, nache_status_name(st));
  return st;
}

uint32_t Core::UpstreamDowngrade(const Creds &cr, FileOpen *f, uint32_t access,
                                 uint32_t deny) {
  Fh fh;
  uint32_t st = FhOfAny(f->key, &fh);
  if (st) return st;
  StateId sid;
  {
    // Only to modes the open had (FileOpen::MayDowngradeTo); otherwise it
    // keeps more than the local opens need, which they do not notice.
    if (!f->MayDowngradeTo(access, deny)) return upstream::kNfs4Ok;
    sid = f->stateid();
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
    f->SetStateid(r->stateid);
    f->up_access = access;
    f->up_deny = deny;
    f->NoteUpstreamModes(access, deny);
  }
  return st;
}

uint32_t Core::OpenFile(const Creds &cr, const OpenRequest &req,
                        NacheOpen **out, Key *key_out, Attrs *attrs,
                        bool *created) {
  ForgetRecentAbsence();  // a name may be made now
  *created = false;
  Key key = req.key;
  bool have_attrs = false;
  bool by_name = req.name != nullptr;
  Key named = kNoKey;  // the file req.name names here, when known
  // An exclusive create's verifier goes into the new file's times, where
  // a retry of the create finds it (create_verifier.h).
  const bool verified = req.mode == NACHE_OPEN_EXCLUSIVE && req.verifier;
  Attrs create_attrs = req.create_attrs;
  if (verified) StampCreateVerifier(req.verifier, &create_attrs);

  if (by_name && LocalNamespace()) {
    // Created here, or opened by its local name: no upstream OPEN. A name
    // the remote has takes the usual way below. A create needs the search
    // right to the directory (Ganesha checks it after an open without
    // create): whether the name is taken is not told to anyone else.
    if (req.mode != NACHE_OPEN_NOCREATE) {
      if (uint32_t ast = MaySearch(cr, req.key)) return ast;
    }
    Key k;
    Attrs a;
    uint32_t st = Lookup(cr, req.key, req.name, &k, &a);
    if (st == upstream::kNfs4Ok) named = k;
    // Renamed here and not yet at the remote: the remote knows it under
    // its old name, so it is opened by its handle (the record keeps the
    // remote's name until the RENAME is sent); by the new name the remote
    // would make another file, which the RENAME would then replace.
    LocalNames::Entry moved;
    bool renamed_here = st == upstream::kNfs4Ok &&
                        namespace_->names().Find(req.key, req.name, &moved) &&
                        moved.moved && moved.key == k;
    if (st == upstream::kNfs4Ok && (NotAtRemote(k) || renamed_here)) {
      if (uint32_t est = OpenOfExisting(
              req.mode, verified && CarriesCreateVerifier(a, req.verifier), a))
        return est;
      key = k;
      by_name = false;
    } else if (st == upstream::kNfs4ErrNoent &&
               req.mode != NACHE_OPEN_NOCREATE && Draining()) {
      // Draining: created at the remote below, as without write-back;
      // a remove of the name logged here goes first (the remote would
      // open the file it still has).
      if (uint32_t rst = namespace_->SendRemoveOf(req.key, req.name))
        return rst;
    } else if (st == upstream::kNfs4ErrNoent &&
               req.mode != NACHE_OPEN_NOCREATE) {
      st = namespace_->CreateLocal(cr, req.key, req.name,
                                   upstream::FileType::kReg, create_attrs, "",
                                   &key, nullptr);
      if (st == upstream::kNfs4ErrExist && req.mode == NACHE_OPEN_UNCHECKED)
        return upstream::kNfs4ErrDelay;  // lost a race: the client retries
      if (st) return st;
      *created = true;
      by_name = false;
    } else if (st != upstream::kNfs4Ok) {
      return st;
    }
  }

  // The name holds k (attributes a), known here: refused as taken, or
  // opened by its handle below (0).
  auto by_handle = [&](Key k, const Attrs &a) -> uint32_t {
    if (uint32_t est = OpenOfExisting(
            req.mode, verified && CarriesCreateVerifier(a, req.verifier), a))
      return est;
    key = k;
    by_name = false;
    return upstream::kNfs4Ok;
  };
  if (by_name && req.mode != NACHE_OPEN_UNCHECKED) {
    // Ganesha looks nothing up before such a create (its FSAL option
    // atomic_exclusive_create) or before an open without create of a name
    // it does not hold (open_judged_by_server): a name a fresh listing
    // here holds is answered as that lookup was, with no round trip.
    // Taken (GUARDED, or EXCLUSIVE with another verifier); or opened by
    // its handle: an open without create, or the client's own retry of
    // the create (the same verifier). By its handle, the open may join our
    // upstream open or be granted under our delegation.
    // Without create, only an open nothing needs to be asked for: else the
    // OPEN by name below answers the name, the file's attributes, the
    // caller's rights to it and to the directory (which Ganesha checks
    // after) in one round trip, where by handle each may cost one.
    // A create is judged here (Ganesha checks nothing before it): only a
    // caller who may search the directory learns the name is taken (its
    // right asked of the remote when no answer is kept: one ACCESS, kept
    // for the next creates, as Ganesha's check asked it before).
    Key k = ListedKey(req.key, req.name);
    Attrs a;
    uint32_t dir_allowed;
    if (k != kNoKey && cache_->FreshAttrs(k, &a) && !Unlinked(a) &&
        (req.mode != NACHE_OPEN_NOCREATE ||
         (cache_->CachedAccess(req.key, Cache::CredId(cr),
                               upstream::kAccessLookup, &dir_allowed) &&
          OpenIsLocal(k, req.access, req.deny)))) {
      if (req.mode != NACHE_OPEN_NOCREATE) {
        if (uint32_t sst = MaySearch(cr, req.key)) return sst;
      }
      if (uint32_t est = by_handle(k, a)) return est;
    }
  }

  // An open by name goes upstream in the name's turn: one waiting for it
  // opens by handle what the one before found, if its attributes are
  // fresh, as for a listed name above (else by name, out of turn).
  NameTurns::Turn turn;
  if (by_name) {
    Key found;
    turn = name_turns_.Take(req.key, req.name, &found);
    Attrs a;
    if (found != kNoKey && cache_->FreshAttrs(found, &a) && !Unlinked(a)) {
      // (A create, judged here, as for a listed name above.)
      if (req.mode != NACHE_OPEN_NOCREATE) {
        if (uint32_t sst = MaySearch(cr, req.key)) return sst;
      }
      if (uint32_t est = by_handle(found, a)) return est;
    }
  }

  if (by_name) {
    // Open by name: OPEN in the directory, whose COMPOUND also looks the
    // name up.
    Fh dfh;
    uint32_t st = FhOf(req.key, &dfh);
    if (st) return st;
    // A truncating open of a file we hold unflushed data of owns its
    // flushing until the truncate is at the remote and its data dropped
    // here (as Setattr does).
    std::optional<Flusher::Ownership> owned;
    if (req.truncate && flusher_) {
      if (named == kNoKey) named = DirtyFileNamed(req.key, req.name);
      if (named != kNoKey) owned.emplace(flusher_->Own(named));
    }
    OwnerSlot *owner = opens_->OwnerFor(req.key, req.name);
    MutexLock og(&owner->mu);
    uint64_t epoch = up_->epoch();
    if (owner->epoch != epoch) {
      owner->seqid = 0;
      owner->epoch = epoch;
    }
    const bool exclusive =
        req.mode == NACHE_OPEN_GUARDED || req.mode == NACHE_OPEN_EXCLUSIVE;
    const uint64_t who = Cache::CredId(cr);
    bool created_once = false;  // a lost reply's create, found done
    CompoundReply rep;
    const OpResult *o = nullptr;
    for (bool again = true; again;) {
      again = false;
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
        // Exclusive creates go upstream as GUARDED with the attributes
        // and the verifier in the times; a retry of one whose reply was
        // lost, or that its client sent again, is below.
        case NACHE_OPEN_GUARDED:
        case NACHE_OPEN_EXCLUSIVE:
          a.create = upstream::OpenArgs::Create::kGuarded;
          break;
      }
      if (created_once) a.create = upstream::OpenArgs::Create::kNoCreate;
      a.create_attrs = create_attrs;
      Compound c;
      c.SetTag("open_name").Putfh(dfh).Open(a).Getfh();
      if (req.truncate) c.Setattr(StateId::Anonymous(), TruncateAttrs());
      // The file's attributes and the caller's rights to it, then its
      // directory's attributes (a create changed it) and the caller's
      // rights to the directory (Ganesha checks its search right after an
      // open by name without create: ganesha_patch_open.cmake).
      c.Getattr(upstream::kAttrsObject);
      AskAccess(c);
      c.Putfh(dfh).Getattr(upstream::kAttrsObject);
      AskAccess(c);
      rep = CompoundReply();
      st = Run(c, cr, &rep);
      o = rep.Find(Op::kOpen);
      if (o) OpenTable::AdvanceSeqid(&owner->seqid, o->status);
      if (exclusive && !o && st == upstream::kNfs4ErrDelay) {
        // Executed or not: the client's retry tells (below).
        unanswered_.Note(UnansweredNames::Op::kCreate, req.key, req.name, who);
      } else if (exclusive && !created_once && o &&
                 o->status == upstream::kNfs4ErrExist &&
                 (rep.sends > 1 ||
                  unanswered_.TakeRecent(UnansweredNames::Op::kCreate, req.key,
                                         req.name, who))) {
        // The client's retry of an exclusive create whose reply was lost,
        // which the remote did (NFSv4.1, and a new NFSv4.0 owner's first
        // OPEN), or Run's own resend of it that the remote executed anew
        // instead of answering from its replay cache: the name holds the
        // file it made, opened now without a create.
        created_once = again = true;
      } else if (verified && !created_once && o &&
                 o->status == upstream::kNfs4ErrExist &&
                 RemoteCarriesVerifier(cr, dfh, req.name, req.verifier)) {
        // An exclusive create sent again by its client (its reply was
        // lost before it reached the client): the file is the one it
        // made, opened now without a create.
        created_once = again = true;
      }
    }
    if (!o || o->status) return o ? o->status : st;
    if (!rep.Find(Op::kGetfh)) return st ? st : upstream::kNfs4ErrServerfault;
    StateId sid = o->stateid;
    upstream::Delegation deleg;
    if ((st = ConfirmIfAsked(cr, *o, rep.Find(Op::kGetfh)->fh, owner, &sid,
                             {dfh, req.name, req.access, req.deny}, &deleg)))
      return st;
    key = handles_->Intern(rep.Find(Op::kGetfh)->fh, req.key, req.name);
    turn.Found(key);
    *created = created_once || (req.mode != NACHE_OPEN_NOCREATE &&
                                (req.mode != NACHE_OPEN_UNCHECKED ||
                                 o->cinfo.before != o->cinfo.after));
    // A truncating open makes unflushed data of ours garbage.
    if (req.truncate && cache_->IsDirty(key)) cache_->Forget(key);
    if (const OpResult *g = rep.Find(Op::kGetattr)) {
      if (!g->status) {
        cache_->Validated(key, g->attrs);
        if (*created) NoteNewObjectOwner(key, g->attrs);
        NoteAccessAnswer(key, cr, rep);
        if (attrs) *attrs = g->attrs;
        have_attrs = true;
      }
    }
    NoteDirAfter(req.key, rep, 1, o->cinfo, "", req.name, key);
    NoteAccessAnswer(req.key, cr, rep, 1);
    delegations_->NoteGrant(key, deleg);
    std::shared_ptr<FileOpen> f =
        opens_->GetOrAdopt(key, owner, req.key, req.name);
    if (f->owner == owner) {
      f->owner->mu.AssertHeld();  // (owner->mu, held above)
      ResetIfStale(f.get());
      // Same owner, same file: the server merged this OPEN into the open
      // we hold (a lingering one, say), which one CLOSE ends.
      if (f->open()) metrics_->CountOpenJoin();
      f->SetOpen(sid, epoch);
      f->up_access |= req.access;
      f->up_deny |= req.deny;
      f->NoteUpstreamModes(req.access, req.deny);
      f->open_creds = cr;
      f->Count(req.access, req.deny, +1);
      *out = new NacheOpen{f, req.access, req.deny};
      *key_out = key;
      return have_attrs ? upstream::kNfs4Ok : Revalidate(cr, key, attrs);
    }
    // The file is pinned to another owner (it was already open by handle):
    // give this open back and join the file's own upstream open below.
    Compound cl;
    cl.SetTag("close_dup")
        .Putfh(rep.Find(Op::kGetfh)->fh)
        .Close(owner->seqid, sid);
    CompoundReply clrep;
    Run(cl, cr, &clrep);
    if (const OpResult *r = clrep.Find(Op::kClose))
      OpenTable::AdvanceSeqid(&owner->seqid, r->status);
    og.Unlock();
    opens_->Unpin(f);
  }

  // Open by handle: join the file's upstream open, upgrading it if needed,
  // or grant it locally under our delegation.
  const Cache::Clock::time_point began = Cache::Clock::now();
  // (Our read delegation goes back in the upstream OPEN's COMPOUND, or on
  // its own when none is sent; declared before the lock, so that its end
  // comes after the lock's release.)
  std::optional<OwnReturn> own;
  if (req.access & upstream::kShareAccessWrite)
    own.emplace(delegations_.get(), key, up_->epoch());
  std::shared_ptr<FileOpen> f = opens_->Get(key);
  MutexLock fg(&f->owner->mu);
  ResetIfStale(f.get());
  uint32_t want_access = f->WantAccess() | req.access;
  uint32_t want_deny = f->WantDeny() | req.deny;
  uint32_t st = upstream::kNfs4Ok;
  bool covered = f->open() && (f->up_access & want_access) == want_access &&
                 (f->up_deny & want_deny) == want_deny;
  if (!covered && delegations_->Covers(key, want_access, want_deny, nullptr)) {
    covered = true;
    f->deleg_creds = cr;
  }
  // Not at the remote yet: nobody there to share with. Or the remote is
  // unreachable and we serve what we have.
  if (!covered && DecidedLocally(key)) covered = true;
  // Ganesha leaves the caller of an open by handle to us (its option
  // open_judged_by_server). Shared with another caller's upstream open,
  // granted under our delegation, or decided here: no OPEN asks the remote
  // about this caller, so its answer to ACCESS does (cached, or asked
  // now), as its OPEN would have; the mode bits for a file the remote has
  // not got or while it cannot be asked. So does an upgrade of our
  // upstream open: not every server judges one (Ganesha 4.3 lets an open's
  // owner upgrade it unchecked, whoever asks). And when the remote sees
  // nache's own principal, its OPEN judges nache, not the caller: Access,
  // bounded by the mode bits, judges the caller. (Not the creator of the
  // file: it may write what its new mode forbids.)
  auto judge_caller = [&]() -> uint32_t {
    return *created ? upstream::kNfs4Ok : MayOpen(cr, key, req.access);
  };
  if (covered || f->open() || cfg_.remote_sees_machine) {
    if ((st = judge_caller())) {
      fg.Unlock();
      opens_->Unpin(f);
      return st;
    }
  }
  if (!covered) {
    // An upgrade of our open asks for this caller's bits only (the remote
    // adds them to the open's): the remote judges the caller by what it
    // asks, and a user who may write a file but not read it must not be
    // refused for the read access another user's open holds.
    const bool upgrade = f->open();
    st = UpstreamOpenByHandle(cr, f.get(), upgrade ? req.access : want_access,
                              upgrade ? req.deny : want_deny, attrs,
                              own ? &*own : nullptr);
    if (st == upstream::kNfs4Ok) {
      have_attrs = true;  // fetched with the OPEN, and validated
    } else if (st == upstream::kNfs4ErrNoent && !(st = judge_caller())) {
      // No usable name: stateless I/O, and no OPEN judged the caller.
    } else {
      fg.Unlock();
      opens_->Unpin(f);
      return st;
    }
  }
  f->Count(req.access, req.deny, +1);
  fg.Unlock();
  own.reset();
  *out = new NacheOpen{f, req.access, req.deny};
  *key_out = key;
  if (req.truncate) {
    st = Setattr(cr, key, *out, TruncateAttrs(), attrs);
    have_attrs = st == upstream::kNfs4Ok;
    if (st) {
      CloseFile(*out);
      *out = nullptr;
      return st;
    }
  }
  // Close-to-open: an open always revalidates (one GETATTR when no OPEN
  // went upstream), and cached data of a changed file is dropped; a
  // delegation vouches for the cached attributes instead.
  Attrs a;
  if (!have_attrs &&
      (delegations_->Delegated(key) || cache_->IsDirty(key) ||
       ServingStale()) &&
      cache_->KnownAttrs(key, &a)) {
    have_attrs = true;
    if (attrs) *attrs = a;
  }
  // (Attributes the remote gave since this open began, with the caller's
  // ACCESS answer asked above, are that revalidation.)
  if (!have_attrs) {
    if (!cache_->ValidatedSince(key, began, &a)) st = Revalidate(cr, key, &a);
    if (st == upstream::kNfs4Ok && attrs) *attrs = a;
    // Replaced at the remote (saved over by rename, or removed) while our
    // upstream open kept the old file alive: the client's name lookup was
    // stale. ESTALE makes it look the name up again.
    if (st == upstream::kNfs4Ok && Unlinked(a)) {
      st = upstream::kNfs4ErrStale;
      // Its directory's cached listing named it: not any more.
      HandleRecord rec;
      if (handles_->Get(key, &rec) && rec.parent != kNoKey)
        cache_->ExpireAttrs(rec.parent);
    }
    if (st) {
      CloseFile(*out);
      *out = nullptr;
    }
  }
  return st;
}

bool Core::RemoteCarriesVerifier(const Creds &cr, const upstream::Fh &dir,
                                 const std::string &name,
                                 const uint8_t *verifier) {
  Compound c;
  c.SetTag("lookup_verifier")
      .Putfh(dir)
      .Lookup(name)
      .Getattr(upstream::kAttrType | upstream::kAttrAtime |
               upstream::kAttrMtime);
  CompoundReply rep;
  if (Run(c, cr, &rep) != upstream::kNfs4Ok) return false;
  const Attrs &a = rep.Find(Op::kGetattr)->attrs;
  return a.type == upstream::FileType::kReg &&
         CarriesCreateVerifier(a, verifier);
}

uint32_t Core::CheckCreateVerifier(const Creds &cr, Key key,
                                   const uint8_t *verifier) {
  if (verifier == nullptr) return upstream::kNfs4ErrExist;
  Attrs a;
  uint32_t st = Getattr(cr, key, &a);
  if (st) return st;
  return CarriesCreateVerifier(a, verifier) ? upstream::kNfs4Ok
                                            : upstream::kNfs4ErrExist;
}

uint32_t Core::Reopen(const Creds &cr, NacheOpen *open, uint32_t access,
                      uint32_t deny) {
  FileOpen *f = open->file.get();
  // (Our read delegation goes back in the OPEN's COMPOUND, or alone; ends
  // after the lock's release.)
  std::optional<OwnReturn> own;
  if (access & upstream::kShareAccessWrite)
    own.emplace(delegations_.get(), f->key, up_->epoch());
  MutexLock fg(&f->owner->mu);
  ResetIfStale(f);
  f->Count(open->access, open->deny, -1);
  f->Count(access, deny, +1);
  uint32_t want_access = f->WantAccess(), want_deny = f->WantDeny();
  uint32_t st = upstream::kNfs4Ok;
  bool covered = f->open() && (f->up_access & want_access) == want_access &&
                 (f->up_deny & want_deny) == want_deny;
  const bool deleg =
      !covered && delegations_->Covers(f->key, want_access, want_deny, nullptr);
  // Granted without an OPEN that asks the remote about this caller, or
  // with an upgrade of our upstream open, which not every server judges
  // (as in OpenFile; Ganesha does not check a reopen for its caller
  // either): its answer to ACCESS decides (and the mode bits, when the
  // remote sees nache's own principal).
  if ((covered || deleg || f->open() || cfg_.remote_sees_machine) &&
      !NotAtRemote(f->key))
    st = MayOpen(cr, f->key, access);
  if (st == upstream::kNfs4Ok) {
    if (deleg) {
      f->deleg_creds = cr;
    } else if (!covered && DecidedLocally(f->key)) {
      // Not at the remote yet, or the remote is unreachable: a local open.
    } else if (!covered) {
      // An upgrade asks for this caller's modes only (as in Open).
      st = UpstreamOpenByHandle(cr, f, f->open() ? access : want_access,
                                f->open() ? deny : want_deny, nullptr,
                                own ? &*own : nullptr);
      if (st == upstream::kNfs4ErrNoent) st = upstream::kNfs4Ok;
    } else if (f->up_access != want_access || f->up_deny != want_deny) {
      st = UpstreamDowngrade(cr, f, want_access, want_deny);
    }
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
    MutexLock fg(&f->owner->mu);
    ResetIfStale(f.get());
    f->Count(open->access, open->deny, -1);
    if (f->open()) {
      if (f->n_local == 0) {
        // Linger: a reopen before the deadline reuses this open with no
        // OPEN; LingeringOpens sends the CLOSE otherwise.
        if (!lingering_->Linger(f)) st = UpstreamCloseLocked(root, f.get());
      } else if (f->up_access != f->WantAccess() ||
                 f->up_deny != f->WantDeny()) {
        st = UpstreamDowngrade(root, f.get(), f->WantAccess(), f->WantDeny());
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
  FileOpen *f = open->file.get();
  StateId io;
  if (f->IoStateid(up_->epoch(), &io)) return io;
  // Granted locally under our delegation: its stateid is the one to use
  // (a state error makes the caller fall back to the anonymous one).
  StateId sid;
  if (delegations_->Covers(f->key, upstream::kShareAccessRead, 0, &sid))
    return sid;
  return StateId::Anonymous();
}

uint32_t Core::Read(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                    size_t len, char *buf, size_t *nread, bool *eof) {
  *nread = 0;
  *eof = false;
  // Writes still queued for this file land first (read-your-writes).
  if (unstable_writes_) unstable_writes_->Drain(key);
  Attrs a;
  if (!cache_->FreshAttrs(key, &a)) {
    uint32_t st = Revalidate(cr, key, &a);
    if (st) return st;
  }
  if (offset >= a.size) {
    *eof = true;
    return upstream::kNfs4Ok;
  }
  size_t want = size_t(std::min<uint64_t>(len, a.size - offset));
  StateId sid = IoStateid(open);
  const uint64_t bs = cache_->block_size();
  const uint64_t nblocks = (a.size + bs - 1) / bs;
  while (*nread < want) {
    uint64_t pos = offset + *nread;
    uint64_t idx = pos / bs;
    std::string block;
    if (flusher_ && cache_->ReadsAsZeros(key, idx)) {
      // A hole our unflushed writes made beyond the remote's data.
      block.assign(size_t(std::min<uint64_t>(bs, a.size - idx * bs)), '\0');
    } else {
      reader_->NoteRead(key, idx, nblocks, cr, sid);
      uint32_t st = reader_->Get(key, idx, cr, sid, &block);
      if (st) return *nread ? upstream::kNfs4Ok : st;
    }
    uint64_t in = pos - idx * bs;
    if (block.size() <= in) break;  // the file is shorter than we knew
    size_t n = std::min<size_t>(want - *nread, block.size() - in);
    memcpy(buf + *nread, block.data() + in, n);
    *nread += n;
    if (block.size() < bs) break;  // a short block ends the file
  }
  *eof = offset + *nread >= a.size;
  return upstream::kNfs4Ok;
}

uint32_t Core::Prefetch(const Creds &cr, Key key, uint64_t idx,
                        uint64_t *fetched) {
  *fetched = 0;
  if (cache_->HasBlock(key, idx)) return upstream::kNfs4Ok;
  std::string block;
  uint32_t st = reader_->Get(key, idx, cr, StateId::Anonymous(), &block);
  if (st == upstream::kNfs4Ok) *fetched = block.size();
  return st;
}

uint32_t Core::FetchBlock(Key key, uint64_t idx, const Creds &cr,
                          const StateId &sid_in, std::string *data) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  // The generation before the fetch: if the file changes meanwhile, the
  // block is returned to this reader but not cached.
  uint64_t gen = cache_->Generation(key);
  const uint32_t bs = cache_->block_size();
  const uint64_t start = idx * bs;
  data->resize(bs);
  // A block costs one round trip: when the server's maxread is below the
  // block size (knfsd on a small machine allows 32 KiB, per COMPOUND
  // reply), its pieces are fetched in parallel, each READ with a GETATTR.
  LearnIoLimits();
  const uint32_t per = std::min<uint32_t>(bs, max_read_);
  // Only the pieces the file's known size covers (a small file is one
  // READ); a file that grew meanwhile is read on with the next block.
  uint32_t span = bs;
  Attrs known;
  if (cache_->KnownAttrs(key, &known) && known.size > start)
    span = uint32_t(std::min<uint64_t>(bs, known.size - start));
  const uint32_t pieces = std::max<uint32_t>(1, (span + per - 1) / per);
  struct Piece {
    uint32_t st = 0, count = 0;
    bool eof = false;
    Attrs post;
  };
  std::vector<Piece> got_pieces(pieces);
  auto fetch_piece = [&](uint32_t i) {
    Piece &p = got_pieces[i];
    uint32_t off = i * per, len = std::min(per, bs - off);
    StateId sid = sid_in;
    // Over NFSv4.2, READ_PLUS: runs of zeros (a sparse file's holes) come
    // as their length alone instead of the bytes, where the remote finds
    // them; the cache keeps them as zeros either way.
    bool plus = Speaks42() && !read_plus_refused_.load();
    for (int attempt = 0; attempt < 2; attempt++) {
      // READ last: knfsd (seen with 6.1) can send a corrupt status word
      // for an op after a READ whose data ends just before a page
      // boundary (the Linux client never sends one). Attributes from
      // before the READ are also the safe ones to cache the data under:
      // a change landing in between moves them at the next look, so the
      // block is dropped, never kept as current.
      Compound c;
      c.SetTag("read").Putfh(fh).Getattr(upstream::kAttrsObject);
      if (plus)
        c.ReadPlus(sid, start + off, len, &(*data)[off]);
      else
        c.Read(sid, start + off, len, &(*data)[off]);
      CompoundReply rep;
      p.st = Run(c, cr, &rep);
      if (plus && p.st == upstream::kNfs4ErrNotsupp &&
          rep.Find(Op::kReadPlus)) {
        if (!read_plus_refused_.exchange(true))
          NACHE_LOG(kLogInfo, "NACHE_UPSTREAM",
                    "the remote has no READ_PLUS: blocks are read with READ");
        plus = false;
        attempt--;  // once: plus is off now
        continue;
      }
      if (IsStateError(p.st) && !(sid == StateId::Anonymous())) {
        sid = StateId::Anonymous();  // our open went away: stateless
        continue;
      }
      if (p.st) return;
      const OpResult *got = rep.Find(plus ? Op::kReadPlus : Op::kRead);
      // A READ_PLUS that ends short of the range and of the file's size
      // (the GETATTR before it, in the same COMPOUND), eof or not: READ
      // says what is there. Nothing at all is a READ_PLUS that does not
      // work (Ganesha 4.3 answers it so when its FSAL has none, even
      // with eof): not asked again.
      const Attrs &before = rep.Find(Op::kGetattr)->attrs;
      const uint64_t end = std::min<uint64_t>(start + off + len, before.size);
      if (plus && start + off + got->count < end) {
        if (got->count == 0 && !read_plus_refused_.exchange(true))
          NACHE_LOG(kLogInfo, "NACHE_UPSTREAM",
                    "the remote's READ_PLUS returns nothing: blocks are "
                    "read with READ");
        plus = false;
        attempt--;  // once: plus is off now
        continue;
      }
      p.count = got->count;
      p.eof = got->eof;
      p.post = rep.Find(Op::kGetattr)->attrs;
      return;
    }
  };
  std::vector<std::thread> helpers;
  for (uint32_t i = 1; i < pieces; i++) helpers.emplace_back(fetch_piece, i);
  fetch_piece(0);
  for (auto &t : helpers) t.join();
  // The data runs up to the first short piece (the end of the file); the
  // pieces must agree on the change attribute to be cached together.
  uint32_t got = 0;
  Attrs post = got_pieces[0].post;
  bool consistent = true;
  for (uint32_t i = 0; i < pieces; i++) {
    const Piece &p = got_pieces[i];
    // A piece that failed fails the read (retryable), rather than a short
    // block the client would take for a read of nothing before EOF.
    if (p.st) return p.st;
    if (p.post.change != post.change) consistent = false;
    got += p.count;
    if (p.count < std::min(per, bs - i * per) || p.eof) break;
  }
  data->resize(got);
  cache_->Validated(key, post);
  uint64_t expect =
      start < post.size ? std::min<uint64_t>(bs, post.size - start) : 0;
  if (consistent && got > 0 && got == expect)
    cache_->PutBlock(key, idx, gen, *data);
  return upstream::kNfs4Ok;
}

void Core::WriteVerifier(uint8_t out[8]) { memcpy(out, boot_verf_, 8); }

uint32_t Core::Write(const Creds &cr, Key key, NacheOpen *open, uint64_t offset,
                     size_t len, const char *buf, upstream::StableHow stable,
                     size_t *nwritten, upstream::StableHow *committed) {
  using upstream::StableHow;
  // Kept local: our own read delegation is no conflict until the flush.
  if (WriteBackFor(key)) {
    uint32_t st =
        WriteLocal(cr, key, open, offset, len, buf, nwritten, committed);
    // A full cache disk: a write that cannot be kept goes to the remote
    // now, FILE_SYNC, when the remote has the file and nothing of it waits
    // to be flushed (which would be sent after it, and undo it). Else the
    // client hears NFS4ERR_NOSPC.
    if (st != upstream::kNfs4ErrNospc || NotAtRemote(key) ||
        cache_->IsDirty(key))
      return st;
    metrics_->CountFullDiskWrite();
    stable = StableHow::kFileSync;
  }
  // A write under a local open for writing keeps our read delegation: the
  // server granted it with (or after) our upstream open for writing, as an
  // NFSv4.1 server may (knfsd does), so our own writes are no conflict to
  // it; WriteUpstream's attributes around each WRITE keep what it vouches
  // for current here; and Ganesha recalled its clients' delegations before
  // it granted that open. Any other write (NFSv3's comes with no open)
  // returns it: at the head of the WRITE's own COMPOUND when the write is
  // sent now in one.
  std::optional<OwnReturn> own;
  if (!(open && (open->access & upstream::kShareAccessWrite)))
    own.emplace(delegations_.get(), key, up_->epoch());
  LearnIoLimits();
  const bool carried = own && own->pending() && len <= max_write_.load();
  if (!carried) own.reset();  // sent alone, before the write is queued
  if (!carried && stable == StableHow::kUnstable && unstable_writes_ &&
      unstable_writes_->Submit(key, cr, IoStateid(open), offset, buf, len)) {
    *nwritten = len;  // queued; durable at COMMIT
    *committed = StableHow::kUnstable;
    return upstream::kNfs4Ok;
  }
  // Synchronously. An UNSTABLE write not queued here goes FILE_SYNC: its
  // data is not kept for a resend, so the remote must not lose it (and
  // the client waited for the delegation's return anyway: one round trip).
  if (carried && unstable_writes_) unstable_writes_->Drain(key);
  upstream::Verifier verf;
  const StableHow asked =
      stable == StableHow::kUnstable ? StableHow::kFileSync : stable;
  uint32_t st = WriteUpstream(
      cr, key, [this, open] { return IoStateid(open); }, offset, len, buf,
      asked, nwritten, committed, &verf, own ? &*own : nullptr);
  if (st != upstream::kNfs4Ok || *nwritten == 0 ||
      uint32_t(*committed) >= uint32_t(asked))
    return st;
  // Answered less durable than asked (a broken server: it may not). The
  // data is kept nowhere else here, and a client told FILE_SYNC, or one
  // whose COMMIT finds nothing queued, would drop it: made durable now.
  upstream::Verifier cverf;
  if ((st = CommitUpstream(cr, key, &cverf))) return st;
  // The remote restarted in between and may have lost it: the client
  // sends it again.
  if (cverf != verf) return upstream::kNfs4ErrDelay;
  *committed = asked;
  return upstream::kNfs4Ok;
}

uint32_t Core::CommitUpstream(const Creds &cr, Key key,
                              upstream::Verifier *verf) {
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  Compound c;
  c.SetTag("commit").Putfh(fh).Commit(0, 0);
  CompoundReply rep;
  st = Run(c, cr, &rep);
  if (st == upstream::kNfs4Ok) *verf = rep.Find(Op::kCommit)->verifier;
  return st;
}

uint32_t Core::WriteUpstream(const Creds &cr, Key key,
                             const std::function<StateId()> &sid_of,
                             uint64_t offset, size_t len, const char *buf,
                             upstream::StableHow stable, size_t *nwritten,
                             upstream::StableHow *committed,
                             upstream::Verifier *verf, OwnReturn *own) {
  LearnIoLimits();
  Fh fh;
  uint32_t st = FhOf(key, &fh);
  if (st) return st;
  *nwritten = 0;
  *committed = upstream::StableHow::kFileSync;
  StateId sid = sid_of();
  while (*nwritten < len) {
    uint32_t chunk = uint32_t(std::min<size_t>(len - *nwritten, max_write_));
    // The change attribute just before and the attributes just after the
    // WRITE: when nothing else changed the file in between, the written
    // bytes update the cached blocks and a read-back is a hit.
    cache_->BeginOwnChange(key);
    Compound c;
    c.SetTag("write").Putfh(fh);
    if (own) own->AddTo(&c);
    c.Getattr(upstream::kAttrChange)
        .Write(sid, offset + *nwritten, stable, buf + *nwritten, chunk)
        .Getattr(upstream::kAttrsObject);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (own && !own->Done(rep, st)) {
      // Refused (the server dropped it meanwhile): the WRITE never ran,
      // and goes alone.
      cache_->AfterOwnChange(key, false, 0, Attrs());
      continue;
    }
    if (IsStateError(st)) {
      cache_->AfterOwnChange(key, false, 0, Attrs());  // nothing written
      if (sid == StateId::Anonymous()) return st;
      StateId fresh = sid_of();
      sid = fresh == sid ? StateId::Anonymous() : fresh;
      continue;
    }
    const OpResult *w = rep.Find(Op::kWrite);
    const OpResult *post = rep.Find(Op::kGetattr, 1);
    if (!w || w->status || !post || post->status) {
      // Unknown outcome: the cache trusts nothing of the file until it is
      // revalidated.
      cache_->AfterOwnChange(key, false, 0, Attrs());
      if (!w || w->status) return *nwritten ? upstream::kNfs4Ok : st;
    } else {
      cache_->AfterOwnChange(key, true, rep.Find(Op::kGetattr)->attrs.change,
                             post->attrs, offset + *nwritten, buf + *nwritten,
                             w->count);
    }
    *verf = w->verifier;
    *nwritten += w->count;
    *committed = std::min(*committed, w->committed);
    if (w->count == 0) return upstream::kNfs4ErrIo;
  }
  return upstream::kNfs4Ok;
}

uint32_t Core::Commit(const Creds &cr, Key key, uint64_t offset, uint64_t len) {
  (void)offset;  // the whole file is committed: cheaper than tracking ranges
  (void)len;
  // Writes sent through UNSTABLE and not yet committed at the remote are
  // committed first, also when the file has gone write-back since (a write
  // delegation, drain lifted): the client was told they are durable once
  // this COMMIT succeeds, and the store never held them.
  if (unstable_writes_) {
    const uint32_t st = unstable_writes_->Commit(key, cr);
    if (st != upstream::kNfs4Ok) return st;
  }
  // Write-back writes are durable in the store; every other write was sent
  // FILE_SYNC or stable.
  return upstream::kNfs4Ok;
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
      conflict->length = r->denied.length == UINT64_MAX ? 0 : r->denied.length;
      conflict->write = r->denied.type == upstream::LockType::kWrite ||
                        r->denied.type == upstream::LockType::kWriteWait;
    }
  };

  // Under our write delegation no other client of the server has the file
  // open, so none holds a lock on it: a test finds no conflict there
  // (Ganesha has checked its own clients' locks), and a lock is granted
  // here, to be sent before the delegation goes back (RFC 7530 10.4).
  if (op == NACHE_LOCK_TEST &&
      delegations_->Covers(key, upstream::kShareAccessWrite, 0, nullptr))
    return upstream::kNfs4Ok;
  if (op == NACHE_LOCK_TEST) {
    // The local owner's own locks are no conflict: when it holds locks
    // upstream, the test goes as that lock-owner (the server answers for
    // its others); otherwise as a name of its own, which holds nothing.
    std::string name;
    if (opens_->Contains(key)) {
      std::shared_ptr<FileOpen> f = opens_->Get(key);
      {
        MutexLock fg(&f->owner->mu);
        auto lit = f->lock_owners.find(owner);
        if (lit != f->lock_owners.end() && lit->second.established)
          name = lit->second.name;
      }
      opens_->Unpin(f);
    }
    if (name.empty()) name = owner_prefix_ + "-t" + std::to_string(key);
    Compound c;
    c.SetTag("lockt").Putfh(fh).Lockt(type, offset, up_len, 0, name);
    CompoundReply rep;
    st = Run(c, cr, &rep);
    if (st == upstream::kNfs4ErrDenied) fill_conflict(rep, Op::kLockt);
    return st;
  }
  if (open == nullptr) {
    if (op != NACHE_UNLOCK) return upstream::kNfs4ErrOpenmode;
    // An unlock with no local open: NLM's, whose lock state may have no
    // open of its own (any more). The owner's locks, if it holds any,
    // hang off the file's upstream open.
    if (!opens_->Contains(key)) return upstream::kNfs4Ok;
    std::shared_ptr<FileOpen> f = opens_->Get(key);
    {
      MutexLock fg(&f->owner->mu);
      ResetIfStale(f.get());
      st = UnlockLocked(cr, f.get(), fh, owner, type, offset, up_len);
    }
    opens_->Unpin(f);
    return st;
  }

  FileOpen *f = open->file.get();
  MutexLock fg(&f->owner->mu);
  ResetIfStale(f);
  // (Under the owner's mutex: a return of the delegation, which sends
  // these first, waits for it.)
  if (op == NACHE_LOCK &&
      delegations_->Covers(key, upstream::kShareAccessWrite, 0, nullptr)) {
    LockOwnerState &lo = LockOwnerFor(f, owner);
    lo.creds = cr;
    AddHeldLock(&lo.local, type, offset, up_len);
    metrics_->CountLocalLock();
    return upstream::kNfs4Ok;
  }
  if (op == NACHE_UNLOCK)
    return UnlockLocked(cr, f, fh, owner, type, offset, up_len);
  if (!f->open()) {
    // Opened locally under our read delegation: locks are the server's
    // business even so (others may lock the file too), and hang off an
    // upstream open.
    st = UpstreamOpenByHandle(cr, f, f->WantAccess(), f->WantDeny(), nullptr);
    if (st && st != upstream::kNfs4ErrNoent) return st;
  }
  if (!f->open()) {
    // Locks hang off an upstream open; a file we could not open by name
    // upstream cannot carry them.
    return upstream::kNfs4ErrLockNotsupp;
  }
  LockOwnerState &lo = LockOwnerFor(f, owner);

  // A local client's reclaim (after nache restarted) is a new lock
  // upstream: the remote has no grace period for us then, and the lock
  // our previous incarnation held went with its client id.
  (void)reclaim;
  lo.creds = cr;
  CompoundReply rep;
  st = SendLock(cr, f, fh, &lo, type, offset, up_len, false, &rep);
  if (st == upstream::kNfs4ErrDenied) fill_conflict(rep, Op::kLock);
  return st;
}

uint32_t Core::UnlockLocked(const Creds &cr, FileOpen *f, const Fh &fh,
                            const std::string &owner, upstream::LockType type,
                            uint64_t offset, uint64_t length) {
  auto lit = f->lock_owners.find(owner);
  if (lit == f->lock_owners.end()) return upstream::kNfs4Ok;
  LockOwnerState &lo = lit->second;
  // What was granted here (under our write delegation), if any, goes here.
  RemoveHeldLock(&lo.local, offset, length);
  if (!f->open() || !lo.established) return upstream::kNfs4Ok;
  Compound c;
  c.SetTag("locku").Putfh(fh).Locku(type, lo.seqid, lo.stateid, offset, length);
  CompoundReply rep;
  uint32_t st = Run(c, cr, &rep);
  if (const OpResult *r = rep.Find(Op::kLocku)) {
    OpenTable::AdvanceSeqid(&lo.seqid, r->status);
    if (!r->status) {
      lo.stateid = r->stateid;
      RemoveHeldLock(&lo.held, offset, length);
    }
  }
  return st;
}

LockOwnerState &Core::LockOwnerFor(FileOpen *f, const std::string &owner) {
  auto it = f->lock_owners.find(owner);
  if (it != f->lock_owners.end()) return it->second;
  LockOwnerState lo;
  lo.name = owner_prefix_ + "-l" + std::to_string(++lock_serial_);
  return f->lock_owners.emplace(owner, lo).first->second;
}

void Core::SendLocalLocks(FileOpen *f, const Fh &fh) {
  for (auto &kv : f->lock_owners) {
    LockOwnerState &lo = kv.second;
    std::vector<HeldLock> want;
    want.swap(lo.local);
    for (const HeldLock &h : want) {
      uint32_t st = SendHeldLock(f, fh, &lo, h, false);
      if (st)
        NACHE_LOG(kLogMajor, "NACHE_DELEG",
                  "lock [%llu, +%llu) of %llu, granted here under our write "
                  "delegation, refused at the remote before the return "
                  "(%s): its holder here no longer excludes others",
                  (unsigned long long)h.offset,
                  (unsigned long long)HeldLength(h), (unsigned long long)f->key,
                  nache_status_name(st));
    }
  }
}

uint32_t Core::SendHeldLock(FileOpen *f, const Fh &fh, LockOwnerState *lo,
                            const HeldLock &h, bool reclaim) {
  CompoundReply rep;
  return SendLock(lo->creds, f, fh, lo, h.type, h.offset, HeldLength(h),
                  reclaim, &rep);
}

uint32_t Core::SendLock(const Creds &cr, FileOpen *f, const Fh &fh,
                        LockOwnerState *lo, upstream::LockType type,
                        uint64_t offset, uint64_t length, bool reclaim,
                        CompoundReply *rep) {
  upstream::LockArgs a;
  a.type = type;
  a.reclaim = reclaim;
  a.offset = offset;
  a.length = length;
  if (!lo->established) {
    a.new_lock_owner = true;
    a.open_seqid = f->owner->seqid;
    { a.open_stateid = f->stateid(); }
    a.lock_seqid = 0;
    a.owner = lo->name;
  } else {
    a.lock_stateid = lo->stateid;
    a.lock_seqid = lo->seqid;
  }
  Compound c;
  c.SetTag(reclaim ? "lock_reclaim" : "lock").Putfh(fh).Lock(a);
  uint32_t st = Run(c, cr, rep);
  const OpResult *r = rep->Find(Op::kLock);
  if (r) {
    if (a.new_lock_owner) {
      OpenTable::AdvanceSeqid(&f->owner->seqid, r->status);
      if (!r->status) {
        lo->established = true;
        lo->seqid = 1;
      }
    } else {
      OpenTable::AdvanceSeqid(&lo->seqid, r->status);
    }
    if (!r->status) {
      lo->stateid = r->stateid;
      AddHeldLock(&lo->held, type, offset, length);
    }
  }
  return st;
}

}  // namespace nache
