// Issue 18, durability of the router's evidence (docs/ledger.md, "Durability"), with the
// real ledger writer and the Postgres of tests/run:
//   - a router process SIGKILLed under load: every request whose client received its
//     answer has its outcome (request.finished) in the ledger afterwards;
//   - a spool that cannot be written: the client gets 503 evidence_unavailable (never
//     an answer whose evidence was dropped), and new work is refused the same way.
// The router runs in a forked child (the in-process router wired as gantry-router's main
// wires it: writer, LedgerRecorder, gateway, HTTP), so that it can be killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ledger/ledger_key.h"
#include "ledger/pg_test_util.h"
#include "ledger/schema.h"
#include "ledger/writer.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using gantry::testing::FakeStep;
using gantry::testing::FakeWorkerOptions;

constexpr char kBody[] = R"({"model":"test-model","messages":[{"role":"user","content":"hi"}]})";

class EvidenceDurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ledger::TestServerUrlForTest().empty())
        << "GANTRY_TEST_PG_URL is not set: run the tests through tests/run";
    url_ = ledger::CreateTestDatabaseForTest();
    const char* tmp = std::getenv("TEST_TMPDIR");
    base_ = absl::StrCat(tmp ? tmp : "/tmp", "/", NewId("d"));
    ::mkdir(base_.c_str(), 0700);
    key_file_ = base_ + "/ledger.key";
    ASSERT_TRUE(ledger::GenerateKeyFile(key_file_).ok());
    pqxx::connection owner(url_);
    ASSERT_TRUE(ledger::SetupLedger(owner, "").ok());
    writer_url_ = url_;
    writer_url_.replace(writer_url_.find("postgres@"), 8, ledger::kWriterRole);
  }

  // In the child: a router with the writer; writes its HTTP port to `fd`, then serves
  // until killed (or `serve_ms` passed). Never returns.
  [[noreturn]] void RunRouterChild(int fd, const std::string& db_url, bool limit_spool) {
    if (limit_spool) std::signal(SIGXFSZ, SIG_IGN);
    ledger::WriterOptions options;
    options.database_url = db_url;
    options.spool_dir = base_ + "/spool";
    options.key_file = key_file_;
    auto writer = ledger::LedgerWriter::Start(options);
    if (!writer.ok()) _exit(3);
    LedgerRecorder recorder(writer->get());
    std::map<std::string, ModelEntry> models;
    models["test-model"] = TinyModelEntryForTest("test-model");
    auto router = InProcessRouterForTest::Start(OneUserPolicyForTest(), std::move(models), {},
                                                &recorder);
    if (!router.ok()) _exit(4);
    FakeWorkerOptions w;
    w.slots = 64;
    w.script = {FakeStep::Text("ok"), FakeStep::Finish(v1::FINISH_STOP)};
    auto worker = (*router)->StartWorker(w);
    if (worker == nullptr) _exit(5);
    if (limit_spool) {
      // From now on no file of this process grows past 8 KiB: the spool fills at once.
      struct rlimit limit = {8192, 8192};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(6);
    }
    int port = (*router)->port();
    if (write(fd, &port, sizeof(port)) != sizeof(port)) _exit(7);
    for (;;) pause();
  }

  // Forks the router child; `port` receives its HTTP port (0 when it did not start).
  pid_t StartRouterChild(const std::string& db_url, bool limit_spool, int* port) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t child = fork();
    if (child == 0) {
      close(fds[0]);
      RunRouterChild(fds[1], db_url, limit_spool);
    }
    close(fds[1]);
    *port = 0;
    if (read(fds[0], port, sizeof(*port)) != static_cast<ssize_t>(sizeof(*port))) *port = 0;
    close(fds[0]);
    return child;
  }

  std::string url_, writer_url_, base_, key_file_;
};

TEST_F(EvidenceDurabilityTest, ARouterKilledUnderLoadLosesNoAnsweredRequest) {
  int port = 0;
  const pid_t child = StartRouterChild(writer_url_, false, &port);
  ASSERT_GT(port, 0);

  std::mutex mu;
  std::vector<std::string> answered;  // request ids whose whole answer the client got
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        auto r = http::TestHttpClient::PostJson(port, "/v1/chat/completions", kBody, "k-dev", 5000);
        if (!r.ok()) continue;  // the router is gone (or going)
        if (r->status != 200 || r->body.find("\"finish_reason\":\"stop\"") == std::string::npos) {
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        answered.push_back(r->Header("x-gantry-request-id"));
      }
    });
  }
  // Load for a while, then SIGKILL in the middle of it.
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mu);
    if (answered.size() >= 300 && i >= 25) break;
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  waitpid(child, &status, 0);
  stop = true;
  for (auto& t : clients) t.join();
  ASSERT_TRUE(WIFSIGNALED(status)) << "child status " << status;
  ASSERT_GE(answered.size(), 50u) << "too little load before the kill";

  // Every answered request's outcome is in Postgres: nothing waited in memory.
  std::set<std::string> finished;
  pqxx::connection c(url_);
  pqxx::read_transaction tx(c);
  for (const auto& row : tx.exec("SELECT stream_id FROM ledger_events WHERE type = 'request.finished'")) {
    finished.insert(row[0].as<std::string>());
  }
  size_t missing = 0;
  for (const std::string& id : answered) {
    ASSERT_FALSE(id.empty());
    if (!finished.count(id)) ++missing;
  }
  EXPECT_EQ(missing, 0u) << "of " << answered.size() << " answered requests";
  std::printf("killed after %zu answered requests; all %zu found in the ledger (%zu finished rows)\n",
              answered.size(), answered.size() - missing, finished.size());
}

TEST_F(EvidenceDurabilityTest, ASpoolThatCannotBeWrittenGives503EvidenceUnavailable) {
  // Postgres unreachable: everything goes to the spool, which cannot grow.
  int port = 0;
  const pid_t child = StartRouterChild(
      "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=1", true, &port);
  ASSERT_GT(port, 0);
  int ok_answers = 0, refused = 0, other = 0;
  std::string last_body;
  for (int i = 0; i < 40 && refused < 3; ++i) {
    auto r = http::TestHttpClient::PostJson(port, "/v1/chat/completions", kBody, "k-dev", 10000);
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->status == 200) {
      ++ok_answers;
    } else if (r->status == 503 && r->body.find("evidence_unavailable") != std::string::npos) {
      ++refused;
    } else {
      ++other;
      last_body = r->body;
    }
  }
  // Readiness says so too, so that a load balancer stops sending work here.
  auto client = http::TestHttpClient::Connect(port);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(client->SendRequest("GET", "/readyz", "", {}).ok());
  auto ready = client->ReadResponse(10000);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->status, 503) << ready->body;
  EXPECT_NE(ready->body.find("evidence_unavailable"), std::string::npos) << ready->body;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(refused, 3) << "answers: " << ok_answers << " other: " << other << " " << last_body;
  EXPECT_EQ(other, 0) << last_body;
  // The first answers fitted in the spool (fsync'd) before it filled up.
  EXPECT_LT(ok_answers, 40);
}

}  // namespace
}  // namespace gantry::router
