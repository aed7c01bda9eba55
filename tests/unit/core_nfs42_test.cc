// NFSv4.2's operations through the core (core_nfs42.cc): forwarded as the
// caller on a 4.2 session and refused with NOTSUPP on any other, a file's
// unflushed data sent before an ALLOCATE, DEALLOCATE or SEEK of it, and the
// cache never serving what a DEALLOCATE made zeros.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

using upstream::SeekWhat;
using upstream::StableHow;
using upstream::XattrOption;

// Log entries of the NFSv4.2 and WRITE operations, in order.
std::vector<std::string> DataOps(ScriptedUpstream *up) {
  std::vector<std::string> out;
  for (const std::string &op : up->Log())
    if (op == "WRITE" || op == "ALLOCATE" || op == "DEALLOCATE" || op == "SEEK")
      out.push_back(op);
  return out;
}

TEST_F(CoreDelegationsTest, NoNfs42OperationWithoutANfs42Session) {
  up_->minor = 1;
  Start(DelegationType::kNone);
  const size_t before = up_->Log().size();
  bool eof;
  uint64_t at;
  std::string v;
  std::vector<std::string> names;
  uint64_t cookie;
  EXPECT_EQ(core_->Fallocate(cr_, file_, nullptr, 0, 10, true),
            upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(core_->Seek(cr_, file_, nullptr, 0, SeekWhat::kHole, &eof, &at),
            upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(core_->GetXattr(cr_, file_, "k", &v), upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(core_->SetXattr(cr_, file_, XattrOption::kEither, "k", "v"),
            upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(core_->ListXattrs(cr_, file_, 0, 4096, &names, &cookie, &eof),
            upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(core_->RemoveXattr(cr_, file_, "k"), upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(up_->Log().size(), before) << "nothing was sent";
}

// The client punches a hole in a file whose data it wrote moments ago
// (write-back): the remote must get the data first, or the flush would
// later fill the hole with the old bytes.
TEST_F(CoreDelegationsTest, ADeallocateGoesAfterTheFilesUnflushedData) {
  up_->minor = 2;
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // no flush by age
  size_t n = 0;
  StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 8, "abcdefgh",
                         StableHow::kFileSync, &n, &committed),
            0u);
  ASSERT_EQ(up_->Data("f"), "hello") << "still only here";
  ASSERT_EQ(core_->Fallocate(cr_, file_, nullptr, 2, 4, false), 0u);
  EXPECT_EQ(DataOps(up_), (std::vector<std::string>{"WRITE", "DEALLOCATE"}));
  EXPECT_EQ(up_->Data("f"), std::string("ab\0\0\0\0gh", 8));
  // Nothing is left to flush that could undo the hole.
  ASSERT_TRUE(core_->AdminFlush(
      std::chrono::steady_clock::now() + std::chrono::seconds(5), nullptr));
  EXPECT_EQ(up_->Data("f"), std::string("ab\0\0\0\0gh", 8));
}

// A read after a DEALLOCATE sees the zeros, not the cached bytes.
TEST_F(CoreDelegationsTest, TheCacheServesNoBytesADeallocateZeroed) {
  up_->minor = 2;
  up_->AddFile("g", "0123456789");
  Start(DelegationType::kNone);
  Key g;
  ASSERT_EQ(core_->Lookup(cr_, root_, "g", &g, nullptr), 0u);
  char buf[16];
  size_t got = 0;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, g, nullptr, 0, 10, buf, &got, &eof), 0u);
  ASSERT_EQ(std::string(buf, got), "0123456789");
  ASSERT_EQ(core_->Fallocate(cr_, g, nullptr, 0, 5, false), 0u);
  ASSERT_EQ(core_->Read(cr_, g, nullptr, 0, 10, buf, &got, &eof), 0u);
  EXPECT_EQ(std::string(buf, got), std::string("\0\0\0\0\0"
                                               "56789",
                                               10));
}

// Over NFSv4.2 blocks are fetched with READ_PLUS, whose holes cost no
// bytes on the link; a remote without it (NOTSUPP) is read with READ from
// then on, and the client gets its bytes either way.
TEST_F(CoreDelegationsTest, BlocksAreFetchedWithReadPlusOverNfs42) {
  up_->minor = 2;
  up_->read_plus = true;
  std::string sparse(3 * 4096, '\0');
  sparse.replace(4096, 4, "data");
  up_->AddFile("sparse", sparse);
  Start(DelegationType::kNone);
  Key k;
  Attrs a;
  ASSERT_EQ(core_->Lookup(cr_, root_, "sparse", &k, &a), 0u);
  std::string buf(sparse.size() + 10, '#');
  size_t got = 0;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, k, nullptr, 0, buf.size(), &buf[0], &got, &eof),
            0u);
  EXPECT_EQ(buf.substr(0, got), sparse);
  EXPECT_EQ(up_->Sends("READ").size(), 0u);
  EXPECT_GE(up_->Sends("READ_PLUS").size(), 1u);
}

