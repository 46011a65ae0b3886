// Helpers of the broker's tests (broker_test.cc, broker_peers_test.cc): a recording
// sink, brokers on loopback for the test's own fake workers, and waits.
#ifndef GANTRY_ROUTER_BROKER_BROKER_TEST_UTIL_H_
#define GANTRY_ROUTER_BROKER_BROKER_TEST_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "gtest/gtest.h"
#include "router/broker/broker.h"
#include "router/fake_worker_for_test.h"

namespace gantry::broker {

using testing::FakeStep;
using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

class RecordingSink : public StreamSink {
 public:
  void OnEvent(const v1::StreamEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
    if (event.has_terminal()) ++terminals_;
    cv_.notify_all();
  }
  bool WaitTerminal(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return terminals_ > 0; });
  }
  std::vector<v1::StreamEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  int terminals() {
    std::lock_guard<std::mutex> lock(mu_);
    return terminals_;
  }
  v1::Terminal terminal() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.back().terminal();
  }
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& e : events_) out += e.text().text();
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1::StreamEvent> events_;
  int terminals_ = 0;
};

inline std::unique_ptr<Broker> StartBroker(size_t max_queue = 64) {
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.insecure_workers = true;  // plain loopback tcp: this test's own workers
  options.max_queue_per_model = max_queue;
  auto broker = Broker::Start(options);
  EXPECT_TRUE(broker.ok()) << broker.status();
  return std::move(*broker);
}

inline FakeWorkerOptions WorkerOptions(const Broker& broker, std::string id = "host/1/a") {
  FakeWorkerOptions options;
  options.endpoint = broker.endpoint();
  options.worker_id = std::move(id);
  return options;
}

inline bool WaitUntil(const std::function<bool()>& predicate, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return predicate();
}

inline bool WaitLive(const Broker& broker, uint64_t workers) {
  return WaitUntil([&] { return broker.stats().live_workers == workers; }, 5000);
}

inline v1::InferenceRequest Request(const std::string& model = "test-model",
                             v1::PriorityClass priority = v1::PRIORITY_INTERACTIVE) {
  v1::InferenceRequest r;
  r.set_request_id(NewId("req"));
  r.set_model(model);
  r.set_priority(priority);
  auto* m = r.add_messages();
  m->set_role("user");
  m->set_content("hi");
  return r;
}

// A broker that notices a silent worker within 3 x 100 ms, for tests of lost workers.
inline std::unique_ptr<Broker> StartFastBroker(uint32_t cancel_ack_timeout_ms = 0) {
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.insecure_workers = true;
  options.heartbeat_interval_ms = 100;
  options.cancel_ack_timeout_ms = cancel_ack_timeout_ms;
  auto broker = Broker::Start(options);
  EXPECT_TRUE(broker.ok()) << broker.status();
  return std::move(*broker);
}

}  // namespace gantry::broker

#endif  // GANTRY_ROUTER_BROKER_BROKER_TEST_UTIL_H_
