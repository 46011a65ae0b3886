#include "policy/policy_reloader.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "common/sha256.h"
#include "policy/policy_decide.h"
#include "policy/policy_test_util.h"

namespace gantry::policy {
namespace {

constexpr int64_t kWaitMs = 10000;  // a deadline, not a sleep: waits end on the event

std::string PolicyWithMaxTokens(int max_tokens) {
  return TestPolicyHead() + "grants:\n  - {user: alice, models: {m1: {max_tokens: {max: " +
         std::to_string(max_tokens) + ", action: clamp}}}}\n";
}

class ReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/reload_" + ::testing::UnitTest::GetInstance()
                                                               ->current_test_info()
                                                               ->name();
    ASSERT_EQ(system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str()), 0);
    path_ = dir_ + "/policy.yaml";
    Write(path_, PolicyWithMaxTokens(100));
    auto reloader = PolicyReloader::Create(path_);
    ASSERT_TRUE(reloader.ok()) << reloader.status();
    reloader_ = *std::move(reloader);
  }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }

  // The max_tokens the current policy clamps alice's request to.
  std::string CurrentMax() {
    PolicyRequest r;
    r.principal = "alice";
    r.model = "m1";
    Decision d = Decide(*reloader_->Current(), r);
    return d.clamps.empty() ? "" : d.clamps[0].applied;
  }

  // Waits until the installed policy has `sha256`.
  bool WaitUntilInstalled(const std::string& sha256) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    while (std::chrono::steady_clock::now() < until) {
      if (reloader_->Current()->sha256 == sha256) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<PolicyReloader> reloader_;
};

TEST_F(ReloaderTest, ReloadNowSwapsAValidFileAndKeepsTheOldOnError) {
  EXPECT_EQ(CurrentMax(), "100");
  std::shared_ptr<const Snapshot> in_flight = reloader_->Current();
  Write(path_, PolicyWithMaxTokens(200));
  ASSERT_TRUE(reloader_->ReloadNow().ok());
  EXPECT_EQ(CurrentMax(), "200");
  EXPECT_EQ(reloader_->reloads(), 1u);
  // The request that started before the swap keeps its snapshot.
  PolicyRequest r;
  r.principal = "alice";
  r.model = "m1";
  EXPECT_EQ(Decide(*in_flight, r).clamps[0].applied, "100");

  Write(path_, "version: 1\ngrants: [\n");
  absl::Status s = reloader_->ReloadNow();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(CurrentMax(), "200");
  EXPECT_EQ(reloader_->reload_errors(), 1u);
  EXPECT_NE(reloader_->last_error().find("policy.yaml:"), std::string::npos)
      << reloader_->last_error();

  unlink(path_.c_str());
  EXPECT_EQ(reloader_->ReloadNow().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CurrentMax(), "200");
}

TEST_F(ReloaderTest, WatcherReloadsOnWriteAndSurvivesHalfWrittenFiles) {
  ASSERT_TRUE(reloader_->StartWatching().ok());
  uint64_t attempts = reloader_->reload_attempts();

  // A valid rewrite in place.
  Write(path_, PolicyWithMaxTokens(300));
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
  EXPECT_EQ(CurrentMax(), "300");
  attempts = reloader_->reload_attempts();

  // A writer that closes after half the file: the reload fails and the old policy stays.
  std::string full = PolicyWithMaxTokens(400);
  Write(path_, full.substr(0, full.size() / 2));
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
  EXPECT_EQ(CurrentMax(), "300");
  EXPECT_GE(reloader_->reload_errors(), 1u);
  EXPECT_FALSE(reloader_->last_error().empty());
  attempts = reloader_->reload_attempts();

  // The rest arrives.
  Write(path_, full);
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
  EXPECT_EQ(CurrentMax(), "400");
  EXPECT_TRUE(reloader_->last_error().empty());
}

TEST_F(ReloaderTest, WatcherReloadsWhenAFileIsRenamedOverThePolicy) {
  ASSERT_TRUE(reloader_->StartWatching().ok());
  uint64_t attempts = reloader_->reload_attempts();
  std::string tmp = dir_ + "/.policy.yaml.tmp";
  Write(tmp, PolicyWithMaxTokens(500));  // closing the temp file is not our file's event
  ASSERT_EQ(rename(tmp.c_str(), path_.c_str()), 0);
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
  EXPECT_EQ(CurrentMax(), "500");

  // An invalid file renamed in is refused like any other.
  attempts = reloader_->reload_attempts();
  Write(tmp, PolicyWithMaxTokens(600) + "  - {user: nobody}\n");
  ASSERT_EQ(rename(tmp.c_str(), path_.c_str()), 0);
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
  EXPECT_EQ(CurrentMax(), "500");
  EXPECT_NE(reloader_->last_error().find("unknown user 'nobody'"), std::string::npos);
}

