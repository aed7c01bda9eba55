// UnstableWrites, the queue of UNSTABLE writes (Write_Behind_Max; not to
// be confused with write-back, proxy/writeback/): the client's UNSTABLE
// WRITE is answered once its data is queued here; worker threads send it
// upstream (UNSTABLE) while the client goes on. COMMIT waits for the file's
// queued writes, sends one upstream COMMIT and resends (FILE_SYNC) every write
// whose verifier differs from the COMMIT's (the remote rebooted in between), so
// data is dropped only once the remote has it on stable storage.
//
// This is what NFS already allows: an UNSTABLE write is not durable until a
// COMMIT returns the same verifier. nache's verifier is its own, chosen at
// start, so a nache crash (which loses queued writes) makes clients resend.
//
// Ordering: a write overlapping one still in flight for the same file waits
// for it, so overlapping writes reach the remote in the order they came.
//
// Gathering: while a send smaller than the remote's largest WRITE is on the
// wire for a file, that file's later writes wait, and the next send takes
// every queued write that continues the one before it (same caller, same
// stateid) up to that size: a log appended in small pieces goes upstream in
// a few large WRITEs, not one per piece (the clients of a busy branch
// office wait for the link anyway). A queued run that already fills a send
// goes at once, so a large stream keeps sends in flight side by side. A
// write larger than the remote's largest WRITE is queued as pieces of that
// size, which the workers send side by side.
//
// In flight: enough sends for about 2 MiB on their way (RequestsInFlight:
// a WAN's bandwidth-delay product, with room), at least 8 and at most the
// workers (the core starts 32). A remote that takes WRITEs of 32 KiB
// needs 16 in flight just to fill a 50 Mbit/s link at 80 ms; with 8, a
// client's large write went at half the speed of a direct mount's, with
// 16 a few per cent slower (any pause of the server's idled the link).
// A failed send is retried at COMMIT (FILE_SYNC); only then does its error
// reach the client.
//
// Bound: at most max_bytes queued or uncommitted; beyond it Submit refuses
// and the caller writes synchronously.
//
// Thread safety: all methods are thread-safe. No lock is held while a send
// or COMMIT is on the wire.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "handles/handle_map.h"
#include "upstream/types.h"
#include "util/mutex.h"

namespace nache {

class UnstableWrites {
 public:
  // Sends [off, off + data.size()) with the given stability; sets *verf.
  using SendFn = std::function<uint32_t(
      Key key, const upstream::Creds &cr, const upstream::StateId &sid,
      uint64_t off, const std::string &data, upstream::StableHow stable,
      upstream::Verifier *verf)>;
  // Sends COMMIT of the whole file; sets *verf.
  using CommitFn = std::function<uint32_t(Key key, const upstream::Creds &cr,
                                          upstream::Verifier *verf)>;
  // The largest send worth gathering (the remote's largest WRITE, as
  // known now); called under the queue's lock, by idle workers each time
  // they look for work, so it must not wait (for the remote or anything
  // else) nor take a lock: a worker stuck in it holds up the queue.
  using MaxSendFn = std::function<size_t()>;

  // workers: the most sends in flight at once (the threads started).
  UnstableWrites(SendFn send, CommitFn commit, MaxSendFn max_send,
                 uint64_t max_bytes, int workers);
  // Sends what is queued, then stops the workers.
  ~UnstableWrites();

  // Queues an UNSTABLE write; false when it would exceed the bound (or
  // is empty).
  bool Submit(Key key, const upstream::Creds &cr, const upstream::StateId &sid,
              uint64_t off, const char *buf, size_t len);
  // Returns once every write of key queued so far has been sent.
  void Drain(Key key);
  // Drain, COMMIT, resend what the COMMIT's verifier does not cover; then
  // forgets the file's writes. Returns an NFS status (a send's failure
  // that a FILE_SYNC resend could not fix, or the COMMIT's).
  uint32_t Commit(Key key, const upstream::Creds &cr);

  uint64_t bytes() const;  // queued or uncommitted bytes

 private:
  struct Write {
    uint64_t off = 0;
    std::string data;
    upstream::Creds cr;
    upstream::StateId sid;
    bool done = false;
    uint32_t status = 0;
    upstream::Verifier verf;
  };
  using WritePtr = std::shared_ptr<Write>;
  struct Job {
    Key key;
    WritePtr w;
  };
  using JobList = std::list<Job>;
  // One upstream send: queued writes of one file, each continuing the one
  // before it.
  struct Send {
    Key key = 0;
    std::vector<WritePtr> writes;
    bool small = false;  // below the largest send: holds the file's next
  };
  void Worker();
  // Takes the oldest job that may go now with the queued writes that
  // continue it; false when none may. Linear in the queue.
  bool TakeSendLocked(size_t max_send, Send *out) REQUIRES(mu_);
  // Bytes of the queued run starting at j, counted up to max_send.
  size_t RunBytesLocked(const Job &j, size_t max_send) const REQUIRES(mu_);
  void UnqueueLocked(JobList::iterator it) REQUIRES(mu_);
  bool PendingLocked(Key key) const REQUIRES(mu_);  // an unsent write of key
  // An unsent write of key overlaps [off, off + len).
  bool OverlapsUnsentLocked(Key key, uint64_t off, size_t len) const
      REQUIRES(mu_);

  SendFn send_;         // immutable
  CommitFn commit_;     // immutable
  MaxSendFn max_send_;  // immutable
  uint64_t max_bytes_;  // immutable
  size_t workers_;      // immutable: threads_'s size, once started
  mutable Mutex mu_{"unstable_writes"};
  CondVar cv_{&mu_};       // a write finished
  CondVar jobs_cv_{&mu_};  // a job was queued (or stop)
  // Uncommitted writes by file. A Write's done, status and verf are read
  // and written under mu_ (by the worker that sends it, and by Commit).
  std::unordered_map<Key, std::list<WritePtr>> files_ GUARDED_BY(mu_);
  JobList jobs_ GUARDED_BY(mu_);  // queued, not taken yet, oldest first
  // The same jobs by file and offset (queued writes of a file never
  // overlap: Submit waits).
  std::unordered_map<Key, std::map<uint64_t, JobList::iterator>> queued_
      GUARDED_BY(mu_);
  // Files with a small send on the wire.
  std::unordered_map<Key, int> small_sends_ GUARDED_BY(mu_);
  size_t sending_ GUARDED_BY(mu_) = 0;  // sends on the wire
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // started by the constructor
};

}  // namespace nache
