// The queue of UNSTABLE writes sent behind the client's back. See
// unstable_writes.h.
#include "core/unstable_writes.h"

#include <algorithm>
#include <unordered_set>

#include "util/parallel.h"

namespace nache {

UnstableWrites::UnstableWrites(SendFn send, CommitFn commit, MaxSendFn max_send,
                               uint64_t max_bytes, int workers)
    : send_(std::move(send)),
      commit_(std::move(commit)),
      max_send_(std::move(max_send)),
      max_bytes_(max_bytes),
      workers_(size_t(std::max(0, workers))) {
  for (int i = 0; i < workers; i++) threads_.emplace_back([this] { Worker(); });
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
  // (Asked with no lock held, as its contract says.)
  const size_t piece = std::max<size_t>(max_send_(), 1);
  MutexLock g(&mu_);
  if (len == 0 || stop_ || workers_ == 0 || bytes_ + len > max_bytes_)
    return false;
  // Wait for unsent writes this one overlaps: they must land first.
  while (OverlapsUnsentLocked(key, off, len)) cv_.Wait();
  // A write larger than the remote's largest goes as pieces of that size,
  // each its own job: the workers send them side by side, where one send
  // of the whole would go piece after piece, a round trip each.
  for (size_t done = 0; done < len; done += piece) {
    const size_t n = std::min(piece, len - done);
    WritePtr w = std::make_shared<Write>();
    w->off = off + done;
    w->data.assign(buf + done, n);
    w->cr = cr;
    w->sid = sid;
    files_[key].push_back(w);
    jobs_.push_back(Job{key, w});
    queued_[key][w->off] = std::prev(jobs_.end());
  }
  bytes_ += len;
  g.Unlock();
  jobs_cv_.SignalAll();
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

size_t UnstableWrites::RunBytesLocked(const Job &j, size_t max_send) const {
  size_t bytes = j.w->data.size();
  const std::map<uint64_t, JobList::iterator> &by_off = queued_.at(j.key);
  for (auto it = by_off.find(j.w->off + j.w->data.size());
       bytes < max_send && it != by_off.end();) {
    const Write &next = *it->second->w;
    if (next.cr != j.w->cr || !(next.sid == j.w->sid)) break;
    bytes += next.data.size();
    it = by_off.find(next.off + next.data.size());
  }
  return bytes;
}

void UnstableWrites::UnqueueLocked(JobList::iterator it) {
  auto q = queued_.find(it->key);
  q->second.erase(it->w->off);
  if (q->second.empty()) queued_.erase(q);
  jobs_.erase(it);
}

bool UnstableWrites::TakeSendLocked(size_t max_send, Send *out) {
  // Files with a small send on the wire whose oldest queued run is not a
  // full send: they wait (their later runs too; checking the oldest only
  // keeps a take linear in the queue).
  std::unordered_set<Key> held;
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    if (held.count(it->key)) continue;
    if (small_sends_.count(it->key) &&
        RunBytesLocked(*it, max_send) < max_send) {
      held.insert(it->key);
      continue;
    }
    out->key = it->key;
    out->writes.assign(1, it->w);
    size_t bytes = it->w->data.size();
    const Write &first = *it->w;
    UnqueueLocked(it);
    for (;;) {
      auto q = queued_.find(out->key);
      if (q == queued_.end()) break;
      auto n = q->second.find(first.off + bytes);
      if (n == q->second.end()) break;
      const WritePtr &next = n->second->w;
      if (next->cr != first.cr || !(next->sid == first.sid) ||
          bytes + next->data.size() > max_send)
        break;
      out->writes.push_back(next);
      bytes += next->data.size();
      UnqueueLocked(n->second);
    }
    out->small = bytes < max_send;
    if (out->small) small_sends_[out->key]++;
    return true;
  }
  return false;
}

void UnstableWrites::Worker() {
  constexpr size_t kMinInFlight = 8;
  for (;;) {
    Send s;
    {
      MutexLock g(&mu_);
      for (;;) {
        // The remote's largest WRITE as known now, at every look: it is
        // learned after the workers start, and a size read before a wait
        // (Max_IO_Size) would gather 1 MiB sends, 8 at a time, that go
        // out in the remote's small WRITEs one after the other.
        const size_t max_send = std::max<size_t>(max_send_(), 1);
        const size_t in_flight = RequestsInFlight(
            max_send, std::min(kMinInFlight, workers_), workers_);
        if (sending_ < in_flight && TakeSendLocked(max_send, &s)) break;
        if (stop_ && jobs_.empty()) return;  // stopping, queue sent
        jobs_cv_.Wait();
      }
      sending_++;
    }
    std::string gathered;
    const std::string *data = &s.writes[0]->data;
    if (s.writes.size() > 1) {
      for (const WritePtr &w : s.writes) gathered += w->data;
      data = &gathered;
    }
    const WritePtr &first = s.writes[0];
    upstream::Verifier v;
    uint32_t st = send_(s.key, first->cr, first->sid, first->off, *data,
                        upstream::StableHow::kUnstable, &v);
    {
      MutexLock g(&mu_);
      for (const WritePtr &w : s.writes) {
        w->status = st;
        w->verf = v;
        w->done = true;
      }
      if (s.small && --small_sends_[s.key] == 0) small_sends_.erase(s.key);
      sending_--;
    }
    cv_.SignalAll();
    jobs_cv_.SignalAll();  // the file's held writes may go now
  }
}

}  // namespace nache
