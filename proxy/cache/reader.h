// Block reads for the cache: concurrent misses on one block become one
// upstream fetch, and sequential access starts readahead that keeps several
// fetches in flight.
//
// The reader knows nothing of NFS: a fetch function supplied by the core
// reads one block from upstream (and stores it in the cache when it is still
// valid). Readahead runs on the reader's own threads, never on the caller's.
//
// Readahead window (ReadaheadPolicy): per file, a read that moves the
// frontier (the highest block read) forward by a little doubles the window
// (starting at 1 block) up to the configured maximum; reads a little behind
// the frontier (a client's parallel READs arriving out of order) keep it; a
// jump resets it to 0. Blocks up to window
// ahead of the read are fetched in the background. The maximum should cover
// the WAN's bandwidth-delay product (80 ms x 50 Mbit/s = 500 KB in the lab's
// wan profile; the default of 4 MiB covers 400 Mbit/s at 80 ms).
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/cache.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

// The readahead decision for one file (pure; unit-tested).
class ReadaheadPolicy {
 public:
  explicit ReadaheadPolicy(uint32_t max_blocks) : max_(max_blocks) {}
  // Notes a read of block idx; returns how many blocks after idx to fetch
  // ahead (0: none).
  uint32_t OnRead(uint64_t idx);
  uint32_t window() const { return window_; }

 private:
  uint32_t max_;
  uint64_t front_ = UINT64_MAX;  // highest block read so far
  uint32_t window_ = 0;
};

class BlockReader {
 public:
  // Fetches block idx of key from upstream into *data (short at the end of
  // the file), storing it in the cache when valid; returns an NFS status.
  // cr and sid are those of the read that asked for the block.
  using FetchFn =
      std::function<uint32_t(Key key, uint64_t idx, const upstream::Creds &cr,
                             const upstream::StateId &sid, std::string *data)>;

  BlockReader(Cache *cache, FetchFn fetch, uint32_t readahead_max_blocks,
              int threads);
  ~BlockReader();

  // Block idx of key: from the cache, from a fetch already in flight, or
  // fetched now.
  uint32_t Get(Key key, uint64_t idx, const upstream::Creds &cr,
               const upstream::StateId &sid, std::string *data);
  // Notes a read of block idx of a file of nblocks blocks and queues the
  // readahead it calls for.
  void NoteRead(Key key, uint64_t idx, uint64_t nblocks,
                const upstream::Creds &cr, const upstream::StateId &sid);
  // Forgets a file's readahead state (closed or removed).
  void Forget(Key key);

  // Upstream fetches started (demand and readahead), for tests.
  uint64_t fetches() const;

 private:
  // A fetch in flight. Its fields are guarded by the reader's mu_ (which
  // the analysis cannot name from here); cv waits under it.
  struct Flight {
    explicit Flight(Mutex *mu) : cv(mu) {}
    bool done = false;
    uint32_t status = 0;
    std::string data;
    CondVar cv;
  };
  struct Job {
    Key key;
    uint64_t idx;
    upstream::Creds cr;
    upstream::StateId sid;
  };
  static std::pair<Key, uint64_t> Id(Key k, uint64_t i) { return {k, i}; }
  void Worker();
  // Whether block (key, idx) is being fetched.
  bool InFlightLocked(Key key, uint64_t idx) const REQUIRES(mu_);

  Cache *cache_;   // not owned
  FetchFn fetch_;  // immutable
  uint32_t ra_max_;
  mutable Mutex mu_{"cache_reader"};
  std::map<std::pair<Key, uint64_t>, std::shared_ptr<Flight>> flights_
      GUARDED_BY(mu_);
  std::unordered_map<Key, ReadaheadPolicy> policies_ GUARDED_BY(mu_);
  std::deque<Job> jobs_ GUARDED_BY(mu_);
  CondVar jobs_cv_{&mu_};  // a job queued, or stop_
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t fetches_ GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace nache
