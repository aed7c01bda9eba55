#include "metrics/process_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace nache {
namespace metrics {

bool ParseProcStat(const std::string &stat, long ticks_per_s, long page_bytes,
                   ProcessStats *out) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // the fields start after its last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || ticks_per_s <= 0 || page_bytes <= 0)
    return false;
  std::istringstream in(stat.substr(close + 1));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string w; in >> w;) f.push_back(w);
  // Fields 14 and 15 (utime, stime), 20 (num_threads), 24 (rss, pages).
  if (f.size() < 22) return false;
  auto num = [&](size_t field, unsigned long long *v) {
    char *end = nullptr;
    const std::string &s = f[field - 3];
    *v = std::strtoull(s.c_str(), &end, 10);
    return end != s.c_str() && *end == '\0';
  };
  unsigned long long utime, stime, threads, rss;
  if (!num(14, &utime) || !num(15, &stime) || !num(20, &threads) ||
      !num(24, &rss))
    return false;
  out->user_cpu_s = double(utime) / double(ticks_per_s);
  out->system_cpu_s = double(stime) / double(ticks_per_s);
  out->threads = uint32_t(threads);
  out->resident_bytes = uint64_t(rss) * uint64_t(page_bytes);
  return true;
}

bool SampleThisProcess(ProcessStats *out) {
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line) ||
      !ParseProcStat(line, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), out))
    return false;
  uint32_t fds = 0;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (const dirent *e = readdir(d))
      if (e->d_name[0] != '.') fds++;
    closedir(d);
    out->open_fds = fds > 0 ? fds - 1 : 0;  // (not the one reading it)
  }
  return true;
}

}  // namespace metrics
}  // namespace nache
