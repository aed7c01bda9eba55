// NameTurns: one open by name of a directory entry at a time; the one
// waiting is told what the one before found, or takes the turn when it
// found nothing; entries of different names or directories do not wait
// for each other; nothing is left behind.
#include "opens/name_turns.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cb_client.h"

namespace nache {
namespace {

TEST(NameTurnsTest, TheNextOpenIsToldWhatTheFirstFound) {
  int waits = 0;  // (counted under the table's lock)
  NameTurns turns([&waits] { waits++; });
  Key found = 99;
  NameTurns::Turn first = turns.Take(1, "f", &found);
  ASSERT_TRUE(first.held());
  EXPECT_EQ(found, kNoKey);
  std::atomic<Key> told{99};
  std::atomic<bool> held{true};
  std::thread second([&] {
    Key k;
    NameTurns::Turn t = turns.Take(1, "f", &k);
    told = k;
    held = t.held();
  });
  ASSERT_TRUE(cb_client::WaitFor([&] { return turns.waiting() == 1; }));
  EXPECT_EQ(told.load(), Key(99)) << "it did not wait for the first";
  first.Found(42);
  first.Release();
  second.join();
  EXPECT_EQ(told.load(), Key(42));
  EXPECT_FALSE(held.load()) << "told a file, it needs no turn";
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(turns.entries(), 0u);
}

TEST(NameTurnsTest, AnOpenThatFoundNothingPassesTheTurnOnToOne) {
  NameTurns turns;
  Key found;
  NameTurns::Turn first = turns.Take(1, "f", &found);
  std::atomic<int> holding{0}, most{0}, done{0};
  auto waiter = [&] {
    Key k;
    NameTurns::Turn t = turns.Take(1, "f", &k);
    EXPECT_TRUE(t.held());
    EXPECT_EQ(k, kNoKey);
    int now = ++holding;
    for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
    }
    // Held across a yield, as an upstream OPEN would be.
    std::this_thread::yield();
    --holding;
    ++done;
  };
  std::thread a(waiter), b(waiter);
  ASSERT_TRUE(cb_client::WaitFor([&] { return turns.waiting() == 2; }));
  first.Release();  // found nothing
  a.join();
  b.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(most.load(), 1) << "two held the turn at once";
  EXPECT_EQ(turns.entries(), 0u);
}

TEST(NameTurnsTest, OtherNamesAndDirectoriesDoNotWait) {
  NameTurns turns;
  Key found;
  NameTurns::Turn f = turns.Take(1, "f", &found);
  NameTurns::Turn g = turns.Take(1, "g", &found);
  NameTurns::Turn f2 = turns.Take(2, "f", &found);
  EXPECT_TRUE(f.held() && g.held() && f2.held());
  EXPECT_EQ(turns.entries(), 3u);
  NameTurns::Turn moved = std::move(f);
  EXPECT_FALSE(f.held());
  EXPECT_TRUE(moved.held());
  moved.Release();
  g.Release();
  f2.Release();
  EXPECT_EQ(turns.entries(), 0u);
  // Taken again at once, by nobody's leave.
  NameTurns::Turn again = turns.Take(1, "f", &found);
  EXPECT_TRUE(again.held());
}

}  // namespace
}  // namespace nache
