// The default (stderr) log sink and the level filter behind nache_log().
#include "util/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "util/recent_errors.h"

namespace {

void StderrSink(int level, const char *component, const char *message) {
  static const char *const kNames[] = {"FATAL", "MAJ",  "CRIT",  "WARN",
                                       "EVENT", "INFO", "DEBUG", "FULL_DEBUG"};
  const char *name = (level >= 0 && level <= 7) ? kNames[level] : "?";
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  // One fprintf per message so lines from different threads do not
  // interleave (stdio locks the stream for the duration of the call).
  std::fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s: %s\n", tm.tm_hour,
               tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, name, component,
               message);
}

std::atomic<nache_log_sink_fn> g_sink{StderrSink};
std::atomic<int> g_level{NACHE_LOG_EVENT};

}  // namespace

extern "C" void nache_log(int level, const char *component, const char *fmt,
                          ...) {
  const bool shown = level <= g_level.load(std::memory_order_relaxed);
  // Warnings and errors are kept for nachectl status even when the log
  // level hides them.
  if (!shown && level > NACHE_LOG_WARN) return;
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  if (level <= NACHE_LOG_WARN)
    nache::NoteRecentError(level, component, message);
  if (shown) g_sink.load(std::memory_order_acquire)(level, component, message);
}

extern "C" void nache_log_set_sink(nache_log_sink_fn sink) {
  g_sink.store(sink != nullptr ? sink : StderrSink, std::memory_order_release);
}

extern "C" void nache_log_set_level(int level) {
  g_level.store(level, std::memory_order_relaxed);
}

extern "C" int nache_log_get_level(void) {
  return g_level.load(std::memory_order_relaxed);
}
