// The admin protocol's requests and answers. See protocol.h.
#include "admin/protocol.h"

#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

namespace nache {
namespace admin {

namespace {

std::vector<std::string> Words(const std::string &line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// A whole number of seconds, 1..86400 (a day: waits longer than that are
// a mistake, and the number stays far from any overflow).
bool ParseSeconds(const std::string &w, int *out) {
  if (w.empty() || w.size() > 5) return false;
  for (char c : w)
    if (c < '0' || c > '9') return false;
  int v = std::atoi(w.c_str());
  if (v < 1 || v > 86400) return false;
  *out = v;
  return true;
}

std::string Printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// A number as JSON has it: integers without a fraction, others with
// enough digits; never NaN or infinity (JSON has neither).
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "0";
  if (v == std::floor(v) && std::fabs(v) < 9.0e15) return Printf("%.0f", v);
  return Printf("%.6g", v);
}

std::string Seconds(double s) {
  if (s < 0) return "never";
  if (s < 10) return Printf("%.1f s", s);
  if (s < 3600) return Printf("%.0f s", s);
  return Printf("%.1f h", s / 3600);
}

std::string Ratio(double hits, double misses) {
  if (hits + misses <= 0) return "-";
  return Printf("%.1f%%", 100.0 * hits / (hits + misses));
}

}  // namespace

namespace {

bool SafePathByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || strchr("/._-~+,:@=", c) != nullptr;
}

// A whole number in [lo, hi].
bool ParseNumber(const std::string &w, uint64_t lo, uint64_t hi,
                 uint64_t *out) {
  if (w.empty() || w.size() > 19) return false;
  for (char c : w)
    if (c < '0' || c > '9') return false;
  uint64_t v = std::strtoull(w.c_str(), nullptr, 10);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Words of version 2 after the command (and, for flush, its version 1
// words): which ones each command takes.
struct Takes {
  bool path = false, depth = false, data = false, rate = false,
       parallel = false, wait = false, cancel = false, unpin = false;
};

bool ParseV2Words(const std::vector<std::string> &w, size_t i, const Takes &t,
                  Request *req, std::string *error) {
  const std::string &c = w[0];
  for (; i < w.size(); i++) {
    const std::string &x = w[i];
    uint64_t v = 0;
    auto value = [&x](const char *key) -> const char * {
      size_t n = strlen(key);
      return x.compare(0, n, key) == 0 ? x.c_str() + n : nullptr;
    };
    if (const char *e = value("export=")) {
      if (!ParseNumber(e, 0, 65535, &v)) {
        *error = "bad export id '" + std::string(e) + "' (0..65535)";
        return false;
      }
      req->export_id = int64_t(v);
    } else if (t.path && !x.empty() && x[0] == '/' && req->path.empty()) {
      if (!DecodePath(x, &req->path)) {
        *error = "bad path '" + x + "'";
        return false;
      }
    } else if (const char *e = t.depth ? value("depth=") : nullptr) {
      if (!ParseNumber(e, 0, 1000000, &v)) {
        *error = "bad depth '" + std::string(e) + "' (0..1000000)";
        return false;
      }
      req->depth = int(v);
    } else if (const char *e = t.rate ? value("rate=") : nullptr) {
      if (!ParseNumber(e, 1, uint64_t(1) << 50, &v)) {
        *error = "bad rate '" + std::string(e) + "' (bytes per second)";
        return false;
      }
      req->rate = v;
    } else if (const char *e = t.parallel ? value("parallel=") : nullptr) {
      if (!ParseNumber(e, 1, 64, &v)) {
        *error = "bad parallel '" + std::string(e) + "' (1..64)";
        return false;
      }
      req->parallel = int(v);
    } else if (t.data && x == "data") {
      req->data = true;
    } else if (t.wait && x == "wait") {
      req->wait = true;
    } else if (t.cancel && x == "cancel") {
      req->cancel = true;
    } else if (t.unpin && x == "unpin") {
      req->unpin = true;
    } else {
      *error = "unexpected '" + x + "' after " + c;
      return false;
    }
  }
  return true;
}

}  // namespace

std::string EncodePath(const std::string &path) {
  std::string out;
  for (unsigned char c : path) {
    if (SafePathByte(c)) {
      out += char(c);
    } else {
      out += Printf("%%%02X", c);
    }
  }
  return out;
}

bool DecodePath(const std::string &word, std::string *path) {
  if (word.empty() || word[0] != '/') return false;
  std::string out;
  for (size_t i = 0; i < word.size(); i++) {
    unsigned char c = word[i];
    if (c == '%') {
      if (i + 2 >= word.size()) return false;
      if (!isxdigit((unsigned char)word[i + 1]) ||
          !isxdigit((unsigned char)word[i + 2]))
        return false;
      c = (unsigned char)std::strtoul(word.substr(i + 1, 2).c_str(), nullptr,
                                      16);
      i += 2;
      if (c == 0) return false;
    } else if (!SafePathByte(c)) {
      return false;
    }
    out += char(c);
  }
  *path = out;
  return true;
}

bool ParseRequest(const std::string &line, Request *req, std::string *error) {
  if (line.size() > kMaxRequestLine) {
    *error =
        "request longer than " + std::to_string(kMaxRequestLine) + " bytes";
    return false;
  }
  std::vector<std::string> w = Words(line);
  if (w.empty()) {
    *error = "empty request";
    return false;
  }
  *req = Request();
  const std::string &c = w[0];
  size_t i = 1;
  Takes t;
  if (c == "status") {
    req->command = Command::kStatus;
    if (i < w.size() && w[i] == "json") {
      req->json = true;
      i++;
    }
  } else if (c == "stats") {
    req->command = Command::kStats;
  } else if (c == "flush" || c == "drain") {
    req->command = c == "flush" ? Command::kFlush : Command::kDrain;
    req->wait = req->command == Command::kDrain;
    if (i < w.size() && w[i] == (req->wait ? "nowait" : "wait")) {
      req->wait = !req->wait;
      i++;
    }
    if (req->wait && i < w.size() && !w[i].empty() && w[i][0] != '/' &&
        w[i].compare(0, 7, "export=") != 0) {
      if (!ParseSeconds(w[i], &req->timeout_s)) {
        *error = "bad timeout '" + w[i] + "' (whole seconds, 1..86400)";
        return false;
      }
      i++;
    }
    t.path = req->command == Command::kFlush;
  } else if (c == "undrain") {
    req->command = Command::kUndrain;
  } else if (c == "warm") {
    req->command = Command::kWarm;
    t.path = t.depth = t.data = t.rate = t.parallel = t.wait = t.cancel = true;
  } else if (c == "pin" || c == "unpin") {
    req->command = c == "pin" ? Command::kPin : Command::kUnpin;
    t.path = true;
  } else if (c == "evict") {
    req->command = Command::kEvict;
    t.path = t.unpin = true;
  } else {
    *error = "unknown command '" + c +
             "' (status, stats, flush, drain, undrain, warm, pin, unpin, "
             "evict)";
    return false;
  }
  const bool v2 =
      req->command == Command::kFlush || req->command >= Command::kWarm;
  if (v2) {
    if (!ParseV2Words(w, i, t, req, error)) return false;
    i = w.size();
  }
  if (i < w.size()) {
    *error = "unexpected '" + w[i] + "' after " + c;
    return false;
  }
  const bool needs_path = req->command >= Command::kWarm &&
                          !(req->command == Command::kWarm && req->cancel);
  if (needs_path && req->path.empty()) {
    *error = c + " needs a path inside the export (starting with /)";
    return false;
  }
  if (req->cancel && (!req->path.empty() || req->data || req->wait ||
                      req->depth >= 0 || req->rate || req->parallel)) {
    *error = "warm cancel takes no path or other option";
    return false;
  }
  return true;
}

std::string FormatRequest(const Request &req) {
  std::string s;
  std::string ex = req.export_id >= 0
                       ? " export=" + std::to_string(req.export_id)
                       : std::string();
  std::string path = req.path.empty() ? "" : " " + EncodePath(req.path);
  switch (req.command) {
    case Command::kStatus: return req.json ? "status json" : "status";
    case Command::kStats: return "stats";
    case Command::kUndrain: return "undrain";
    case Command::kFlush: s = req.wait ? "flush wait" : "flush"; break;
    case Command::kDrain: s = req.wait ? "drain" : "drain nowait"; break;
    case Command::kWarm:
      if (req.cancel) return "warm" + ex + " cancel";
      s = "warm" + ex;
      if (req.depth >= 0) s += " depth=" + std::to_string(req.depth);
      if (req.data) s += " data";
      if (req.rate) s += " rate=" + std::to_string(req.rate);
      if (req.parallel) s += " parallel=" + std::to_string(req.parallel);
      if (req.wait) s += " wait";
      return s + path;
    case Command::kPin: return "pin" + ex + path;
    case Command::kUnpin: return "unpin" + ex + path;
    case Command::kEvict:
      return "evict" + ex + (req.unpin ? " unpin" : "") + path;
  }
  if (req.wait && req.timeout_s > 0) s += " " + std::to_string(req.timeout_s);
  if (req.command == Command::kFlush) s += ex + path;
  return s;
}

std::string AnswerLine(const char *tag, const std::string &text) {
  std::string out = tag;
  out += ' ';
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  out += '\n';
  return out;
}

std::string DataLines(const std::string &text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out += AnswerLine("data", text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

bool ParseAnswerLine(const std::string &line, std::string *tag,
                     std::string *text) {
  static const char *const kTags[] = {"data", "progress", "ok", "error"};
  for (const char *t : kTags) {
    std::string p = std::string(t) + " ";
    if (line.compare(0, p.size(), p) == 0) {
      *tag = t;
      *text = line.substr(p.size());
      return true;
    }
  }
  return false;
}

std::string JsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20)
          out += Printf("\\u%04x", c);
        else
          out += char(c);
    }
  }
  return out + "\"";
}

std::string StatusJson(const std::vector<ExportStatus> &exports, bool draining,
                       const std::vector<std::string> &recent_errors) {
  std::string o = "{\n  \"version\": 1,\n  \"draining\": ";
  o += draining ? "true" : "false";
  o += ",\n  \"exports\": [";
  bool first = true;
  for (const ExportStatus &e : exports) {
    o += first ? "\n" : ",\n";
    first = false;
    auto num = [&](const char *k, double v) {
      o += Printf("      \"%s\": ", k) + JsonNumber(v) + ",\n";
    };
    auto str = [&](const char *k, const std::string &v) {
      o += Printf("      \"%s\": ", k) + JsonString(v) + ",\n";
    };
    auto boolean = [&](const char *k, bool v) {
      o += Printf("      \"%s\": %s,\n", k, v ? "true" : "false");
    };
    o += Printf("    {\n      \"export_id\": %u,\n", e.export_id);
    o += "      \"upstream\": {\n";
    str("server", e.server);
    num("port", e.port);
    str("path", e.path);
    num("minor_version", e.minor_version);
    str("state", e.state);
    boolean("connected", e.connected);
    str("client_id", Printf("%016" PRIx64, e.client_id));
    num("clientid_epoch", double(e.clientid_epoch));
    num("lease_time_s", e.lease_time_s);
    num("lease_age_s", e.lease_age_s);
    boolean("callbacks_configured", e.callbacks_configured);
    boolean("callback_path_up", e.callback_path_up);
    num("open_files", double(e.open_files));
    num("compounds", e.compounds);
    o += "      \"rtt_avg_s\": " + JsonNumber(e.rtt_avg_s) + "\n      },\n";
    o += "      \"cache\": {\n";
    num("bytes", double(e.cache_bytes));
    num("limit_bytes", double(e.cache_limit));
    num("blocks", double(e.cache_blocks));
    num("objects", double(e.objects));
    num("max_objects", double(e.max_objects));
    num("hits", e.cache_hits);
    num("misses", e.cache_misses);
    double total = e.cache_hits + e.cache_misses;
    o += "      \"hit_ratio\": " +
         JsonNumber(total > 0 ? e.cache_hits / total : 0) + "\n      },\n";
    o += "      \"delegations\": {\n";
    num("read", double(e.delegations_read));
    num("write", double(e.delegations_write));
    o += "      \"given_to_clients\": " +
         JsonNumber(double(e.local_delegations)) + "\n      },\n";
    o += "      \"writeback\": {\n";
    boolean("enabled", e.write_back);
    boolean("single_writer", e.single_writer);
    boolean("draining", e.draining);
    num("dirty_bytes", double(e.dirty_bytes));
    num("dirty_files", double(e.dirty_files));
    num("dirty_max", double(e.dirty_max));
    num("oldest_dirty_s", e.oldest_dirty_s);
    num("flush_age_s", e.flush_age_s);
    o += "      \"conflicts\": " + JsonNumber(e.conflicts) + "\n      },\n";
    o += "      \"ops\": {\n";
    num("local", e.local_ops);
    o += "      \"answered_locally\": " + JsonNumber(e.answered_locally) +
         "\n      },\n";
    o += "      \"pins\": {\n";
    num("count", double(e.pins));
    num("objects", double(e.pinned_objects));
    num("size", double(e.pinned_size));
    num("cached", double(e.pinned_cached));
    num("limit", double(e.pin_limit));
    o += "      \"list\": [";
    for (size_t i = 0; i < e.pin_list.size(); i++)
      o += (i ? ", " : "") + std::string("{\"path\": ") +
           JsonString(e.pin_list[i].path) +
           ", \"objects\": " + JsonNumber(double(e.pin_list[i].objects)) +
           ", \"size\": " + JsonNumber(double(e.pin_list[i].size)) + "}";
    o += "]\n      },\n";
    if (e.warm.job == 0) {
      o += "      \"warm\": null,\n";
    } else {
      const WarmProgress &w = e.warm;
      o += "      \"warm\": {\n";
      num("job", double(w.job));
      str("path", w.request.path);
      num("depth", w.request.depth);
      boolean("data", w.request.data);
      num("rate", double(w.request.rate));
      boolean("running", w.running);
      boolean("ok", w.ok);
      str("outcome", w.outcome);
      num("dirs", double(w.dirs));
      num("files", double(w.files));
      num("bytes_fetched", double(w.bytes_fetched));
      num("bytes_cached", double(w.bytes_cached));
      num("skipped", double(w.skipped));
      str("last_skip", w.last_skip);
      o += "        \"elapsed_s\": " + JsonNumber(w.elapsed_s) + "\n      },\n";
    }
    o += "      \"last_error\": " +
         (e.last_error.empty()
              ? std::string("null")
              : "{\"message\": " + JsonString(e.last_error) + ", \"time\": " +
                    JsonNumber(double(e.last_error_time)) + "}") +
         "\n    }";
  }
  o += first ? "],\n" : "\n  ],\n";
  o += "  \"recent_errors\": [";
  for (size_t i = 0; i < recent_errors.size(); i++)
    o += (i ? ",\n    " : "\n    ") + JsonString(recent_errors[i]);
  o += recent_errors.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return o;
}

std::string StatusText(const std::vector<ExportStatus> &exports, bool draining,
                       const std::vector<std::string> &recent_errors) {
  std::string o;
  if (exports.empty()) o += "no NACHE export is running\n";
  if (draining)
    o += "DRAINING: new writes go to the remote at once (nachectl "
         "undrain ends it)\n";
  for (const ExportStatus &e : exports) {
    o += Printf("export %u\n", e.export_id);
    o += Printf("  upstream     %s:%u%s, NFSv4.%u, %s%s\n", e.server.c_str(),
                e.port, e.path.c_str(), e.minor_version,
                e.connected ? "connected" : "NOT CONNECTED",
                e.connected ? "" : (" (" + e.state + ")").c_str());
    o += Printf("  client id    %016" PRIx64 " (re-established %" PRIu64
                " times), lease %s old of %u s\n",
                e.client_id, e.clientid_epoch, Seconds(e.lease_age_s).c_str(),
                e.lease_time_s);
    o += Printf("  callbacks    %s\n", !e.callbacks_configured
                                           ? "not configured (no delegations)"
                                       : e.callback_path_up ? "path up"
                                                            : "PATH DOWN");
    o += "  round trips  " +
         Printf("%.0f COMPOUNDs, mean %.1f ms; ", e.compounds,
                e.rtt_avg_s * 1000) +
         Printf("%.0f of %.0f operations answered here without one\n",
                e.answered_locally, e.local_ops);
    o += "  cache        " + HumanBytes(double(e.cache_bytes)) + " of " +
         HumanBytes(double(e.cache_limit)) +
         Printf(" in %" PRIu64 " blocks; %" PRIu64
                " objects in memory "
                "(of %" PRIu64 "); hit ratio %s\n",
                e.cache_blocks, e.objects, e.max_objects,
                Ratio(e.cache_hits, e.cache_misses).c_str());
    o += Printf("  delegations  %" PRIu64 " read, %" PRIu64
                " write held; %" PRIu64 " given to clients; %" PRIu64
                " files open upstream\n",
                e.delegations_read, e.delegations_write, e.local_delegations,
                e.open_files);
    if (e.write_back) {
      o += "  write-back   " + HumanBytes(double(e.dirty_bytes)) +
           " dirty of " + HumanBytes(double(e.dirty_max)) +
           Printf(" (Dirty_Max) in %" PRIu64 " objects", e.dirty_files);
      if (e.dirty_files) o += ", oldest " + Seconds(e.oldest_dirty_s);
      o += Printf("; flush after %u s%s%s\n", e.flush_age_s,
                  e.single_writer ? "; single writer" : "",
                  e.draining ? "; DRAINING" : "");
    } else {
      o += "  write-back   off (write-through)\n";
    }
    o += Printf("  conflicts    %.0f\n", e.conflicts);
    if (e.pins) {
      o += Printf("  pins         %" PRIu64 " (%" PRIu64 " objects): ", e.pins,
                  e.pinned_objects) +
           HumanBytes(double(e.pinned_size)) + " of files, " +
           HumanBytes(double(e.pinned_cached)) + " cached; at most " +
           HumanBytes(double(e.pin_limit)) + "\n";
      for (const PinInfo &p : e.pin_list)
        o += "               " + p.path +
             Printf(" (%" PRIu64 " objects, ", p.objects) +
             HumanBytes(double(p.size)) + ")\n";
    }
    if (e.warm.job) {
      // ("warm of PATH " once: the line says PATH first.)
      const std::string ended = WarmSummary(e.warm);
      const size_t head = ("warm of " + e.warm.request.path + " ").size();
      o += "  warm         " + e.warm.request.path + ": " +
           (e.warm.running ? "running, " + WarmProgressLine(e.warm)
                           : ended.substr(std::min(head, ended.size()))) +
           "\n";
    }
    if (!e.last_error.empty()) {
      char when[32] = "?";
      time_t t = time_t(e.last_error_time);
      struct tm tm;
      if (gmtime_r(&t, &tm)) strftime(when, sizeof(when), "%FT%TZ", &tm);
      o += std::string("  last error   ") + when + " " + e.last_error + "\n";
    }
  }
  if (!recent_errors.empty()) {
    o += "recent errors and warnings (all exports, newest last)\n";
    for (const std::string &m : recent_errors) o += "  " + m + "\n";
  }
  return o;
}

namespace {

std::string LabelText(const prometheus::ClientMetric &m) {
  std::string s;
  for (const auto &l : m.label) {
    if (l.name == "export") continue;
    s += s.empty() ? "{" : ",";
    s += l.name + "=" + l.value;
  }
  return s.empty() ? s : s + "}";
}

std::string ExportOf(const prometheus::ClientMetric &m) {
  for (const auto &l : m.label)
    if (l.name == "export") return l.value;
  return "";
}

std::string ValueText(const std::string &family, double v) {
  const bool bytes = family.find("bytes") != std::string::npos;
  if (bytes && v >= 1024) return Printf("%.0f (%s)", v, HumanBytes(v).c_str());
  return JsonNumber(v);
}

}  // namespace

std::string StatsText(const std::vector<prometheus::MetricFamily> &families) {
  // export label -> its lines; and the sums the summary needs.
  struct Sums {
    double local = 0, answered = 0, compounds = 0, hits = 0, misses = 0;
  };
  std::map<std::string, std::string> body;
  std::map<std::string, Sums> sums;
  std::set<std::string> exports;
  for (const prometheus::MetricFamily &f : families) {
    if (f.name.compare(0, 9, "exposer_") == 0) continue;
    std::map<std::string, std::string> lines;  // by export
    for (const prometheus::ClientMetric &m : f.metric) {
      std::string ex = ExportOf(m);
      exports.insert(ex);
      std::string v;
      double value = 0;
      switch (f.type) {
        case prometheus::MetricType::Counter: value = m.counter.value; break;
        case prometheus::MetricType::Gauge: value = m.gauge.value; break;
        default: break;
      }
      if (f.type == prometheus::MetricType::Histogram) {
        const auto &h = m.histogram;
        v = Printf("count %" PRIu64 ", sum %.6g, mean %s", h.sample_count,
                   h.sample_sum,
                   h.sample_count
                       ? Printf("%.3f ms",
                                1000 * h.sample_sum / double(h.sample_count))
                             .c_str()
                       : "-");
      } else {
        v = ValueText(f.name, value);
      }
      Sums &s = sums[ex];
      if (f.name == "nache_local_ops_total") s.local += value;
      if (f.name == "nache_local_ops_without_upstream_total")
        s.answered += value;
      if (f.name == "nache_upstream_compounds_total") s.compounds += value;
      if (f.name == "nache_cache_hits_total") s.hits += value;
      if (f.name == "nache_cache_misses_total") s.misses += value;
      lines[ex] += "    " + f.name + LabelText(m) + "  " + v + "\n";
    }
    for (auto &l : lines) body[l.first] += l.second;
  }
  std::string o;
  for (const std::string &ex : exports) {
    const Sums &s = sums[ex];
    o += ex.empty() ? std::string("daemon-wide\n") : "export " + ex + "\n";
    if (!ex.empty()) {
      o += Printf(
          "  operations answered here without a round trip: %.0f of "
          "%.0f (%s); COMPOUNDs sent upstream: %.0f\n",
          s.answered, s.local, Ratio(s.answered, s.local - s.answered).c_str(),
          s.compounds);
      o += "  cache hit ratio (all kinds): " + Ratio(s.hits, s.misses) + "\n";
    }
    o += body[ex];
  }
  return o;
}

std::string FlushProgress(const std::vector<ExportStatus> &exports,
                          double elapsed_s, const std::string &last_error) {
  uint64_t bytes = 0, files = 0;
  double oldest = 0;
  bool connected = true;
  for (const ExportStatus &e : exports) {
    if (!e.write_back) continue;
    bytes += e.dirty_bytes;
    files += e.dirty_files;
    if (e.dirty_files && e.oldest_dirty_s > oldest) oldest = e.oldest_dirty_s;
    if (!e.connected) connected = false;
  }
  std::string o = Printf("%.0f s: ", elapsed_s) + HumanBytes(double(bytes)) +
                  Printf(" dirty in %" PRIu64 " objects", files);
  if (files) o += ", oldest " + Seconds(oldest);
  if (!connected) o += "; upstream not connected";
  if (!last_error.empty()) o += "; last flush error: " + last_error;
  return o;
}

std::string WarmProgressLine(const WarmProgress &w) {
  std::string o = Printf("%.0f s: %" PRIu64 " directories, %" PRIu64 " files",
                         w.elapsed_s, w.dirs, w.files);
  if (w.request.data || w.bytes_fetched || w.bytes_cached)
    o += ", " + HumanBytes(double(w.bytes_fetched)) + " fetched, " +
         HumanBytes(double(w.bytes_cached)) + " already cached";
  if (w.elapsed_s > 0 && w.bytes_fetched)
    o += " (" + HumanBytes(double(w.bytes_fetched) / w.elapsed_s) + "/s)";
  o += Printf(", %" PRIu64 " skipped", w.skipped);
  if (!w.last_skip.empty()) o += " (last: " + w.last_skip + ")";
  return o;
}

std::string WarmSummary(const WarmProgress &w) {
  std::string o = "warm of " + w.request.path + " ";
  const char *fmt = w.elapsed_s < 10 ? "%.2f" : "%.0f";
  o += w.ok ? "done in " : "stopped (" + w.outcome + ") after ";
  o += Printf(fmt, w.elapsed_s) + " s: ";
  o += Printf("%" PRIu64 " directories, %" PRIu64 " files", w.dirs, w.files);
  if (w.request.data)
    o += ", " + HumanBytes(double(w.bytes_fetched)) + " fetched, " +
         HumanBytes(double(w.bytes_cached)) + " already cached";
  o += Printf(", %" PRIu64 " skipped", w.skipped);
  if (!w.last_skip.empty()) o += " (last: " + w.last_skip + ")";
  return o;
}

std::string HumanBytes(double b) {
  static const char *const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1024) return Printf("%.0f B", b);
  int u = -1;
  while (b >= 1024 && u < 3) {
    b /= 1024;
    u++;
  }
  return Printf("%.1f %s", b, kUnits[u]);
}

}  // namespace admin
}  // namespace nache
