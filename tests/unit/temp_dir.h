// A temporary directory for one test, removed with everything in it.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <string>

namespace nache {
namespace testing_util {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/nache-unit-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace testing_util
}  // namespace nache
