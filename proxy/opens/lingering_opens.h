// Upstream opens kept after their last local close (Open_Linger), so a
// reopen within the linger costs no OPEN: the queue of lingering opens by
// the time their CLOSE is due, and the thread that sends those CLOSEs.
//
// The core tells it of a last local close (Linger); a reopen in the
// meantime needs nothing of it: the open is simply in use again, and its
// entry, once due, finds it so and leaves it. A later last close lingers
// it afresh (FileOpen::linger_until moves on, and an older entry due
// before it leaves the open alone). At shutdown the core stops the thread
// and, when the remote is reachable, closes what still lingers
// (CloseAll): the remote sees a CLOSE for every OPEN.
//
// What it needs of the core is the narrow Host below (bringing an open to
// the current client id, sending its CLOSE) and the OpenTable, from which
// a closed open is dropped when nobody uses it. It sends nothing itself.
//
// Thread safety: all methods are thread-safe. Locks, in the core's lock
// order (core.h):
//   an open-owner's OwnerSlot::mu (level 1): Linger is called with the
//     file's held; the thread takes it for each due entry, and the Host is
//     called with it held (its CLOSE goes upstream under it);
//   mu_ (level 2): the queue and the thread's stop flag; taken under an
//     OwnerSlot::mu (Linger), never held across a Host call, an upstream
//     call or another lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <thread>

#include "opens/opens.h"
#include "util/mutex.h"

namespace nache {

class LingeringOpens {
 public:
  // What the linger needs of the core.
  class Host {
   public:
    virtual ~Host() = default;
    // Brings f's upstream open to the current client id (reclaims it when
    // it belongs to an earlier one).
    virtual void ResetIfStale(FileOpen *f) REQUIRES(f->owner->mu) = 0;
    // Sends CLOSE for f's upstream open. Its result does not matter: the
    // state of a failed CLOSE dies with our lease.
    virtual void CloseUpstream(FileOpen *f) REQUIRES(f->owner->mu) = 0;
  };

  // linger: how long an open lingers (0: not at all, Linger refuses).
  // opens and host outlive this.
  LingeringOpens(std::chrono::milliseconds linger, OpenTable *opens,
                 Host *host);
  ~LingeringOpens();  // Stop()
  LingeringOpens(const LingeringOpens &) = delete;
  LingeringOpens &operator=(const LingeringOpens &) = delete;

  // Starts the thread that closes opens whose linger is over.
  void Start() EXCLUDES(mu_);
  // Ends the thread; what lingers stays open (CloseAll closes it).
  // Idempotent.
  void Stop() EXCLUDES(mu_);

  // The last local close of f left its upstream open: it lingers (true),
  // or, with no linger configured, false (the caller closes it now).
  bool Linger(const std::shared_ptr<FileOpen> &f) REQUIRES(f->owner->mu)
      EXCLUDES(mu_);
  // Sends CLOSE for every lingering open no local open uses (the linger
  // cut short); returns how many were closed.
  size_t CloseAll() EXCLUDES(mu_);
  // Entries in the queue (an open reopened meanwhile keeps its entry
  // until it is due).
  size_t Queued() const EXCLUDES(mu_);

 private:
  using Queue = std::multimap<std::chrono::steady_clock::time_point,
                              std::shared_ptr<FileOpen>>;

  // The thread: closes the opens whose linger is over, in deadline order.
  void Run() EXCLUDES(mu_);
  // Sends CLOSE for f's upstream open when no local open is left (and,
  // with only_if_due, its latest linger is over); drops f from the open
  // table when idle. True when it closed.
  bool CloseIfIdle(const std::shared_ptr<FileOpen> &f, bool only_if_due)
      EXCLUDES(mu_);

  const std::chrono::milliseconds linger_;  // Open_Linger (immutable)
  OpenTable *const opens_;                  // drops closed opens (not owned)
  Host *const host_;                        // the core (not owned)
  mutable Mutex mu_{"lingering_opens"};     // guards queue_ and stop_
  CondVar cv_{&mu_};                        // queue_ or stop_ changed
  // Lingering opens by the time their CLOSE is due.
  Queue queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;  // Stop() was called
  // Run: started by Start, joined by Stop (the owner's calls, never made
  // concurrently: no lock guards it).
  std::thread thread_;
};

}  // namespace nache
