// Upstream_Identity = user: a caller's uid to its principal and its
// credentials, with a fake mechanism in place of MIT's (the KDC's side is
// proved in the lab: tests/integration/krb5_s4u_test.sh).
#include "upstream/user_identity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nache {
namespace upstream {
namespace {

using TimePoint = UserIdentities::TimePoint;

// Credentials that record the impersonations asked of them; a user in
// refused_ is refused, in unreachable_ the KDC is out of reach.
class FakeKrb : public rpc::KrbCredentials {
 public:
  explicit FakeKrb(std::string principal, TimePoint expires = TimePoint::max())
      : principal_(std::move(principal)), expires_(expires) {}
  std::unique_ptr<rpc::GssInitiator> NewInitiator() override { return nullptr; }
  std::string principal() const override { return principal_; }
  TimePoint expires() const override { return expires_; }
  std::shared_ptr<rpc::KrbCredentials> Impersonate(
      const std::string &user, rpc::KrbError *err) override {
    asked.push_back(user);
    if (refused.count(user)) {
      err->message = "credentials for " + user + ": not allowed";
      return nullptr;
    }
    if (unreachable) {
      err->message = "credentials for " + user + ": Cannot contact any KDC";
      err->transient = true;
      return nullptr;
    }
    return std::make_shared<FakeKrb>(user, user_expires);
  }
  std::vector<std::string> asked;
  std::map<std::string, bool> refused;
  bool unreachable = false;
  TimePoint user_expires = TimePoint::max();

 private:
  std::string principal_;
  TimePoint expires_;
};

class UserIdentityTest : public ::testing::Test {
 protected:
  UserIdentityTest()
      : machine_(std::make_shared<FakeKrb>("nfs/box.example.org@EXAMPLE.ORG")) {
    UserIdentities::Options o;
    o.now = [this] { return now_; };
    users_ = std::make_unique<UserIdentities>(
        machine_,
        [](uint32_t uid, std::string *name) {
          if (uid == 1000) *name = "alice@example.org";
          if (uid == 2000) *name = "bob@example.org";
          return uid == 1000 || uid == 2000;
        },
        o);
  }
  static Creds As(uint32_t uid) {
    Creds c;
    c.uid = c.gid = uid;
    return c;
  }
  TimePoint now_ = TimePoint() + std::chrono::hours(1);
  std::shared_ptr<FakeKrb> machine_;
  std::unique_ptr<UserIdentities> users_;
};

TEST_F(UserIdentityTest, AUidIsItsNameInTheRealmOfNachesPrincipal) {
  auto id = users_->Get(As(1000));
  ASSERT_NE(id.creds, nullptr) << id.error;
  EXPECT_EQ(id.principal, "alice@EXAMPLE.ORG");
  EXPECT_EQ(machine_->asked, std::vector<std::string>{"alice@EXAMPLE.ORG"});
}

TEST_F(UserIdentityTest, CredentialsAreKeptUntilShortlyBeforeTheyEnd) {
  machine_->user_expires = now_ + std::chrono::hours(10);
  auto a = users_->Get(As(1000));
  auto b = users_->Get(As(1000));
  EXPECT_EQ(a.creds, b.creds);
  EXPECT_EQ(machine_->asked.size(), 1u);
  // Within renew_before (5 min) of the end: made anew.
  now_ += std::chrono::hours(10) - std::chrono::minutes(4);
  auto c = users_->Get(As(1000));
  EXPECT_NE(c.creds, a.creds);
  EXPECT_EQ(machine_->asked.size(), 2u);
}

TEST_F(UserIdentityTest, AUidWithoutANameIsRefusedForAWhile) {
  auto id = users_->Get(As(3000));
  EXPECT_EQ(id.creds, nullptr);
  EXPECT_FALSE(id.transient);
  EXPECT_NE(id.error.find("uid 3000"), std::string::npos) << id.error;
  EXPECT_TRUE(machine_->asked.empty());  // no KDC without a name
}

TEST_F(UserIdentityTest, ARefusalIsKeptAndAskedAgainAfterItsTime) {
  machine_->refused["bob@EXAMPLE.ORG"] = true;
  auto id = users_->Get(As(2000));
  EXPECT_EQ(id.creds, nullptr);
  EXPECT_FALSE(id.transient);
  EXPECT_NE(id.error.find("bob@EXAMPLE.ORG"), std::string::npos) << id.error;
  users_->Get(As(2000));
  EXPECT_EQ(machine_->asked.size(), 1u);
  now_ += std::chrono::seconds(31);
  machine_->refused.clear();
  EXPECT_NE(users_->Get(As(2000)).creds, nullptr);
  EXPECT_EQ(machine_->asked.size(), 2u);
}

TEST_F(UserIdentityTest, AKdcOutOfReachIsRetryableAndNotKept) {
  machine_->unreachable = true;
  auto id = users_->Get(As(1000));
  EXPECT_EQ(id.creds, nullptr);
  EXPECT_TRUE(id.transient);
  machine_->unreachable = false;
  EXPECT_NE(users_->Get(As(1000)).creds, nullptr);
  EXPECT_EQ(machine_->asked.size(), 2u);
}

// A KDC that answers only when the test lets it: Impersonate waits at a
// gate (held until Release).
class SlowKrb : public rpc::KrbCredentials {
 public:
  explicit SlowKrb(std::string principal) : principal_(std::move(principal)) {}
  std::unique_ptr<rpc::GssInitiator> NewInitiator() override { return nullptr; }
  std::string principal() const override { return principal_; }
  TimePoint expires() const override { return TimePoint::max(); }
  std::shared_ptr<rpc::KrbCredentials> Impersonate(
      const std::string &user, rpc::KrbError *err) override {
    asked++;
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return !held_; });
    return std::make_shared<SlowKrb>(user);
  }
  void Release() {
    std::lock_guard<std::mutex> g(mu_);
    held_ = false;
    cv_.notify_all();
  }
  std::atomic<int> asked{0};

