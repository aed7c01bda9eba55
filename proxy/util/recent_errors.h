// The daemon's last warnings and errors, kept in memory for `nachectl
// status` (an admin asking "what went wrong lately" should not need the
// log file). nache_log() notes every message at NACHE_LOG_WARN or more
// severe here, whatever the log level lets through to the sink.
//
// Bounded: the newest kRecentErrors messages, each with its UTC time and
// component. Thread safety: thread-safe; one short lock per note.
#pragma once

#include <string>
#include <vector>

namespace nache {

constexpr size_t kRecentErrors = 16;

// Keeps "<UTC time> <LEVEL> <component>: <message>", dropping the oldest
// beyond kRecentErrors.
void NoteRecentError(int level, const char *component, const char *message);
// Oldest first.
std::vector<std::string> RecentErrors();
// Forgets them all (tests).
void ClearRecentErrors();

}  // namespace nache
