// nachectl warm and pin: the tree walk and the warm job. See warm.h.
#include "core/warm.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "core/convert.h"
#include "core/core.h"
#include "util/log.h"
#include "util/parallel.h"

namespace nache {

namespace {

constexpr const char *kComponent = "NACHE_ADMIN";
using Clock = std::chrono::steady_clock;
// Blocks fetched in one parallel round at most (several small files
// share a round, so that `parallel` fetches are in flight for them too).
constexpr size_t kBlocksPerRound = 64;

std::string Join(const std::string &dir, const std::string &name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// A directory entry as the walk needs it.
struct Listed {
  std::string name;
  Key key = kNoKey;
  upstream::Attrs attrs;
  uint64_t cookie = 0;
};

bool Collect(void *ctx, const char *name, nache_key key,
             const nache_attrs *attrs, uint64_t cookie) {
  static_cast<std::vector<Listed> *>(ctx)->push_back(
      Listed{name, key, AttrsFromC(*attrs), cookie});
  return true;
}

// The entries of directory dir, every chunk of them, read as root; an NFS
// status (OK with what was read so far when stop() says so).
uint32_t List(Core *core, Key dir, const std::function<bool()> &stop,
              std::vector<Listed> *out) {
  const upstream::Creds root;
  uint64_t cookie = 0;
  bool eof = false;
  while (!eof && !stop()) {
    size_t before = out->size();
    uint32_t st = core->Readdir(root, dir, cookie, Collect, out, &eof);
    if (st) return st;
    if (eof) break;
    // Readdir delivers until its callback stops it or the listing ends;
    // a chunk with nothing new would loop forever.
    if (out->size() == before) return upstream::kNfs4ErrServerfault;
    cookie = out->back().cookie;
  }
  return upstream::kNfs4Ok;
}

}  // namespace

// A regular file whose data the walk fetches.
struct TreeWalk::File {
  Key key = kNoKey;
  std::string path;
  uint64_t size = 0;
  std::atomic<bool> skipped{false};
  File(Key k, std::string p, uint64_t s)
      : key(k), path(std::move(p)), size(s) {}
  File(File &&o) noexcept
      : key(o.key),
        path(std::move(o.path)),
        size(o.size),
        skipped(o.skipped.load()) {}
};

TreeWalk::TreeWalk(Core *core, const Options &opts, std::function<bool()> stop,
                   std::function<void(const Counts &)> progress)
    : core_(core),
      opts_(opts),
      stop_(std::move(stop)),
      progress_(std::move(progress)) {}

TreeWalk::Counts TreeWalk::counts() const {
  Counts c;
  c.dirs = dirs_.load();
  c.files = files_.load();
  c.bytes_fetched = fetched_.load();
  c.bytes_cached = cached_.load();
  c.skipped = skipped_.load();
  MutexLock g(&mu_);
  c.last_skip = last_skip_;
  return c;
}

bool TreeWalk::Unreachable(uint32_t st) {
  // What the core answers when the remote cannot be asked (a retryable
  // error for a client): the walk would only collect more of them.
  return st == upstream::kNfs4ErrDelay;
}

void TreeWalk::Skip(const std::string &path, uint32_t st) {
  skipped_++;
  const char *why =
      st == upstream::kNfs4ErrAccess || st == upstream::kNfs4ErrPerm
          ? "permission denied by the remote"
      : st == upstream::kNfs4ErrNoent || st == upstream::kNfs4ErrStale
          ? "gone at the remote"
          : nache_status_name(st);
  MutexLock g(&mu_);
  last_skip_ = path + ": " + why;
}

void TreeWalk::MaybeReport() {
  if (!progress_) return;
  const Clock::time_point now = Clock::now();
  if (now - reported_ < std::chrono::seconds(1)) return;
  reported_ = now;
  progress_(counts());
}

bool TreeWalk::Pace(uint64_t bytes) {
  if (opts_.rate == 0) return !stop_();
  MutexLock g(&mu_);
  const Clock::time_point now = Clock::now();
  const Clock::time_point start = std::max(now, next_fetch_);
  next_fetch_ =
      start +
      std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(double(bytes) / double(opts_.rate)));
  // (Woken every 100 ms to see a cancel.)
  while (Clock::now() < start) {
    if (stop_()) return false;
    pace_cv_.WaitUntil(
        std::min(start, Clock::now() + std::chrono::milliseconds(100)));
  }
  return !stop_();
}

std::string TreeWalk::FetchData(std::vector<File> *files) {
  struct Item {
    size_t file;
    uint64_t idx;
    uint64_t len;
  };
  const uint64_t bs = core_->cache()->block_size();
  std::vector<Item> items;
  for (size_t f = 0; f < files->size(); f++) {
    const File &file = (*files)[f];
    for (uint64_t i = 0; i * bs < file.size; i++)
      items.push_back(Item{f, i, std::min(bs, file.size - i * bs)});
  }
  const upstream::Creds root;
  std::atomic<bool> unreachable{false};
  ParallelFor(items.size(), size_t(std::max(1, opts_.parallel)),
              [&](size_t n) -> uint32_t {
                const Item &it = items[n];
                File &file = (*files)[it.file];
                if (file.skipped.load()) return 0;
                if (core_->cache()->HasBlock(file.key, it.idx)) {
                  cached_ += it.len;
                  return 0;
                }
                if (!Pace(it.len)) return upstream::kNfs4ErrDelay;
                uint64_t got = 0;
                uint32_t st = core_->Prefetch(root, file.key, it.idx, &got);
                fetched_ += got;
                if (st == 0) return 0;
                if (Unreachable(st)) {
                  unreachable = true;
                  return st;  // no new fetch starts
                }
                if (!file.skipped.exchange(true)) Skip(file.path, st);
                return 0;
              });
  if (stop_()) return "cancelled";
  if (unreachable) return "the remote cannot be reached";
  return "";
}

std::string TreeWalk::Run(
    const std::string &path, Key root, const upstream::Attrs &attrs,
    const std::function<void(Key, const upstream::Attrs &)> &visit) {
  Cache *cache = core_->cache();
  // What the walk may warm before the cache would evict what it warmed:
  // the bound less what it cannot evict (looked at again for each round).
  auto room = [cache] {
    uint64_t held = cache->dirty_bytes() + cache->pin_totals().cached;
    uint64_t size = cache->options().size_bytes;
    return held < size ? size - held : 0;
  };
  uint64_t room_now = room();
  std::vector<File> files;  // data to fetch in the next round
  uint64_t round_blocks = 0;
  const uint64_t bs = cache->block_size();
  auto fetch_round = [&]() -> std::string {
    if (files.empty()) return "";
    std::string why = FetchData(&files);
    files.clear();
    round_blocks = 0;
    room_now = room();
    return why;
  };
  // An object reached: visited, and its data queued.
  auto reach = [&](Key key, const upstream::Attrs &a,
                   const std::string &p) -> std::string {
    visit(key, a);
    if (a.type == upstream::FileType::kDir) return "";
    files_++;
    if (!opts_.data || a.type != upstream::FileType::kReg || a.size == 0)
      return "";
    // Our own unflushed writes are the newest data there is.
    if (cache->IsDirty(key)) {
      cached_ += a.size;
      return "";
    }
    if (!cache->Pinned(key)) {
      if (warmed_ + a.size > room_now) {
        std::string why = fetch_round();
        if (!why.empty()) return why;
        if (warmed_ + a.size > room_now)
          return "cache full: " + p + " (" + std::to_string(a.size) +
                 " bytes) would not fit beside the " + std::to_string(warmed_) +
                 " bytes warmed so far (Cache_Size less pinned and dirty "
                 "data); nothing warmed was evicted";
      }
      warmed_ += a.size;
    }
    files.emplace_back(key, p, a.size);
    round_blocks += (a.size + bs - 1) / bs;
    if (round_blocks >= kBlocksPerRound) return fetch_round();
    return "";
  };

  struct Dir {
    Key key;
    std::string path;
    int depth;
  };
  std::deque<Dir> dirs;
  std::string why;
  if (attrs.type == upstream::FileType::kDir) {
    visit(root, attrs);
    dirs_++;
    if (opts_.depth != 0) dirs.push_back(Dir{root, path, 0});
  } else {
    why = reach(root, attrs, path);
  }
  while (why.empty() && !dirs.empty()) {
    if (stop_()) return "cancelled";
    Dir d = std::move(dirs.front());
    dirs.pop_front();
    std::vector<Listed> entries;
    uint32_t st = List(core_, d.key, stop_, &entries);
    if (stop_()) return "cancelled";
    if (st) {
      if (Unreachable(st)) return "the remote cannot be reached";
      Skip(d.path, st);
      continue;
    }
    for (const Listed &e : entries) {
      const std::string p = Join(d.path, e.name);
      if (e.attrs.type == upstream::FileType::kDir) {
        visit(e.key, e.attrs);
        dirs_++;
        // Listed only above the depth asked (its entries are one deeper).
        if (opts_.depth < 0 || d.depth + 1 < opts_.depth)
          dirs.push_back(Dir{e.key, p, d.depth + 1});
        continue;
      }
      why = reach(e.key, e.attrs, p);
      if (!why.empty()) break;
    }
    MaybeReport();
  }
  if (why.empty()) why = fetch_round();
  if (why.empty() && stop_()) why = "cancelled";
  return why;
}

// --- the job
// ------------------------------------------------------------------

void Warmer::Stop() {
  std::thread t;
  {
    MutexLock g(&mu_);
    stopped_ = true;
    cancel_ = true;
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

bool Warmer::Start(const admin::WarmRequest &req, std::string *error) {
  {
    MutexLock g(&mu_);
    if (job_.running) {
      *error = "a warm of " + job_.request.path + " is running (job " +
               std::to_string(job_.job) + "); nachectl warm --cancel stops it";
      return false;
    }
  }
  Key key;
  upstream::Attrs attrs;
  std::string path = req.path;
  if (!core_->AdminResolve(&path, &key, &attrs, error)) return false;
  std::thread old;
  {
    MutexLock g(&mu_);
    if (stopped_) {
      *error = "the daemon is stopping";
      return false;
    }
    if (job_.running) {  // another nachectl started one meanwhile
      *error = "a warm of " + job_.request.path + " is running (job " +
               std::to_string(job_.job) + "); nachectl warm --cancel stops it";
      return false;
    }
    old = std::move(thread_);  // ended: joined below, off the lock
    uint64_t id = job_.job + 1;
    job_ = admin::WarmProgress();
    job_.job = id;
    job_.request = req;
    job_.request.path = path;
    job_.running = true;
    started_ = Clock::now();
    cancel_ = false;
    TreeWalk::Options o;
    o.depth = req.depth;
    o.data = req.data;
    o.rate = req.rate;
    o.parallel = std::max(1, std::min(req.parallel, 64));
    walk_ =
        std::make_shared<TreeWalk>(core_, o, [this] { return cancel_.load(); });
    thread_ = std::thread(&Warmer::RunJob, this, walk_, path, key, attrs);
  }
  if (old.joinable()) old.join();
  NACHE_LOG(kLogEvent, kComponent,
            "warm of %s started by nachectl (depth %d, %s, rate %llu B/s, "
            "%d in flight)",
            path.c_str(), req.depth, req.data ? "data" : "metadata only",
            (unsigned long long)req.rate, req.parallel);
  return true;
}

void Warmer::RunJob(std::shared_ptr<TreeWalk> walk, std::string path, Key key,
                    upstream::Attrs attrs) {
  std::string why =
      walk->Run(path, key, attrs, [](Key, const upstream::Attrs &) {});
  TreeWalk::Counts c = walk->counts();
  MutexLock g(&mu_);
  job_.running = false;
  job_.ok = why.empty();
  job_.outcome = why.empty() ? "done" : why;
  ended_ = Clock::now();
  NACHE_LOG(why.empty() ? kLogEvent : kLogWarn, kComponent,
            "warm of %s: %s after %.1f s: %llu directories, %llu files, "
            "%llu bytes fetched, %llu already cached, %llu skipped%s%s",
            path.c_str(), job_.outcome.c_str(),
            std::chrono::duration<double>(ended_ - started_).count(),
            (unsigned long long)c.dirs, (unsigned long long)c.files,
            (unsigned long long)c.bytes_fetched,
            (unsigned long long)c.bytes_cached, (unsigned long long)c.skipped,
            c.last_skip.empty() ? "" : "; last skipped: ", c.last_skip.c_str());
}

bool Warmer::Cancel(std::string *error) {
  MutexLock g(&mu_);
  if (!job_.running) {
    *error = job_.job ? "no warm is running (the last one, of " +
                            job_.request.path + ", ended: " + job_.outcome + ")"
                      : "no warm is running";
    return false;
  }
  cancel_ = true;
  return true;
}

admin::WarmProgress Warmer::Progress() const {
  MutexLock g(&mu_);
  admin::WarmProgress p = job_;
  if (walk_) {
    TreeWalk::Counts c = walk_->counts();
    p.dirs = c.dirs;
    p.files = c.files;
    p.bytes_fetched = c.bytes_fetched;
    p.bytes_cached = c.bytes_cached;
    p.skipped = c.skipped;
    p.last_skip = c.last_skip;
  }
  if (p.job)
    p.elapsed_s = std::chrono::duration<double>(
                      (p.running ? Clock::now() : ended_) - started_)
                      .count();
  return p;
}

}  // namespace nache
