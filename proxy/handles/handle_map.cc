// Persistent key <-> remote filehandle map. See handle_map.h.
#include "handles/handle_map.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <cstring>
#include <random>

#include "util/log.h"

namespace nache {
namespace {

// Keys are reserved on disk in batches so allocating one costs no write.
constexpr Key kReserveBatch = 4096;

std::string KeyBytes(Key k) {
  // Big-endian, so RocksDB iterates keys in numeric order.
  std::string s(8, '\0');
  for (int i = 7; i >= 0; i--) {
    s[i] = char(k & 0xff);
    k >>= 8;
  }
  return s;
}

}  // namespace

HandleMap::HandleMap(Store *store) : store_(store) {
  std::string v;
  if (store_->GetMeta("next_key", &v) && v.size() == 8) {
    memcpy(&next_key_, v.data(), 8);
  }
  reserved_ = next_key_;  // nothing beyond next_key_ may have been used
}

Key HandleMap::AllocateKey() {
  // alloc_mu_ held by caller.
  if (next_key_ >= reserved_) {
    Key r = next_key_ + kReserveBatch;
    std::string v(reinterpret_cast<const char *>(&r), 8);
    // Synced: a key handed out must never be handed out again after a crash.
    if (store_->PutMeta("next_key", v, true)) {
      reserved_ = r;
    } else {
      // Not reserved: a key of this process's own range instead (see the
      // header), 62 random bits at its start.
      if (next_volatile_ == 0) {
        std::random_device rd;
        next_volatile_ =
            kVolatileKeyBit | ((Key(rd()) << 32 | rd()) & ~(3ull << 62));
        NACHE_LOG(kLogMajor, "NACHE_HANDLES",
                  "cannot reserve handle keys on the cache disk: new objects "
                  "get keys valid until nache restarts");
      }
      return next_volatile_++;
    }
  }
  return next_key_++;
}

void HandleMap::Save(Key key, const HandleRecord &r,
                     const upstream::Fh &old_fh) {
  MutexLock sg(&save_mu_);
  SaveUnsaved();
  rocksdb::WriteBatch b;
  if (!old_fh.empty() && old_fh != r.fh)
    b.Delete(store_->family(Store::kFhIndex), old_fh);
  b.Put(store_->family(Store::kHandles), KeyBytes(key), EncodeRecord(r));
  if (!r.fh.empty())
    b.Put(store_->family(Store::kFhIndex), r.fh,
          std::string(reinterpret_cast<const char *>(&key), 8));
  rocksdb::Status st = store_->Write(rocksdb::WriteOptions(), &b);
  MutexLock g(&unsaved_mu_);
  auto it = unsaved_.find(key);
  if (it != unsaved_.end() && it->second.fh != r.fh)
    unsaved_fh_.erase(it->second.fh);
  if (st.ok()) {
    if (it != unsaved_.end()) unsaved_.erase(it);
    return;
  }
  if (unsaved_.empty())
    NACHE_LOG(kLogMajor, "NACHE_HANDLES",
              "cannot persist handle %llu: %s (kept in memory until it can "
              "be)",
              (unsigned long long)key, st.ToString().c_str());
  unsaved_[key] = r;
  if (!r.fh.empty()) unsaved_fh_[r.fh] = key;
}

void HandleMap::SaveUnsaved() {
  std::unordered_map<Key, HandleRecord> todo;
  {
    MutexLock g(&unsaved_mu_);
    if (unsaved_.empty()) return;
    todo = unsaved_;
  }
  rocksdb::WriteBatch b;
  for (const auto &kv : todo) {
    b.Put(store_->family(Store::kHandles), KeyBytes(kv.first),
          EncodeRecord(kv.second));
    if (!kv.second.fh.empty())
      b.Put(store_->family(Store::kFhIndex), kv.second.fh,
            std::string(reinterpret_cast<const char *>(&kv.first), 8));
  }
  if (!store_->Write(rocksdb::WriteOptions(), &b).ok()) return;
  // (Only Save and SaveUnsaved change unsaved_, under save_mu_, held: it
  // is still todo; Remove may have taken entries out.)
  MutexLock g(&unsaved_mu_);
  for (const auto &kv : todo) {
    auto it = unsaved_.find(kv.first);
    if (it == unsaved_.end()) continue;
    if (!it->second.fh.empty()) unsaved_fh_.erase(it->second.fh);
    unsaved_.erase(it);
  }
  NACHE_LOG(kLogEvent, "NACHE_HANDLES",
            "handles kept in memory while the cache disk refused them are "
            "written (%zu)",
            todo.size());
}

bool HandleMap::GetUnsaved(Key key, HandleRecord *out) const {
  MutexLock g(&unsaved_mu_);
  auto it = unsaved_.find(key);
  if (it == unsaved_.end()) return false;
  *out = it->second;
  return true;
}

size_t HandleMap::Unsaved() const {
  MutexLock g(&unsaved_mu_);
  return unsaved_.size();
}

std::string HandleMap::EncodeRecord(const HandleRecord &r) {
  std::string s;
  s.push_back(char(1));  // record version
  uint8_t fl = uint8_t(r.fh.size());
  s.push_back(char(fl));
  s.append(r.fh);
  s.append(reinterpret_cast<const char *>(&r.parent), 8);
  s.append(r.name);
  return s;
}

bool HandleMap::DecodeRecord(const std::string &s, HandleRecord *r) {
  if (s.size() < 2 || s[0] != 1) return false;
  size_t fl = uint8_t(s[1]);
  if (fl > upstream::kMaxFhSize || s.size() < 2 + fl + 8) return false;
  r->fh.assign(s, 2, fl);
  memcpy(&r->parent, s.data() + 2 + fl, 8);
  r->name.assign(s, 2 + fl + 8, std::string::npos);
  return true;
}

Key HandleMap::Find(const upstream::Fh &fh) const {
  {
    MutexLock g(&unsaved_mu_);
    auto it = unsaved_fh_.find(fh);
    if (it != unsaved_fh_.end()) return it->second;
  }
  std::string v;
  if (!store_->db()
           ->Get(rocksdb::ReadOptions(), store_->family(Store::kFhIndex), fh,
                 &v)
           .ok() ||
      v.size() != 8)
    return kNoKey;
  Key k;
  memcpy(&k, v.data(), 8);
  return k;
}

Key HandleMap::Intern(const upstream::Fh &fh, Key parent,
                      const std::string &name) {
  Key k = Find(fh);
  if (k != kNoKey) {
    if (parent != kNoKey) {
      HandleRecord r;
      if (Get(k, &r) && (r.parent != parent || r.name != name))
        SetName(k, parent, name);
    }
    return k;
  }
  MutexLock g(&alloc_mu_);
  k = Find(fh);  // another thread may have interned it meanwhile
  if (k != kNoKey) return k;
  k = AllocateKey();
  Save(k, HandleRecord{fh, parent, name}, upstream::Fh());
  return k;
}

Key HandleMap::NewLocal(Key parent, const std::string &name) {
  MutexLock g(&alloc_mu_);
  Key k = AllocateKey();
  HandleRecord r{upstream::Fh(), parent, name};
  // Not synced: the log record of the create, appended (and synced) next,
  // makes it durable.
  rocksdb::Status st =
      store_->Put(rocksdb::WriteOptions(), store_->family(Store::kHandles),
                  KeyBytes(k), EncodeRecord(r));
  if (!st.ok()) return kNoKey;
  return k;
}

Key HandleMap::NamedKey(const std::string &slot) {
  MutexLock g(&alloc_mu_);
  std::string v;
  Key k;
  if (store_->GetMeta("slot:" + slot, &v) && v.size() == 8) {
    memcpy(&k, v.data(), 8);
    return k;
  }
  k = AllocateKey();
  rocksdb::WriteBatch b;
  b.Put(store_->family(Store::kHandles), KeyBytes(k),
        EncodeRecord(HandleRecord{}));
  b.Put(store_->family(Store::kMeta), "slot:" + slot,
        std::string(reinterpret_cast<const char *>(&k), 8));
  rocksdb::WriteOptions w;
  w.sync = true;  // clients will hold this key
  rocksdb::Status st = store_->Write(w, &b);
  if (!st.ok())
    NACHE_LOG(kLogMajor, "NACHE_HANDLES", "cannot persist slot %s: %s",
              slot.c_str(), st.ToString().c_str());
  return k;
}

void HandleMap::SetFh(Key key, const upstream::Fh &fh) {
  HandleRecord r;
  if (!Get(key, &r)) return;
  const upstream::Fh old = r.fh;
  r.fh = fh;
  Save(key, r, old);
}

void HandleMap::Remove(Key key) {
  MutexLock g(&alloc_mu_);  // no Intern of its fh between
  MutexLock sg(&save_mu_);  // nor a write of its record
  HandleRecord r;
  if (!Get(key, &r)) return;
  rocksdb::WriteBatch b;
  b.Delete(store_->family(Store::kHandles), KeyBytes(key));
  if (!r.fh.empty() && Find(r.fh) == key)
    b.Delete(store_->family(Store::kFhIndex), r.fh);
  rocksdb::Status st = store_->Write(rocksdb::WriteOptions(), &b);
  if (!st.ok())
    NACHE_LOG(kLogMajor, "NACHE_HANDLES", "cannot remove handle %llu: %s",
              (unsigned long long)key, st.ToString().c_str());
  MutexLock ug(&unsaved_mu_);
  auto it = unsaved_.find(key);
  if (it != unsaved_.end()) {
    if (unsaved_fh_.count(it->second.fh) && unsaved_fh_[it->second.fh] == key)
      unsaved_fh_.erase(it->second.fh);
    unsaved_.erase(it);
  }
}

bool HandleMap::Get(Key key, HandleRecord *out) const {
  if (GetUnsaved(key, out)) return true;  // newer than the store's
  std::string v;
  if (!store_->db()
           ->Get(rocksdb::ReadOptions(), store_->family(Store::kHandles),
                 KeyBytes(key), &v)
           .ok())
    return false;
  return DecodeRecord(v, out);
}

void HandleMap::SetName(Key key, Key parent, const std::string &name) {
  HandleRecord r;
  if (!Get(key, &r)) return;
  r.parent = parent;
  r.name = name;
  Save(key, r, r.fh);
}

}  // namespace nache