// Ganesha 4.3 as the remote answers READ_PLUS with nothing when its FSAL
// has none, even "eof": short of the size the GETATTR before it gave, so
// READ says what is there (the client must not take the file for empty),
// and READ from then on.
TEST_F(CoreDelegationsTest, AReadPlusThatReturnsNothingIsReadAgainWithRead) {
  up_->minor = 2;
  up_->read_plus = true;
  up_->read_plus_empty = true;
  Start(DelegationType::kNone);
  char buf[32];
  size_t got = 0;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, file_, nullptr, 0, sizeof buf, buf, &got, &eof),
            0u);
  EXPECT_EQ(std::string(buf, got), "hello");
  EXPECT_EQ(up_->Sends("READ_PLUS").size(), 1u);
  EXPECT_EQ(up_->Sends("READ").size(), 1u);
}

TEST_F(CoreDelegationsTest, ARemoteWithoutReadPlusIsReadWithRead) {
  up_->minor = 2;
  up_->AddFile("g", "all the data");
  up_->AddFile("h", "more data");
  Start(DelegationType::kNone);
  for (const char *name : {"g", "h"}) {
    Key k;
    Attrs a;
    ASSERT_EQ(core_->Lookup(cr_, root_, name, &k, &a), 0u);
    char buf[32];
    size_t got = 0;
    bool eof = false;
    ASSERT_EQ(core_->Read(cr_, k, nullptr, 0, sizeof buf, buf, &got, &eof), 0u);
    EXPECT_EQ(std::string(buf, got), up_->Data(name));
  }
  EXPECT_EQ(up_->Sends("READ_PLUS").size(), 1u) << "asked once";
  EXPECT_EQ(up_->Sends("READ").size(), 2u);
}

// A copy_file_range is a COPY at the remote: the source's unflushed
// data goes first, and the destination's cached blocks, which held the
// old bytes, are not served after it.
TEST_F(CoreDelegationsTest, ACopyIsMadeAtTheRemoteAfterTheSourcesData) {
  up_->minor = 2;
  up_->copy = true;
  up_->AddFile("dst", "0123456789");
  StartWriteBack(DelegationType::kNone, 3600 * 1000);  // no flush by age
  Key dst;
  Attrs a;
  ASSERT_EQ(core_->Lookup(cr_, root_, "dst", &dst, &a), 0u);
  char buf[32];
  size_t got = 0;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, dst, nullptr, 0, sizeof buf, buf, &got, &eof),
            0u);  // dst's block is cached now
  size_t n = 0;
  StableHow committed{};
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 5, "HELLO",
                         StableHow::kFileSync, &n, &committed),
            0u);
  ASSERT_EQ(up_->Data("f"), "hello") << "still only here";
  uint64_t copied = 0;
  ASSERT_EQ(core_->Copy(cr_, file_, nullptr, 1, dst, nullptr, 2, 3, &copied),
            0u);
  EXPECT_EQ(copied, 3u);
  EXPECT_EQ(up_->Data("dst"), "01ELL56789");
  EXPECT_EQ(up_->Sends("COPY").size(), 1u);
  ASSERT_EQ(core_->Read(cr_, dst, nullptr, 0, sizeof buf, buf, &got, &eof), 0u);
  EXPECT_EQ(std::string(buf, got), "01ELL56789");
}

// A synchronous COPY holds its call until the remote is done: a huge one
// would outlast the call timeout, and the client's retry would copy it
// all again. Each COPY asks for at most kMaxCopyBytes; the client goes on
// from the short count.
TEST_F(CoreDelegationsTest, ACopyAsksForABoundedCount) {
  up_->minor = 2;
  up_->copy = true;
  up_->AddFile("dst", "");
  Start(DelegationType::kNone);
  Key dst;
  Attrs a;
  ASSERT_EQ(core_->Lookup(cr_, root_, "dst", &dst, &a), 0u);
  uint64_t copied = 0;
  ASSERT_EQ(
      core_->Copy(cr_, file_, nullptr, 0, dst, nullptr, 0, 1ull << 40, &copied),
      0u);
  EXPECT_EQ(copied, 5u) << "the source's 5 bytes";
  const std::vector<uint64_t> asked = up_->CopyLengths();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], Core::kMaxCopyBytes);
  // Within the bound, and "to the end" (0), as asked.
  ASSERT_EQ(core_->Copy(cr_, file_, nullptr, 0, dst, nullptr, 0, 3, &copied),
            0u);
  ASSERT_EQ(core_->Copy(cr_, file_, nullptr, 0, dst, nullptr, 0, 0, &copied),
            0u);
  ASSERT_EQ(up_->CopyLengths().size(), 3u);
  EXPECT_EQ(up_->CopyLengths()[1], 3u);
  EXPECT_EQ(up_->CopyLengths()[2], 0u);
}

