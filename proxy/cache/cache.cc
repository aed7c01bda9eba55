// The cache of remote objects. See cache.h.
#include "cache/cache.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "metrics/metrics.h"
#include "util/bytes.h"
#include "util/log.h"

namespace nache {
namespace {

using rocksdb::WriteBatch;

upstream::Time RealNow() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return upstream::Time{now.tv_sec, uint32_t(now.tv_nsec)};
}

// l with the entry `removed` gone and `added` (as added_key) at the end
// (empty names: none).
std::shared_ptr<const std::vector<CachedDirent>> EditedListing(
    const std::vector<CachedDirent> &l, const std::string &removed,
    const std::string &added, Key added_key) {
  auto out = std::make_shared<std::vector<CachedDirent>>();
  for (const CachedDirent &e : l)
    if ((removed.empty() || e.name != removed) &&
        (added.empty() || e.name != added))
      out->push_back(e);
  if (!added.empty()) out->push_back(CachedDirent{added, added_key, 0});
  return out;
}

// Keys sort by object, then block number: big-endian fixed width.
std::string ObjKey(Key key) {
  std::string s;
  PutBE64(&s, key);
  return s;
}
std::string BlockKey(Key key, uint64_t idx) {
  std::string s;
  PutBE64(&s, key);
  PutBE64(&s, idx);
  return s;
}

// attrs record: version byte, generation, sizeof(Attrs), raw Attrs. Attrs is
// plain data; a record of another layout is ignored (the object is simply
// refetched).
// Version 2 adds the mask of attributes set locally and not yet flushed
// (write-back).
constexpr uint8_t kAttrsVersion = 3;
// attrs record: version, generation, have, the attributes, the pending
// setattr mask (v2), and the remote state a dirty object is based on (v3).
struct AttrsRecord {
  uint64_t gen = 0;
  bool have = false;
  upstream::Attrs a;
  uint64_t set_mask = 0;
  uint64_t remote_size = 0, remote_change = 0;
  uint8_t base = 0;  // kBase* bits
};
constexpr uint8_t kBaseKnown = 1, kBaseUncertain = 2;
std::string EncodeAttrsRecord(const AttrsRecord &r) {
  std::string s(1, char(kAttrsVersion));
  PutBE64(&s, r.gen);
  s.push_back(r.have ? 1 : 0);
  uint32_t n = sizeof(r.a);
  s.append(reinterpret_cast<const char *>(&n), 4);
  s.append(reinterpret_cast<const char *>(&r.a), sizeof(r.a));
  PutBE64(&s, r.set_mask);
  PutBE64(&s, r.remote_size);
  PutBE64(&s, r.remote_change);
  s.push_back(char(r.base));
  return s;
}
bool DecodeAttrsRecord(const std::string &s, AttrsRecord *r) {
  const size_t v1 = 1 + 8 + 1 + 4 + sizeof(r->a);
  const size_t sizes[] = {0, v1, v1 + 8, v1 + 8 + 17};
  uint8_t v = s.empty() ? 0 : uint8_t(s[0]);
  if (v < 1 || v > kAttrsVersion || s.size() != sizes[v]) return false;
  uint32_t n;
  memcpy(&n, s.data() + 10, 4);
  if (n != sizeof(r->a)) return false;
  *r = AttrsRecord();
  r->gen = GetBE64(s.data() + 1);
  r->have = s[9] != 0;
  memcpy(&r->a, s.data() + 14, sizeof(r->a));
  if (v >= 2) r->set_mask = GetBE64(s.data() + v1);
  if (v >= 3) {
    r->remote_size = GetBE64(s.data() + v1 + 8);
    r->remote_change = GetBE64(s.data() + v1 + 16);
    r->base = uint8_t(s[v1 + 24]);
  }
  return true;
}

// block_meta record: generation, change read under, length, dirty; a
// dirty block also has its dirty byte range and dirty epoch (write-back).
struct DirtyMark {
  uint32_t lo = 0, hi = 0;  // dirty bytes [lo, hi) within the block
  uint64_t epoch = 0;       // bumped by every local write of the block
};
std::string EncodeBlockMeta(uint64_t gen, uint64_t change, uint32_t len,
                            bool dirty, const DirtyMark &m = DirtyMark()) {
  std::string s;
  PutBE64(&s, gen);
  PutBE64(&s, change);
  PutBE64(&s, len);
  s.push_back(dirty ? 1 : 0);
  if (dirty) {
    PutBE32(&s, m.lo);
    PutBE32(&s, m.hi);
    PutBE64(&s, m.epoch);
  }
  return s;
}
bool DecodeBlockMeta(const rocksdb::Slice &s, uint64_t *gen, uint32_t *len,
                     bool *dirty, DirtyMark *m) {
  if (s.size() != 25 && s.size() != 41) return false;
  *gen = GetBE64(s.data());
  *len = uint32_t(GetBE64(s.data() + 16));
  *dirty = s.data()[24] != 0;
  if (*dirty != (s.size() == 41)) return false;
  if (*dirty) {
    m->lo = GetBE32(s.data() + 25);
    m->hi = GetBE32(s.data() + 29);
    m->epoch = GetBE64(s.data() + 33);
  }
  return true;
}

// What of a change of attributes invalidates access results.
// Whether the attributes that decide a caller's rights differ, leaving
// the change attribute aside.
bool RightsAttrsChanged(const upstream::Attrs &a, const upstream::Attrs &b) {
  const uint64_t unmapped =
      upstream::kAttrOwnerUnmapped | upstream::kAttrGroupUnmapped;
  return a.mode != b.mode || a.uid != b.uid || a.gid != b.gid ||
         ((a.mask ^ b.mask) & unmapped);
}

// Whether ACCESS answers given under a may not hold under b: rights
// attributes, or any change (an ACL moves only the change attribute).
bool AccessInvariantChanged(const upstream::Attrs &a,
                            const upstream::Attrs &b) {
  return RightsAttrsChanged(a, b) || a.change != b.change;
}

// FNV-1a: a cheap, stable hash for in-memory identities (credentials,
// records as last written), continued from h over n bytes.
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
uint64_t Fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Objects in use a trim passes over at most beyond those it drops; and
// how far LoadIndex lets the objects it loads exceed the bound.
constexpr uint64_t kTrimBatch = 64;
// Blocks being assembled from our writes' pieces, over all objects (each
// holds up to a block in memory).
constexpr size_t kMaxAssemblies = 64;

// Pin records (kMeta "pin/<root>"): version, the path's length and bytes,
// the number of objects, then each object's key and size.
constexpr char kPinPrefix[] = "pin/";
constexpr uint8_t kPinVersion = 1;
std::string PinName(Key root) {
  std::string s = kPinPrefix;
  PutBE64(&s, root);
  return s;
}
std::string EncodePin(const Cache::Pin &p) {
  std::string s(1, char(kPinVersion));
  PutBE32(&s, uint32_t(p.path.size()));
  s += p.path;
  PutBE64(&s, p.objects.size());
  for (const Cache::PinnedObject &o : p.objects) {
    PutBE64(&s, o.key);
    PutBE64(&s, o.size);
  }
  return s;
}
bool DecodePin(Key root, const std::string &s, Cache::Pin *p) {
  if (s.size() < 13 || uint8_t(s[0]) != kPinVersion) return false;
  uint32_t plen = GetBE32(s.data() + 1);
  if (s.size() < 13 + uint64_t(plen)) return false;
  uint64_t n = GetBE64(s.data() + 5 + plen);
  if ((s.size() - 13 - plen) / 16 != n || (s.size() - 13 - plen) % 16)
    return false;
  p->root = root;
  p->path = s.substr(5, plen);
  p->objects.resize(n);
  const char *at = s.data() + 13 + plen;
  for (uint64_t i = 0; i < n; i++, at += 16)
    p->objects[i] = Cache::PinnedObject{GetBE64(at), GetBE64(at + 8)};
  return true;
}

}  // namespace

uint64_t DefaultMaxObjects(uint64_t size_bytes) {
  return std::min<uint64_t>(1000000,
                            std::max<uint64_t>(10000, size_bytes >> 15));
}

Cache::Cache(Store *store, const CacheOptions &opts,
             metrics::ExportMetrics *metrics)
    : store_(store),
      opts_(opts),
      metrics_(metrics),
      max_objects_(opts.max_objects ? opts.max_objects
                                    : DefaultMaxObjects(opts.size_bytes)) {
  LoadIndex();
}

Cache::~Cache() = default;

uint64_t Cache::CredId(const upstream::Creds &cr) {
  // Over uid, gid and the group list, each as 4 bytes, low byte first.
  uint64_t h = kFnvOffset;
  auto mix = [&h](uint32_t v) {
    const unsigned char b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16),
                                uint8_t(v >> 24)};
    h = Fnv1a(h, b, 4);
  };
  mix(cr.uid);
  mix(cr.gid);
  for (uint32_t g : cr.groups) mix(g);
  return h;
}

