// Upstream open bookkeeping. See opens.h.
#include "opens/opens.h"

#include <algorithm>
#include <functional>

namespace nache {

OpenTable::OpenTable(int owners, const std::string &prefix,
                     std::function<uint64_t()> epoch,
                     std::function<bool()> confirms)
    : owners_(new OwnerSlot[owners]),
      n_owners_(owners),
      epoch_(std::move(epoch)),
      confirms_(std::move(confirms)) {
  for (int i = 0; i < owners; i++) {
    owners_[i].name = prefix + "-o" + std::to_string(i);
  }
}

OwnerSlot *OpenTable::PickOwner(size_t start) {
  const uint64_t epoch = epoch_();
  // Rank, 0 best: free and known first; then, where a new owner costs an
  // OPEN_CONFIRM, known before free (see OwnerFor).
  const bool confirms = confirms_ && confirms_();
  OwnerSlot *best = nullptr;
  int best_rank = 4;
  for (int i = 0; i < n_owners_; i++) {
    OwnerSlot *o = &owners_[(start + i) % n_owners_];
    // Busy (an upstream call of its own in flight): skip, never wait.
    if (!o->mu.TryLock()) continue;
    bool known = o->epoch == epoch && o->seqid > 0;
    o->mu.Unlock();
    const bool shared = o->files.load() > 0;
    const int rank = confirms ? (known ? 0 : 2) + (shared ? 1 : 0)
                              : (shared ? 2 : 0) + (known ? 0 : 1);
    if (rank == 0) return o;
    if (rank < best_rank) {
      best = o;
      best_rank = rank;
    }
  }
  return best ? best : &owners_[start % n_owners_];
}

OwnerSlot *OpenTable::OwnerForKey(Key key) { return PickOwner(key); }

OwnerSlot *OpenTable::OwnerFor(Key dir, const std::string &name) {
  {
    MutexLock g(&mu_);
    auto n = named_.find(NameOf(dir, name));
    if (n != named_.end()) {
      auto it = files_.find(n->second);
      if (it != files_.end() && it->second.name == n->first)
        return it->second.file->owner;
      named_.erase(n);  // (stale: GetOrAdopt keeps one name per file)
    }
  }
  return PickOwner(std::hash<std::string>()(name) ^
                   (dir * 0x9e3779b97f4a7c15ull));
}

std::shared_ptr<FileOpen> OpenTable::Get(Key key) {
  return GetOrAdopt(key, nullptr);
}

std::shared_ptr<FileOpen> OpenTable::GetOrAdopt(Key key, OwnerSlot *owner,
                                                Key dir,
                                                const std::string &name) {
  MutexLock g(&mu_);
  Entry &e = files_[key];
  if (dir != kNoKey) {
    // One name per file: the one it was last opened by.
    std::string now = NameOf(dir, name);
    if (e.name != now) {
      auto n = named_.find(e.name);
      if (n != named_.end() && n->second == key) named_.erase(n);
      e.name = std::move(now);
    }
    named_[e.name] = key;
  }
  if (!e.file) {
    // New: nobody else can hold it yet, so its owner may be chosen freely.
    e.file = std::make_shared<FileOpen>();
    e.file->key = key;
    e.file->owner = owner != nullptr ? owner : OwnerForKey(key);
    e.file->owner->files++;
  }
  e.pins++;
  return e.file;
}

void OpenTable::Unpin(const std::shared_ptr<FileOpen> &f) {
  MutexLock g(&mu_);
  auto it = files_.find(f->key);
  // (A pinned file is in the table: it is dropped only unpinned.)
  if (it == files_.end() || it->second.file != f) return;
  it->second.pins--;
  EraseIfIdle(f);
}

void OpenTable::DropIfIdle(const std::shared_ptr<FileOpen> &f) {
  MutexLock g(&mu_);
  EraseIfIdle(f);
}

void OpenTable::EraseIfIdle(const std::shared_ptr<FileOpen> &f) {
  auto it = files_.find(f->key);
  if (it == files_.end() || it->second.file != f) return;
  // With no pin left nobody can be using f, so reading whether it is open
  // is safe.
  if (it->second.pins > 0 || f->HoldsUpstreamOpen()) return;
  f->owner->files--;
  auto n = named_.find(it->second.name);
  if (n != named_.end() && n->second == f->key) named_.erase(n);
  files_.erase(it);
}

size_t OpenTable::size() const {
  MutexLock g(&mu_);
  return files_.size();
}

bool OpenTable::Contains(Key key) const {
  MutexLock g(&mu_);
  return files_.count(key) != 0;
}

std::vector<std::shared_ptr<FileOpen>> OpenTable::Snapshot() const {
  MutexLock g(&mu_);
  std::vector<std::shared_ptr<FileOpen>> out;
  out.reserve(files_.size());
  for (const auto &kv : files_) out.push_back(kv.second.file);
  return out;
}

namespace {
uint64_t RangeEnd(uint64_t offset, uint64_t length) {
  return length > UINT64_MAX - offset ? UINT64_MAX : offset + length;
}
}  // namespace

void RemoveHeldLock(std::vector<HeldLock> *held, uint64_t offset,
                    uint64_t length) {
  uint64_t end = RangeEnd(offset, length);
  std::vector<HeldLock> out;
  for (const HeldLock &h : *held) {
    if (h.end <= offset || h.offset >= end) {
      out.push_back(h);
      continue;
    }
    if (h.offset < offset) out.push_back({h.type, h.offset, offset});
    if (h.end > end) out.push_back({h.type, end, h.end});
  }
  held->swap(out);
}

void AddHeldLock(std::vector<HeldLock> *held, upstream::LockType type,
                 uint64_t offset, uint64_t length) {
  RemoveHeldLock(held, offset, length);
  HeldLock n{type, offset, RangeEnd(offset, length)};
  auto at = std::find_if(held->begin(), held->end(),
                         [&](const HeldLock &h) { return h.offset > offset; });
  held->insert(at, n);
  // Neighbours of the same type merge (what the server holds is one
  // range then, and a reclaim one LOCK).
  std::vector<HeldLock> out;
  for (const HeldLock &h : *held) {
    if (!out.empty() && out.back().type == h.type && out.back().end == h.offset)
      out.back().end = h.end;
    else
      out.push_back(h);
  }
  held->swap(out);
}

void OpenTable::AdvanceSeqid(uint32_t *seqid, uint32_t status) {
  switch (status) {
    case upstream::kNfs4ErrStaleClientid:
    case upstream::kNfs4ErrStaleStateid:
    case upstream::kNfs4ErrBadStateid:
    case upstream::kNfs4ErrBadSeqid:
    case upstream::kNfs4ErrBadxdr:
    case upstream::kNfs4ErrResource:
    case upstream::kNfs4ErrNofilehandle:
    case upstream::kNfs4ErrMoved: return;
    default: (*seqid)++;
  }
}

}  // namespace nache
