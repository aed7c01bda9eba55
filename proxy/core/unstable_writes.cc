// The queue of UNSTABLE writes sent behind the client's back. See
// unstable_writes.h.
#include "core/unstable_writes.h"

namespace nache {

UnstableWrites::UnstableWrites(SendFn send, CommitFn commit, uint64_t max_bytes,
                               int threads)
    : send_(std::move(send)),
      commit_(std::move(commit)),
      max_bytes_(max_bytes) {
  for (int i = 0; i < threads; i++) threads_.emplace_back([this] { Worker(); });
}

UnstableWrites::~UnstableWrites() {
  {
    MutexLock g(&mu_);
    stop_ = true;  // workers finish the queue first
  }
  jobs_cv_.SignalAll();
  for (auto &t : threads_) t.join();
}

bool UnstableWrites::Submit(Key key, const upstream::Creds &cr,
                            const upstream::StateId &sid, uint64_t off,
                            const char *buf, size_t len) {
  MutexLock g(&mu_);
  if (stop_ || threads_.empty() || bytes_ + len > max_bytes_) return false;
  // Wait for unsent writes this one overlaps: they must land first.
  while (OverlapsUnsentLocked(key, off, len)) cv_.Wait();
  WritePtr w = std::make_shared<Write>();
  w->off = off;
  w->data.assign(buf, len);
  w->cr = cr;
  w->sid = sid;
  files_[key].push_back(w);
  bytes_ += len;
  jobs_.push_back(Job{key, w});
  g.Unlock();
  jobs_cv_.Signal();
  return true;
}

bool UnstableWrites::OverlapsUnsentLocked(Key key, uint64_t off,
                                          size_t len) const {
  auto it = files_.find(key);
  if (it == files_.end()) return false;
  for (const WritePtr &w : it->second)
    if (!w->done && w->off < off + len && off < w->off + w->data.size())
      return true;
  return false;
}

bool UnstableWrites::PendingLocked(Key key) const {
  auto it = files_.find(key);
  if (it == files_.end()) return false;
  for (const WritePtr &w : it->second)
    if (!w->done) return true;
  return false;
}

void UnstableWrites::Drain(Key key) {
  MutexLock g(&mu_);
  while (PendingLocked(key)) cv_.Wait();
}

uint32_t UnstableWrites::Commit(Key key, const upstream::Creds &cr) {
  std::list<WritePtr> mine;
  {
    MutexLock g(&mu_);
    while (PendingLocked(key)) cv_.Wait();
    auto it = files_.find(key);
    if (it == files_.end() || it->second.empty())
      return upstream::kNfs4Ok;  // nothing of this file is uncommitted
    mine = it->second;           // writes queued later stay for a later COMMIT
  }
  upstream::Verifier cverf;
  uint32_t st = commit_(key, cr, &cverf);
  if (st != upstream::kNfs4Ok) return st;  // all kept: the client retries
  for (const WritePtr &w : mine) {
    {
      MutexLock g(&mu_);
      if (w->status == upstream::kNfs4Ok && w->verf == cverf) continue;
    }
    // Failed, or sent before the remote lost it: send again, durably.
    upstream::Verifier v;
    uint32_t s = send_(key, w->cr, w->sid, w->off, w->data,
                       upstream::StableHow::kFileSync, &v);
    if (s != upstream::kNfs4Ok) return s;  // all kept for the retry
    MutexLock g(&mu_);
    w->status = upstream::kNfs4Ok;
    w->verf = cverf;
  }
  MutexLock g(&mu_);
  auto it = files_.find(key);
  if (it != files_.end()) {
    for (const WritePtr &w : mine) {
      it->second.remove(w);
      bytes_ -= w->data.size();
    }
    if (it->second.empty()) files_.erase(it);
  }
  return upstream::kNfs4Ok;
}

uint64_t UnstableWrites::bytes() const {
  MutexLock g(&mu_);
  return bytes_;
}

void UnstableWrites::Worker() {
  for (;;) {
    Job j;
    {
      MutexLock g(&mu_);
      while (!stop_ && jobs_.empty()) jobs_cv_.Wait();
      if (jobs_.empty()) return;  // stopping, queue sent
      j = jobs_.front();
      jobs_.pop_front();
    }
    upstream::Verifier v;
    uint32_t st = send_(j.key, j.w->cr, j.w->sid, j.w->off, j.w->data,
                        upstream::StableHow::kUnstable, &v);
    {
      MutexLock g(&mu_);
      j.w->status = st;
      j.w->verf = v;
      j.w->done = true;
    }
    cv_.SignalAll();
  }
}

}  // namespace nache
