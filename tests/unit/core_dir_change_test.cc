// The remote's change_info of the directories an operation changes, noted
// for Ganesha's NFSv4 replies (Core::DirChangeScope; the C API hands it on,
// cmake/ganesha_patch_cinfo.cmake): exactly what the remote reported, for
// the right directory, and only while a scope lives.
#include "scripted_upstream.h"

namespace nache {
namespace coretest {
namespace {

using upstream::ChangeInfo;
using upstream::FileType;

// Whether seen holds dir's change as the remote reported it.
bool Noted(const std::vector<Core::DirChange> &seen, Key dir,
           const ChangeInfo &ci) {
  for (const Core::DirChange &c : seen)
    if (c.dir == dir && c.ci.atomic == ci.atomic && c.ci.before == ci.before &&
        c.ci.after == ci.after)
      return true;
  return false;
}

TEST_F(CoreDelegationsTest, TheRemotesChangeOfEachDirectoryIsNotedInAScope) {
  up_->change_info = true;
  Start(DelegationType::kNone, nullptr, false);
  std::vector<Core::DirChange> seen;
  Key d, e, g;
  {
    Core::DirChangeScope scope(&seen);
    ASSERT_EQ(core_->Create(cr_, root_, "d", FileType::kDir, Attrs(), "", &d,
                            nullptr),
              0u);
    ASSERT_EQ(core_->Create(cr_, root_, "e", FileType::kDir, Attrs(), "", &e,
                            nullptr),
              0u);
    Core::OpenRequest req;
    req.key = d;
    req.name = "g";
    req.access = upstream::kShareAccessWrite;
    req.mode = NACHE_OPEN_GUARDED;
    NacheOpen *open = nullptr;
    bool created = false;
    ASSERT_EQ(core_->OpenFile(cr_, req, &open, &g, nullptr, &created), 0u);
    ASSERT_TRUE(created);
    ASSERT_EQ(core_->CloseFile(open), 0u);
    ASSERT_EQ(core_->Rename(cr_, d, "g", e, "h"), 0u);
    ASSERT_EQ(core_->Link(cr_, g, root_, "g2"), 0u);
    ASSERT_EQ(core_->Remove(cr_, e, "h"), 0u);
  }
  const std::vector<ChangeInfo> sent = up_->ChangeInfos();
  // mkdir d, mkdir e, create g, rename (source, target), link, remove.
  ASSERT_EQ(sent.size(), 7u);
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_TRUE(Noted(seen, root_, sent[0]));
  EXPECT_TRUE(Noted(seen, root_, sent[1]));
  EXPECT_TRUE(Noted(seen, d, sent[2]));
  EXPECT_TRUE(Noted(seen, d, sent[3]));      // the rename's source
  EXPECT_TRUE(Noted(seen, e, sent[4]));      // its target
  EXPECT_TRUE(Noted(seen, root_, sent[5]));  // the link
  EXPECT_TRUE(Noted(seen, e, sent[6]));
  // No scope, nothing noted.
  Key f;
  ASSERT_EQ(
      core_->Create(cr_, root_, "f2", FileType::kDir, Attrs(), "", &f, nullptr),
      0u);
  EXPECT_EQ(up_->ChangeInfos().size(), 8u);
  EXPECT_EQ(seen.size(), 7u);
}

}  // namespace
}  // namespace coretest
}  // namespace nache
