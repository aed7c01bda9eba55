// What the daemon's process costs the box: its CPU time, resident memory,
// threads and open file descriptors, as the kernel counts them
// (/proc/self). Served with nache's metrics under the names Prometheus'
// own clients use (process_cpu_seconds_total, ...), so that a dashboard
// can tell a busy CPU from a slow remote.
//
// Thread safety: free functions without state.
#pragma once

#include <cstdint>
#include <string>

namespace nache {
namespace metrics {

struct ProcessStats {
  double user_cpu_s = 0;    // CPU time in user mode
  double system_cpu_s = 0;  // CPU time in the kernel
  uint64_t resident_bytes = 0;
  uint32_t threads = 0;
  uint32_t open_fds = 0;
};

// Parses the text of /proc/<pid>/stat (proc(5)): ticks_per_s is
// sysconf(_SC_CLK_TCK), page_bytes the page size. False when it is not
// such a line. (open_fds is left as it was.)
bool ParseProcStat(const std::string &stat, long ticks_per_s, long page_bytes,
                   ProcessStats *out);

// This process's numbers now; false when /proc cannot be read.
bool SampleThisProcess(ProcessStats *out);

}  // namespace metrics
}  // namespace nache
