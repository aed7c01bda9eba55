#include "core/unanswered.h"

namespace nache {

void UnansweredNames::Note(Op op, Key dir, const std::string &name,
                           uint64_t who) {
  MutexLock g(&mu_);
  const Clock::time_point now = Clock::now();
  while (!entries_.empty() &&
         (entries_.size() >= kMax || now - entries_.front().when > kWindow))
    entries_.pop_front();
  entries_.push_back(Entry{op, dir, name, who, now});
}

bool UnansweredNames::TakeRecent(Op op, Key dir, const std::string &name,
                                 uint64_t who) {
  MutexLock g(&mu_);
  const Clock::time_point now = Clock::now();
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->op == op && it->dir == dir && it->who == who && it->name == name) {
      const bool recent = now - it->when <= kWindow;
      entries_.erase(std::next(it).base());
      return recent;
    }
  }
  return false;
}

std::string UnansweredNames::RenameName(const std::string &oldname, Key newdir,
                                        const std::string &newname) {
  // NUL is in no NFS name: the parts cannot run into each other.
  std::string n = oldname;
  n.push_back('\0');
  n += std::to_string(newdir);
  n.push_back('\0');
  return n + newname;
}

}  // namespace nache
