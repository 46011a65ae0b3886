#include "router/broker/broker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/error_codes.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gtest/gtest.h"
#include "proto/worker_frames.h"
#include "router/broker/worker_auth.h"
#include "router/fake_worker_for_test.h"
#include "router/broker/broker_test_util.h"

namespace gantry::broker {
namespace {

TEST(Broker, ReadyDispatchStreamFinal) {
  auto broker = StartBroker();
  FakeWorkerForTest worker(WorkerOptions(*broker));
  ASSERT_TRUE(WaitLive(*broker, 1));
  ASSERT_TRUE(broker->LiveBundle("test-model").has_value());
  EXPECT_EQ(broker->LiveBundle("test-model")->tool_protocol(), "hermes_json");
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(Request(), sink).ok());
  ASSERT_TRUE(sink->WaitTerminal(5000));
  auto events = sink->events();
  ASSERT_EQ(events.size(), 3u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq(), i);
  EXPECT_EQ(sink->Text(), "Hello, world");
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_STOP);
  EXPECT_EQ(sink->terminal().status().code(), "OK");
  // Heartbeats flow both ways.
  EXPECT_TRUE(worker.WaitFor([&] { return worker.router_heartbeats_received() > 0; }, 3000));
  EXPECT_EQ(broker->stats().in_flight, 0u);
}

// CURVE over real tcp sockets: a worker whose key is in the allow-list is served; one
// with an unknown key never gets past the handshake (counted as refused, never LIVE).
TEST(Broker, CurveAdmitsListedWorkerKeysOnly) {
  auto router_keys = GenerateCurveKeyPair();
  auto known = GenerateCurveKeyPair();
  auto unknown = GenerateCurveKeyPair();
  ASSERT_TRUE(router_keys.ok() && known.ok() && unknown.ok());
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = CurveServerOptions{
      router_keys->secret_z85,
      {WorkerGrant{known->public_z85, {kAnyWorkerGrant}, {kAnyWorkerGrant}}}};
  auto broker = Broker::Start(options);
  ASSERT_TRUE(broker.ok()) << broker.status();

  FakeWorkerOptions stranger = WorkerOptions(**broker, "host/1/stranger");
  stranger.curve_public_z85 = unknown->public_z85;
  stranger.curve_secret_z85 = unknown->secret_z85;
  stranger.curve_server_public_z85 = router_keys->public_z85;
  FakeWorkerForTest refused(stranger);
  ASSERT_TRUE(WaitUntil([&] { return (*broker)->stats().handshakes_refused >= 1; }, 5000));
  EXPECT_EQ((*broker)->stats().live_workers, 0u);
  EXPECT_EQ(ReasonOf((*broker)->Submit(Request(), std::make_shared<RecordingSink>())),
            "no_worker");

  FakeWorkerOptions member = WorkerOptions(**broker, "host/2/member");
  member.curve_public_z85 = known->public_z85;
  member.curve_secret_z85 = known->secret_z85;
  member.curve_server_public_z85 = router_keys->public_z85;
  FakeWorkerForTest admitted(member);
  ASSERT_TRUE(WaitLive(**broker, 1));
  EXPECT_GE((*broker)->stats().handshakes_admitted, 1u);
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*broker)->Submit(Request(), sink).ok());
  ASSERT_TRUE(sink->WaitTerminal(5000));
  EXPECT_EQ(sink->Text(), "Hello, world");
  EXPECT_EQ(admitted.requests_received(), 1);
  EXPECT_EQ(refused.requests_received(), 0);
}

TEST(Broker, NonLocalEndpointNeedsCurveOrExplicitInsecure) {
  BrokerOptions options;
  options.endpoint = "tcp://0.0.0.0:*";
  auto refused = Broker::Start(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("--insecure-workers"), absl::string_view::npos);
  options.curve = CurveServerOptions{"not a key", {}};
  EXPECT_EQ(ReasonOf(Broker::Start(options).status()), "invalid_key_file");

  for (const char* local : {"ipc:///tmp/x", "inproc://x", "tcp://127.0.0.1:5", "tcp://127.9.8.7:*",
                            "tcp://localhost:5", "tcp://[::1]:5"}) {
    EXPECT_TRUE(IsLocalEndpoint(local)) << local;
  }
  for (const char* remote : {"tcp://0.0.0.0:5", "tcp://*:5", "tcp://eth0:5", "tcp://10.0.0.1:5",
                             "tcp://127.evil.example:5", "tcp://127.0.0.1", "pgm://x", ""}) {
    EXPECT_FALSE(IsLocalEndpoint(remote)) << remote;
  }
}

