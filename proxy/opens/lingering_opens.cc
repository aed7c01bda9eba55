#include "opens/lingering_opens.h"

#include <utility>

namespace nache {

LingeringOpens::LingeringOpens(std::chrono::milliseconds linger,
                               OpenTable *opens, Host *host)
    : linger_(linger), opens_(opens), host_(host) {}

LingeringOpens::~LingeringOpens() { Stop(); }

void LingeringOpens::Start() {
  {
    MutexLock g(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void LingeringOpens::Stop() {
  if (!thread_.joinable()) return;
  {
    MutexLock g(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

bool LingeringOpens::Linger(const std::shared_ptr<FileOpen> &f) {
  if (linger_.count() == 0) return false;
  auto due = std::chrono::steady_clock::now() + linger_;
  f->linger_until = due;
  {
    MutexLock g(&mu_);
    queue_.emplace(due, f);
  }
  cv_.SignalAll();
  return true;
}

size_t LingeringOpens::CloseAll() {
  Queue all;
  {
    MutexLock g(&mu_);
    all.swap(queue_);
  }
  size_t n = 0;
  for (auto &kv : all) n += CloseIfIdle(kv.second, false);
  return n;
}

size_t LingeringOpens::Queued() const {
  MutexLock g(&mu_);
  return queue_.size();
}

void LingeringOpens::Run() {
  MutexLock g(&mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.Wait();
      continue;
    }
    auto due = queue_.begin()->first;
    if (std::chrono::steady_clock::now() < due) {
      cv_.WaitUntil(due);
      continue;
    }
    std::shared_ptr<FileOpen> f = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    g.Unlock();
    CloseIfIdle(f, true);
    g.Lock();
  }
}

bool LingeringOpens::CloseIfIdle(const std::shared_ptr<FileOpen> &f,
                                 bool only_if_due) {
  bool closed = false;
  {
    MutexLock fg(&f->owner->mu);
    host_->ResetIfStale(f.get());
    // Not when reopened meanwhile, nor (only_if_due) when closed again
    // later: a newer entry is due then.
    if (f->open() && f->n_local == 0 &&
        (!only_if_due || f->linger_until <= std::chrono::steady_clock::now())) {
      host_->CloseUpstream(f.get());
      closed = true;
    }
  }
  opens_->DropIfIdle(f);
  return closed;
}

}  // namespace nache