void Cache::LoadIndex() {
  // Rebuild the block index from block_meta (loading each file's object
  // for its generation); blocks of a stale generation are deleted.
  Locked g(this);
  LoadPins();
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(
      store_->db()->NewIterator(ro, store_->family(Store::kBlockMeta)));
  WriteBatch stale;
  uint64_t highest = 0;  // the highest generation or epoch stored
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    uint64_t gen;
    uint32_t len;
    bool dirty;
    DirtyMark mark;
    if (k.size() != 16 ||
        !DecodeBlockMeta(it->value(), &gen, &len, &dirty, &mark)) {
      stale.Delete(store_->family(Store::kBlockMeta), k);
      stale.Delete(store_->family(Store::kBlocks), k);
      continue;
    }
    Key key = GetBE64(k.data());
    uint64_t idx = GetBE64(k.data() + 8);
    // The objects loaded for their generation stay within the bound
    // (trimmed before, never while a pointer to one is held).
    if (objects_.size() > max_objects_ + kTrimBatch) TrimObjectsLocked();
    Object *o = Obj(key);
    highest = std::max({highest, gen, o->gen, mark.epoch});
    if (gen != o->gen) {
      stale.Delete(store_->family(Store::kBlockMeta), k);
      stale.Delete(store_->family(Store::kBlocks), k);
      continue;
    }
    BlockInfo &b = blocks_[BlockId{key, idx}];
    b.len = len;
    b.gen = gen;
    b.dirty = dirty;
    b.dirty_lo = mark.lo;
    b.dirty_hi = mark.hi;
    b.dirty_epoch = mark.epoch;
    if (dirty) {
      NACHE_LOG(kLogDebug, "NACHE_CACHE",
                "unflushed: block %llu of %llu, bytes %u to %u (epoch %llu)",
                (unsigned long long)idx, (unsigned long long)key, mark.lo,
                mark.hi, (unsigned long long)mark.epoch);
      // Unflushed local writes from before the restart: due at once.
      if (o->dirty_blocks++ == 0)
        o->dirty_since = Clock::time_point(Clock::duration(1));
      dirty_bytes_ += mark.hi - mark.lo;
      IndexDirtyLocked(key, *o);
    }
    b.lru = lru_.insert(lru_.end(), BlockId{key, idx});
    bytes_ += len;
    nblocks_++;
  }
  if (stale.Count() > 0) Commit(&stale);
  // Objects with attributes set locally and not flushed (write-back).
  std::unique_ptr<rocksdb::Iterator> at(
      store_->db()->NewIterator(ro, store_->family(Store::kAttrs)));
  std::vector<Key> set_locally;
  for (at->SeekToFirst(); at->Valid(); at->Next()) {
    if (at->key().size() != 8) continue;
    AttrsRecord r;
    if (!DecodeAttrsRecord(at->value().ToString(), &r)) continue;
    highest = std::max(highest, r.gen);
    if (r.set_mask != 0) set_locally.push_back(GetBE64(at->key().data()));
  }
  // Stamps continue above everything stored: no generation or epoch a
  // record holds is ever handed out again (in-flight fetches and flushes
  // die with the process, so only stored ones matter).
  stamp_ = highest + 1;
  for (Key key : set_locally) {
    Object *o = Obj(key);
    o->dirty_since = Clock::time_point(Clock::duration(1));
    o->set_epoch = NextStampLocked();
    IndexDirtyLocked(key, *o);
  }
  if (nblocks_ > 0)
    NACHE_LOG(kLogEvent, "NACHE_CACHE",
              "cache holds %llu blocks (%llu bytes) of %zu files",
              (unsigned long long)nblocks_, (unsigned long long)bytes_,
              objects_.size());
  EvictLocked();  // the bound may have shrunk since the last run
}

Cache::Object *Cache::FindLocked(Key key) {
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  Object *o = it->second.get();
  object_lru_.splice(object_lru_.end(), object_lru_, o->lru);
  return o;
}

Cache::Object *Cache::Obj(Key key) {
  if (Object *found = FindLocked(key)) return found;
  std::unique_ptr<Object> o(new Object());
  std::string rec;
  if (store_->db()
          ->Get(rocksdb::ReadOptions(), store_->family(Store::kAttrs),
                ObjKey(key), &rec)
          .ok()) {
    AttrsRecord r;
    if (DecodeAttrsRecord(rec, &r)) {
      o->gen = r.gen;
      o->have_attrs = r.have;
      o->attrs = r.a;
      o->set_mask = r.set_mask;
      o->remote_size = r.remote_size;
      o->remote_change = r.remote_change;
      o->base_known = r.base & kBaseKnown;
      o->base_uncertain = r.base & kBaseUncertain;
    }
  }
  // What the store holds, as this object encodes it (a record of an older
  // version, or none, is rewritten if the object is dropped).
  o->record_hash = RecordHash(EncodeRecord(*o));
  // (A READDIR begun before a drop and reload is refused: not this epoch.)
  o->listing_epoch = NextStampLocked();
  o->lru = object_lru_.insert(object_lru_.end(), key);
  Object *p = o.get();
  objects_.emplace(key, std::move(o));
  return p;
}

std::string Cache::EncodeRecord(const Object &o) {
  return EncodeAttrsRecord(AttrsRecord{
      o.gen, o.have_attrs, o.attrs, o.set_mask, o.remote_size, o.remote_change,
      uint8_t((o.base_known ? kBaseKnown : 0) |
              (o.base_uncertain ? kBaseUncertain : 0))});
}

uint64_t Cache::RecordHash(const std::string &encoded) {
  // Never 0 (0 is "not known").
  return Fnv1a(kFnvOffset, encoded.data(), encoded.size()) | 1;
}

void Cache::TrimObjectsLocked() {
  if (objects_.size() <= max_objects_) return;
  // Records are kept current by PersistAttrs, so dropping an object
  // mostly writes nothing; those that differ go in one batch.
  const uint64_t want = objects_.size() - max_objects_;
  WriteBatch batch;
  std::vector<Key> victims;
  // Objects in use are passed over (and moved to the recent end, so that
  // the next trim does not look at them again first), a bounded number per
  // trim: when everything old is in use the bound is exceeded for a while.
  uint64_t looked = 0;
  for (auto it = object_lru_.begin();
       it != object_lru_.end() && victims.size() < want &&
       looked < want + kTrimBatch;
       looked++) {
    Key k = *it;
    Object &o = *objects_.find(k)->second;
    auto next = std::next(it);
    if (!MayDrop(o)) {
      object_lru_.splice(object_lru_.end(), object_lru_, it);
      it = next;
      continue;
    }
    std::string rec = EncodeRecord(o);
    if (RecordHash(rec) != o.record_hash)
      batch.Put(store_->family(Store::kAttrs), ObjKey(k), rec);
    victims.push_back(k);
    it = next;
  }
  if (batch.Count() > 0) {
    rocksdb::Status st = store_->Write(rocksdb::WriteOptions(), &batch);
    if (!st.ok()) return;  // their state is only here: they stay
  }
  for (Key k : victims) {
    auto it = objects_.find(k);
    ClearAssembliesLocked(it->second.get());
    object_lru_.erase(it->second->lru);
    objects_.erase(it);
  }
  object_evictions_ += victims.size();
}

bool Cache::IsFresh(const Object &o) const {
  if (!o.have_attrs) return false;
  if (IsDirtyObj(o)) return true;  // ours is newest
  if (o.validated != Clock::time_point()) {
    Clock::time_point now = Clock::now();
    if (o.delegated && lease_clock_ && now < lease_clock_()) return true;
    if (now - o.validated < std::chrono::milliseconds(opts_.attr_timeout_ms))
      return true;
  }
  // Disconnected, serving stale: whatever we know (also from before a
  // restart).
  return stale_ok_ && stale_ok_();
}

void Cache::SetDelegated(Key key, bool delegated) {
  Locked g(this);
  if (!delegated && objects_.find(key) == objects_.end()) return;
  Obj(key)->delegated = delegated;
}

void Cache::SetLeaseClock(std::function<Clock::time_point()> f) {
  lease_clock_ = std::move(f);
}

void Cache::SetStaleOk(std::function<bool()> f) { stale_ok_ = std::move(f); }

void Cache::PersistAttrs(Key key, Object &o, void *batch) {
  std::string rec = EncodeRecord(o);
  // Taken as written; a batch that fails clears it again (Commit).
  o.record_hash = RecordHash(rec);
  static_cast<WriteBatch *>(batch)->Put(store_->family(Store::kAttrs),
                                        ObjKey(key), rec);
}

bool Cache::Commit(void *batch) {
  rocksdb::WriteOptions wo;
  rocksdb::Status st = store_->Write(wo, static_cast<WriteBatch *>(batch));
  if (st.ok()) return true;
  // Not in the store (a full disk): the index must not promise the clean
  // blocks this batch wrote, whose bytes on disk are older or missing.
  // They are read from the remote again.
  // Nor does it hold the attrs records this batch wrote: an object
  // dropped from memory must write its record again.
  struct DropPuts : public WriteBatch::Handler {
    Cache *c;
    uint32_t meta_cf, attrs_cf;
    rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice &k,
                          const rocksdb::Slice &) override {
      c->mu_.AssertHeld();  // (run by Commit, under it)
      if (cf == meta_cf && k.size() == 16)
        c->UncacheCleanLocked(GetBE64(k.data()), GetBE64(k.data() + 8));
      if (cf == attrs_cf && k.size() == 8) {
        auto o = c->objects_.find(GetBE64(k.data()));
        if (o != c->objects_.end()) o->second->record_hash = 0;
      }
      return rocksdb::Status::OK();
    }
  } drop;
  drop.c = this;
  drop.meta_cf = store_->family(Store::kBlockMeta)->GetID();
  drop.attrs_cf = store_->family(Store::kAttrs)->GetID();
  static_cast<WriteBatch *>(batch)->Iterate(&drop);
  if (!store_->no_space())  // the store logs a full disk itself, once
    NACHE_LOG(kLogCrit, "NACHE_CACHE", "cache store write failed: %s",
              st.ToString().c_str());
  return false;
}