TEST(Broker, NoWorker) {
  auto broker = StartBroker();
  auto sink = std::make_shared<RecordingSink>();
  absl::Status status = broker->Submit(Request("absent"), sink);
  EXPECT_EQ(ReasonOf(status), "no_worker");
  EXPECT_EQ(HttpStatusFor(status), 503);
  EXPECT_GT(RetryAfterMs(status), 0u);
  EXPECT_EQ(sink->terminals(), 0);
}

TEST(Broker, WorkerKilledMidStreamGivesExactlyOneTerminalAndNoRetry) {
  auto broker = StartBroker();
  FakeWorkerOptions options = WorkerOptions(*broker);
  options.script = {FakeStep::Text("partial"), FakeStep::Sleep(50), FakeStep::Die()};
  FakeWorkerForTest worker(options);
  ASSERT_TRUE(WaitLive(*broker, 1));
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(Request(), sink).ok());
  ASSERT_TRUE(sink->WaitTerminal(6000));
  EXPECT_TRUE(worker.dead());
  EXPECT_EQ(sink->Text(), "partial");
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_ERROR);
  EXPECT_EQ(sink->terminal().status().reason(), "worker_lost");
  EXPECT_GT(sink->terminal().status().retry_after_ms(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(sink->terminals(), 1);
  EXPECT_EQ(worker.requests_received(), 1);
  EXPECT_EQ(broker->stats().live_workers, 0u);
}

TEST(Broker, TwoWorkersOneKilledTheOtherKeepsServing) {
  auto broker = StartBroker();
  FakeWorkerOptions a = WorkerOptions(*broker, "host/1/a");
  a.slots = 1;
  a.script = {FakeStep::Text("from a"), FakeStep::Die()};
  FakeWorkerOptions b = WorkerOptions(*broker, "host/2/b");
  b.slots = 1;
  b.script = {FakeStep::Sleep(200), FakeStep::Text("from b"), FakeStep::Finish(v1::FINISH_STOP)};
  FakeWorkerForTest worker_a(a);
  FakeWorkerForTest worker_b(b);
  ASSERT_TRUE(WaitLive(*broker, 2));
  // Least-loaded dispatch spreads two requests over both workers.
  auto s1 = std::make_shared<RecordingSink>();
  auto s2 = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(Request(), s1).ok());
  ASSERT_TRUE(broker->Submit(Request(), s2).ok());
  ASSERT_TRUE(s1->WaitTerminal(6000));
  ASSERT_TRUE(s2->WaitTerminal(6000));
  int lost = 0, ok = 0;
  for (auto* s : {s1.get(), s2.get()}) {
    EXPECT_EQ(s->terminals(), 1);
    if (s->terminal().status().reason() == "worker_lost") ++lost;
    if (s->terminal().finish_reason() == v1::FINISH_STOP) ++ok;
  }
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(ok, 1);
  ASSERT_TRUE(WaitLive(*broker, 1));
  for (int i = 0; i < 3; ++i) {
    auto s = std::make_shared<RecordingSink>();
    ASSERT_TRUE(broker->Submit(Request(), s).ok());
    ASSERT_TRUE(s->WaitTerminal(5000));
    EXPECT_EQ(s->Text(), "from b");
    EXPECT_EQ(s->terminal().finish_reason(), v1::FINISH_STOP);
  }
}

