// See local_names.h.
#include "writeback/local_names.h"

#include <algorithm>

namespace nache {

void LocalNames::Load(OpLog *log) {
  for (uint64_t from = 1;;) {
    std::vector<LogRecord> recs = log->Read(from, 256);
    if (recs.empty()) return;
    for (const LogRecord &r : recs) {
      if (r.op == LogOp::kCreate)
        Add(Entry{r.seq, r.key, r.name, r.key2, r.type, r.text, r.logged_at});
      else if (r.op == LogOp::kRemove)
        AddRemoved(Removed{r.seq, r.key, r.name, r.key2});
      else if (r.op == LogOp::kRename) {
        Add(Entry{r.seq, r.key2, r.name2, Key(r.offset), r.type, "",
                  r.logged_at, true});
        AddRemoved(Removed{r.seq, r.key, r.name, Key(r.offset), true});
      }
      from = r.seq + 1;
    }
  }
}

void LocalNames::Add(const Entry &e) {
  MutexLock g(&mu_);
  by_key_[e.key] = e;
  by_name_[NameKey(e.dir, e.name)] = e.key;
  children_[e.dir][e.seq] = e.key;
}

void LocalNames::Erase(Key key) {
  MutexLock g(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  const Entry &e = it->second;
  by_name_.erase(NameKey(e.dir, e.name));
  auto c = children_.find(e.dir);
  if (c != children_.end()) {
    c->second.erase(e.seq);
    if (c->second.empty()) children_.erase(c);
  }
  by_key_.erase(it);
}

void LocalNames::Move(Key key, uint64_t seq, Key dir, const std::string &name) {
  Entry e;
  if (!Get(key, &e)) return;
  Erase(key);
  e.seq = seq;
  e.dir = dir;
  e.name = name;
  Add(e);
}

bool LocalNames::Find(Key dir, const std::string &name, Entry *out) const {
  MutexLock g(&mu_);
  auto it = by_name_.find(NameKey(dir, name));
  if (it == by_name_.end()) return false;
  if (out) *out = by_key_.at(it->second);
  return true;
}

bool LocalNames::Get(Key key, Entry *out) const {
  MutexLock g(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  if (out) *out = it->second;
  return true;
}

bool LocalNames::IsLocal(Key key) const {
  Entry e;
  return Get(key, &e) && !e.moved;
}

std::vector<LocalNames::Entry> LocalNames::Children(Key dir) const {
  std::vector<Entry> out;
  MutexLock g(&mu_);
  auto c = children_.find(dir);
  if (c == children_.end()) return out;
  for (const auto &kv : c->second) out.push_back(by_key_.at(kv.second));
  return out;
}

uint64_t LocalNames::LastChildSeq(Key dir) const {
  MutexLock g(&mu_);
  auto c = children_.find(dir);
  return c == children_.end() || c->second.empty() ? 0
                                                   : c->second.rbegin()->first;
}

std::vector<LocalNames::Entry> LocalNames::MovedDirsBefore(uint64_t seq) const {
  std::vector<Entry> out;
  {
    MutexLock g(&mu_);
    for (const auto &kv : by_key_)
      if (kv.second.moved && kv.second.type == upstream::FileType::kDir &&
          kv.second.seq < seq)
        out.push_back(kv.second);
  }
  std::sort(out.begin(), out.end(),
            [](const Entry &a, const Entry &b) { return a.seq < b.seq; });
  return out;
}

Key LocalNames::DirNamed(Key parent, const std::string &name,
                         const HandleMap &handles) const {
  std::vector<Key> dirs;
  {
    MutexLock g(&mu_);
    for (const auto &kv : children_) dirs.push_back(kv.first);
  }
  for (Key d : dirs) {
    HandleRecord r;
    if (handles.Get(d, &r) && r.parent == parent && r.name == name) return d;
  }
  return kNoKey;
}

int64_t LocalNames::NewestChildTime(Key dir) const {
  MutexLock g(&mu_);
  auto c = children_.find(dir);
  if (c == children_.end()) return 0;
  int64_t newest = 0;
  for (const auto &kv : c->second)
    newest = std::max(newest, by_key_.at(kv.second).created_at);
  return newest;
}

size_t LocalNames::size() const {
  MutexLock g(&mu_);
  return by_key_.size();
}

void LocalNames::AddRemoved(const Removed &r) {
  MutexLock g(&mu_);
  removed_[NameKey(r.dir, r.name)] = r;
  if (!r.moved && r.key != kNoKey) removed_keys_[r.key] = r.seq;
  removed_seqs_[r.seq] = NameKey(r.dir, r.name);
}

void LocalNames::EraseRemoved(uint64_t seq) {
  MutexLock g(&mu_);
  auto s = removed_seqs_.find(seq);
  if (s == removed_seqs_.end()) return;
  auto it = removed_.find(s->second);
  if (it != removed_.end() && it->second.seq == seq) {
    auto k = removed_keys_.find(it->second.key);
    if (k != removed_keys_.end() && k->second == seq) removed_keys_.erase(k);
    removed_.erase(it);
  }
  removed_seqs_.erase(s);
}

bool LocalNames::FindRemoved(Key dir, const std::string &name,
                             Removed *out) const {
  MutexLock g(&mu_);
  auto it = removed_.find(NameKey(dir, name));
  if (it == removed_.end()) return false;
  if (out) *out = it->second;
  return true;
}

bool LocalNames::IsRemovedKey(Key key) const {
  MutexLock g(&mu_);
  return removed_keys_.count(key) != 0;
}

std::vector<Key> LocalNames::DirsWithRemoved() const {
  MutexLock g(&mu_);
  std::vector<Key> out;
  for (const auto &kv : removed_)
    if (out.empty() || out.back() != kv.first.first)
      out.push_back(kv.first.first);
  return out;
}

std::vector<LocalNames::Removed> LocalNames::RemovedIn(Key dir) const {
  MutexLock g(&mu_);
  std::vector<Removed> out;
  for (auto it = removed_.lower_bound(NameKey(dir, std::string()));
       it != removed_.end() && it->first.first == dir; ++it)
    out.push_back(it->second);
  std::sort(out.begin(), out.end(),
            [](const Removed &a, const Removed &b) { return a.seq < b.seq; });
  return out;
}

}  // namespace nache