void Cache::UncacheCleanLocked(Key key, uint64_t idx) {
  auto b = FindBlock(key, idx);
  if (b == blocks_.end() || b->second.dirty) return;
  bytes_ -= b->second.len;
  nblocks_--;
  lru_.erase(b->second.lru);
  blocks_.erase(b);
}

void Cache::DropData(Key key, Object *o, void *batchp) {
  WriteBatch *batch = static_cast<WriteBatch *>(batchp);
  o->gen = NextStampLocked();
  ClearAssembliesLocked(o);
  o->access.clear();
  o->listing.reset();
  auto first = BlocksFrom(key), it = first;
  for (; it != blocks_.end() && it->first.key == key; ++it) {
    // Dirty blocks are dropped only with the object (Forget: removed, so
    // its unflushed data need never be sent); other callers check first.
    if (it->second.dirty)
      dirty_bytes_ -= it->second.dirty_hi - it->second.dirty_lo;
    bytes_ -= it->second.len;
    nblocks_--;
    lru_.erase(it->second.lru);
  }
  if (first != it) {
    std::string lo = BlockKey(key, 0), hi = BlockKey(key + 1, 0);
    batch->DeleteRange(store_->family(Store::kBlockMeta), lo, hi);
    batch->DeleteRange(store_->family(Store::kBlocks), lo, hi);
    blocks_.erase(first, it);
  }
  o->dirty_blocks = 0;
  o->dirty_since = o->set_mask ? o->dirty_since : Clock::time_point();
  IndexDirtyLocked(key, *o);
}

void Cache::IndexDirtyLocked(Key key, const Object &o) {
  if (IsDirtyObj(o))
    dirty_[key] = o.dirty_since;
  else
    dirty_.erase(key);
}

// --- attributes -----------------------------------------------------------

bool Cache::ValidatedSince(Key key, Clock::time_point since, Attrs *out) {
  Locked g(this);
  Object *o = FindLocked(key);
  if (!o || !o->have_attrs || o->validated == Clock::time_point() ||
      o->validated < since)
    return false;
  *out = o->attrs;
  return true;
}

bool Cache::FreshAttrs(Key key, Attrs *out) {
  bool hit = false;
  {
    Locked g(this);
    Object *found = FindLocked(key);
    if (found && IsFresh(*found)) {
      *out = found->attrs;
      hit = true;
    } else if (!found && stale_ok_ && stale_ok_()) {
      // Serving stale: what the store knew before a restart counts too.
      Object *o = Obj(key);
      if (o->have_attrs) {
        *out = o->attrs;
        hit = true;
      }
    }
  }
  if (metrics_) metrics_->CountCache(metrics::CacheKind::kAttrs, hit, 0);
  return hit;
}

bool Cache::KnownAttrs(Key key, Attrs *out) {
  Locked g(this);
  Object *o = Obj(key);
  if (!o->have_attrs) return false;
  *out = o->attrs;
  return true;
}

void Cache::Validated(Key key, const Attrs &a) {
  if (!(a.mask & upstream::kAttrChange)) return;  // cannot validate
  Locked g(this);
  Object *o = Obj(key);
  if (IsDirtyObj(*o)) {
    // Our unflushed writes make our view the newest: the remote's
    // attributes only tell what it holds (single writer: nothing else
    // changes it meanwhile).
    o->remote_size = a.size;
    return;
  }
  if (o->have_attrs && o->attrs.change != a.change) {
    // A state of ours the cache has moved past: the reply was overtaken.
    if (changes_grow_ && a.change < o->attrs.change &&
        (InOwnRanges(*o, a.change) || KnownOwnChange(*o, a.change)))
      return;
    // Possibly a state one of ours passed through: judged when they are
    // back (AfterOwnChange). Beyond kMaxSeen such states it is judged now.
    if (o->own_inflight > 0) {
      size_t seen = 0;
      for (const auto &p : o->parked) {
        if (p.seen && p.pre == a.change) return;  // parked already
        seen += p.seen;
      }
      if (seen < kMaxSeen) {
        o->parked.push_back(
            Object::Parked{a.change, a, 0, std::string(), true});
        return;
      }
    }
  }
  WriteBatch batch;
  // (A directory's size says nothing about its entries beyond its change.)
  bool moved = !o->have_attrs || o->attrs.change != a.change ||
               (a.type != upstream::FileType::kDir && o->attrs.size != a.size);
  if (moved) {
    DropData(key, o, &batch);
  } else if (AccessInvariantChanged(o->attrs, a)) {
    o->access.clear();
  }
  o->attrs = a;
  o->have_attrs = true;
  o->validated = Clock::now();
  moved |= SeenRemoteLocked(o, a);
  // Only the change attribute and generation matter across a restart
  // (everything is revalidated before use), so an unchanged object costs
  // no store write.
  if (moved) {
    PersistAttrs(key, *o, &batch);
    Commit(&batch);
  }
}

void Cache::BeginOwnChange(Key key) {
  Locked g(this);
  Object *o = Obj(key);
  // The state the first of ours in flight starts from is a known one.
  if (o->own_inflight++ == 0 && o->have_attrs) {
    o->own_floor = o->attrs.change;
    AddOwnRange(o, o->attrs.change, o->attrs.change);
  }
}

void Cache::AfterOwnChange(Key key, bool have_pre, uint64_t pre,
                           const Attrs &post, uint64_t off, const char *buf,
                           size_t len) {
  Locked g(this);
  Object *o = Obj(key);
  if (o->own_inflight > 0) o->own_inflight--;
  WriteBatch batch;
  if (IsDirtyObj(*o) && len == 0) {
    // Locally authoritative (our unflushed changes are newer): the
    // remote's attributes change neither our data nor our view. An
    // operation of ours that started from the base moved the remote, so
    // the base moves with it, or the next flush would take our own
    // change for someone else's. One whose outcome is unknown may have
    // moved it: the base is uncertain. One that started elsewhere stays
    // for the conflict check to see.
    if (!(post.mask & upstream::kAttrChange) || !have_pre) {
      o->base_uncertain = true;
    } else if (o->base_known && pre == o->remote_change) {
      o->remote_change = post.change;
      o->remote_size = post.size;
    }
    PersistAttrs(key, *o, &batch);
    Commit(&batch);
    return;
  }
  if (!(post.mask & upstream::kAttrChange)) {
    DropData(key, o, &batch);  // cannot tell: trust nothing
    o->have_attrs = false;
    ForgetOwnChangesLocked(o);
  } else if (have_pre && OursLocked(*o, pre, post.change)) {
    // A SETATTR of ours on a directory, alone and straight after the
    // change its listing was taken at, changes no entry: the listing
    // stays (a create in it next is not preceded by a READDIR again).
    const bool listing_stays = len == 0 && o->listing &&
                               o->attrs.type == upstream::FileType::kDir &&
                               o->own_inflight == 0 && o->attrs.change == pre &&
                               o->listing_change == pre && post.change >= pre;
    ApplyOwnLocked(key, o, pre, post, off, buf, len, &batch);
    if (listing_stays) o->listing_change = post.change;
    // Parked completions may follow on from this one.
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t i = 0; i < o->parked.size(); i++) {
        if (!OursLocked(*o, o->parked[i].pre, o->parked[i].post.change))
          continue;
        Object::Parked p = std::move(o->parked[i]);
        o->parked.erase(o->parked.begin() + i);
        progress = true;
        if (p.seen) break;  // explained: nothing to apply
        // Applying reads the cached blocks back: write what is pending.
        Commit(&batch);
        batch.Clear();
        ApplyOwnLocked(key, o, p.pre, p.post, p.off, p.data.data(),
                       p.data.size(), &batch);
        break;
      }
    }
  } else if (have_pre && o->have_attrs && o->own_inflight > 0) {
    o->parked.push_back(
        Object::Parked{pre, post, off, std::string(buf ? buf : "", len)});
  } else {
    // Someone else changed the object before our operation.
    DropData(key, o, &batch);
    ForgetOwnChangesLocked(o);
    o->own_changes.push_back(post.change);
    o->attrs = post;
    o->have_attrs = true;
    o->validated = Clock::now();
    SeenRemoteLocked(o, post);
    PersistAttrs(key, *o, &batch);
  }
  if (o->own_inflight == 0 && !o->parked.empty()) {
    // Nothing of ours is left to explain them: foreign changes.
    Attrs newest = o->attrs;
    for (const auto &p : o->parked)
      if (!o->have_attrs || p.post.change > newest.change) newest = p.post;
    DropData(key, o, &batch);
    ForgetOwnChangesLocked(o);
    o->attrs = newest;
    o->have_attrs = true;
    o->validated = Clock::now();
    SeenRemoteLocked(o, newest);
    PersistAttrs(key, *o, &batch);
  }
  // A span vouches only for operations of ours that ran alongside it: once
  // none is in flight, the next one's "before" is known (or foreign).
  if (o->own_inflight == 0) o->own_spans.clear();
  Commit(&batch);  // the written blocks and the attributes together
  EvictLocked();
}