// Worker a: 3 slots, answers "from a" after 600 ms; worker b: 1 slot, "from b" at once.
// Least-loaded dispatch sends a first request to a; with two of a's slots busy, to b.
std::pair<std::unique_ptr<FakeWorkerForTest>, std::unique_ptr<FakeWorkerForTest>> StartSlowAndFastWorkers(
    const Broker& broker) {
  FakeWorkerOptions a = WorkerOptions(broker, "host/1/a");
  a.slots = 3;
  a.script = {FakeStep::Sleep(600), FakeStep::Text("from a"), FakeStep::Finish(v1::FINISH_STOP)};
  FakeWorkerOptions b = WorkerOptions(broker, "host/2/b");
  b.slots = 1;
  b.script = {FakeStep::Text("from b"), FakeStep::Finish(v1::FINISH_STOP)};
  return {std::make_unique<FakeWorkerForTest>(a), std::make_unique<FakeWorkerForTest>(b)};
}

// A conversation's next turn goes to the worker that served its last one (which holds
// its prefix), though least-loaded dispatch would pick the other; another
// conversation, or another principal's, goes least-loaded.
TEST(Broker, AConversationsNextTurnGoesToTheWorkerThatServedItsLast) {
  auto broker = StartBroker();
  auto [worker_a, worker_b] = StartSlowAndFastWorkers(*broker);
  ASSERT_TRUE(WaitLive(*broker, 2));
  auto turn = [](const std::string& principal, const std::string& task, int turns) {
    v1::InferenceRequest r = Request();
    r.set_principal(principal);
    r.mutable_messages(0)->set_role("system");
    r.mutable_messages(0)->set_content("You are an agent.");
    for (int i = 0; i < turns; ++i) {
      auto* user = r.add_messages();
      user->set_role("user");
      user->set_content(i == 0 ? task : "go on");
      if (i + 1 == turns) break;
      auto* reply = r.add_messages();
      reply->set_role("assistant");
      reply->set_content("done " + std::to_string(i));
    }
    return r;
  };
  auto first = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(turn("alice", "fix the bug", 1), first).ok());  // a: most credit
  ASSERT_TRUE(first->WaitTerminal(5000));
  EXPECT_EQ(first->Text(), "from a");
  // Two other tasks keep a busy: least-loaded would now pick b.
  std::vector<std::shared_ptr<RecordingSink>> busy;
  for (const char* task : {"write docs", "add a test"}) {
    busy.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(broker->Submit(turn("alice", task, 1), busy.back()).ok());
  }
  const uint64_t by_prefix = broker->stats().dispatched_by_prefix;
  auto second = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(turn("alice", "fix the bug", 2), second).ok());
  ASSERT_TRUE(second->WaitTerminal(5000));
  EXPECT_EQ(second->Text(), "from a");
  EXPECT_EQ(broker->stats().dispatched_by_prefix, by_prefix + 1);
  for (auto& sink : busy) ASSERT_TRUE(sink->WaitTerminal(5000));
  for (auto& sink : busy) EXPECT_EQ(sink->Text(), "from a");
  // The same task from another principal is another conversation: least-loaded.
  busy.clear();
  for (const char* task : {"write docs", "add a test"}) {
    busy.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(broker->Submit(turn("carol", task, 1), busy.back()).ok());
  }
  auto mallory = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(turn("mallory", "fix the bug", 2), mallory).ok());
  ASSERT_TRUE(mallory->WaitTerminal(5000));
  EXPECT_EQ(mallory->Text(), "from b");
  for (auto& sink : busy) ASSERT_TRUE(sink->WaitTerminal(5000));
}

