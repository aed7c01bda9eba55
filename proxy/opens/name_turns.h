// Opens by name of one directory entry, one at a time.
//
// Two local clients' first opens of a file nache holds no name of would
// both go upstream as an OPEN by name: two OPENs, and the second closed
// again, where one upstream open serves both. NameTurns gives the entry's
// turn to one open at a time; the next waits, and is told which file the
// one before it found, to open it by its handle (joining that upstream
// open, or granted under its delegation). An open before it that found
// nothing passes the turn on, and the next asks by name itself.
//
// Thread safety: all methods are thread-safe. mu_ guards the table of
// entries in turn; it is never held across anything else (a turn is held
// across its holder's upstream OPEN, but no lock is). Whoever holds a turn
// must not wait for another entry's turn (nache takes one per open).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "handles/handle_map.h"
#include "util/mutex.h"

namespace nache {

class NameTurns {
 public:
  // on_wait, if given, is called as an open starts to wait for a turn
  // (under mu_: it must not block or take a lock; a counter's increment).
  explicit NameTurns(std::function<void()> on_wait = nullptr)
      : on_wait_(std::move(on_wait)) {}
  NameTurns(const NameTurns &) = delete;
  NameTurns &operator=(const NameTurns &) = delete;

  // A turn of one entry, held until it is destroyed (or not held: see
  // Take).
  class Turn {
   public:
    Turn() = default;
    Turn(Turn &&o) noexcept { *this = std::move(o); }
    Turn &operator=(Turn &&o) noexcept;
    ~Turn() { Release(); }
    bool held() const { return turns_ != nullptr; }
    // The open found the file key at the entry: whoever waits for the
    // turn takes key instead, and opens it by handle.
    void Found(Key key) { found_ = key; }
    // Ends the turn now (the destructor does otherwise).
    void Release();

   private:
    friend class NameTurns;
    NameTurns *turns_ = nullptr;
    std::pair<Key, std::string> entry_;
    Key found_ = kNoKey;
  };

  // Waits while another open holds the turn of dir's entry name. Returns
  // the turn, held; or, when the open before found a file there, an
  // unheld turn and that file in *found (kNoKey otherwise).
  Turn Take(Key dir, const std::string &name, Key *found) EXCLUDES(mu_);

  // Opens waiting in Take, and entries with a turn held or awaited (none
  // once all turns ended): for tests and gauges.
  size_t waiting() const EXCLUDES(mu_);
  size_t entries() const EXCLUDES(mu_);

 private:
  struct Entry {
    bool held = false;
    int waiting = 0;     // in Take, for this entry's turn
    uint64_t ends = 0;   // turns ended so far
    Key found = kNoKey;  // what the last turn to end found
    CondVar cv;          // signalled when a turn ends
    explicit Entry(Mutex *mu) : cv(mu) {}
  };
  void Give(const std::pair<Key, std::string> &entry, Key found) EXCLUDES(mu_);

  const std::function<void()> on_wait_;
  mutable Mutex mu_{"name_turns"};
  std::map<std::pair<Key, std::string>, std::unique_ptr<Entry>> entries_
      GUARDED_BY(mu_);
};

}  // namespace nache
