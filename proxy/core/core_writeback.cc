// The core's side of write-back (proxy/writeback/DESIGN.md): which writes
// stay local, the local write itself and the listing of local entries.
// The namespace's write-back itself (the log, local names, logged removes
// and renames) is NamespaceWriteBack's (writeback/namespace_writeback.h),
// the flusher's sends FlushSender's (writeback/flush_sender.h).
#include <cstdint>

#include "core/convert.h"
#include "core/core.h"
#include "util/log.h"

namespace nache {

bool Core::WriteBackFor(Key key) {
  if (!flusher_) return false;
  // A file with unflushed data stays write-back until flushed, whatever
  // happens to the delegation meanwhile (its return flushes it first), and
  // whether or not nachectl drain is in force: a write sent at once could
  // land at the remote before older data of the file still to be flushed.
  if (cache_->IsDirty(key)) return true;
  if (Draining()) return false;
  return cfg_.single_writer ||
         delegations_->Covers(key, upstream::kShareAccessWrite, 0, nullptr);
}

Key Core::DirtyFileNamed(Key dir, const std::string &name) {
  for (Key k : cache_->DirtyFiles(std::chrono::milliseconds(0), SIZE_MAX)) {
    HandleRecord rec;
    if (handles_->Get(k, &rec) && rec.parent == dir && rec.name == name)
      return k;
  }
  return kNoKey;
}

uint32_t Core::WriteLocal(const Creds &cr, Key key, NacheOpen *open,
                          uint64_t offset, size_t len, const char *buf,
                          size_t *nwritten, upstream::StableHow *committed) {
  // Earlier unstable writes of the same file, queued for the upstream,
  // land before this one.
  if (unstable_writes_) unstable_writes_->Drain(key);
  // A conflict of this file being resolved: this write is made on the
  // remote's version once ours is set aside (writeback/conflicts.h).
  if (!writeback_->WaitUnresolved(
          key,
          std::chrono::steady_clock::now() +
              std::chrono::milliseconds(cfg_.call_timeout_ms),
          [this] { metrics_->CountConflictWait(); }))
    return upstream::kNfs4ErrDelay;
  Attrs a;
  if (!cache_->KnownAttrs(key, &a)) {
    uint32_t st = Revalidate(cr, key, &a);
    if (st) return st;
  }
  // Beyond the dirty bound writes wait for the flusher; when it cannot
  // make room (the remote is away) the client retries later.
  if (!flusher_->WaitForRoom(len,
                             std::chrono::milliseconds(cfg_.call_timeout_ms)))
    return upstream::kNfs4ErrDelay;
  struct Used {
    Flusher *f;
    size_t n;
    ~Used() { f->RoomUsed(n); }
  } used{flusher_.get(), len};
  // The writer first: its record is made durable by the write's own sync.
  writeback_->NoteWriter(key, cr);
  for (int attempt = 0; attempt < 4; attempt++) {
    uint64_t need = UINT64_MAX, unchanged = 0;
    if (cache_->LocalWrite(key, offset, buf, len, &need, &unchanged)) {
      NACHE_LOG(kLogDebug, kWritebackComponent,
                "local write of %llu: %zu at %llu", (unsigned long long)key,
                len, (unsigned long long)offset);
      if (unchanged) metrics_->CountUnchangedWrite(unchanged);
      *nwritten = len;
      // FILE_SYNC: it is on our stable storage.
      *committed = upstream::StableHow::kFileSync;
      return upstream::kNfs4Ok;
    }
    // The store failed: a full cache disk is the client's NOSPC (nothing
    // of the write was taken; it can free space or retry); else EIO.
    if (need == UINT64_MAX) return StoreFailure();
    // A block the write covers only in part and whose other bytes are at
    // the remote: read it first (it is cached, then the write goes in).
    std::string block;
    uint32_t st = reader_->Get(key, need, cr, IoStateid(open), &block);
    if (st) return st;
    // Read but not kept (a full cache disk): trying again would read it
    // again, for ever.
    if (store_->no_space()) return upstream::kNfs4ErrNospc;
  }
  return upstream::kNfs4ErrDelay;  // evicted again and again: retry
}

uint32_t Core::StoreFailure() const {
  return store_->no_space() ? upstream::kNfs4ErrNospc : upstream::kNfs4ErrIo;
}

uint32_t Core::ReaddirLocal(const Creds &cr, Key dir, uint64_t cookie,
                            nache_dirent_cb cb, void *ctx, bool *eof) {
  // Cookies are the entries' log sequence numbers, marked: increasing in
  // listing order, never reused.
  uint64_t after = IsLocalCookie(cookie) ? cookie & ~kLocalCookie : 0;
  for (const LocalNames::Entry &e : namespace_->names().Children(dir)) {
    if (e.seq <= after) continue;
    uint64_t c = kLocalCookie | e.seq;
    Attrs a;
    // (An object renamed here is the remote's: its attributes may need
    // asking for.)
    if (e.moved ? Getattr(cr, e.key, &a) != upstream::kNfs4Ok
                : !cache_->KnownAttrs(e.key, &a))
      continue;  // removed meanwhile
    nache_attrs ca;
    AttrsToC(a, e.key, &ca);
    if (!cb(ctx, e.name.c_str(), e.key, &ca, c)) return upstream::kNfs4Ok;
  }
  *eof = true;
  return upstream::kNfs4Ok;
}

}  // namespace nache
