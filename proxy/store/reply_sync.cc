#include "store/reply_sync.h"

#include <rocksdb/status.h>

#include <algorithm>

#include "store/store.h"

namespace nache {

namespace {
thread_local ReplySync *tls_current = nullptr;
}  // namespace

ReplySync::ReplySync() : nested_(tls_current != nullptr) {
  if (!nested_) tls_current = this;
}

ReplySync::~ReplySync() {
  if (!finished_) Finish();
  if (!nested_) tls_current = nullptr;
}

ReplySync *ReplySync::Current() { return tls_current; }

void ReplySync::Defer(Store *s) {
  if (std::find(stores_.begin(), stores_.end(), s) == stores_.end())
    stores_.push_back(s);
}

Store *ReplySync::Finish() {
  finished_ = true;
  Store *failed = nullptr;
  for (Store *s : stores_)
    if (!s->Sync().ok() && failed == nullptr) failed = s;
  stores_.clear();
  return failed;
}

}  // namespace nache