void Cache::ApplyOwnLocked(Key key, Object *o, uint64_t pre, const Attrs &post,
                           uint64_t off, const char *buf, size_t len,
                           void *batch) {
  // Replies of parallel operations arrive in any order: the attributes
  // with the highest change are the newest (servers' change attributes
  // grow).
  bool newest = post.change >= o->attrs.change;
  if (len > 0) {
    ApplyWriteLocked(key, o, off, buf, len, std::max(post.size, o->attrs.size),
                     batch);
  } else if (newest && post.size < o->attrs.size) {
    DropData(key, o, batch);  // truncated
  }
  // A write of ours changes no one's rights but in what the attributes
  // show (the remote clearing a setuid bit): the callers' ACCESS answers
  // stay. Anything else of ours may have moved an ACL, which only the
  // change attribute shows.
  if (newest && (len > 0 ? RightsAttrsChanged(o->attrs, post)
                         : AccessInvariantChanged(o->attrs, post)))
    o->access.clear();
  // The change this one moves on from was ours to know too: another of
  // ours running at once at the server may have read it as its "before"
  // (both read the change attribute before either wrote).
  if (newest && o->have_attrs && o->attrs.change != post.change)
    NoteOwnChangeLocked(o, o->attrs.change);
  // So was the one it started from (ours, or it would not be applied).
  NoteOwnChangeLocked(o, pre);
  NoteOwnChangeLocked(o, post.change);
  if (post.change < pre && changes_grow_) {
    changes_grow_ = false;
    NACHE_LOG(kLogWarn, "NACHE_CACHE",
              "the remote's change attribute went down (%llu to %llu) "
              "across an operation of ours: it is no longer taken to grow",
              (unsigned long long)pre, (unsigned long long)post.change);
  }
  if (o->own_spans.size() >= 64) o->own_spans.erase(o->own_spans.begin());
  o->own_spans.push_back(Object::Span{pre, post.change});
  if (changes_grow_) AddOwnRange(o, pre, post.change);
  if (newest) {
    o->attrs = post;
    o->have_attrs = true;
    o->validated = Clock::now();
    SeenRemoteLocked(o, post);
    PersistAttrs(key, *o, batch);
  }
}

