// The core's one logging entry point. Every message goes through nache_log(),
// which formats it and hands it to a replaceable sink: stderr by default, and
// Ganesha's log once the FSAL installs its own sink at load time.
//
// A plain C interface so the C FSAL glue can both install the sink and log.
// Thread safety: nache_log() may be called from any thread; the sink and the
// level are meant to be set once, before other threads log.
#ifndef NACHE_UTIL_LOG_H
#define NACHE_UTIL_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/* Severities, most severe first; they mirror Ganesha's NIV_* levels so the
 * FSAL's sink maps them one to one. */
enum nache_log_level {
  NACHE_LOG_FATAL = 0,
  NACHE_LOG_MAJOR = 1,
  NACHE_LOG_CRIT = 2,
  NACHE_LOG_WARN = 3,
  NACHE_LOG_EVENT = 4,
  NACHE_LOG_INFO = 5,
  NACHE_LOG_DEBUG = 6,
  NACHE_LOG_FULL_DEBUG = 7,
  NACHE_LOG_ERROR = NACHE_LOG_MAJOR, /* an operation failed */
};

/* Receives one formatted message (no trailing newline). */
typedef void (*nache_log_sink_fn)(int level, const char *component,
                                  const char *message);

/* Logs when level <= the current level (default NACHE_LOG_EVENT). */
void nache_log(int level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Installs a sink; NULL restores the stderr sink. */
void nache_log_set_sink(nache_log_sink_fn sink);

/* Messages above this level are dropped before formatting. */
void nache_log_set_level(int level);
int nache_log_get_level(void);

#ifdef __cplusplus
}

// C++ spelling used across the core: NACHE_LOG(kLogInfo, "NACHE_CACHE", ...).
constexpr int kLogFatal = NACHE_LOG_FATAL;
constexpr int kLogMajor = NACHE_LOG_MAJOR;
constexpr int kLogCrit = NACHE_LOG_CRIT;
constexpr int kLogWarn = NACHE_LOG_WARN;
constexpr int kLogEvent = NACHE_LOG_EVENT;
constexpr int kLogInfo = NACHE_LOG_INFO;
constexpr int kLogDebug = NACHE_LOG_DEBUG;

// Log components shared by several files.
constexpr const char *kWritebackComponent = "NACHE_WRITEBACK";
constexpr int kLogFullDebug = NACHE_LOG_FULL_DEBUG;
#endif

#define NACHE_LOG(level, component, ...) \
  nache_log((level), (component), __VA_ARGS__)

#endif /* NACHE_UTIL_LOG_H */