// With a prompt_cache_key, the key is the conversation: a request with the key's
// earlier messages changed still goes to the worker that served the key last; the same
// key from another principal is another conversation.
TEST(Broker, APromptCacheKeyGoesToTheWorkerThatServedItLast) {
  auto broker = StartBroker();
  auto [worker_a, worker_b] = StartSlowAndFastWorkers(*broker);
  ASSERT_TRUE(WaitLive(*broker, 2));
  auto keyed = [](const std::string& principal, const std::string& key, const std::string& text) {
    v1::InferenceRequest r = Request();
    r.set_principal(principal);
    r.set_prompt_cache_key(key);
    r.mutable_messages(0)->set_content(text);
    return r;
  };
  auto first = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(keyed("alice", "ses_1", "first"), first).ok());  // a: most credit
  ASSERT_TRUE(first->WaitTerminal(5000));
  EXPECT_EQ(first->Text(), "from a");
  std::vector<std::shared_ptr<RecordingSink>> busy;
  for (const char* key : {"ses_2", "ses_3"}) {
    busy.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(broker->Submit(keyed("alice", key, "other"), busy.back()).ok());
  }
  auto again = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(keyed("alice", "ses_1", "the summary replaced the history"), again).ok());
  ASSERT_TRUE(again->WaitTerminal(5000));
  EXPECT_EQ(again->Text(), "from a");
  for (auto& sink : busy) ASSERT_TRUE(sink->WaitTerminal(5000));
  busy.clear();
  for (const char* key : {"ses_4", "ses_5"}) {
    busy.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(broker->Submit(keyed("carol", key, "other"), busy.back()).ok());
  }
  auto other = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(keyed("mallory", "ses_1", "first"), other).ok());
  ASSERT_TRUE(other->WaitTerminal(5000));
  EXPECT_EQ(other->Text(), "from b");
  for (auto& sink : busy) ASSERT_TRUE(sink->WaitTerminal(5000));
}

TEST(Broker, HeartbeatExpiryWithinThreeIntervals) {
  auto broker = StartBroker();
  FakeWorkerOptions options = WorkerOptions(*broker);
  options.script = {FakeStep::Hang()};
  FakeWorkerForTest worker(options);
  ASSERT_TRUE(WaitLive(*broker, 1));
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(Request(), sink).ok());
  ASSERT_TRUE(worker.WaitFor([&] { return worker.requests_received() == 1; }, 3000));
  auto stalled_at = std::chrono::steady_clock::now();
  worker.StallHeartbeats(true);
  ASSERT_TRUE(WaitUntil([&] { return broker->stats().live_workers == 0; }, 5000));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stalled_at).count();
  // The last sign of life may be up to one interval before the stall.
  EXPECT_GE(seconds, 1.9);
  EXPECT_LE(seconds, 3.5);
  ASSERT_TRUE(sink->WaitTerminal(1000));
  EXPECT_EQ(sink->terminals(), 1);
  EXPECT_EQ(sink->terminal().status().reason(), "worker_lost");
}

