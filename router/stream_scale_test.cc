// 1,000 concurrent SSE streams through the real gateway (HTTP server, authentication,
// policy, render + count, budgets, broker over tcp) to a worker TEST DOUBLE that holds
// every request open at a gate until all of them are in flight (four workers of one
// model, 250 slots each), then finishes them.
// Each client checks its own stream: 200, the text before and after the gate, usage,
// [DONE], no error event.
#include <sys/resource.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using testing::FakeStep;
using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

constexpr int kStreams = 1000;

std::string Policy() {
  return OneUserPolicyForTest(
      "  budgets: {tokens_per_day: 100000000, tokens_per_month: 1000000000, "
      "requests_per_minute: 100000, concurrent_requests: 2000}\n",
      "  - user: dev\n    models:\n      test-model:\n        max_tokens: {max: 100, action: clamp}\n");
}

// Each stream needs two descriptors here (client and server side).
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

TEST(StreamScale, ThousandConcurrentSseStreamsWithoutAnError) {
  RaiseOpenFileLimit();
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, rlim_t{2 * kStreams + 256}) << "the open-file limit is too low";

  ModelEntry entry = TinyModelEntryForTest("test-model");
  ASSERT_NE(entry.counter, nullptr);
  auto router = InProcessRouterForTest::Start(Policy(), {{"test-model", entry}});
  ASSERT_TRUE(router.ok()) << router.status();

  // Four workers of the model, 250 slots each: the broker spreads the streams.
  constexpr int kWorkers = 4;
  std::vector<std::unique_ptr<FakeWorkerForTest>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    FakeWorkerOptions w;
    w.endpoint = (*router)->broker()->endpoint();
    w.worker_id = absl::StrCat("host/", i, "/fake");
    w.model = "test-model";
    w.slots = kStreams / kWorkers;
    w.script = {FakeStep::Text("before"), FakeStep::Gate(), FakeStep::Text(" after"),
                FakeStep::Finish(v1::FINISH_STOP)};
    workers.push_back(std::make_unique<FakeWorkerForTest>(w));
  }
  FakeWorkerForTest& worker = *workers[0];
  ASSERT_TRUE(worker.WaitFor(
      [&] { return (*router)->broker()->stats().live_workers == kWorkers; }, 5000));

  const std::string body =
      R"({"model":"test-model","stream":true,"stream_options":{"include_usage":true},)"
      R"("messages":[{"role":"user","content":"hi"}]})";
  const int port = (*router)->port();
  std::atomic<int> first_chunk{0}, ok{0};
  std::vector<std::string> failures(kStreams);
  std::vector<std::thread> clients;
  clients.reserve(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      auto client = http::TestHttpClient::Connect(port);
      if (!client.ok()) {
        failures[i] = client.status().ToString();
        ++first_chunk;  // never blocks the gate
        return;
      }
      auto sent = client->SendRequest("POST", "/v1/chat/completions", body,
                                      {{"Content-Type", "application/json"},
                                       {"Authorization", "Bearer k-dev"}});
      if (!sent.ok()) {
        failures[i] = sent.ToString();
        ++first_chunk;
        return;
      }
      bool counted = false;
      auto response = client->ReadResponse(300000, [&](absl::string_view) {
        if (!counted) {
          counted = true;
          ++first_chunk;
        }
        return true;
      });
      if (!counted) ++first_chunk;
      if (!response.ok()) {
        failures[i] = response.status().ToString();
        return;
      }
      std::string text;
      bool done = false, usage = false, error = false;
      for (const std::string& data : http::SseDataLines(response->body)) {
        if (data == "[DONE]") {
          done = true;
          continue;
        }
        if (absl::StrContains(data, R"("error")")) error = true;
        if (absl::StrContains(data, R"("usage":{)")) usage = true;
        if (absl::StrContains(data, R"("content":"before")")) text += "before";
        if (absl::StrContains(data, R"("content":" after")")) text += " after";
      }
      if (response->status != 200 || text != "before after" || !done || !usage || error) {
        failures[i] = absl::StrCat("status ", response->status, " text '", text, "' done ", done,
                                   " usage ", usage, " error ", error, ": ",
                                   absl::StrJoin(http::SseDataLines(response->body), " | "));
        return;
      }
      ++ok;
    });
  }
  // Every stream has its first event while all of them wait at the gate: 1,000 streams
  // open at once, none finished.
  ASSERT_TRUE(worker.WaitFor([&] { return first_chunk.load() == kStreams; }, 240000));
  int active = 0;
  for (auto& w : workers) active += w->active_requests();
  EXPECT_EQ(active, kStreams);
  for (auto& w : workers) w->OpenGate();
  for (auto& t : clients) t.join();
  int failed = 0;
  for (int i = 0; i < kStreams; ++i) {
    if (!failures[i].empty() && ++failed <= 5) ADD_FAILURE() << "stream " << i << ": " << failures[i];
  }
  EXPECT_EQ(ok.load(), kStreams);
  EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace gantry::router
