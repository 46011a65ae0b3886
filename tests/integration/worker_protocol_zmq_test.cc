// GNTW/1 frames over a real ZeroMQ ROUTER/DEALER pair on tcp loopback: the router side
// as the broker will hold it (ROUTER_MANDATORY), the worker side as a worker will.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/status.h"
#include "common/zmq_io.h"
#include "proto/worker_frames.h"

namespace gantry {
namespace {

using wire::DecodeFrames;
using wire::Direction;
using wire::EncodeFrames;
using wire::WorkerMessage;

constexpr int kWaitMs = 5000;

class WorkerProtocolZmqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = LastEndpoint(router_);
    worker_.set(zmq::sockopt::routing_id, "worker-1");
    worker_.set(zmq::sockopt::linger, 0);
    worker_.connect(endpoint_);
  }

  // Router side: receive, split the identity frame, decode.
  absl::StatusOr<WorkerMessage> RouterReceive(std::string* identity) {
    GANTRY_ASSIGN_OR_RETURN(std::vector<std::string> frames, RecvFrames(router_, kWaitMs));
    if (frames.empty()) return absl::InternalError("no identity frame");
    *identity = frames.front();
    frames.erase(frames.begin());
    return DecodeFrames(frames, Direction::kWorkerToRouter);
  }

  absl::Status RouterSend(const std::string& identity, const WorkerMessage& message) {
    std::vector<std::string> frames = EncodeFrames(message);
    frames.insert(frames.begin(), identity);
    return SendFrames(router_, frames);
  }

  absl::StatusOr<WorkerMessage> WorkerReceive() {
    GANTRY_ASSIGN_OR_RETURN(std::vector<std::string> frames, RecvFrames(worker_, kWaitMs));
    return DecodeFrames(frames, Direction::kRouterToWorker);
  }

  zmq::context_t context_;
  zmq::socket_t router_{context_, zmq::socket_type::router};
  zmq::socket_t worker_{context_, zmq::socket_type::dealer};
  std::string endpoint_;
};

v1::Ready MakeReady() {
  v1::Ready ready;
  ready.set_protocol_version(wire::kWorkerProtocolVersion);
  ready.set_worker_id("test/1/w");
  ready.set_slots(2);
  ready.set_free_slots(2);
  ready.set_heartbeat_interval_ms(wire::kHeartbeatIntervalMs);
  ready.mutable_bundle()->set_model("demo");
  ready.mutable_bundle()->set_identity_sha256(std::string(64, 'b'));
  return ready;
}

TEST_F(WorkerProtocolZmqTest, ReadyRequestPartialFinalRoundTrip) {
  ASSERT_TRUE(SendFrames(worker_, EncodeFrames(MakeReady())).ok());
  std::string identity;
  auto ready = RouterReceive(&identity);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(identity, "worker-1");
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(*ready));
  EXPECT_EQ(std::get<v1::Ready>(*ready).slots(), 2u);

  v1::Request request;
  request.mutable_request()->set_request_id("req_000000000000000000000001");
  request.mutable_request()->set_model("demo");
  auto* message = request.mutable_request()->add_messages();
  message->set_role("user");
  message->set_content("héllo <|im_start|> \xF0\x9F\x98\x80");
  ASSERT_TRUE(RouterSend(identity, request).ok());

  auto got = WorkerReceive();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(std::holds_alternative<v1::Request>(*got));
  const auto& inference = std::get<v1::Request>(*got).request();
  EXPECT_EQ(inference.request_id(), "req_000000000000000000000001");
  EXPECT_EQ(inference.messages(0).content(), message->content());

  v1::Partial partial;
  partial.set_request_id(inference.request_id());
  for (int i = 0; i < 3; ++i) {
    auto* event = partial.add_events();
    event->set_request_id(inference.request_id());
    event->set_seq(i);
    event->mutable_text()->set_text("tok" + std::to_string(i));
  }
  ASSERT_TRUE(SendFrames(worker_, EncodeFrames(partial)).ok());
  v1::Final final;
  final.set_request_id(inference.request_id());
  final.mutable_terminal()->set_request_id(inference.request_id());
  final.mutable_terminal()->set_seq(3);
  final.mutable_terminal()->mutable_terminal()->set_finish_reason(v1::FINISH_LENGTH);
  final.mutable_terminal()->mutable_terminal()->mutable_status()->set_code("OK");
  ASSERT_TRUE(SendFrames(worker_, EncodeFrames(final)).ok());

  auto got_partial = RouterReceive(&identity);
  ASSERT_TRUE(got_partial.ok()) << got_partial.status();
  const auto& events = std::get<v1::Partial>(*got_partial).events();
  ASSERT_EQ(events.size(), 3);
  EXPECT_EQ(events[2].text().text(), "tok2");
  auto got_final = RouterReceive(&identity);
  ASSERT_TRUE(got_final.ok()) << got_final.status();
  EXPECT_EQ(std::get<v1::Final>(*got_final).terminal().terminal().finish_reason(),
            v1::FINISH_LENGTH);
}

TEST_F(WorkerProtocolZmqTest, MalformedFramesAreRejectedAndTheSocketKeepsWorking) {
  const std::vector<std::vector<std::string>> bad = {
      {"", "GNTW01", "\x01", "\xff\xff\xff\xff"},           // body is not a Ready
      {"", "GNTW00", "\x01", ""},                           // wrong signature
      {"", "GNTW01", "\x7f", ""},                           // unknown command
      {"", "GNTW01"},                                       // too few frames
      {"", "GNTW01", std::string(1, '\x02'), ""},           // REQUEST from a worker
      {"garbage"},                                          // not the protocol at all
  };
  std::string identity;
  for (const auto& frames : bad) {
    ASSERT_TRUE(SendFrames(worker_, frames).ok());
    auto decoded = RouterReceive(&identity);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(ReasonOf(decoded.status()), "protocol_error") << decoded.status();
  }
  // Too many frames: over the receive limit, drained, reported.
  std::vector<std::string> many(20, "x");
  ASSERT_TRUE(SendFrames(worker_, many).ok());
  auto over = RecvFrames(router_, kWaitMs);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(ReasonOf(over.status()), "protocol_error");

  // The same connection still carries a valid READY afterwards.
  ASSERT_TRUE(SendFrames(worker_, EncodeFrames(MakeReady())).ok());
  auto ready = RouterReceive(&identity);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(std::holds_alternative<v1::Ready>(*ready));
}

TEST_F(WorkerProtocolZmqTest, UnroutableSendIsAnErrorNotASilentDrop) {
  v1::Cancel cancel;
  cancel.set_request_id("req_x");
  absl::Status status = RouterSend("no-such-worker", cancel);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(status), "worker_lost");
}

TEST_F(WorkerProtocolZmqTest, ReceiveTimesOutCleanly) {
  auto frames = RecvFrames(router_, 50);
  EXPECT_EQ(frames.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace gantry
