// The ring of recent warnings and errors. See recent_errors.h.
#include "util/recent_errors.h"

#include <ctime>
#include <deque>

#include "util/log.h"
#include "util/mutex.h"

namespace nache {

namespace {

Mutex &RingMu() {
  static Mutex *mu = new Mutex();  // never destroyed: logged at exit too
  return *mu;
}
std::deque<std::string> &Ring() {
  static auto *ring = new std::deque<std::string>();
  return *ring;
}

const char *LevelName(int level) {
  switch (level) {
    case NACHE_LOG_FATAL: return "FATAL";
    case NACHE_LOG_MAJOR: return "MAJOR";
    case NACHE_LOG_CRIT: return "CRIT";
    case NACHE_LOG_WARN: return "WARN";
    default: return "?";
  }
}

}  // namespace

void NoteRecentError(int level, const char *component, const char *message) {
  char when[32] = "?";
  time_t now = time(nullptr);
  struct tm tm;
  if (gmtime_r(&now, &tm)) strftime(when, sizeof(when), "%FT%TZ", &tm);
  std::string line = std::string(when) + " " + LevelName(level) + " " +
                     component + ": " + message;
  MutexLock g(&RingMu());
  Ring().push_back(std::move(line));
  while (Ring().size() > kRecentErrors) Ring().pop_front();
}

std::vector<std::string> RecentErrors() {
  MutexLock g(&RingMu());
  return std::vector<std::string>(Ring().begin(), Ring().end());
}

void ClearRecentErrors() {
  MutexLock g(&RingMu());
  Ring().clear();
}

}  // namespace nache