bool Cache::AssembleLocked(Key key, Object *o, uint64_t idx, uint64_t from,
                           const char *buf, uint64_t len, uint64_t need,
                           std::string *block) {
  auto found = o->assembling.find(idx);
  if (found == o->assembling.end()) {
    found = o->assembling.emplace(idx, Object::Assembly()).first;
    found->second.fifo =
        assembly_fifo_.insert(assembly_fifo_.end(), BlockId{key, idx});
    while (assembly_fifo_.size() > kMaxAssemblies) {
      const BlockId oldest = assembly_fifo_.front();
      EraseAssemblyLocked(objects_.at(oldest.key).get(), oldest.idx);
    }
  }
  Object::Assembly &a = found->second;
  if (a.data.size() < from + len) a.data.resize(from + len, '\0');
  memcpy(&a.data[from], buf, len);
  // Merge [from, from + len) into the sorted, disjoint ranges.
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  uint64_t lo = from, hi = from + len;
  for (const auto &r : a.have) {
    if (r.second < lo || r.first > hi) {
      merged.push_back(r);
    } else {
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  merged.emplace_back(lo, hi);
  std::sort(merged.begin(), merged.end());
  a.have.swap(merged);
  if (a.have.size() != 1 || a.have[0].first != 0 || a.have[0].second < need)
    return false;
  *block = a.data.substr(0, need);
  EraseAssemblyLocked(o, idx);
  return true;
}

void Cache::EraseAssemblyLocked(Object *o, uint64_t idx) {
  auto it = o->assembling.find(idx);
  if (it == o->assembling.end()) return;
  assembly_fifo_.erase(it->second.fifo);
  o->assembling.erase(it);
}

void Cache::ClearAssembliesLocked(Object *o) {
  for (auto &a : o->assembling) assembly_fifo_.erase(a.second.fifo);
  o->assembling.clear();
}

bool Cache::KnownOwnChange(const Object &o, uint64_t change) {
  return std::find(o.own_changes.begin(), o.own_changes.end(), change) !=
         o.own_changes.end();
}

void Cache::NoteOwnChangeLocked(Object *o, uint64_t change) {
  if (KnownOwnChange(*o, change)) return;
  if (o->own_changes.size() >= 64) o->own_changes.erase(o->own_changes.begin());
  o->own_changes.push_back(change);
}

bool Cache::OursLocked(const Object &o, uint64_t before, uint64_t after) const {
  if (!o.have_attrs) return false;
  if (o.attrs.change == before || KnownOwnChange(o, before)) return true;
  if (changes_grow_ && before >= o.own_floor && InOwnRanges(o, before))
    return true;
  for (const Object::Span &s : o.own_spans)
    if (after == s.after) return true;
  return false;
}

namespace {
// The first of sorted, disjoint ranges that ends at or after v.
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
Ranges::const_iterator FirstEndingFrom(const Ranges &r, uint64_t v) {
  return std::lower_bound(
      r.begin(), r.end(), v,
      [](const Ranges::value_type &x, uint64_t w) { return x.second < w; });
}
}  // namespace

void Cache::AddOwnRange(Object *o, uint64_t from, uint64_t to) {
  if (to < from) std::swap(from, to);
  Ranges &r = o->own_ranges;
  auto first = FirstEndingFrom(r, from), last = first;
  for (; last != r.end() && last->first <= to; ++last) {
    from = std::min(from, last->first);
    to = std::max(to, last->second);
  }
  r.insert(r.erase(first, last), {from, to});
  if (r.size() > kMaxOwnRanges) r.erase(r.begin());
}

bool Cache::InOwnRanges(const Object &o, uint64_t change) {
  auto it = FirstEndingFrom(o.own_ranges, change);
  return it != o.own_ranges.end() && it->first <= change;
}

void Cache::ForgetOwnChangesLocked(Object *o) {
  o->own_changes.clear();
  o->own_spans.clear();
  o->own_ranges.clear();
  o->parked.clear();
}

void Cache::ExpireAttrs(Key key) {
  Locked g(this);
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  it->second->validated = Clock::time_point();
  it->second->listing.reset();
  it->second->listing_epoch = NextStampLocked();
}

void Cache::OwnChangeUnseen(Key key) {
  Locked g(this);
  Object *o = Obj(key);
  if (!o->have_attrs && !IsDirtyObj(*o)) return;  // nothing known to guard
  if (!IsDirtyObj(*o)) o->validated = Clock::time_point();
  // A flush of it under way must not make the base certain again with
  // attributes from before this change (Flushed).
  if (o->flushing) o->unseen_while_flushing = true;
  if (o->base_uncertain) return;
  o->base_uncertain = true;
  WriteBatch batch;
  PersistAttrs(key, *o, &batch);
  Commit(&batch);  // unsynced, as FlushBegins (see there)
}

void Cache::Forget(Key key) {
  Locked g(this);
  ForgetLocked(key);
}

bool Cache::ForgetIfUnchanged(Key key, uint64_t change) {
  Locked g(this);
  auto it = objects_.find(key);
  if (it != objects_.end() && it->second->have_attrs &&
      it->second->attrs.change != change)
    return false;
  ForgetLocked(key);
  return true;
}

bool Cache::ForgetGone(Key key) {
  Locked g(this);
  Object *o = FindLocked(key);
  if (o && !MayDrop(*o)) return false;
  ForgetLocked(key);
  return true;
}

void Cache::ForgetLocked(Key key) {
  Object *o = Obj(key);
  WriteBatch batch;
  DropData(key, o, &batch);
  o->have_attrs = false;
  o->validated = Clock::time_point();
  batch.Delete(store_->family(Store::kAttrs), ObjKey(key));
  Commit(&batch);
  object_lru_.erase(o->lru);
  objects_.erase(key);
  dirty_.erase(key);
}

// --- access ---------------------------------------------------------------

bool Cache::CachedAccess(Key key, uint64_t who, uint32_t want,
                         uint32_t *allowed) {
  bool hit = false;
  {
    Locked g(this);
    Object *o = FindLocked(key);
    if (o && IsFresh(*o)) {
      const Clock::time_point now = Clock::now();
      const bool vouched = o->delegated && lease_clock_ && now < lease_clock_();
      for (const AccessEntry &e : o->access) {
        if (e.who == who && (e.asked & want) == want &&
            (vouched || now - e.when < kAccessTrust)) {
          *allowed = e.allowed & want;
          hit = true;
          break;
        }
      }
    }
  }
  if (metrics_) metrics_->CountCache(metrics::CacheKind::kAccess, hit, 0);
  return hit;
}

void Cache::NoteAccess(Key key, uint64_t who, uint32_t asked,
                       uint32_t allowed) {
  Locked g(this);
  Object *o = Obj(key);
  const Clock::time_point now = Clock::now();
  for (AccessEntry &e : o->access) {
    if (e.who == who) {
      // A new answer replaces the old one: bits asked only before are
      // forgotten rather than kept past their time.
      e.allowed = allowed & asked;
      e.asked = asked;
      e.when = now;
      return;
    }
  }
  // A handful of identities per object; a long tail is not worth keeping.
  if (o->access.size() >= 16) o->access.erase(o->access.begin());
  o->access.push_back(AccessEntry{who, asked, allowed & asked, now});
}

// --- listings -------------------------------------------------------------

uint64_t Cache::ListingEpoch(Key dir) {
  Locked g(this);
  return Obj(dir)->listing_epoch;
}

void Cache::NoteNameSent(Key dir, const std::string &removed,
                         const std::string &added, Key added_key) {
  Locked g(this);
  EditListingLocked(Obj(dir), removed, added, added_key);
}

void Cache::EditListingLocked(Object *o, const std::string &removed,
                              const std::string &added, Key added_key) {
  o->listing_epoch = NextStampLocked();
  if (o->listing) {
    o->listing = EditedListing(*o->listing, removed, added, added_key);
    o->listing_edited = true;
  }
}

void Cache::PutListing(Key dir, uint64_t change, std::vector<CachedDirent> list,
                       uint64_t epoch) {
  Locked g(this);
  Object *o = Obj(dir);
  if (o->listing_epoch != epoch) return;  // crossed a change of ours
  o->listing_change = change;
  o->listing_edited = false;
  o->listing =
      std::make_shared<const std::vector<CachedDirent>>(std::move(list));
}

void Cache::OwnDirChange(Key dir, const upstream::ChangeInfo &ci,
                         const Attrs &post, const std::string &removed,
                         const std::string &added, Key added_key,
                         bool sole_writer) {
  bool have_post = (post.mask & upstream::kAttrChange) != 0;
  {
    Locked g(this);
    Object *o = Obj(dir);
    // The directory moved by our operation alone (atomic change info
    // starting from the change we know).
    const bool only_ours = ci.atomic && o->have_attrs &&
                           o->attrs.change == ci.before &&
                           (!have_post || post.change == ci.after);
    bool exactly_ours = only_ours && o->listing_change == ci.before;
    o->listing_epoch = NextStampLocked();
    if (o->listing && o->have_attrs && (exactly_ours || sole_writer)) {
      // Exactly our change happened: edit the listing.
      o->listing = EditedListing(*o->listing, removed, added, added_key);
      o->listing_edited = true;
      o->listing_change = have_post ? post.change : ci.after;
      if (have_post) {
        o->attrs = post;
        o->validated = Clock::now();
        SeenRemoteLocked(o, post);
      } else {
        o->attrs.change = ci.after;
        o->validated = Clock::time_point();  // the rest is unknown
      }
      return;
    }
    if (only_ours && have_post && !o->listing &&
        !RightsAttrsChanged(o->attrs, post)) {
      // No listing to edit, but only names moved, by us: the callers'
      // rights answered for the directory still hold (its next create
      // is checked without asking again).
      o->attrs = post;
      o->validated = Clock::now();
      SeenRemoteLocked(o, post);
      WriteBatch batch;
      PersistAttrs(dir, *o, &batch);
      Commit(&batch);
      return;
    }
  }
  if (have_post)
    Validated(dir, post);
  else
    ExpireAttrs(dir);
}

std::shared_ptr<const std::vector<CachedDirent>> Cache::Listing(
    Key dir, bool for_readdir) {
  std::shared_ptr<const std::vector<CachedDirent>> l;
  {
    Locked g(this);
    Object *o = FindLocked(dir);
    if (o && IsFresh(*o) && o->listing &&
        o->listing_change == o->attrs.change &&
        !(for_readdir && o->listing_edited))
      l = o->listing;
  }
  if (metrics_)
    metrics_->CountCache(metrics::CacheKind::kDirents, l != nullptr, 0);
  return l;
}

void Cache::SetUnlistable(Key dir) {
  Locked g(this);
  Obj(dir)->unlistable = true;
}

bool Cache::Unlistable(Key dir) {
  Locked g(this);
  Object *o = FindLocked(dir);
  return o && o->unlistable;
}

bool Cache::ListingDue(Key dir, Clock::duration window) {
  MutexLock g(&listed_mu_);
  const auto now = Clock::now();
  auto &at = listed_at_[dir];
  if (at != Clock::time_point() && now - at < window) return false;
  at = now;
  if (listed_at_.size() > 4096) {
    for (auto it = listed_at_.begin(); it != listed_at_.end();)
      it = now - it->second >= window ? listed_at_.erase(it) : std::next(it);
  }
  return true;
}

void Cache::SetCookieVerf(Key dir, const upstream::Verifier &v) {
  Locked g(this);
  uint64_t raw = 0;
  memcpy(&raw, v.data(), std::min<size_t>(v.size(), 8));
  Obj(dir)->cookie_verf = raw;
}

upstream::Verifier Cache::CookieVerf(Key dir) {
  Locked g(this);
  Object *o = FindLocked(dir);
  uint64_t raw = o ? o->cookie_verf : 0;
  return upstream::Verifier(reinterpret_cast<const char *>(&raw), 8);
}

// --- data -----------------------------------------------------------------

uint64_t Cache::Generation(Key key) {
  Locked g(this);
  return Obj(key)->gen;
}

uint32_t Cache::ValidBlockLenLocked(Key key, Object *o, uint64_t idx) {
  if (!o->have_attrs) return 0;
  auto b = FindBlock(key, idx);
  uint64_t start = idx * opts_.block_size;
  if (b == blocks_.end() || b->second.gen != o->gen || start >= o->attrs.size)
    return 0;
  uint64_t full = std::min<uint64_t>(opts_.block_size, o->attrs.size - start);
  return b->second.len == full ? b->second.len : 0;
}

bool Cache::HasBlock(Key key, uint64_t idx) {
  Locked g(this);
  if (FindBlock(key, idx) == blocks_.end()) return false;
  return ValidBlockLenLocked(key, Obj(key), idx) > 0;
}

bool Cache::GetBlock(Key key, uint64_t idx, std::string *data) {
  uint32_t want_len = 0;
  {
    Locked g(this);
    auto b = FindBlock(key, idx);
    // (The object is loaded again when it was dropped from memory: the
    // block is valid under the generation its record holds.)
    if (b != blocks_.end()) {
      want_len = ValidBlockLenLocked(key, Obj(key), idx);
      if (want_len)  // most recently used
        lru_.splice(lru_.end(), lru_, b->second.lru);
    }
  }
  bool hit = false;
  if (want_len > 0) {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    hit =
        store_->db()
            ->Get(ro, store_->family(Store::kBlocks), BlockKey(key, idx), data)
            .ok() &&
        data->size() == want_len;
  }
  if (metrics_)
    metrics_->CountCache(metrics::CacheKind::kData, hit,
                         hit ? data->size() : 0);
  return hit;
}

bool Cache::PutBlock(Key key, uint64_t idx, uint64_t gen,
                     const std::string &data) {
  Locked g(this);
  Object *o = Obj(key);
  if (gen != o->gen || !o->have_attrs) return false;
  auto b = FindBlock(key, idx);
  if (b != blocks_.end() && b->second.dirty) return false;  // ours is newer
  WriteBatch batch;
  if (!PutBlockLocked(key, o, idx, data, o->attrs.change, false, &batch))
    return false;
  if (!Commit(&batch)) return false;  // not cached (a full disk)
  EvictLocked();
  return true;
}

bool Cache::PutBlockLocked(Key key, Object *o, uint64_t idx,
                           const std::string &data, uint64_t change, bool dirty,
                           void *batchp) {
  if (data.empty() || data.size() > opts_.block_size) return false;
  WriteBatch *batch = static_cast<WriteBatch *>(batchp);
  std::string k = BlockKey(key, idx);
  auto it = FindBlock(key, idx);
  if (it != blocks_.end()) {
    bytes_ -= it->second.len;
    lru_.splice(lru_.end(), lru_, it->second.lru);
  } else {
    it = blocks_.emplace(BlockId{key, idx}, BlockInfo()).first;
    it->second.lru = lru_.insert(lru_.end(), BlockId{key, idx});
    nblocks_++;
  }
  EraseAssemblyLocked(o, idx);  // this block is the truth now
  BlockInfo &b = it->second;
  b.len = uint32_t(data.size());
  b.gen = o->gen;
  b.dirty = b.dirty || dirty;
  bytes_ += b.len;
  batch->Put(store_->family(Store::kBlocks), k, data);
  batch->Put(store_->family(Store::kBlockMeta), k,
             EncodeBlockMeta(b.gen, change, b.len, b.dirty,
                             DirtyMark{b.dirty_lo, b.dirty_hi, b.dirty_epoch}));
  return true;
}

bool Cache::ReadBlockLocked(Key key, const BlockInfo &b, uint64_t idx,
                            std::string *data) {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  return store_->db()
             ->Get(ro, store_->family(Store::kBlocks), BlockKey(key, idx), data)
             .ok() &&
         data->size() == b.len;
}

void Cache::ApplyWriteLocked(Key key, Object *o, uint64_t off, const char *buf,
                             size_t len, uint64_t new_size, void *batchp) {
  const uint64_t bs = opts_.block_size;
  WriteBatch &batch = *static_cast<WriteBatch *>(batchp);
  uint64_t end = off + len;
  for (uint64_t idx = off / bs; idx * bs < end; idx++) {
    uint64_t bstart = idx * bs;
    uint64_t wlo = std::max(off, bstart), whi = std::min(end, bstart + bs);
    std::string block;
    auto it = FindBlock(key, idx);
    bool have = false;
    if (it != blocks_.end() && it->second.gen == o->gen) {
      // A cached block is complete up to its length (the file's end when
      // it is short), so bytes between its end and the write are a hole.
      rocksdb::ReadOptions ro;
      ro.fill_cache = false;
      have = store_->db()
                 ->Get(ro, store_->family(Store::kBlocks), BlockKey(key, idx),
                       &block)
                 .ok() &&
             block.size() == it->second.len;
      bool was_last = bstart + it->second.len >= o->attrs.size;
      if (have && block.size() < wlo - bstart && !was_last) {
        // The file has grown past it meanwhile (a later piece of ours came
        // first): the bytes between are not known yet, what it holds is.
        std::string unused;
        AssembleLocked(key, o, idx, 0, block.data(), block.size(), UINT64_MAX,
                       &unused);
        have = false;
      }
    } else if (wlo == bstart && (whi == bstart + bs || whi >= new_size)) {
      // Not cached, but the write covers the whole block up to the file's
      // (new) end.
      have = true;
    }
    if (!have &&
        AssembleLocked(key, o, idx, wlo - bstart, buf + (wlo - off), whi - wlo,
                       std::min<uint64_t>(bs, new_size - bstart), &block)) {
      // Our writes in flight have now written all of it, in pieces.
      PutBlockLocked(key, o, idx, block, o->attrs.change, false, &batch);
      continue;
    }
    if (!have) {
      // Partially known: drop any stale copy of this block.
      if (it != blocks_.end()) {
        bytes_ -= it->second.len;
        nblocks_--;
        lru_.erase(it->second.lru);
        blocks_.erase(it);
        batch.Delete(store_->family(Store::kBlocks), BlockKey(key, idx));
        batch.Delete(store_->family(Store::kBlockMeta), BlockKey(key, idx));
      }
      continue;
    }
    if (block.size() < whi - bstart) block.resize(whi - bstart, '\0');
    memcpy(&block[wlo - bstart], buf + (wlo - off), whi - wlo);
    PutBlockLocked(key, o, idx, block, o->attrs.change, false, &batch);
  }
}

// --- write-back -------------------------------------------------------------

bool Cache::LocalWrite(Key key, uint64_t off, const char *buf, size_t len,
                       uint64_t *need, uint64_t *unchanged) {
  Locked g(this);
  Object *o = Obj(key);
  if (!o->have_attrs) return false;
  // Bytes assembled from earlier writes of ours no longer tell the file.
  ClearAssembliesLocked(o);
  const uint64_t bs = opts_.block_size;
  const uint64_t old_size = o->attrs.size;
  const uint64_t end = off + len;
  const uint64_t new_size = std::max(old_size, end);
  // What the remote holds: what we had until we first dirty the file.
  if (!IsDirtyObj(*o)) BaseIsCurrentLocked(o);
  // Blocks touched: those the write covers, and the old last block when
  // the write starts beyond it (its tail becomes zeros).
  uint64_t first = off / bs, last = len ? (end - 1) / bs : first;
  if (off > old_size && old_size % bs != 0)
    first = std::min(first, old_size / bs);
  struct Touch {
    uint64_t idx;
    std::string block;
    uint32_t lo, hi;
  };
  std::vector<Touch> touched;
  uint64_t same = 0;  // bytes the write left as they were
  for (uint64_t idx = first; idx <= last; idx++) {
    // Blocks between the old last block and the write stay holes: not
    // stored, read as zeros (ReadsAsZeros), left holes by the flush.
    if (idx > first && idx < off / bs) continue;
    uint64_t bstart = idx * bs;
    uint64_t blen = std::min(bs, new_size - bstart);  // length after
    uint64_t wlo = std::max(off, bstart), whi = std::min(end, bstart + blen);
    if (wlo > whi) wlo = whi;  // a padded block the write does not reach
    Touch t{idx, std::string(), 0, 0};
    auto it = FindBlock(key, idx);
    bool cached = it != blocks_.end() && it->second.gen == o->gen &&
                  ReadBlockLocked(key, it->second, idx, &t.block);
    // Bytes of this block that exist outside the write: from the cache, or
    // zeros where nothing was ever written (beyond both sizes).
    uint64_t known_end =
        std::min(bstart + blen, std::max(old_size, o->remote_size));
    bool outside = (bstart < wlo && bstart < known_end) ||
                   (whi < known_end && whi < bstart + blen);
    // A block wholly beyond the remote's data that we never wrote is a
    // hole an earlier write of ours left (writes arrive out of order when
    // a client flushes its pages in parallel): zeros, nothing to fetch.
    bool hole = bstart >= o->remote_size;
    if (!cached && outside && !hole) {
      *need = idx;
      return false;
    }
    // The write puts back what the block holds (a file rewritten in place
    // with mostly the same bytes): nothing of this block to send.
    if (cached && whi > wlo && whi <= old_size &&
        t.block.size() >= whi - bstart &&
        memcmp(&t.block[wlo - bstart], buf + (wlo - off), whi - wlo) == 0) {
      same += whi - wlo;
      continue;
    }
    t.block.resize(blen, '\0');
    // Bytes beyond the old size (the gap up to the write) read as zeros.
    if (old_size < bstart + blen && old_size > bstart)
      std::fill(t.block.begin() + (old_size - bstart), t.block.end(), '\0');
    if (whi > wlo) memcpy(&t.block[wlo - bstart], buf + (wlo - off), whi - wlo);
    // The dirty range: what the write set, plus the zeros it put between
    // the old end and itself in this block (sent too, so that the block is
    // complete at the remote and stays pinned here until then).
    uint64_t dlo = wlo, dhi = whi;
    if (old_size < whi) dlo = std::min(dlo, std::max(old_size, bstart));
    if (dhi <= dlo) continue;  // nothing of this block changes
    t.lo = uint32_t(dlo - bstart);
    t.hi = uint32_t(dhi - bstart);
    touched.push_back(std::move(t));
  }
  // Put back if the store refuses the write (a full disk): the client is
  // told it failed, so nothing of it may show here either.
  struct Undo {
    Attrs attrs;
    Clock::time_point validated, dirty_since;
    int dirty_blocks;
    uint64_t set_mask, set_epoch, dirty_bytes, bytes, nblocks;
    std::vector<std::pair<bool, BlockInfo>> blocks;  // had it, as it was
  } undo{
      o->attrs,     o->validated, o->dirty_since, o->dirty_blocks, o->set_mask,
      o->set_epoch, dirty_bytes_, bytes_,         nblocks_,        {}};
  for (const Touch &t : touched) {
    auto it = FindBlock(key, t.idx);
    undo.blocks.emplace_back(it != blocks_.end(),
                             it != blocks_.end() ? it->second : BlockInfo());
  }
  WriteBatch batch;
  for (Touch &t : touched) {
    auto it = FindBlock(key, t.idx);
    BlockInfo *b = it != blocks_.end() ? &it->second : nullptr;
    uint32_t lo = t.lo, hi = t.hi;
    if (b && b->dirty) {
      dirty_bytes_ -= b->dirty_hi - b->dirty_lo;
      lo = std::min(lo, b->dirty_lo);
      hi = std::max(hi, b->dirty_hi);
    } else {
      o->dirty_blocks++;
    }
    // Never handed out before, for any file: a flush in flight can only
    // clear the bytes it read (Flushed), even across a truncate or a
    // Forget that started this block over.
    uint64_t epoch = NextStampLocked();
    PutBlockLocked(key, o, t.idx, t.block, o->attrs.change, true, &batch);
    BlockInfo &after = blocks_[BlockId{key, t.idx}];
    after.dirty_lo = lo;
    after.dirty_hi = hi;
    after.dirty_epoch = epoch;
    batch.Put(store_->family(Store::kBlockMeta), BlockKey(key, t.idx),
              EncodeBlockMeta(after.gen, o->attrs.change, after.len, true,
                              DirtyMark{lo, hi, epoch}));
    dirty_bytes_ += hi - lo;
  }
  if (touched.empty() && same > 0) {
    // No data to send, but the remote's mtime must move as our clients
    // saw it move.
    o->set_mask |= upstream::kAttrMtime;
    o->set_epoch = NextStampLocked();
  }
  if (unchanged) *unchanged = same;
  if (o->dirty_since == Clock::time_point() && IsDirtyObj(*o))
    o->dirty_since = Clock::now();
  IndexDirtyLocked(key, *o);
  // Our view of the attributes: size, times, a change clients can see move.
  o->attrs.size = new_size;
  o->attrs.change++;
  o->attrs.mtime = o->attrs.ctime = RealNow();
  o->validated = Clock::now();
  PersistAttrs(key, *o, &batch);
  // Acknowledged writes survive a crash: on disk before the client hears,
  // synced by the call's end when it has a ReplySync (then not under this
  // lock: other clients' calls need it meanwhile).
  rocksdb::Status st = store_->WriteBeforeReply(&batch);
  if (st.ok()) return true;
  for (size_t i = 0; i < touched.size(); i++) {
    auto it = FindBlock(key, touched[i].idx);
    if (!undo.blocks[i].first) {
      lru_.erase(it->second.lru);
      blocks_.erase(it);
    } else {
      auto lru = it->second.lru;
      it->second = undo.blocks[i].second;
      it->second.lru = lru;
    }
  }
  o->attrs = undo.attrs;
  o->validated = undo.validated;
  o->dirty_since = undo.dirty_since;
  o->dirty_blocks = undo.dirty_blocks;
  o->set_mask = undo.set_mask;
  o->set_epoch = undo.set_epoch;
  o->record_hash = 0;  // the store may hold either
  dirty_bytes_ = undo.dirty_bytes;
  bytes_ = undo.bytes;
  nblocks_ = undo.nblocks;
  IndexDirtyLocked(key, *o);
  if (!store_->no_space())  // the store logs a full disk itself, once
    NACHE_LOG(kLogCrit, "NACHE_CACHE", "local write to the store failed: %s",
              st.ToString().c_str());
  return false;
}

bool Cache::ReadsAsZeros(Key key, uint64_t idx) {
  Locked g(this);
  if (dirty_.count(key) == 0) return false;
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second->dirty_blocks == 0) return false;
  const Object &o = *it->second;
  auto b = FindBlock(key, idx);
  if (b != blocks_.end() && b->second.gen == o.gen) return false;  // ours
  uint64_t bstart = idx * opts_.block_size;
  return bstart >= o.remote_size && bstart < o.attrs.size;
}

bool Cache::IsDirty(Key key) {
  Locked g(this);
  auto it = objects_.find(key);
  return it != objects_.end() && IsDirtyObj(*it->second);
}

std::vector<Key> Cache::DirtyFiles(std::chrono::milliseconds min_age,
                                   size_t max) {
  Locked g(this);
  Clock::time_point cutoff = Clock::now() - min_age;
  std::vector<std::pair<Clock::time_point, Key>> due;
  for (auto &kv : dirty_)
    if (kv.second <= cutoff) due.emplace_back(kv.second, kv.first);
  std::sort(due.begin(), due.end());
  std::vector<Key> out;
  for (size_t i = 0; i < due.size() && i < max; i++)
    out.push_back(due[i].second);
  return out;
}

std::vector<Cache::DirtyRange> Cache::DirtyRanges(Key key) {
  Locked g(this);
  std::vector<DirtyRange> out;
  auto it = objects_.find(key);
  if (it == objects_.end()) return out;
  for (auto b_it = BlocksFrom(key);
       b_it != blocks_.end() && b_it->first.key == key; ++b_it) {
    const BlockInfo &b = b_it->second;
    if (!b.dirty) continue;
    std::string block;
    if (!ReadBlockLocked(key, b, b_it->first.idx, &block) ||
        b.dirty_hi > block.size())
      continue;
    DirtyRange r;
    r.idx = b_it->first.idx;
    r.lo = b.dirty_lo;
    r.hi = b.dirty_hi;
    r.epoch = b.dirty_epoch;
    r.data = block.substr(b.dirty_lo, b.dirty_hi - b.dirty_lo);
    out.push_back(std::move(r));
  }
  return out;
}

void Cache::Flushed(Key key, const std::vector<DirtyRange> &sent,
                    uint64_t set_epoch, const Attrs &after) {
  Locked g(this);
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  Object *o = it->second.get();
  WriteBatch batch;
  if (set_epoch != 0 && set_epoch == o->set_epoch) o->set_mask = 0;
  for (const DirtyRange &r : sent) {
    auto b = FindBlock(key, r.idx);
    if (b == blocks_.end() || !b->second.dirty ||
        b->second.dirty_epoch != r.epoch)
      continue;  // written again meanwhile: still dirty
    BlockInfo &bi = b->second;
    // The remote holds these bytes now (also when `after` is unknown): a
    // block below remote_size is never taken for a hole of ours.
    o->remote_size =
        std::max(o->remote_size, r.idx * opts_.block_size + bi.dirty_hi);
    dirty_bytes_ -= bi.dirty_hi - bi.dirty_lo;
    bi.dirty = false;
    bi.dirty_lo = bi.dirty_hi = 0;
    o->dirty_blocks--;
    batch.Put(store_->family(Store::kBlockMeta), BlockKey(key, r.idx),
              EncodeBlockMeta(bi.gen, after.change, bi.len, false));
  }
  if (!IsDirtyObj(*o)) {
    o->dirty_since = Clock::time_point();
    // The remote now has everything: its attributes are ours again (the
    // blocks stay valid under its new change attribute).
    if ((after.mask & upstream::kAttrChange) && after.size == o->attrs.size) {
      o->attrs = after;
      o->validated = Clock::now();
    } else {
      o->validated = Clock::time_point();  // revalidate before use
    }
    o->own_changes.clear();
    o->own_spans.clear();
    o->own_ranges.clear();
    // What the remote holds now is the base of the next local change,
    // even when our view differs from it (it is then revalidated first).
    o->base_known = o->base_uncertain = false;
    SeenRemoteLocked(o, after);
  } else if (after.mask & upstream::kAttrChange) {
    // Still dirty (written again meanwhile, or part of it failed): what the
    // remote holds now, after all of our flush, is the next base.
    o->remote_size = after.size;
    o->remote_change = after.change;
    o->base_known = true;
    o->base_uncertain = false;
  }
  // An operation of ours moved the remote unseen while this flush ran
  // (a RENAME of the file sent meanwhile): `after` does not show it.
  if (o->flushing && o->unseen_while_flushing) o->base_uncertain = true;
  o->flushing = o->unseen_while_flushing = false;
  PersistAttrs(key, *o, &batch);
  IndexDirtyLocked(key, *o);
  Commit(&batch);
  EvictLocked();
}

bool Cache::GetDirtyBase(Key key, DirtyBase *out) {
  Locked g(this);
  auto it = objects_.find(key);
  if (it == objects_.end() || !IsDirtyObj(*it->second) ||
      !it->second->base_known)
    return false;
  const Object &o = *it->second;
  out->change = o.remote_change;
  out->size = o.remote_size;
  out->uncertain = o.base_uncertain;
  out->has_data = o.dirty_blocks > 0;
  return true;
}

void Cache::FlushBegins(Key key) {
  Locked g(this);
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  it->second->flushing = true;
  it->second->unseen_while_flushing = false;
  if (!IsDirtyObj(*it->second) || it->second->base_uncertain) return;
  it->second->base_uncertain = true;
  WriteBatch batch;
  PersistAttrs(key, *it->second, &batch);
  Commit(&batch);  // unsynced: a daemon crash keeps it (see cache.h)
}

bool Cache::LocalSetattr(Key key, const Attrs &set) {
  Locked g(this);
  Object *o = Obj(key);
  if (!o->have_attrs) return false;
  upstream::Time t = RealNow();
  uint64_t m = set.mask & kLocalSetattrMask;
  if (m & upstream::kAttrMode) o->attrs.mode = set.mode;
  // An id set here is a local one (mapped), whatever the remote named.
  if (m & upstream::kAttrOwner) {
    o->attrs.uid = set.uid;
    o->attrs.mask &= ~upstream::kAttrOwnerUnmapped;
  }
  if (m & upstream::kAttrOwnerGroup) {
    o->attrs.gid = set.gid;
    o->attrs.mask &= ~upstream::kAttrGroupUnmapped;
  }
  if (m & upstream::kAttrAtime)
    o->attrs.atime = set.atime_server ? t : set.atime;
  if (m & upstream::kAttrMtime)
    o->attrs.mtime = set.mtime_server ? t : set.mtime;
  // What the flush will set: the values as they are now (server time
  // included, so the remote gets what our clients saw).
  o->attrs.ctime = t;
  o->access.clear();  // mode or owner may have changed
  return SetLocallyLocked(key, o, m, true);
}

bool Cache::LocalCreate(Key key, const Attrs &a) {
  Locked g(this);
  Object *o = Obj(key);
  WriteBatch batch;
  DropData(key, o, &batch);  // a fresh key has none; be sure
  o->have_attrs = true;
  o->attrs = a;
  o->delegated = false;
  o->dirty_since = Clock::now();
  o->remote_size = 0;  // nothing of it at the remote: no block to fetch
  o->base_known = o->base_uncertain = false;  // no remote state to be on
  // Its mtime goes to the remote after its data, as the clients saw it.
  o->set_mask = kSetCreated | upstream::kAttrMtime;
  o->set_epoch = NextStampLocked();
  o->validated = Clock::now();
  if (a.type == upstream::FileType::kDir) {
    o->listing = std::make_shared<std::vector<CachedDirent>>();
    o->listing_change = a.change;
    o->listing_edited = true;
  }
  IndexDirtyLocked(key, *o);
  PersistAttrs(key, *o, &batch);
  if (store_->Write(rocksdb::WriteOptions(), &batch).ok()) return true;
  o->record_hash = 0;
  return false;
}

bool Cache::LocalDirEdit(Key dir, const std::string &removed,
                         const std::string &added, Key added_key) {
  Locked g(this);
  Object *o = Obj(dir);
  if (!o->have_attrs) return false;
  EditListingLocked(o, removed, added, added_key);
  o->attrs.mtime = o->attrs.ctime = RealNow();
  // Not synced: the log record of the create or remove that edited it is.
  bool ok = SetLocallyLocked(dir, o, upstream::kAttrMtime, false);
  o->listing_change = o->attrs.change;
  return ok;
}

void Cache::BaseIsCurrentLocked(Object *o) {
  // The last state seen at the remote; our own view only when none was
  // seen (then nothing of ours ran ahead of it). Uncertain stays so when
  // an operation of ours moved the remote since (OwnChangeUnseen).
  if (!o->base_known) {
    o->remote_size = o->attrs.size;
    o->remote_change = o->attrs.change;
    o->base_known = true;
  }
}

bool Cache::SeenRemoteLocked(Object *o, const Attrs &a) {
  if (IsDirtyObj(*o) || !(a.mask & upstream::kAttrChange)) return false;
  bool changed = !o->base_known || o->remote_change != a.change ||
                 o->remote_size != a.size;
  o->remote_size = a.size;
  o->remote_change = a.change;
  o->base_known = true;
  o->base_uncertain = false;
  return changed;
}

bool Cache::SetLocallyLocked(Key key, Object *o, uint64_t mask, bool sync) {
  if (!IsDirtyObj(*o)) {
    o->dirty_since = Clock::now();
    BaseIsCurrentLocked(o);
  }
  o->attrs.change++;
  o->set_mask |= mask;
  o->set_epoch = NextStampLocked();
  o->validated = Clock::now();
  IndexDirtyLocked(key, *o);
  WriteBatch batch;
  PersistAttrs(key, *o, &batch);
  if ((sync ? store_->WriteBeforeReply(&batch)
            : store_->Write(rocksdb::WriteOptions(), &batch))
          .ok())
    return true;
  o->record_hash = 0;
  return false;
}

bool Cache::PendingSetattr(Key key, Attrs *set, uint64_t *epoch) {
  Locked g(this);
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second->set_mask == 0) return false;
  *set = it->second->attrs;
  set->mask = it->second->set_mask & ~kSetCreated;
  set->atime_server = set->mtime_server = false;
  *epoch = it->second->set_epoch;
  return true;
}

