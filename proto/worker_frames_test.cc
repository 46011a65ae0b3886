#include "proto/worker_frames.h"

#include <gtest/gtest.h>

#include "common/status.h"

namespace gantry::wire {
namespace {

v1::Ready SampleReady() {
  v1::Ready ready;
  ready.set_protocol_version(kWorkerProtocolVersion);
  ready.set_worker_id("host/42/abc");
  ready.set_slots(4);
  ready.set_free_slots(4);
  ready.set_heartbeat_interval_ms(kHeartbeatIntervalMs);
  ready.mutable_bundle()->set_model("qwen3-demo");
  ready.mutable_bundle()->set_identity_sha256(std::string(64, 'a'));
  return ready;
}

v1::Final SampleFinal(const std::string& id) {
  v1::Final final;
  final.set_request_id(id);
  final.mutable_terminal()->set_request_id(id);
  final.mutable_terminal()->set_seq(3);
  auto* terminal = final.mutable_terminal()->mutable_terminal();
  terminal->set_finish_reason(v1::FINISH_STOP);
  terminal->mutable_status()->set_code("OK");
  terminal->mutable_usage()->set_prompt_tokens(17);
  return final;
}

void ExpectProtocolError(const absl::StatusOr<WorkerMessage>& decoded, absl::string_view needle) {
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(decoded.status()), "protocol_error");
  EXPECT_NE(decoded.status().message().find(needle), absl::string_view::npos)
      << decoded.status().message();
}

TEST(WorkerFramesTest, ReadyRoundTrip) {
  auto frames = EncodeFrames(SampleReady());
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0], "");
  EXPECT_EQ(frames[1], "GNTW01");
  EXPECT_EQ(frames[2], std::string(1, '\x01'));
  auto decoded = DecodeFrames(frames, Direction::kWorkerToRouter);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(*decoded));
  EXPECT_EQ(std::get<v1::Ready>(*decoded).worker_id(), "host/42/abc");
  EXPECT_EQ(std::get<v1::Ready>(*decoded).bundle().model(), "qwen3-demo");
}

TEST(WorkerFramesTest, EveryCommandHasItsByteAndName) {
  EXPECT_EQ(CommandOf(v1::Ready()), Command::kReady);
  EXPECT_EQ(CommandOf(v1::Request()), Command::kRequest);
  EXPECT_EQ(CommandOf(v1::Partial()), Command::kPartial);
  EXPECT_EQ(CommandOf(v1::Final()), Command::kFinal);
  EXPECT_EQ(CommandOf(v1::Heartbeat()), Command::kHeartbeat);
  EXPECT_EQ(CommandOf(v1::Disconnect()), Command::kDisconnect);
  EXPECT_EQ(CommandOf(v1::Cancel()), Command::kCancel);
  EXPECT_STREQ(CommandName(Command::kCancel), "CANCEL");
  EXPECT_STREQ(CommandName(static_cast<Command>(0x42)), "UNKNOWN");
}

TEST(WorkerFramesTest, DirectionIsEnforced) {
  // A worker may not send REQUEST or CANCEL; the router may not send READY or FINAL.
  v1::Request request;
  request.mutable_request()->set_request_id("req_1");
  ExpectProtocolError(DecodeFrames(EncodeFrames(request), Direction::kWorkerToRouter),
                      "REQUEST is not allowed from a worker");
  ExpectProtocolError(DecodeFrames(EncodeFrames(SampleReady()), Direction::kRouterToWorker),
                      "READY is not allowed from the router");
  EXPECT_TRUE(DecodeFrames(EncodeFrames(v1::Heartbeat()), Direction::kRouterToWorker).ok());
  EXPECT_TRUE(DecodeFrames(EncodeFrames(v1::Heartbeat()), Direction::kWorkerToRouter).ok());
}