TEST(Broker, QueueOverflowCancelAndPriority) {
  auto broker = StartBroker(/*max_queue=*/2);
  FakeWorkerOptions options = WorkerOptions(*broker);
  options.slots = 1;
  options.script = {FakeStep::Hang()};
  FakeWorkerForTest worker(options);
  ASSERT_TRUE(WaitLive(*broker, 1));
  auto first = std::make_shared<RecordingSink>();
  v1::InferenceRequest r1 = Request();
  ASSERT_TRUE(broker->Submit(r1, first).ok());
  ASSERT_TRUE(worker.WaitFor([&] { return worker.requests_received() == 1; }, 3000));
  // Queued behind it: a batch request, then an accessibility one.
  auto batch = std::make_shared<RecordingSink>();
  auto a11y = std::make_shared<RecordingSink>();
  v1::InferenceRequest rb = Request("test-model", v1::PRIORITY_BATCH);
  v1::InferenceRequest ra = Request("test-model", v1::PRIORITY_ACCESSIBILITY);
  ASSERT_TRUE(broker->Submit(rb, batch).ok());
  ASSERT_TRUE(broker->Submit(ra, a11y).ok());
  auto overflow = std::make_shared<RecordingSink>();
  absl::Status full = broker->Submit(Request(), overflow);
  EXPECT_EQ(ReasonOf(full), "queue_full");
  EXPECT_EQ(HttpStatusFor(full), 429);
  EXPECT_GT(RetryAfterMs(full), 0u);
  // The client of the first goes away: CANCEL reaches the worker, the sink gets one
  // cancelled terminal, and the accessibility request is served before the batch one.
  broker->Cancel(r1.request_id(), "client closed the connection");
  ASSERT_TRUE(first->WaitTerminal(1000));
  EXPECT_EQ(first->terminal().finish_reason(), v1::FINISH_CANCELLED);
  ASSERT_TRUE(worker.WaitFor([&] { return worker.cancels_received().size() == 1; }, 3000));
  EXPECT_EQ(worker.cancels_received()[0], r1.request_id());
  ASSERT_TRUE(worker.WaitFor([&] { return worker.requests_received() == 2; }, 3000));
  EXPECT_EQ(worker.requests()[1].request_id(), ra.request_id());
  // A queued request cancels at once.
  broker->Cancel(rb.request_id(), "gone");
  ASSERT_TRUE(batch->WaitTerminal(1000));
  EXPECT_EQ(batch->terminals(), 1);
  broker->Cancel(ra.request_id(), "gone");
  ASSERT_TRUE(a11y->WaitTerminal(1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(first->terminals(), 1);  // the worker's FINAL (cancelled) was absorbed
}

// Submits a request the router counted 20 prompt tokens for, and waits for its first
// `events` events.
std::shared_ptr<RecordingSink> SubmitCounted(Broker& broker, v1::InferenceRequest* request,
                                             size_t events) {
  auto sink = std::make_shared<RecordingSink>();
  *request = Request();
  request->set_router_prompt_tokens(20);
  EXPECT_TRUE(broker.Submit(*request, sink).ok());
  EXPECT_TRUE(WaitUntil([&] { return sink->events().size() == events; }, 5000));
  return sink;
}

// Holds until `worker` has sent its answer to a CANCEL (its `answered`-th and one) and
// checks, all along, that the sink has no Terminal yet and the request is still in
// flight. Returns the checks made.
int ExpectHeldUntilTheWorkerAnswers(const Broker& broker, const FakeWorkerForTest& worker,
                                    RecordingSink& sink, int answered = 0) {
  int checks = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    // Read before asking whether the FINAL has left: while it has not, the sink cannot
    // have a Terminal and the request cannot have left the broker's books.
    const int terminals = sink.terminals();
    const uint64_t in_flight = broker.stats().in_flight;
    if (worker.cancel_finals_sent() > answered) return checks;
    EXPECT_EQ(terminals, 0);
    EXPECT_EQ(in_flight, 1u);
    ++checks;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "the worker never answered the CANCEL";
  return checks;
}

// Cancel (and a deadline, the same path): the broker relays nothing more, keeps the
// request in flight on its worker until the worker's FINAL, then gives the sink the
// Terminal it decided with the usage the worker reported.
TEST(Broker, AnEndedRequestWaitsForItsWorkersFinalAndCarriesItsUsage) {
  auto broker = StartBroker();
  FakeWorkerOptions options = WorkerOptions(*broker);
  options.prompt_tokens = 33;
  options.cancel_delay_ms = 300;
  options.script = {FakeStep::Text("a").Costing(3), FakeStep::Text("b").Costing(2),
                    FakeStep::Hang()};
  FakeWorkerForTest worker(options);
  ASSERT_TRUE(WaitLive(*broker, 1));

  v1::InferenceRequest request;
  auto sink = SubmitCounted(*broker, &request, 2);
  broker->Cancel(request.request_id(), "the client closed the connection");
  EXPECT_GT(ExpectHeldUntilTheWorkerAnswers(*broker, worker, *sink), 10);
  ASSERT_TRUE(sink->WaitTerminal(3000));
  v1::Terminal t = sink->terminal();
  EXPECT_EQ(t.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(t.status().reason(), "cancelled");
  EXPECT_EQ(t.status().message(), "the client closed the connection");
  EXPECT_EQ(t.usage().prompt_tokens(), 33u);  // the worker's, not the router's 20
  EXPECT_EQ(t.usage().completion_tokens(), 5u);
  EXPECT_EQ(t.bundle().model(), "test-model");
  EXPECT_EQ(sink->events().back().seq(), 2u);  // numbered after what was relayed
  ASSERT_TRUE(WaitUntil([&] { return broker->stats().in_flight == 0; }, 1000));

  // The deadline: the same wait, the client told deadline_exceeded.
  auto late = std::make_shared<RecordingSink>();
  v1::InferenceRequest timed = Request();
  timed.set_deadline_unix_ms(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()) + 300);
  const int answered_before = worker.cancel_finals_sent();
  ASSERT_TRUE(broker->Submit(timed, late).ok());
  ASSERT_TRUE(WaitUntil([&] { return worker.cancels_received().size() == 2; }, 5000));
  EXPECT_GT(ExpectHeldUntilTheWorkerAnswers(*broker, worker, *late, answered_before), 10);
  ASSERT_TRUE(late->WaitTerminal(3000));
  EXPECT_EQ(late->terminal().status().reason(), "deadline_exceeded");
  EXPECT_EQ(late->terminal().usage().prompt_tokens(), 33u);
  EXPECT_EQ(late->terminal().usage().completion_tokens(), 5u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(sink->terminals(), 1);
  EXPECT_EQ(late->terminals(), 1);
}

// A worker that never answers the CANCEL is treated as lost for the request after
// cancel_ack_timeout_ms: the Terminal then carries what the router knows (its prompt
// count and the worker's running count), and the request leaves the books.
TEST(Broker, AnUnansweredCancelEndsAfterTheTimeoutWithWhatTheRouterKnows) {
  auto broker = StartFastBroker(/*cancel_ack_timeout_ms=*/400);
  FakeWorkerOptions options = WorkerOptions(*broker);
  options.heartbeat_interval_ms = 50;
  options.cancel_delay_ms = -1;  // never
  options.script = {FakeStep::ToolCall("get_weather", "{}").Costing(9), FakeStep::Hang()};
  FakeWorkerForTest worker(options);
  ASSERT_TRUE(WaitLive(*broker, 1));
  v1::InferenceRequest request;
  auto sink = SubmitCounted(*broker, &request, 1);
  const auto cancelled_at = std::chrono::steady_clock::now();
  broker->Cancel(request.request_id(), "gone");
  ASSERT_TRUE(sink->WaitTerminal(3000));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
  EXPECT_GE(waited, 0.35);
  EXPECT_EQ(worker.cancel_finals_sent(), 0);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(sink->terminal().usage().prompt_tokens(), 20u);
  EXPECT_EQ(sink->terminal().usage().completion_tokens(), 9u);
  EXPECT_EQ(broker->stats().in_flight, 0u);
  EXPECT_EQ(broker->stats().cancels_unanswered, 1u);
  EXPECT_EQ(broker->stats().live_workers, 1u);  // lost for this request only
}

// A worker lost mid-request: the router's prompt count and the worker's last running
// count of generated tokens, or one per output event when it reported none.
TEST(Broker, ALostWorkersRequestCarriesThePromptAndTheTokensCounted) {
  for (bool running_count : {true, false}) {
    SCOPED_TRACE(running_count ? "running count" : "no running count");
    auto broker = StartFastBroker();
    FakeWorkerOptions options = WorkerOptions(*broker);
    options.heartbeat_interval_ms = 50;
    options.report_running_count = running_count;
    options.script = {FakeStep::Reasoning("hmm").Costing(3), FakeStep::Text("a").Costing(4),
                      FakeStep::Hang()};
    FakeWorkerForTest worker(options);
    ASSERT_TRUE(WaitLive(*broker, 1));
    v1::InferenceRequest request;
    auto sink = SubmitCounted(*broker, &request, 2);
    worker.Kill();
    EXPECT_EQ(broker->stats().in_flight, 1u);
    ASSERT_TRUE(sink->WaitTerminal(3000));
    EXPECT_EQ(sink->terminal().status().reason(), "worker_lost");
    EXPECT_EQ(sink->terminal().usage().prompt_tokens(), 20u);
    EXPECT_EQ(sink->terminal().usage().completion_tokens(), running_count ? 7u : 2u);
    EXPECT_EQ(broker->stats().in_flight, 0u);
  }
}

// A DEALER connected to the broker that speaks whatever frames the test sends.

}  // namespace
}  // namespace gantry::broker