uint64_t Cache::dirty_bytes() const {
  MutexLock g(&mu_);
  return dirty_bytes_;
}

size_t Cache::dirty_files() const {
  MutexLock g(&mu_);
  return dirty_.size();
}

std::chrono::milliseconds Cache::flush_lag() const {
  MutexLock g(&mu_);
  Clock::time_point oldest{};
  for (auto &kv : dirty_)
    if (oldest == Clock::time_point() || kv.second < oldest) oldest = kv.second;
  if (oldest == Clock::time_point()) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                               oldest);
}

void Cache::EvictLocked() {
  if (bytes_ <= opts_.size_bytes) return;
  WriteBatch batch;
  uint64_t n = 0;
  auto it = lru_.begin();
  // Each block is looked at once at most (pinned ones move to the recent
  // end, so that the next eviction does not pass over them again first).
  for (size_t left = lru_.size();
       bytes_ > opts_.size_bytes && it != lru_.end() && left > 0; left--) {
    BlockId id = *it;
    auto b = blocks_.find(id);
    if (b->second.dirty) {  // never evicted
      ++it;
      continue;
    }
    if (pinned_.count(id.key)) {  // nor pinned ones
      auto next = std::next(it);
      lru_.splice(lru_.end(), lru_, it);
      it = next;
      continue;
    }
    it = lru_.erase(it);
    bytes_ -= b->second.len;
    nblocks_--;
    blocks_.erase(b);
    std::string k = BlockKey(id.key, id.idx);
    batch.Delete(store_->family(Store::kBlocks), k);
    batch.Delete(store_->family(Store::kBlockMeta), k);
    n++;
  }
  if (n == 0) return;
  evictions_ += n;
  Commit(&batch);
  if (metrics_) metrics_->CountEvictions(n);
}

