// Persistent key <-> remote filehandle map. See handle_map.h.
#include "handles/handle_map.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <cstring>

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
    store_->PutMeta("next_key", v, true);
    reserved_ = r;
  }
  return next_key_++;
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
  std::lock_guard<std::mutex> g(alloc_mu_);
  k = Find(fh);  // another thread may have interned it meanwhile
  if (k != kNoKey) return k;
  k = AllocateKey();
  HandleRecord r{fh, parent, name};
  rocksdb::WriteBatch b;
  b.Put(store_->family(Store::kHandles), KeyBytes(k), EncodeRecord(r));
  b.Put(store_->family(Store::kFhIndex), fh,
        std::string(reinterpret_cast<const char *>(&k), 8));
  rocksdb::Status st = store_->Write(rocksdb::WriteOptions(), &b);
  if (!st.ok())
    NACHE_LOG(kLogMajor, "NACHE_HANDLES", "cannot persist handle %llu: %s",
              (unsigned long long)k, st.ToString().c_str());
  return k;
}

Key HandleMap::NewLocal(Key parent, const std::string &name) {
  std::lock_guard<std::mutex> g(alloc_mu_);
  Key k = AllocateKey();
  HandleRecord r{upstream::Fh(), parent, name};
  // Not synced: the log record of the create, appended (and synced) next,
  // makes it durable.
  rocksdb::Status st = store_->Put(rocksdb::WriteOptions(),
                                         store_->family(Store::kHandles),
                                         KeyBytes(k), EncodeRecord(r));
  if (!st.ok()) return kNoKey;
  return k;
}

Key HandleMap::NamedKey(const std::string &slot) {
  std::lock_guard<std::mutex> g(alloc_mu_);
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
  rocksdb::WriteBatch b;
  if (!r.fh.empty() && r.fh != fh)
    b.Delete(store_->family(Store::kFhIndex), r.fh);
  r.fh = fh;
  b.Put(store_->family(Store::kHandles), KeyBytes(key), EncodeRecord(r));
  b.Put(store_->family(Store::kFhIndex), fh,
        std::string(reinterpret_cast<const char *>(&key), 8));
  store_->Write(rocksdb::WriteOptions(), &b);
}

void HandleMap::Remove(Key key) {
  std::lock_guard<std::mutex> g(alloc_mu_);  // no Intern of its fh between
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
}

bool HandleMap::Get(Key key, HandleRecord *out) const {
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
  store_->Put(rocksdb::WriteOptions(), store_->family(Store::kHandles),
                    KeyBytes(key), EncodeRecord(r));
}

}  // namespace nache
