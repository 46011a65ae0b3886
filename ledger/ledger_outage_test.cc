// Postgres goes away for 60 seconds while events keep coming; nothing may be lost or
// reordered, and every chain must verify afterwards. Runs alone (tag "exclusive"):
// it stops the server every other Postgres test uses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <pqxx/pqxx>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ledger/ledger_key.h"
#include "ledger/pg_test_util.h"
#include "ledger/schema.h"
#include "ledger/verify.h"
#include "ledger/writer.h"

namespace gantry::ledger {
namespace {

int PgCtl(const char* action) {
  const char* ctl = std::getenv("GANTRY_TEST_PG_CTL");
  if (!ctl) return -1;
  return std::system(absl::StrCat("'", ctl, "' ", action).c_str());
}

TEST(LedgerOutageTest, SixtySecondsWithoutPostgresLosesNothing) {
  ASSERT_FALSE(TestServerUrlForTest().empty()) << "run through tests/run (GANTRY_TEST_PG_URL)";
  ASSERT_NE(std::getenv("GANTRY_TEST_PG_CTL"), nullptr) << "run through tests/run (GANTRY_TEST_PG_CTL)";
  const std::string url = CreateTestDatabaseForTest();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string key_file = absl::StrCat(tmp ? tmp : "/tmp", "/outage.key");
  ::unlink(key_file.c_str());
  ASSERT_TRUE(GenerateKeyFile(key_file).ok());
  {
    pqxx::connection owner(url);
    ASSERT_TRUE(SetupLedger(owner, "").ok());
  }
  std::string writer_url = url;
  writer_url.replace(writer_url.find("postgres@"), 8, kWriterRole);
  WriterOptions options;
  options.database_url = writer_url + "?connect_timeout=2";
  options.key_file = key_file;
  options.spool_dir = absl::StrCat(tmp ? tmp : "/tmp", "/outage-spool");
  options.retry_interval_ms = 250;
  auto writer_or = LedgerWriter::Start(options);
  ASSERT_TRUE(writer_or.ok()) << writer_or.status();
  auto& writer = *writer_or;

  // Two producers, each on its own streams, recording what they appended, in order.
  std::atomic<bool> stop{false};
  std::map<std::string, std::vector<std::string>> appended;  // stream -> event ids
  std::mutex appended_mu;
  std::atomic<int> failures{0};
  auto produce = [&](int producer) {
    for (int i = 0; !stop; ++i) {
      std::string stream = absl::StrCat("task_", producer, "_", i % 7);
      auto e = writer->Append({stream, "tool.executed", "sandbox", absl::StrCat("{\"i\":", i, "}")});
      if (!e.ok()) {
        ++failures;
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(appended_mu);
        appended[stream].push_back(e->event_id());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  std::thread a(produce, 0), b(produce, 1);

  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(PgCtl("stop"), 0);
  const auto down_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(60));
  // While down, events are durable in the spool: Flush succeeds without Postgres.
  EXPECT_TRUE(writer->Flush(10000).ok());
  EXPECT_TRUE(writer->GetStats().spooling);
  ASSERT_EQ(PgCtl("start"), 0);
  const double down_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - down_at).count();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  stop = true;
  a.join();
  b.join();
  ASSERT_TRUE(writer->Flush(60000).ok());
  // Wait (bounded) until the spool has been replayed.
  for (int i = 0; i < 600 && writer->GetStats().spooling; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  WriterStats stats = writer->GetStats();
  EXPECT_FALSE(stats.spooling);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(stats.spooled, 1000u) << "too few events were produced during the outage";
  EXPECT_EQ(stats.replayed, stats.spooled);
  EXPECT_EQ(stats.dead_letters, 0u);

  size_t total = 0;
  pqxx::connection c(url);
  pqxx::read_transaction tx(c);
  for (const auto& [stream, ids] : appended) {
    total += ids.size();
    auto rows = tx.exec_params("SELECT event_id, seq FROM ledger_events WHERE stream_id = $1 "
                               "ORDER BY seq",
                               stream);
    ASSERT_EQ(rows.size(), ids.size()) << stream;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(rows[i][0].as<std::string>(), ids[i]) << stream << " seq " << i;
      ASSERT_EQ(rows[i][1].as<size_t>(), i);
    }
  }
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM ledger_events")[0].as<size_t>(), total);
  writer.reset();  // its last checkpoint
  VerifyOptions verify;
  verify.database_url = url;
  verify.key_file = key_file;
  verify.checkpoint_dirs = {options.spool_dir};
  auto report = VerifyLedger(verify);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->broken.front().problem;
  std::printf("outage %.1fs: %zu events, %llu inserted directly, %llu spooled and replayed\n",
              down_s, total, static_cast<unsigned long long>(stats.inserted),
              static_cast<unsigned long long>(stats.spooled));
}

}  // namespace
}  // namespace gantry::ledger
