// The ledger against a real PostgreSQL started by tests/run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "ledger/pg_test_util.h"
#include "ledger/verify.h"
#include "ledger/writer.h"

namespace gantry::ledger {
namespace {

class LedgerPgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(TestServerUrlForTest().empty())
        << "GANTRY_TEST_PG_URL is not set: run the tests through tests/run, which starts "
           "PostgreSQL";
    url_ = CreateTestDatabaseForTest();
    const char* tmp = std::getenv("TEST_TMPDIR");
    spool_dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/spool-", NewId("d"));
  }

  std::unique_ptr<LedgerWriter> StartWriter(const std::string& url) {
    WriterOptions options;
    options.database_url = url;
    options.spool_dir = spool_dir_;
    options.retry_interval_ms = 100;
    auto writer = LedgerWriter::Start(options);
    EXPECT_TRUE(writer.ok()) << writer.status();
    return writer.ok() ? std::move(*writer) : nullptr;
  }

  long long Count(const std::string& where = "true") {
    pqxx::connection c(url_);
    pqxx::read_transaction tx(c);
    return tx.exec1("SELECT count(*) FROM ledger_events WHERE " + where)[0].as<long long>();
  }

  std::string url_;
  std::string spool_dir_;
};

TEST_F(LedgerPgTest, AppendFlushVerify) {
  auto writer = StartWriter(url_);
  ASSERT_NE(writer, nullptr);
  for (int i = 0; i < 30; ++i) {
    auto e = writer->Append({absl::StrCat("req_", i % 3), "admission.decided", "router",
                             R"({"z": 1, "gen_ai.request.model": "qwen3", "n": 1.0})"});
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->seq(), static_cast<uint64_t>(i / 3));
    // Stored canonically: compact, keys sorted, 1.0 kept.
    EXPECT_EQ(e->payload_json(), R"({"gen_ai.request.model":"qwen3","n":1.0,"z":1})");
  }
  ASSERT_TRUE(writer->Flush(10000).ok());
  EXPECT_EQ(Count(), 30);
  EXPECT_EQ(writer->GetStats().inserted, 30u);
  auto report = VerifyLedger(url_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->streams, 3u);
  EXPECT_EQ(report->events, 30u);
}

TEST_F(LedgerPgTest, RejectsBadInputWithoutQueueingIt) {
  auto writer = StartWriter(url_);
  EXPECT_EQ(writer->Append({"", "t", "a", "{}"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->Append({"s", "t", "a", "[1]"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->Append({"s", "t", "a", "{bad"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer->Flush(5000).ok());
  EXPECT_EQ(Count(), 0);
}

TEST_F(LedgerPgTest, AppendOnlyForTheWriterRoleAndForOwners) {
  auto writer = StartWriter(url_);
  ASSERT_TRUE(writer->Append({"req_x", "t", "router", "{}"}).ok());
  ASSERT_TRUE(writer->Flush(10000).ok());
  pqxx::connection c(url_);
  for (const char* role : {"gantry_ledger_writer", "postgres"}) {
    for (const char* sql : {"UPDATE ledger_events SET actor = 'x'",
                            "DELETE FROM ledger_events", "TRUNCATE ledger_events"}) {
      pqxx::work tx(c);
      tx.exec0(absl::StrCat("SET ROLE ", role));
      try {
        tx.exec0(sql);
        ADD_FAILURE() << role << " could run: " << sql;
      } catch (const pqxx::insufficient_privilege&) {
        // Refused, as it must be (SQLSTATE 42501).
      } catch (const std::exception& e) {
        ADD_FAILURE() << role << ": " << sql << ": unexpected " << e.what();
      }
    }
  }
  EXPECT_EQ(Count(), 1);
}

TEST_F(LedgerPgTest, SuperuserTamperingIsCaughtByVerify) {
  auto writer = StartWriter(url_);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(writer->Append({"req_a", "t", "router", "{}"}).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(writer->Append({"req_b", "t", "router", "{}"}).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(writer->Append({"req_c", "t", "router", "{}"}).ok());
  ASSERT_TRUE(writer->Flush(10000).ok());
  {
    pqxx::connection c(url_);
    pqxx::work tx(c);
    // A superuser can switch triggers off; verify must still notice.
    tx.exec0("SET session_replication_role = replica");
    tx.exec0(R"(UPDATE ledger_events SET payload_json = '{"forged":true}'
                WHERE stream_id = 'req_a' AND seq = 4)");
    tx.exec0("DELETE FROM ledger_events WHERE stream_id = 'req_b' AND seq = 6");
    tx.commit();
  }
  auto report = VerifyLedger(url_);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->broken.size(), 2u);
  EXPECT_EQ(report->broken[0].stream_id, "req_a");
  EXPECT_EQ(report->broken[0].seq, 4u);
  EXPECT_NE(report->broken[0].problem.find("hash mismatch"), std::string::npos);
  EXPECT_EQ(report->broken[1].stream_id, "req_b");
  EXPECT_EQ(report->broken[1].seq, 7u);
  EXPECT_NE(report->broken[1].problem.find("seq gap"), std::string::npos);
}

TEST_F(LedgerPgTest, UnreachableDatabaseSpoolsAndAnotherWriterAdoptsTheSpool) {
  // Port 1 on loopback: nothing listens, so this writer can only spool.
  std::vector<std::string> ids;
  {
    auto down = StartWriter("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=1");
    ASSERT_NE(down, nullptr);
    for (int i = 0; i < 50; ++i) {
      auto e = down->Append({absl::StrCat("task_", i % 2), "tool.executed", "sandbox", "{}"});
      ASSERT_TRUE(e.ok());
      ids.push_back(e->event_id());
    }
    ASSERT_TRUE(down->Flush(10000).ok());  // durable in the spool
    EXPECT_EQ(down->GetStats().spooled, 50u);
    EXPECT_TRUE(down->GetStats().spooling);
  }  // the writer goes away with its spool unreplayed
  auto up = StartWriter(url_);
  ASSERT_NE(up, nullptr);
  for (int i = 0; i < 100 && Count() < 50; ++i) usleep(50000);
  ASSERT_TRUE(up->Flush(10000).ok());
  EXPECT_EQ(Count(), 50);
  pqxx::connection c(url_);
  pqxx::read_transaction tx(c);
  auto rows = tx.exec("SELECT event_id FROM ledger_events ORDER BY id");
  ASSERT_EQ(rows.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(rows[i][0].as<std::string>(), ids[i]);
  EXPECT_TRUE(VerifyLedger(url_)->ok());
}

TEST_F(LedgerPgTest, SeveralWriterProcessesAtOnce) {
  constexpr int kProcesses = 4, kEvents = 500;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      WriterOptions options;
      options.database_url = url_;
      options.spool_dir = absl::StrCat(spool_dir_, "-", p);
      auto writer = LedgerWriter::Start(options);
      if (!writer.ok()) _exit(3);
      for (int i = 0; i < kEvents; ++i) {
        if (!(*writer)->Append({absl::StrCat("req_p", p, "_", i % 5), "dispatch.sent", "router",
                                absl::StrCat("{\"i\":", i, "}")})
                 .ok()) {
          _exit(4);
        }
      }
      _exit((*writer)->Flush(30000).ok() ? 0 : 5);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(Count(), kProcesses * kEvents);
  auto report = VerifyLedger(url_);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->streams, static_cast<uint64_t>(kProcesses * 5));
}

}  // namespace
}  // namespace gantry::ledger
