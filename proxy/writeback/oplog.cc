// The write-back log's records and durability. See oplog.h.
#include "writeback/oplog.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>

#include "util/bytes.h"
#include "util/log.h"

namespace nache {
namespace {

const char *const kComponent = "NACHE_WBLOG";

// Record layout (after the 4-byte CRC-32C of everything that follows):
// version byte, op byte, logged_at, key, key2, offset, type, then the
// lengths and bytes of data, name, name2, text, and the raw Attrs (plain
// data, with its size so that another layout is refused). Version 2 adds,
// after the Attrs, the caller's credentials: uid, gid, the number of
// groups (at most LogRecord::kMaxGroups) and the groups. Version 1 records
// (written before) still decode, without credentials.
constexpr uint8_t kRecordVersion1 = 1;
constexpr uint8_t kRecordVersion = 2;

std::string SeqKey(uint64_t seq) {
  std::string k;
  PutBE64(&k, seq);
  return k;
}

void PutBytes(std::string *s, const std::string &b) {
  PutBE32(s, uint32_t(b.size()));
  s->append(b);
}

// Reads what Put* wrote, refusing to run past the end.
class Reader {
 public:
  Reader(const char *p, size_t n) : p_(p), end_(p + n) {}
  bool U8(uint8_t *v) {
    if (end_ - p_ < 1) return false;
    *v = uint8_t(*p_++);
    return true;
  }
  bool U32(uint32_t *v) {
    if (end_ - p_ < 4) return false;
    *v = GetBE32(p_);
    p_ += 4;
    return true;
  }
  bool U64(uint64_t *v) {
    if (end_ - p_ < 8) return false;
    *v = GetBE64(p_);
    p_ += 8;
    return true;
  }
  bool Bytes(std::string *b) {
    uint32_t n;
    if (!U32(&n) || size_t(end_ - p_) < n) return false;
    b->assign(p_, n);
    p_ += n;
    return true;
  }
  bool done() const { return p_ == end_; }
  // Everything not read yet.
  void Rest(std::string *b) {
    b->assign(p_, end_);
    p_ = end_;
  }

 private:
  const char *p_, *end_;
};

}  // namespace

void PutCreds(std::string *out, const upstream::Creds &cr) {
  const size_t n = std::min(cr.groups.size(), LogRecord::kMaxGroups);
  PutBE32(out, cr.uid);
  PutBE32(out, cr.gid);
  PutBE32(out, uint32_t(n));
  for (size_t i = 0; i < n; i++) PutBE32(out, cr.groups[i]);
}

bool ParseCreds(const std::string &v, upstream::Creds *cr) {
  Reader in(v.data(), v.size());
  uint32_t n;
  if (!in.U32(&cr->uid) || !in.U32(&cr->gid) || !in.U32(&n) ||
      n > LogRecord::kMaxGroups)
    return false;
  cr->groups.resize(n);
  for (uint32_t i = 0; i < n; i++)
    if (!in.U32(&cr->groups[i])) return false;
  return in.done();
}

std::string OpLog::Encode(const LogRecord &r) {
  std::string body;
  body.push_back(char(kRecordVersion));
  body.push_back(char(r.op));
  PutBE64(&body, uint64_t(r.logged_at));
  PutBE64(&body, r.key);
  PutBE64(&body, r.key2);
  PutBE64(&body, r.offset);
  PutBE32(&body, uint32_t(r.type));
  PutBytes(&body, r.data);
  PutBytes(&body, r.name);
  PutBytes(&body, r.name2);
  PutBytes(&body, r.text);
  PutBytes(&body, std::string(reinterpret_cast<const char *>(&r.attrs),
                              sizeof(r.attrs)));
  // Credentials (version 2): a record without them keeps the fallback of
  // version 1 by having none here (a zero flag).
  body.push_back(char(r.has_creds ? 1 : 0));
  if (r.has_creds) PutCreds(&body, r.creds);
  std::string out;
  PutBE32(&out, Crc32c(body.data(), body.size()));
  out += body;
  return out;
}

bool OpLog::Decode(const std::string &v, LogRecord *r) {
  if (v.size() < 4 || GetBE32(v.data()) != Crc32c(v.data() + 4, v.size() - 4))
    return false;
  Reader in(v.data() + 4, v.size() - 4);
  uint8_t version, op;
  uint64_t at;
  uint32_t type;
  std::string attrs;
  if (!in.U8(&version) ||
      (version != kRecordVersion && version != kRecordVersion1) ||
      !in.U8(&op) || op < uint8_t(LogOp::kWrite) ||
      op > uint8_t(LogOp::kLink) || !in.U64(&at) || !in.U64(&r->key) ||
      !in.U64(&r->key2) || !in.U64(&r->offset) || !in.U32(&type) ||
      !in.Bytes(&r->data) || !in.Bytes(&r->name) || !in.Bytes(&r->name2) ||
      !in.Bytes(&r->text) || !in.Bytes(&attrs) ||
      attrs.size() != sizeof(r->attrs))
    return false;
  r->has_creds = false;
  r->creds = upstream::Creds();
  if (version >= 2) {
    uint8_t has;
    if (!in.U8(&has) || has > 1) return false;
    if (has) {
      std::string creds;  // the record's last field
      in.Rest(&creds);
      if (!ParseCreds(creds, &r->creds)) return false;
      r->has_creds = true;
    }
  }
  if (!in.done()) return false;
  r->op = LogOp(op);
  r->logged_at = int64_t(at);
  r->type = upstream::FileType(type);
  memcpy(&r->attrs, attrs.data(), sizeof(r->attrs));
  return true;
}

OpLog::OpLog(Store *store) : store_(store) {
  rocksdb::ColumnFamilyHandle *cf = store_->family(Store::kWbLog);
  std::unique_ptr<rocksdb::Iterator> it(
      store_->db()->NewIterator(rocksdb::ReadOptions(), cf));
  rocksdb::WriteBatch drop;
  uint64_t bad_at = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    LogRecord r;
    bool ok = k.size() == 8 && Decode(it->value().ToString(), &r);
    uint64_t seq = k.size() == 8 ? GetBE64(k.data()) : 0;
    if (ok && bad_at == 0) {
      size_[seq] = uint32_t(it->value().size());
      bytes_ += it->value().size();
      next_seq_ = seq + 1;
      continue;
    }
    if (bad_at == 0) bad_at = seq;
    drop.Delete(cf, k);
    discarded_++;
  }
  if (discarded_ > 0) {
    rocksdb::WriteOptions w;
    w.sync = true;
    store_->Write(w, &drop);
    NACHE_LOG(kLogCrit, kComponent,
              "write-back log: record %llu is damaged; it and the %zu "
              "record(s) after it are discarded (%zu intact records kept)",
              (unsigned long long)bad_at, discarded_ - 1, size_.size());
  }
  if (!size_.empty())
    NACHE_LOG(kLogEvent, kComponent,
              "write-back log holds %zu record(s), %llu bytes, to send",
              size_.size(), (unsigned long long)bytes_);
}