 private:
  const std::string principal_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = true;
};

// A Ganesha worker whose call needs a user's credentials from a KDC that
// does not answer waits no longer than the bound (the call timeout): it
// gets a retryable answer (NFS4ERR_DELAY), counted; a second caller meanwhile
// waits for the same making (one KDC exchange, not two); once the KDC
// answers, the credentials made are kept for the retry. (Before the bound,
// Get waited for the KDC as long as the library did.)
TEST(UserIdentitySlowKdcTest, AWorkerWaitsNoLongerThanTheBoundForTheKdc) {
  auto machine = std::make_shared<SlowKrb>("nfs/box.example.org@EXAMPLE.ORG");
  std::atomic<int> expired{0};
  UserIdentities::Options o;
  o.wait = std::chrono::milliseconds(200);
  o.on_wait_expired = [&] { expired++; };
  auto users = std::make_unique<UserIdentities>(
      machine,
      [](uint32_t uid, std::string *name) {
        *name = "alice@example.org";
        return true;
      },
      o);
  Creds alice;
  alice.uid = alice.gid = 1000;
  auto get = [&] {
    return std::async(std::launch::async, [&] { return users->Get(alice); });
  };
  auto first = get();
  if (first.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    machine->Release();  // (so that the test ends)
    FAIL() << "the caller still waits for the KDC after 10 s";
  }
  UpstreamOptions::UserIdentity id = first.get();
  EXPECT_EQ(id.creds, nullptr);
  EXPECT_TRUE(id.transient) << "retryable: NFS4ERR_DELAY";
  EXPECT_NE(id.error.find("uid 1000"), std::string::npos) << id.error;
  EXPECT_EQ(expired.load(), 1);
  auto second = get();
  ASSERT_EQ(second.wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  EXPECT_TRUE(second.get().transient);
  EXPECT_EQ(machine->asked.load(), 1) << "one making for both callers";
  machine->Release();
  // The client's retries (each bounded) get what the KDC gave, once it
  // has, without asking it again.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    id = users->Get(alice);
  } while (!id.creds && std::chrono::steady_clock::now() < until);
  ASSERT_NE(id.creds, nullptr) << id.error;
  EXPECT_EQ(id.principal, "alice@EXAMPLE.ORG");
  EXPECT_EQ(machine->asked.load(), 1);
  EXPECT_GE(expired.load(), 2);
}

}  // namespace
}  // namespace upstream
}  // namespace nache
