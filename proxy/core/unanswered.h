// Names whose write-through REMOVE, CREATE (or exclusive OPEN), LINK or
// RENAME got no answer from the remote (the request or its reply was lost,
// garbled, or late): the remote may or may not have done it, and the
// client, told to retry (NFS4ERR_DELAY), sends the same operation again.
// Done the first time, the retry meets NOENT (remove, rename) or EXIST
// (create, link) and would report an error for an operation that
// succeeded exactly once. (A rename's name is its source's, with its
// target folded in: RenameName.) A retry of the same
// operation by the same caller on the same name, soon after, takes that
// answer as the first try's success, the way a server's duplicate request
// cache would have answered it.
//
// Thread-safe (one internal mutex, held only inside each call).
#ifndef NACHE_CORE_UNANSWERED_H_
#define NACHE_CORE_UNANSWERED_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "handles/handle_map.h"
#include "util/mutex.h"

namespace nache {

class UnansweredNames {
 public:
  enum class Op { kRemove, kCreate, kLink, kRename };
  using Clock = std::chrono::steady_clock;
  // How long a retry may come after the unanswered try, and how many
  // names are remembered (the oldest are forgotten first).
  static constexpr std::chrono::seconds kWindow{60};
  static constexpr size_t kMax = 1024;

  // op of name in dir by the caller who got no answer.
  void Note(Op op, Key dir, const std::string &name, uint64_t who)
      EXCLUDES(mu_);
  // Whether an unanswered op of name in dir by who is recent; forgets it
  // (one retry is answered so, not every later one).
  bool TakeRecent(Op op, Key dir, const std::string &name, uint64_t who)
      EXCLUDES(mu_);
  // The name a RENAME of oldname (in the dir given to Note) to newname in
  // newdir is noted under: a retry must name the same target too.
  static std::string RenameName(const std::string &oldname, Key newdir,
                                const std::string &newname);

 private:
  struct Entry {
    Op op;
    Key dir;
    std::string name;
    uint64_t who;
    Clock::time_point when;
  };
  Mutex mu_{"unanswered"};
  std::deque<Entry> entries_ GUARDED_BY(mu_);  // oldest first
};

}  // namespace nache

#endif  // NACHE_CORE_UNANSWERED_H_
