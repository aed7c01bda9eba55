// The write-back log: records come back in order and intact after a
// reopen (they were synced), erased ones do not, and a damaged record ends
// the log there (it and what follows are discarded, what precedes is kept).
#include "writeback/oplog.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <string>

#include "temp_dir.h"
#include "util/bytes.h"

namespace nache {
namespace {

LogRecord Write(Key key, uint64_t off, const std::string &data) {
  LogRecord r;
  r.op = LogOp::kWrite;
  r.key = key;
  r.offset = off;
  r.data = data;
  return r;
}

// A namespace record: op of name in directory dir, about object obj.
LogRecord NameRecord(LogOp op, Key dir, Key obj, const std::string &name) {
  LogRecord r;
  r.op = op;
  r.key = dir;
  r.key2 = obj;
  r.name = name;
  return r;
}

class OpLogTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    log_.reset();
    store_.reset();
    std::string err;
    store_ = Store::Open(dir_.path() + "/db", &err);
    ASSERT_TRUE(store_) << err;
    log_.reset(new OpLog(store_.get()));
  }
  testing_util::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<OpLog> log_;
};

TEST_F(OpLogTest, RecordsSurviveReopenInOrderAndIntact) {
  LogRecord c;
  c.op = LogOp::kCreate;
  c.key = 1;
  c.key2 = 9;
  c.name = "new file";
  c.type = upstream::FileType::kLnk;
  c.text = "target";
  c.attrs.mask = upstream::kAttrMode;
  c.attrs.mode = 0640;
  uint64_t s1 = log_->Append(c);
  uint64_t s2 = log_->Append(Write(9, 4096, std::string(70000, 'z')));
  ASSERT_GT(s1, 0u);
  ASSERT_GT(s2, s1);
  Reopen();
  EXPECT_EQ(log_->records(), 2u);
  EXPECT_EQ(log_->discarded(), 0u);
  std::vector<LogRecord> got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, s1);
  EXPECT_EQ(got[0].op, LogOp::kCreate);
  EXPECT_EQ(got[0].name, "new file");
  EXPECT_EQ(got[0].text, "target");
  EXPECT_EQ(got[0].key2, 9u);
  EXPECT_EQ(got[0].type, upstream::FileType::kLnk);
  EXPECT_EQ(got[0].attrs.mode, 0640u);
  EXPECT_GT(got[0].logged_at, 0);
  EXPECT_EQ(got[1].seq, s2);
  EXPECT_EQ(got[1].offset, 4096u);
  EXPECT_EQ(got[1].data, std::string(70000, 'z'));
  // New records continue the sequence.
  EXPECT_GT(log_->Append(Write(9, 0, "a")), s2);
}

TEST_F(OpLogTest, ErasedRecordsAreGoneAndAccounted) {
  uint64_t a = log_->Append(Write(1, 0, "aaaa"));
  uint64_t b = log_->Append(Write(1, 4, "bbbb"));
  uint64_t c = log_->Append(Write(1, 8, "cccc"));
  uint64_t all = log_->bytes();
  log_->Erase({a, c});
  EXPECT_EQ(log_->records(), 1u);
  EXPECT_LT(log_->bytes(), all);
  EXPECT_EQ(log_->first_seq(), b);
  Reopen();
  std::vector<LogRecord> got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, b);
  EXPECT_EQ(got[0].data, "bbbb");
  EXPECT_EQ(log_->Read(b + 1, 10).size(), 0u) << "reads start at from";
}

TEST_F(OpLogTest, ADamagedRecordEndsTheLog) {
  uint64_t a = log_->Append(Write(1, 0, "kept"));
  uint64_t b = log_->Append(Write(1, 4, "damaged"));
  log_->Append(Write(1, 11, "after"));
  // Flip one byte of record b's data as stored.
  std::string key, value;
  PutBE64(&key, b);
  rocksdb::ColumnFamilyHandle *cf = store_->family(Store::kWbLog);
  ASSERT_TRUE(store_->db()->Get(rocksdb::ReadOptions(), cf, key, &value).ok());
  value[value.size() / 2] ^= 0x40;
  ASSERT_TRUE(store_->db()->Put(rocksdb::WriteOptions(), cf, key, value).ok());
  Reopen();
  EXPECT_EQ(log_->discarded(), 2u);
  std::vector<LogRecord> got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, a);
  EXPECT_EQ(got[0].data, "kept");
  Reopen();  // discarded for good
  EXPECT_EQ(log_->discarded(), 0u);
  EXPECT_EQ(log_->records(), 1u);
}

TEST(OpLogCodecTest, TruncatedOrForeignValuesDoNotDecode) {
  std::string v = OpLog::Encode(Write(3, 1, "xyz"));
  LogRecord r;
  ASSERT_TRUE(OpLog::Decode(v, &r));
  EXPECT_EQ(r.data, "xyz");
  EXPECT_FALSE(OpLog::Decode(v.substr(0, v.size() - 1), &r));
  EXPECT_FALSE(OpLog::Decode("", &r));
  EXPECT_FALSE(OpLog::Decode(std::string(100, '\0'), &r));
}

TEST(Crc32cTest, KnownValue) {
  // RFC 3720 B.4: 32 bytes of zeros.
  EXPECT_EQ(Crc32c(std::string(32, '\0').data(), 32), 0x8a9136aau);
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
}