TEST_F(CoreDelegationsTest, NoCopyWithoutANfs42SessionOrARemoteCopy) {
  up_->minor = 1;
  Start(DelegationType::kNone);
  uint64_t copied = 7;
  EXPECT_EQ(core_->Copy(cr_, file_, nullptr, 0, file_, nullptr, 10, 5, &copied),
            upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(copied, 0u);
  EXPECT_EQ(up_->Sends("COPY").size(), 0u);
  up_->minor = 2;  // a remote without COPY: its answer passes on
  EXPECT_EQ(core_->Copy(cr_, file_, nullptr, 0, file_, nullptr, 10, 5, &copied),
            upstream::kNfs4ErrNotsupp);
  EXPECT_EQ(up_->Sends("COPY").size(), 1u);
}

TEST_F(CoreDelegationsTest, ASeekSeesTheFilesUnflushedData) {
  up_->minor = 2;
  StartWriteBack(DelegationType::kNone, 3600 * 1000);
  size_t n = 0;
  StableHow committed{};
  // The remote has 5 bytes; the file here has 20.
  ASSERT_EQ(core_->Write(cr_, file_, nullptr, 0, 20, "twenty bytes of data",
                         StableHow::kFileSync, &n, &committed),
            0u);
  bool eof = false;
  uint64_t at = 0;
  ASSERT_EQ(core_->Seek(cr_, file_, nullptr, 12, SeekWhat::kData, &eof, &at),
            0u);
  EXPECT_EQ(at, 12u) << "offset 12 is data once the remote has it all";
  EXPECT_EQ(DataOps(up_), (std::vector<std::string>{"WRITE", "SEEK"}));
}

// Extended attributes go to the remote as the caller, and a change of
// ours leaves the file's cached data valid (no read goes upstream again).
TEST_F(CoreDelegationsTest, XattrsAreTheRemotesAndCostNoCachedData) {
  up_->minor = 2;
  Start(DelegationType::kNone);
  char buf[16];
  size_t got = 0;
  bool eof = false;
  ASSERT_EQ(core_->Read(cr_, file_, nullptr, 0, 5, buf, &got, &eof), 0u);
  Creds alice;
  alice.uid = 1000;
  alice.gid = 1000;
  ASSERT_EQ(core_->SetXattr(alice, file_, XattrOption::kCreate, "color",
                            std::string("bl\0e", 4)),
            0u);
  EXPECT_EQ(core_->SetXattr(alice, file_, XattrOption::kCreate, "color", "x"),
            upstream::kNfs4ErrExist);
  EXPECT_EQ(up_->XattrsOf("f").at("color"), std::string("bl\0e", 4));
  ASSERT_FALSE(up_->Sends("SETXATTR").empty());
  EXPECT_EQ(up_->Sends("SETXATTR")[0].cr.uid, 1000u) << "as the caller";
  std::string v;
  ASSERT_EQ(core_->GetXattr(alice, file_, "color", &v), 0u);
  EXPECT_EQ(v, std::string("bl\0e", 4));
  EXPECT_EQ(core_->GetXattr(alice, file_, "size", &v),
            upstream::kNfs4ErrNoxattr);
  std::vector<std::string> names;
  uint64_t cookie = 0;
  ASSERT_EQ(core_->ListXattrs(alice, file_, 0, 4096, &names, &cookie, &eof),
            0u);
  EXPECT_EQ(names, std::vector<std::string>{"color"});
  EXPECT_TRUE(eof);
  const size_t reads = up_->Sends("READ").size();
  ASSERT_EQ(core_->Read(cr_, file_, nullptr, 0, 5, buf, &got, &eof), 0u);
  EXPECT_EQ(std::string(buf, got), "hello");
  EXPECT_EQ(up_->Sends("READ").size(), reads) << "served from the cache";
  ASSERT_EQ(core_->RemoveXattr(alice, file_, "color"), 0u);
  EXPECT_TRUE(up_->XattrsOf("f").empty());
  EXPECT_EQ(core_->RemoveXattr(alice, file_, "color"),
            upstream::kNfs4ErrNoxattr);
}

}  // namespace
}  // namespace coretest
}  // namespace nache