TEST_F(ReloaderTest, SighupRequestsAReload) {
  ASSERT_TRUE(reloader_->StartWatching().ok());
  ASSERT_TRUE(reloader_->InstallSighupHandler().ok());
  // The file is unchanged, so only the signal can cause this attempt; an unchanged
  // file is a successful reload that swaps nothing.
  uint64_t attempts = reloader_->reload_attempts();
  ASSERT_EQ(raise(SIGHUP), 0);
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
  EXPECT_EQ(CurrentMax(), "100");
  EXPECT_EQ(reloader_->reloads(), 0u);
  EXPECT_EQ(reloader_->reload_errors(), 0u);
  attempts = reloader_->reload_attempts();
  reloader_->RequestReloadFromSignal();
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(attempts + 1, kWaitMs));
}

// A writer that writes the policy in pieces, closing the file after each (as a shell
// appending line by line does): every prefix ends at a line and parses as a valid policy
// with fewer grants, and each close is an IN_CLOSE_WRITE. Only the whole file may ever
// be installed.
TEST_F(ReloaderTest, APolicyWrittenInPiecesIsInstalledOnlyWhole) {
  ASSERT_TRUE(reloader_->StartWatching().ok());
  const std::string grant_alice =
      "  - {user: alice, models: {m1: {max_tokens: {max: 700, action: clamp}}}}\n";
  const std::string grant_bob = "  - {user: bob, models: {m2: {}}}\n";
  const std::string grant_carol = "  - {user: carol, models: {m1: {}, m2: {}}}\n";
  const std::vector<std::string> pieces = {TestPolicyHead() + "grants:\n" + grant_alice,
                                           grant_bob, grant_carol};
  std::set<std::string> prefixes;  // the hashes of every proper prefix written
  std::string so_far;
  for (size_t i = 0; i + 1 < pieces.size(); ++i) {
    so_far += pieces[i];
    ASSERT_TRUE(LoadPolicyText(so_far, "prefix").ok()) << "prefix " << i << " must parse";
    prefixes.insert(Sha256Hex(so_far));
  }
  const std::string whole = so_far + pieces.back();
  ASSERT_TRUE(LoadPolicyText(whole, "whole").ok());

  // Samples what is installed while the writer writes.
  std::atomic<bool> done{false};
  std::set<std::string> seen;
  std::thread sampler([&] {
    while (!done.load()) {
      seen.insert(reloader_->Current()->sha256);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const uint64_t reloads_before = reloader_->reloads();
  for (size_t i = 0; i < pieces.size(); ++i) {
    int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC | (i == 0 ? O_TRUNC : O_APPEND));
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, pieces[i].data(), pieces[i].size()),
              static_cast<ssize_t>(pieces[i].size()));
    ASSERT_EQ(close(fd), 0);
    // Well inside the stability interval (250 ms), long enough for a reload to run.
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  ASSERT_TRUE(WaitUntilInstalled(Sha256Hex(whole)));
  done = true;
  sampler.join();
  seen.insert(reloader_->Current()->sha256);
  for (const auto& prefix : prefixes) EXPECT_EQ(seen.count(prefix), 0u) << "a prefix was installed";
  EXPECT_EQ(reloader_->reloads(), reloads_before + 1);  // straight to the whole file
  EXPECT_EQ(CurrentMax(), "700");
}

// A file that never stops changing is never installed; the old policy stays.
TEST_F(ReloaderTest, AFileThatKeepsChangingIsRefused) {
  auto reloader = PolicyReloader::Create(path_, ReloaderOptions{100, 400});
  ASSERT_TRUE(reloader.ok()) << reloader.status();
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; !done.load(); ++i) {
      Write(path_, PolicyWithMaxTokens(1000 + i));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  absl::Status status = (*reloader)->ReloadNow();
  done = true;
  writer.join();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("policy_file_unstable"), absl::string_view::npos) << status;
  EXPECT_EQ((*reloader)->reloads(), 0u);
  EXPECT_EQ((*reloader)->reload_errors(), 1u);
}

TEST(ReloaderCreateTest, AnInvalidFirstPolicyIsAnError) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/bad_first.yaml";
  std::ofstream(path) << "version: 1\n";
  EXPECT_FALSE(PolicyReloader::Create(path).ok());
}

}  // namespace
}  // namespace gantry::policy