// --- pins and evict ----------------------------------------------------------

void Cache::LoadPins() {
  std::unique_ptr<rocksdb::Iterator> it(store_->db()->NewIterator(
      rocksdb::ReadOptions(), store_->family(Store::kMeta)));
  const size_t plen = sizeof(kPinPrefix) - 1;
  for (it->Seek(kPinPrefix); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() < plen || memcmp(k.data(), kPinPrefix, plen) != 0) break;
    Pin p;
    if (k.size() != plen + 8 ||
        !DecodePin(GetBE64(k.data() + plen), it->value().ToString(), &p)) {
      NACHE_LOG(kLogWarn, "NACHE_CACHE", "an unreadable pin record is ignored");
      continue;
    }
    CountPinLocked(p, 1);
    pins_[p.root] = std::move(p);
  }
  if (!pins_.empty())
    NACHE_LOG(kLogEvent, "NACHE_CACHE", "%zu pins hold %zu objects",
              pins_.size(), pinned_.size());
}

void Cache::CountPinLocked(const Pin &pin, int delta) {
  for (const PinnedObject &o : pin.objects) {
    if (delta > 0) {
      PinCount &c = pinned_[o.key];
      c.pins++;
      c.size = o.size;
      continue;
    }
    auto it = pinned_.find(o.key);
    if (it != pinned_.end() && --it->second.pins <= 0) pinned_.erase(it);
  }
}

