// Helpers the command-line tools of tests/tools share.
#pragma once

#include <string>
#include <vector>

namespace nache {
namespace tools {

// The components of a path ("/a//b/" gives "a", "b").
inline std::vector<std::string> SplitPath(const std::string &path) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    if (next > pos) parts.push_back(path.substr(pos, next - pos));
    pos = next + 1;
  }
  return parts;
}

}  // namespace tools
}  // namespace nache
