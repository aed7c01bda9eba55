// The durable writes of one client call, made durable together when the
// call has done its work, before it answers.
//
// Some writes must be on disk before the client hears of them: an
// acknowledged write-back write, a local setattr, a create or remove in the
// write-back log (Store::WriteBeforeReply). Synced where they are made,
// the disk's flush happens under the lock of the module making the write
// (the cache's, the namespace's), so every other client's call that needs
// that lock waits for this call's flush: eight untarring clients under
// write-back spent 26 of their 42 s in nache waiting for the cache's lock
// (bench/README.md, stop 45).
//
// While a ReplySync is open on the calling thread, such a write goes to
// the store unsynced and the store is noted; Finish makes each noted store
// durable once (Store::Sync), after the call's locks are released, sharing
// the flush with concurrent calls. The call reports success only when
// Finish succeeded, so "on disk before the client hears" still holds; it is
// checked where the call answers instead of where each write is made.
//
// What is not kept: until Finish returns, other threads see the call's
// writes as they see any write (a reader may be answered with bytes a
// power loss would then take back, as from a server's page cache). A
// daemon crash keeps them (the log is in the page cache); a power loss
// may lose them, and the client was never told they were done. Not so for
// write-back's sends to the remote: what the remote has, a power loss must
// not take back here (the acknowledged older bytes would come back dirty
// and make a conflict of it), so every write-back COMPOUND first makes
// the calls' deferred writes durable (Store::SyncDeferred, in the core's
// write-back host).
//
// A failed sync: the call answers an error although its changes are
// applied here, as when a reply is lost on the way: the client retries or
// reports the error, and nothing it was told is done is lost (an open the
// call made is closed again, core/nache_api.cc). A failed sync is final
// for the store: RocksDB keeps its log writer's error and takes no write
// until the store is reopened (nache restarted), so no later sync vouches
// for pages a failed one may have lost (Linux reports a failed write-back
// of a file once); ReplySyncTest.AfterAFailedSyncNoLaterSyncVouchesForTheLog
// holds RocksDB to that.
//
// One per client call, on the thread that makes it (the C API's calls,
// core/nache_api.cc); a nested one joins the outermost, which finishes.
// A thread with none open (the flusher, the admin socket, startup, unit
// tests calling the core directly) syncs each such write as it makes it.
//
// Thread safety: a ReplySync belongs to the thread that made it.
#pragma once

#include <vector>

namespace nache {

class Store;

class ReplySync {
 public:
  ReplySync();
  // Syncs what Finish has not (its failure then goes unreported: call
  // Finish where the result can still change the answer).
  ~ReplySync();
  ReplySync(const ReplySync &) = delete;
  ReplySync &operator=(const ReplySync &) = delete;

  // Makes every store written under this scope durable. Returns the first
  // store whose sync failed, or null when all are durable (also when
  // nothing was written, and in a nested scope, whose outer one syncs).
  Store *Finish();

  // The calling thread's open scope (the outermost), or null.
  static ReplySync *Current();
  // s took a write whose sync this scope's Finish owes.
  void Defer(Store *s);

 private:
  bool nested_;  // another scope was open: it finishes
  bool finished_ = false;
  std::vector<Store *> stores_;  // written under this scope, each once
};

}  // namespace nache