TEST(WorkerFramesTest, MalformedFramesAreRejectedWithReasons) {
  auto good = EncodeFrames(SampleFinal("req_1"));
  ASSERT_TRUE(DecodeFrames(good, Direction::kWorkerToRouter).ok());

  ExpectProtocolError(DecodeFrames({}, Direction::kWorkerToRouter), "expected 4 frames, got 0");
  auto three = good;
  three.pop_back();
  ExpectProtocolError(DecodeFrames(three, Direction::kWorkerToRouter), "expected 4 frames");
  auto no_delim = good;
  no_delim[0] = "x";
  ExpectProtocolError(DecodeFrames(no_delim, Direction::kWorkerToRouter), "delimiter");
  auto bad_sig = good;
  bad_sig[1] = "MDPW01";
  ExpectProtocolError(DecodeFrames(bad_sig, Direction::kWorkerToRouter), "signature");
  auto long_cmd = good;
  long_cmd[2] = "\x04\x04";
  ExpectProtocolError(DecodeFrames(long_cmd, Direction::kWorkerToRouter), "one command byte");
  auto unknown_cmd = good;
  unknown_cmd[2] = std::string(1, '\x09');
  ExpectProtocolError(DecodeFrames(unknown_cmd, Direction::kWorkerToRouter), "unknown command");
  auto zero_cmd = good;
  zero_cmd[2] = std::string(1, '\0');
  ExpectProtocolError(DecodeFrames(zero_cmd, Direction::kWorkerToRouter), "unknown command");
  auto garbage = good;
  garbage[3] = "\xff\xff\xff\xff\xff";
  ExpectProtocolError(DecodeFrames(garbage, Direction::kWorkerToRouter), "not a valid gantry.v1.Final");
  auto huge = good;
  huge[3] = std::string(kMaxBodyBytes + 1, '\0');
  ExpectProtocolError(DecodeFrames(huge, Direction::kWorkerToRouter), "exceeds");
}

TEST(WorkerFramesTest, RequiredFieldsAreChecked) {
  v1::Ready ready = SampleReady();
  ready.set_protocol_version(2);
  ExpectProtocolError(DecodeFrames(EncodeFrames(ready), Direction::kWorkerToRouter),
                      "protocol_version 2");
  ready = SampleReady();
  ready.set_free_slots(5);
  ExpectProtocolError(DecodeFrames(EncodeFrames(ready), Direction::kWorkerToRouter),
                      "free_slots > slots");
  ready = SampleReady();
  ready.set_heartbeat_interval_ms(0);
  ExpectProtocolError(DecodeFrames(EncodeFrames(ready), Direction::kWorkerToRouter),
                      "heartbeat_interval_ms");
  ready = SampleReady();
  ready.clear_bundle();
  ExpectProtocolError(DecodeFrames(EncodeFrames(ready), Direction::kWorkerToRouter),
                      "bundle identity");

  v1::Final final = SampleFinal("req_1");
  final.mutable_terminal()->set_request_id("req_2");
  ExpectProtocolError(DecodeFrames(EncodeFrames(final), Direction::kWorkerToRouter),
                      "another request_id");
  final = SampleFinal("req_1");
  final.mutable_terminal()->mutable_text()->set_text("not terminal");
  ExpectProtocolError(DecodeFrames(EncodeFrames(final), Direction::kWorkerToRouter),
                      "without terminal");

  v1::Partial partial;
  partial.set_request_id("req_1");
  auto* event = partial.add_events();
  event->set_request_id("req_1");
  event->mutable_terminal();
  ExpectProtocolError(DecodeFrames(EncodeFrames(partial), Direction::kWorkerToRouter),
                      "PARTIAL carries a terminal");

  ExpectProtocolError(DecodeFrames(EncodeFrames(v1::Cancel()), Direction::kRouterToWorker),
                      "CANCEL without request_id");
  ExpectProtocolError(DecodeFrames(EncodeFrames(v1::Request()), Direction::kRouterToWorker),
                      "REQUEST without request_id");
}

}  // namespace
}  // namespace gantry::wire