uint64_t OpLog::Append(LogRecord r) {
  if (r.logged_at == 0) r.logged_at = int64_t(time(nullptr));
  MutexLock g(&mu_);
  r.seq = next_seq_;
  std::string v = Encode(r);
  rocksdb::WriteBatch b;
  b.Put(store_->family(Store::kWbLog), SeqKey(r.seq), v);
  // Durable before the client hears "done".
  rocksdb::Status st = store_->WriteBeforeReply(&b);
  if (!st.ok()) {
    NACHE_LOG(kLogCrit, kComponent, "write-back log append failed: %s",
              st.ToString().c_str());
    return 0;
  }
  next_seq_++;
  size_[r.seq] = uint32_t(v.size());
  bytes_ += v.size();
  return r.seq;
}

std::vector<LogRecord> OpLog::Read(uint64_t from, size_t max) {
  std::vector<LogRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(store_->db()->NewIterator(
      rocksdb::ReadOptions(), store_->family(Store::kWbLog)));
  for (it->Seek(SeqKey(from)); it->Valid() && out.size() < max; it->Next()) {
    LogRecord r;
    if (it->key().size() != 8 || !Decode(it->value().ToString(), &r))
      continue;  // checked at load; appended since by us
    r.seq = GetBE64(it->key().data());
    out.push_back(std::move(r));
  }
  return out;
}

bool OpLog::Erase(const std::vector<uint64_t> &seqs, bool sync) {
  rocksdb::WriteBatch b;
  MutexLock g(&mu_);
  for (uint64_t seq : seqs) {
    auto it = size_.find(seq);
    if (it == size_.end()) continue;
    bytes_ -= it->second;
    size_.erase(it);
    b.Delete(store_->family(Store::kWbLog), SeqKey(seq));
  }
  // Unsynced, a record that reappears after a crash is sent again. A WRITE
  // sent twice writes the same bytes; a namespace record sent twice fails
  // with EXIST or NOENT, which the flusher must take as done.
  rocksdb::Status st = sync ? store_->WriteBeforeReply(&b)
                            : store_->Write(rocksdb::WriteOptions(), &b);
  if (!st.ok())
    NACHE_LOG(kLogCrit, kComponent, "write-back log erase failed: %s",
              st.ToString().c_str());
  return st.ok();
}

uint64_t OpLog::Replace(uint64_t old_seq, LogRecord r) {
  std::vector<LogRecord> rs{std::move(r)};
  return Replace(old_seq, &rs) ? rs[0].seq : 0;
}

bool OpLog::Replace(uint64_t old_seq, std::vector<LogRecord> *rs) {
  MutexLock g(&mu_);
  rocksdb::WriteBatch b;
  if (old_seq != 0) b.Delete(store_->family(Store::kWbLog), SeqKey(old_seq));
  std::vector<uint32_t> sizes;
  uint64_t seq = next_seq_;
  for (LogRecord &r : *rs) {
    if (r.logged_at == 0) r.logged_at = int64_t(time(nullptr));
    r.seq = seq++;
    std::string v = Encode(r);
    sizes.push_back(uint32_t(v.size()));
    b.Put(store_->family(Store::kWbLog), SeqKey(r.seq), v);
  }
  rocksdb::Status st = store_->WriteBeforeReply(&b);  // before "done"
  if (!st.ok()) {
    NACHE_LOG(kLogCrit, kComponent, "write-back log replace failed: %s",
              st.ToString().c_str());
    return false;
  }
  next_seq_ = seq;
  auto it = size_.find(old_seq);
  if (it != size_.end()) {
    bytes_ -= it->second;
    size_.erase(it);
  }
  for (size_t i = 0; i < rs->size(); i++) {
    size_[(*rs)[i].seq] = sizes[i];
    bytes_ += sizes[i];
  }
  return true;
}

size_t OpLog::records() const {
  MutexLock g(&mu_);
  return size_.size();
}

uint64_t OpLog::bytes() const {
  MutexLock g(&mu_);
  return bytes_;
}

uint64_t OpLog::first_seq() const {
  MutexLock g(&mu_);
  return size_.empty() ? 0 : size_.begin()->first;
}

}  // namespace nache
