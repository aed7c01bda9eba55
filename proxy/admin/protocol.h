// The admin socket's protocol, spoken by nachectl and the daemon
// (admin_server.h), and how its answers are written: pure functions, no
// sockets, no threads.
//
// A connection carries one request and its answer, then closes.
//
//   request:  one line, at most kMaxRequestLine bytes: words separated by
//             spaces, the command first:
//               status [json] | stats | flush [wait [SECONDS]] |
//               drain [nowait] [SECONDS] | undrain
//             version 2 adds work on a path inside an export (PATH: a
//             word starting with "/", bytes other than letters, digits
//             and /._-~+,:@= written %XX; EXPORT: export=N, needed only
//             when the daemon has several exports):
//               flush [wait [SECONDS]] [EXPORT] [PATH] |
//               warm [EXPORT] [depth=N] [data] [rate=BYTES] [parallel=N]
//                    [wait] PATH | warm [EXPORT] cancel |
//               pin [EXPORT] PATH | unpin [EXPORT] PATH |
//               evict [EXPORT] [unpin] PATH
//   answer:   lines "<tag> <text>", tags:
//               data      a line of the answer's body (stdout)
//               progress  a progress report while waiting (stdout)
//               ok        the end: success (text: a summary, may be empty)
//               error     the end: failure (text: what went wrong)
//             Nothing follows ok or error. A connection closed without
//             either is a failure (the daemon stopped meanwhile).
//
// Version 2; a command the daemon does not know is answered with error
// (an older daemon so refuses version 2's commands), and every request of
// version 1 means what it meant.
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <vector>

#include "admin/registry.h"

namespace nache {
namespace admin {

// (A PATH of PATH_MAX bytes, each written %XX, fits.)
constexpr size_t kMaxRequestLine = 16384;

enum class Command {
  kStatus,
  kStats,
  kFlush,
  kDrain,
  kUndrain,
  // Version 2.
  kWarm,
  kPin,
  kUnpin,
  kEvict
};

struct Request {
  Command command = Command::kStatus;
  bool json = false;  // status json
  bool wait = false;  // flush wait; drain unless nowait; warm wait
  int timeout_s = 0;  // wait at most this long (0: until done)
  // Version 2.
  int64_t export_id = -1;  // export=N; -1: the daemon's only export
  std::string path;        // PATH ("" none: flush of everything)
  int depth = -1;          // warm depth=N (-1: all)
  bool data = false;       // warm data
  uint64_t rate = 0;       // warm rate=BYTES (per second; 0: no cap)
  int parallel = 0;        // warm parallel=N (0: the default, 4)
  bool cancel = false;     // warm cancel
  bool unpin = false;      // evict unpin
};

// Parses one request line (without its newline). False with *error set
// (a message naming what is wrong) when it is not a request.
bool ParseRequest(const std::string &line, Request *req, std::string *error);
// The line that asks for req (without newline); ParseRequest reads it back.
std::string FormatRequest(const Request &req);

// One answer line with its newline; newlines inside text become spaces
// (one line is one line).
std::string AnswerLine(const char *tag, const std::string &text);
// Each line of text as a data line.
std::string DataLines(const std::string &text);

// Splits an answer line into tag and text. False when it has no known tag.
bool ParseAnswerLine(const std::string &line, std::string *tag,
                     std::string *text);

// A JSON string literal of s (quotes included), escaping what RFC 8259
// requires; bytes that are not UTF-8 pass through as they are.
std::string JsonString(const std::string &s);

// `nachectl status --json`: {"version":1, "draining":..,
// "exports":[{...}], "recent_errors":[...]}, names as in ExportStatus.
std::string StatusJson(const std::vector<ExportStatus> &exports, bool draining,
                       const std::vector<std::string> &recent_errors);
// `nachectl status`: the same for a person.
std::string StatusText(const std::vector<ExportStatus> &exports, bool draining,
                       const std::vector<std::string> &recent_errors);

// `nachectl stats`: every series of families, grouped by export, the
// export's summary first (operations answered without a round trip, cache
// hit ratio). Histograms show count, sum and mean. exposer_* (the HTTP
// server's own) are left out.
std::string StatsText(const std::vector<prometheus::MetricFamily> &families);

// One progress line of a flush being waited for.
std::string FlushProgress(const std::vector<ExportStatus> &exports,
                          double elapsed_s, const std::string &last_error);

// A warm job's progress in one line ("12 s: 3 directories, ...").
std::string WarmProgressLine(const WarmProgress &w);
// The end of a warm job, in one line ("warm of /a done in 3.1 s: ...").
std::string WarmSummary(const WarmProgress &w);

// PATH as a request carries it, and back (false: not a valid PATH word).
std::string EncodePath(const std::string &path);
bool DecodePath(const std::string &word, std::string *path);

// 1536 -> "1.5 KiB"; below 1 KiB in bytes.
std::string HumanBytes(double bytes);

}  // namespace admin
}  // namespace nache
