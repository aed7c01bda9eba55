// Coalesced block fetches and readahead. See reader.h.
#include "cache/reader.h"

#include <chrono>

#include "util/round_trips.h"

namespace nache {

uint32_t ReadaheadPolicy::OnRead(uint64_t idx) {
  if (front_ == UINT64_MAX) {  // first read: nothing known yet
    front_ = idx;
    return 0;
  }
  // Clients read ahead themselves, with several READs in flight that
  // arrive out of order: a read near the frontier is sequential; one that
  // moves it forward widens the window.
  uint64_t slack = std::max<uint64_t>(window_, 4);
  if (idx + slack >= front_ && idx <= front_ + slack + 1) {
    if (idx > front_) {
      window_ = window_ == 0 ? 1 : std::min(window_ * 2, max_);
      front_ = idx;
    }
  } else {  // a jump: random access
    window_ = 0;
    front_ = idx;
  }
  return window_;
}

BlockReader::BlockReader(Cache *cache, FetchFn fetch,
                         uint32_t readahead_max_blocks, int threads)
    : cache_(cache), fetch_(std::move(fetch)), ra_max_(readahead_max_blocks) {
  for (int i = 0; i < threads; i++) threads_.emplace_back([this] { Worker(); });
}

BlockReader::~BlockReader() {
  {
    MutexLock g(&mu_);
    stop_ = true;
    jobs_.clear();
  }
  jobs_cv_.SignalAll();
  for (auto &t : threads_) t.join();
}

bool BlockReader::InFlightLocked(Key key, uint64_t idx) const {
  return flights_.count(Id(key, idx)) != 0;
}

uint32_t BlockReader::Get(Key key, uint64_t idx, const upstream::Creds &cr,
                          const upstream::StateId &sid, std::string *data) {
  if (cache_->GetBlock(key, idx, data)) return upstream::kNfs4Ok;
  std::shared_ptr<Flight> f;
  {
    MutexLock g(&mu_);
    auto it = flights_.find(Id(key, idx));
    if (it != flights_.end()) {
      f = it->second;
      NoteUpstreamWait();  // another thread's fetch: a round trip all the same
      const auto t0 = std::chrono::steady_clock::now();
      while (!f->done) f->cv.Wait();
      NoteUpstreamWaitTime(std::chrono::steady_clock::now() - t0);
      if (f->status == upstream::kNfs4Ok) *data = f->data;
      return f->status;
    }
    // A flight that ended between the first look and here cached the
    // block before it left flights_: look again rather than fetch twice.
    if (cache_->GetBlock(key, idx, data)) return upstream::kNfs4Ok;
    f = std::make_shared<Flight>(&mu_);
    flights_.emplace(Id(key, idx), f);
    fetches_++;
  }
  std::string got;
  uint32_t st = fetch_(key, idx, cr, sid, &got);
  {
    MutexLock g(&mu_);
    f->status = st;
    f->data = got;
    f->done = true;
    flights_.erase(Id(key, idx));
  }
  f->cv.SignalAll();
  if (st == upstream::kNfs4Ok) *data = std::move(got);
  return st;
}

void BlockReader::NoteRead(Key key, uint64_t idx, uint64_t nblocks,
                           const upstream::Creds &cr,
                           const upstream::StateId &sid) {
  if (ra_max_ == 0 || threads_.empty()) return;
  MutexLock g(&mu_);
  auto it = policies_.find(key);
  if (it == policies_.end())
    it = policies_.emplace(key, ReadaheadPolicy(ra_max_)).first;
  uint32_t ahead = it->second.OnRead(idx);
  bool queued = false;
  for (uint64_t i = idx + 1; i <= idx + ahead && i < nblocks; i++) {
    if (InFlightLocked(key, i)) continue;
    bool pending = false;
    for (const Job &j : jobs_) {
      if (j.key == key && j.idx == i) {
        pending = true;
        break;
      }
    }
    if (pending) continue;
    jobs_.push_back(Job{key, i, cr, sid});
    queued = true;
  }
  if (queued) jobs_cv_.SignalAll();
}

void BlockReader::Forget(Key key) {
  MutexLock g(&mu_);
  policies_.erase(key);
}

uint64_t BlockReader::fetches() const {
  MutexLock g(&mu_);
  return fetches_;
}

void BlockReader::Worker() {
  for (;;) {
    Job j;
    {
      MutexLock g(&mu_);
      while (!stop_ && jobs_.empty()) jobs_cv_.Wait();
      if (stop_) return;
      j = jobs_.front();
      jobs_.pop_front();
    }
    if (cache_->HasBlock(j.key, j.idx)) continue;
    std::string data;
    Get(j.key, j.idx, j.cr, j.sid, &data);
  }
}

}  // namespace nache
