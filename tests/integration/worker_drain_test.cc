// A rolling restart of one worker: the real broker (router/broker) and two real
// gantry-worker loops (worker/server/worker_loop.h, the real engine on a test bundle
// with the scripted sampler) over tcp loopback. Worker A is stopped while it streams a
// long answer: it drains (docs/protocol.md, "Worker states": DRAINING), so its answer
// ends whole, the requests that come meanwhile are served by B (one that reached A is
// refused no_worker and queued again by the broker), and A leaves with DISCONNECT.
// No request fails.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "router/broker/broker.h"
#include "worker/server/serving.h"
#include "worker/server/test_bundle.h"
#include "worker/server/worker_loop.h"

namespace gantry {
namespace {

class Sink : public broker::StreamSink {
 public:
  void OnEvent(const v1::StreamEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_ += event.text().text();
    if (event.has_terminal()) terminal_ = event.terminal(), done_ = true;
    ++events_;
    cv_.notify_all();
  }
  bool Wait(const std::function<bool()>& what, int ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(ms), what);
  }
  bool WaitDone(int ms) { return Wait([&] { return done_; }, ms); }
  bool WaitFirst(int ms) { return Wait([&] { return events_ > 0; }, ms); }
  v1::Terminal terminal() {
    std::lock_guard<std::mutex> lock(mu_);
    return terminal_;
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  v1::Terminal terminal_;
  bool done_ = false;
  int events_ = 0;
};

bool WaitUntil(const std::function<bool()>& what, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (what()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return what();
}

TEST(WorkerDrain, AStoppedWorkerFinishesItsAnswerAndTheOtherServesTheRest) {
  auto dir = server::TestBundleDirForTest(true);
  ASSERT_TRUE(dir.ok()) << dir.status();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string script = std::string(tmp ? tmp : "/tmp") + "/drain-script.yaml";
  std::string words;
  for (int i = 0; i < 150; ++i) words += " word";
  FILE* f = std::fopen(script.c_str(), "w");
  std::fprintf(f, "- match: \"long\"\n  emit: \"%s\"\n- match: \"\"\n  emit: \"Short.\"\n",
               words.c_str());
  std::fclose(f);
  auto loaded = server::LoadedBundle::Load(*dir, script);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::string model = (*loaded)->serving().identity.model();

  broker::BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.insecure_workers = true;
  options.heartbeat_interval_ms = 200;
  auto started = broker::Broker::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<broker::Broker> b = std::move(*started);

  auto worker = [&](const std::string& id) {
    server::WorkerOptions w;
    w.router_endpoint = b->endpoint();
    w.worker_id = id;
    w.slots = 1;
    w.capacity_per_slot = 512;
    w.heartbeat_interval_ms = 200;
    return std::make_unique<server::WorkerLoop>(w, (*loaded)->serving());
  };
  auto request = [&](const std::string& text) {
    v1::InferenceRequest r;
    r.set_request_id(NewId("req"));
    r.set_model(model);
    r.set_max_tokens(300);
    auto* m = r.add_messages();
    m->set_role("user");
    m->set_content(text);
    return r;
  };

  std::unique_ptr<server::WorkerLoop> a = worker("host/a");
  std::thread run_a([&] { a->Run(); });
  ASSERT_TRUE(WaitUntil([&] { return b->stats().live_workers == 1; }, 5000));
  auto long_answer = std::make_shared<Sink>();
  ASSERT_TRUE(b->Submit(request("a long one please"), long_answer).ok());  // to A
  ASSERT_TRUE(long_answer->WaitFirst(10000));
  std::unique_ptr<server::WorkerLoop> other = worker("host/b");
  std::thread run_b([&] { other->Run(); });
  ASSERT_TRUE(WaitUntil([&] { return b->stats().live_workers == 2; }, 5000));

  a->Stop();  // A drains
  std::vector<std::shared_ptr<Sink>> shorts;
  for (int i = 0; i < 4; ++i) {
    auto s = std::make_shared<Sink>();
    ASSERT_TRUE(b->Submit(request("hello"), s).ok());
    shorts.push_back(s);
  }
  ASSERT_TRUE(long_answer->WaitDone(30000));
  EXPECT_EQ(long_answer->terminal().finish_reason(), v1::FINISH_STOP)
      << long_answer->terminal().status().ShortDebugString();
  EXPECT_EQ(long_answer->text(), words);  // whole: the drain let it finish
  for (auto& s : shorts) {
    ASSERT_TRUE(s->WaitDone(30000));
    EXPECT_EQ(s->terminal().finish_reason(), v1::FINISH_STOP)
        << s->terminal().status().ShortDebugString();
    EXPECT_EQ(s->text(), "Short.");
  }
  run_a.join();  // A's loop returned after its DISCONNECT
  EXPECT_TRUE(WaitUntil([&] { return b->stats().live_workers == 1; }, 5000));
  EXPECT_EQ(b->stats().workers_expired, 1u);
  // And B keeps serving.
  auto after = std::make_shared<Sink>();
  ASSERT_TRUE(b->Submit(request("hello"), after).ok());
  ASSERT_TRUE(after->WaitDone(10000));
  EXPECT_EQ(after->terminal().finish_reason(), v1::FINISH_STOP);
  other->Stop();
  run_b.join();
}

}  // namespace
}  // namespace gantry
