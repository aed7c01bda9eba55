// Write-back's own state (see writeback.h).
#include "writeback/writeback.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <ctime>

#include "util/bytes.h"
#include "writeback/oplog.h"

namespace nache {

namespace {

// The last local writer of a dirty file, in the store's kMeta family
// (see writeback.h): "wb_writer/" and the key, big-endian; its credentials
// as the log keeps them (PutCreds).
std::string WriterName(Key key) {
  std::string n = "wb_writer/";
  PutBE64(&n, key);
  return n;
}

}  // namespace

void WriteBack::NoteWriter(Key key, const upstream::Creds &in) {
  upstream::Creds cr = in;
  if (cr.groups.size() > LogRecord::kMaxGroups)
    cr.groups.resize(LogRecord::kMaxGroups);
  MutexLock g(&writers_mu_);
  auto it = writers_.find(key);
  if (it == writers_.end() || it->second != cr) {
    // Persisted when it changes, unsynced: the caller's own synced write
    // that follows (the data, the attributes) makes it durable with it.
    std::string v;
    PutCreds(&v, cr);
    store_->PutMeta(WriterName(key), v, false);
    writers_[key] = cr;
  }
  // Only files still dirty need theirs: prune now and then.
  if (writers_.size() > kMaxWriters) {
    rocksdb::WriteBatch drop;
    for (auto i = writers_.begin(); i != writers_.end();) {
      if (host_->IsDirty(i->first)) {
        ++i;
        continue;
      }
      drop.Delete(store_->family(Store::kMeta), WriterName(i->first));
      i = writers_.erase(i);
    }
    store_->Write(rocksdb::WriteOptions(), &drop);  // best effort
  }
}

upstream::Creds WriteBack::FlushCreds(Key key) {
  // As the file's last local writer (remembered in the store, so also
  // after a restart); a file of none such, as its owner.
  MutexLock g(&writers_mu_);
  auto it = writers_.find(key);
  if (it != writers_.end()) return it->second;
  upstream::Creds cr;
  std::string v;
  if (store_->GetMeta(WriterName(key), &v) && ParseCreds(v, &cr)) {
    writers_[key] = cr;
    return cr;
  }
  upstream::Attrs a;
  if (host_->KnownAttrs(key, &a)) {
    cr.uid = a.uid;
    cr.gid = a.gid;
  }
  return cr;
}

std::string WriteBack::UtcStamp() {
  // "20261122T210501Z": sorts by time, no characters a shell or a Windows
  // client would trip on.
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string WriteBack::ConflictName(const std::string &name,
                                    const std::string &stamp, int n) {
  return CopyName(name, "conflict", stamp, n);
}

std::string WriteBack::CopyName(const std::string &name, const char *kind,
                                const std::string &stamp, int n) {
  return name + ".nache-" + kind + "-" + stamp +
         (n ? "-" + std::to_string(n) : std::string());
}

WriteBack::Resolving WriteBack::BeginResolving(Key key) {
  MutexLock g(&resolving_mu_);
  resolving_.insert(key);
  return Resolving(this, key);
}

void WriteBack::EndResolving(Key key) {
  {
    MutexLock g(&resolving_mu_);
    auto it = resolving_.find(key);
    if (it != resolving_.end()) resolving_.erase(it);
  }
  resolving_cv_.SignalAll();
}

bool WriteBack::WaitUnresolved(Key key,
                               std::chrono::steady_clock::time_point deadline,
                               const std::function<void()> &on_wait) {
  MutexLock g(&resolving_mu_);
  if (resolving_.count(key) == 0) return true;
  g.Unlock();
  if (on_wait) on_wait();
  g.Lock();
  while (resolving_.count(key) != 0)
    if (!resolving_cv_.WaitUntil(deadline)) return resolving_.count(key) == 0;
  return true;
}

}  // namespace nache
