// Memory and store growth of the core's metadata: touches N files the way a
// cold `ls -lR` or `find` through nache does (a handle interned, attributes
// validated, optionally one small block cached each) against the Cache and
// HandleMap directly, no upstream, no lab. Prints the resident set size
// (VmRSS of /proc/self/status), the cache's in-memory object count and the
// store's size on disk as it goes. Not a test: a measurement
// (bench/README.md, "Memory per file").
//
//   nache_memory_bench [--files N] [--block-bytes B] [--dir D] [--keep]
#include <rocksdb/db.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cache/cache.h"
#include "handles/handle_map.h"
#include "store/store.h"

namespace {

// VmRSS of this process, in KiB (0 when unreadable).
uint64_t RssKib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, 6, "VmRSS:") == 0)
      return strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

// Bytes of every file under dir.
uint64_t DirBytes(const std::string &dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto &e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  return n;
}

// Number of keys RocksDB estimates in family f.
uint64_t Keys(nache::Store *s, nache::Store::Family f) {
  uint64_t n = 0;
  s->db()->GetIntProperty(s->family(f), "rocksdb.estimate-num-keys", &n);
  return n;
}

void Report(const char *when, uint64_t files, nache::Store *s, nache::Cache *c,
            const std::string &dir, double secs) {
  rocksdb::FlushOptions fo;
  for (int f = 0; f < nache::Store::kNumFamilies; f++)
    s->db()->Flush(fo, s->family(nache::Store::Family(f)));
  printf(
      "%-6s files=%-8llu rss_mib=%-7.1f objects_in_memory=%-8zu "
      "store_mib=%-7.1f handles=%-8llu attrs=%-8llu blocks=%-8llu "
      "cache_bytes=%llu secs=%.1f\n",
      when, (unsigned long long)files, RssKib() / 1024.0, c->objects(),
      DirBytes(dir) / 1048576.0,
      (unsigned long long)Keys(s, nache::Store::kHandles),
      (unsigned long long)Keys(s, nache::Store::kAttrs),
      (unsigned long long)Keys(s, nache::Store::kBlockMeta),
      (unsigned long long)c->bytes(), secs);
  fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  uint64_t files = 1000000, block_bytes = 0;
  std::string dir;
  bool keep = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--files" && i + 1 < argc) {
      files = strtoull(argv[++i], nullptr, 10);
    } else if (a == "--block-bytes" && i + 1 < argc) {
      block_bytes = strtoull(argv[++i], nullptr, 10);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--keep") {
      keep = true;
    } else {
      fprintf(stderr,
              "usage: %s [--files N] [--block-bytes B] [--dir D] [--keep]\n",
              argv[0]);
      return 2;
    }
  }
  if (dir.empty()) {
    char tmpl[] = "/tmp/nache-membench-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    dir = tmpl;
  }
  std::string err;
  std::unique_ptr<nache::Store> store = nache::Store::Open(dir + "/db", &err);
  if (!store) {
    fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  nache::HandleMap handles(store.get());
  nache::CacheOptions opts;  // the defaults: Cache_Size 4G, 256 KiB blocks
  std::unique_ptr<nache::Cache> cache(
      new nache::Cache(store.get(), opts, nullptr));
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  Report("start", 0, store.get(), cache.get(), dir, 0);
  nache::Key parent = handles.NamedKey("root");
  const std::string block(block_bytes, 'x');
  for (uint64_t i = 0; i < files; i++) {
    // A remote handle of a typical size (knfsd's are 28..36 bytes).
    char fh[40];
    snprintf(fh, sizeof(fh), "fh-%016llx-%016llx", (unsigned long long)i,
             (unsigned long long)(i * 2654435761u));
    nache::Key key = handles.Intern(fh, parent, "file" + std::to_string(i));
    nache::upstream::Attrs a;
    a.mask = nache::upstream::kAttrsObject;
    a.type = nache::upstream::FileType::kReg;
    a.change = 1;
    a.size = block_bytes;
    a.mode = 0644;
    a.nlink = 1;
    a.fileid = i + 100;
    cache->Validated(key, a);
    if (block_bytes > 0) cache->PutBlock(key, 0, cache->Generation(key), block);
    if ((i + 1) % (files >= 10 ? files / 5 : 1) == 0 && i + 1 < files)
      Report("touch", i + 1, store.get(), cache.get(), dir, secs());
  }
  Report("end", files, store.get(), cache.get(), dir, secs());
  cache.reset();
  store.reset();
  if (!keep) std::filesystem::remove_all(dir);
  return 0;
}