// A local rename: the record moves to the end of the log in one durable
// step (never both, never neither); a synced erase stays erased.
TEST_F(OpLogTest, ReplaceMovesARecordToTheEndDurably) {
  LogRecord c = NameRecord(LogOp::kCreate, 1, 7, "a");
  uint64_t a = log_->Append(c);
  c.key2 = 8;
  c.name = "other";
  uint64_t other = log_->Append(c);
  c.key2 = 7;
  c.name = "b";
  uint64_t b = log_->Replace(a, c);
  ASSERT_GT(b, other);
  Reopen();
  std::vector<LogRecord> got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, other);
  EXPECT_EQ(got[1].seq, b);
  EXPECT_EQ(got[1].name, "b");
  EXPECT_EQ(log_->first_seq(), other);
  ASSERT_TRUE(log_->Erase({other}, true));
  Reopen();
  EXPECT_EQ(log_->records(), 1u);
  EXPECT_EQ(log_->first_seq(), b);
}

// A rename over a remote file: the remove of the file replaced and the
// moved create land together, in that order, in place of the old create.
TEST_F(OpLogTest, ReplaceWithSeveralRecordsKeepsTheirOrder) {
  uint64_t a = log_->Append(NameRecord(LogOp::kCreate, 1, 7, "doc.tmp"));
  std::vector<LogRecord> rs{NameRecord(LogOp::kRemove, 1, 5, "doc"),
                            NameRecord(LogOp::kCreate, 1, 7, "doc")};
  ASSERT_TRUE(log_->Replace(a, &rs));
  EXPECT_LT(rs[0].seq, rs[1].seq);
  EXPECT_GT(rs[0].seq, a);
  Reopen();
  std::vector<LogRecord> got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].op, LogOp::kRemove);
  EXPECT_EQ(got[0].key2, 5u);
  EXPECT_EQ(got[1].op, LogOp::kCreate);
  EXPECT_EQ(got[1].name, "doc");
  EXPECT_EQ(log_->records(), 2u);
}

// The caller's credentials are kept with a record (at most 16 groups).
TEST(OpLogCodecTest, CredentialsRoundTrip) {
  LogRecord r = NameRecord(LogOp::kCreate, 1, 2, "n");
  upstream::Creds cr;
  cr.uid = 2000;
  cr.gid = 2001;
  for (uint32_t g = 0; g < 20; g++) cr.groups.push_back(3000 + g);
  r.SetCreds(cr);
  LogRecord back;
  ASSERT_TRUE(OpLog::Decode(OpLog::Encode(r), &back));
  ASSERT_TRUE(back.has_creds);
  EXPECT_EQ(back.creds.uid, 2000u);
  EXPECT_EQ(back.creds.gid, 2001u);
  ASSERT_EQ(back.creds.groups.size(), 16u);
  EXPECT_EQ(back.creds.groups[15], 3015u);
  EXPECT_EQ(back.SendCreds().groups.size(), 16u);
}

// A record of the first format (version 1: no credentials) still loads,
// and is sent as the uid and gid it kept in its attributes, without groups.
TEST_F(OpLogTest, ARecordOfTheFirstFormatStillLoads) {
  LogRecord r = NameRecord(LogOp::kRemove, 1, 2, "old");
  r.attrs.mask = upstream::kAttrOwner | upstream::kAttrOwnerGroup;
  r.attrs.uid = 2000;
  r.attrs.gid = 2001;
  // Version 1's layout: the body ends with the Attrs.
  std::string body;
  body.push_back(char(1));
  body.push_back(char(r.op));
  PutBE64(&body, 77);  // logged_at
  PutBE64(&body, r.key);
  PutBE64(&body, r.key2);
  PutBE64(&body, r.offset);
  PutBE32(&body, uint32_t(r.type));
  for (const std::string *b : {&r.data, &r.name, &r.name2, &r.text}) {
    PutBE32(&body, uint32_t(b->size()));
    body += *b;
  }
  PutBE32(&body, uint32_t(sizeof(r.attrs)));
  body.append(reinterpret_cast<const char *>(&r.attrs), sizeof(r.attrs));
  std::string v;
  PutBE32(&v, Crc32c(body.data(), body.size()));
  v += body;
  std::string k;
  PutBE64(&k, 5);
  ASSERT_TRUE(
      store_->db()
          ->Put(rocksdb::WriteOptions(), store_->family(Store::kWbLog), k, v)
          .ok());
  Reopen();
  EXPECT_EQ(log_->discarded(), 0u);
  std::vector<LogRecord> got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 5u);
  EXPECT_EQ(got[0].name, "old");
  EXPECT_FALSE(got[0].has_creds);
  upstream::Creds cr = got[0].SendCreds();
  EXPECT_EQ(cr.uid, 2000u);
  EXPECT_EQ(cr.gid, 2001u);
  EXPECT_TRUE(cr.groups.empty());
  // Appended after it: the new format, with credentials.
  LogRecord n = NameRecord(LogOp::kCreate, 1, 3, "new");
  upstream::Creds me;
  me.uid = 7;
  me.groups = {8};
  n.SetCreds(me);
  EXPECT_EQ(log_->Append(n), 6u);
  Reopen();
  got = log_->Read(0, 10);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[1].has_creds);
  EXPECT_EQ(got[1].creds.groups, std::vector<uint32_t>{8});
}

}  // namespace
}  // namespace nache