bool Cache::AddPin(const Pin &pin) {
  Locked g(this);
  rocksdb::WriteOptions w;
  w.sync = true;  // a pin acknowledged survives a crash
  if (!store_
           ->Put(w, store_->family(Store::kMeta), PinName(pin.root),
                 EncodePin(pin))
           .ok())
    return false;
  auto old = pins_.find(pin.root);
  if (old != pins_.end()) CountPinLocked(old->second, -1);
  CountPinLocked(pin, 1);
  pins_[pin.root] = pin;
  return true;
}

bool Cache::RemovePin(Key root) {
  Locked g(this);
  auto it = pins_.find(root);
  if (it == pins_.end()) return false;
  WriteBatch batch;
  batch.Delete(store_->family(Store::kMeta), PinName(root));
  rocksdb::WriteOptions w;
  w.sync = true;
  if (!store_->Write(w, &batch).ok()) return false;
  CountPinLocked(it->second, -1);
  pins_.erase(it);
  EvictLocked();  // what the pin held may have kept the cache above its bound
  return true;
}

std::vector<Cache::PinSummary> Cache::PinList() const {
  MutexLock g(&mu_);
  std::vector<PinSummary> out;
  for (const auto &kv : pins_) {
    PinSummary p{kv.first, kv.second.path, kv.second.objects.size(), 0};
    std::unordered_map<Key, uint64_t> sizes;
    for (const PinnedObject &o : kv.second.objects) sizes[o.key] = o.size;
    for (const auto &sz : sizes) p.size += sz.second;
    out.push_back(std::move(p));
  }
  return out;
}

bool Cache::GetPin(Key root, Pin *out) const {
  MutexLock g(&mu_);
  auto it = pins_.find(root);
  if (it == pins_.end()) return false;
  *out = it->second;
  return true;
}

bool Cache::Pinned(Key key, Key *root) const {
  MutexLock g(&mu_);
  if (!pinned_.count(key)) return false;
  if (root) {
    *root = kNoKey;
    for (const auto &kv : pins_) {
      for (const PinnedObject &o : kv.second.objects) {
        if (o.key == key) {
          *root = kv.first;
          return true;
        }
      }
    }
  }
  return true;
}

Cache::PinTotals Cache::pin_totals() const {
  MutexLock g(&mu_);
  PinTotals t;
  t.pins = pins_.size();
  t.objects = pinned_.size();
  for (const auto &kv : pinned_) {
    t.size += kv.second.size;
    for (auto b = blocks_.lower_bound(BlockId{kv.first, 0});
         b != blocks_.end() && b->first.key == kv.first; ++b)
      t.cached += b->second.len;
  }
  return t;
}

uint64_t Cache::UnpinnedSize(const std::vector<PinnedObject> &objects) const {
  MutexLock g(&mu_);
  std::unordered_map<Key, uint64_t> fresh;
  for (const PinnedObject &o : objects)
    if (!pinned_.count(o.key)) fresh[o.key] = o.size;
  uint64_t n = 0;
  for (const auto &kv : fresh) n += kv.second;
  return n;
}

Cache::EvictOutcome Cache::Evict(Key key, uint64_t *freed) {
  Locked g(this);
  *freed = 0;
  if (pinned_.count(key)) return EvictOutcome::kPinned;
  Object *o = FindLocked(key);
  if (o && IsDirtyObj(*o)) return EvictOutcome::kDirty;
  if (o && !MayDrop(*o)) return EvictOutcome::kInUse;
  // Unflushed data is never dropped, whether or not its object is in
  // memory (the dirty set and the blocks' own flags both say so).
  if (dirty_.count(key)) return EvictOutcome::kDirty;
  for (auto b = BlocksFrom(key); b != blocks_.end() && b->first.key == key; ++b)
    if (b->second.dirty) return EvictOutcome::kDirty;
  for (auto b = BlocksFrom(key); b != blocks_.end() && b->first.key == key; ++b)
    *freed += b->second.len;
  // (A fetch in flight took the old generation: its block is not stored.)
  ForgetLocked(key);
  return EvictOutcome::kEvicted;
}

std::vector<Key> Cache::CachedKeys() const {
  std::vector<Key> out;
  {
    MutexLock g(&mu_);
    for (const auto &kv : objects_) out.push_back(kv.first);
    for (const auto &kv : blocks_)
      if (out.empty() || out.back() != kv.first.key)
        out.push_back(kv.first.key);
  }
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(
      store_->db()->NewIterator(ro, store_->family(Store::kAttrs)));
  for (it->SeekToFirst(); it->Valid(); it->Next())
    if (it->key().size() == 8) out.push_back(GetBE64(it->key().data()));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool Cache::DirtyOf(Key key, uint64_t *bytes) const {
  MutexLock g(&mu_);
  *bytes = 0;
  auto o = objects_.find(key);
  if (o == objects_.end() || !IsDirtyObj(*o->second)) return false;
  for (auto b = blocks_.lower_bound(BlockId{key, 0});
       b != blocks_.end() && b->first.key == key; ++b)
    if (b->second.dirty) *bytes += b->second.dirty_hi - b->second.dirty_lo;
  return true;
}

uint64_t Cache::bytes() const {
  MutexLock g(&mu_);
  return bytes_;
}
uint64_t Cache::blocks() const {
  MutexLock g(&mu_);
  return nblocks_;
}
uint64_t Cache::evictions() const {
  MutexLock g(&mu_);
  return evictions_;
}
size_t Cache::objects() const {
  MutexLock g(&mu_);
  return objects_.size();
}
uint64_t Cache::object_evictions() const {
  MutexLock g(&mu_);
  return object_evictions_;
}

}  // namespace nache
