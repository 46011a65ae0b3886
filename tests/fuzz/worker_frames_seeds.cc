// Writes the seed corpus of worker_frames_fuzz: one valid message of every command in
// the fuzz input layout (fuzz_input.h). Run: bazel run //tests/fuzz:worker_frames_seeds -- DIR
#include <cstdio>
#include <string>
#include <vector>

#include "proto/worker_frames.h"

namespace {

using gantry::wire::WorkerMessage;

void Write(const std::string& dir, const std::string& name, bool to_router,
           const WorkerMessage& message) {
  std::string bytes(1, to_router ? '\x01' : '\x00');
  std::vector<std::string> frames = gantry::wire::EncodeFrames(message);
  for (size_t i = 0; i < frames.size(); ++i) {
    const bool last = i + 1 == frames.size();
    bytes.push_back(last ? static_cast<char>(255) : static_cast<char>(frames[i].size()));
    bytes += frames[i];
  }
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (!f) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::string dir = argv[1];
  gantry::v1::Ready ready;
  ready.set_protocol_version(1);
  ready.set_worker_id("h/1/x");
  ready.set_slots(2);
  ready.set_free_slots(1);
  ready.set_heartbeat_interval_ms(1000);
  ready.mutable_bundle()->set_model("m");
  ready.mutable_bundle()->set_identity_sha256("ab");
  Write(dir, "ready", true, ready);
  gantry::v1::Request request;
  request.mutable_request()->set_request_id("req_1");
  auto* message = request.mutable_request()->add_messages();
  message->set_role("user");
  message->set_content("hi");
  request.mutable_request()->add_tools()->set_name("read_file");
  Write(dir, "request", false, request);
  gantry::v1::Partial partial;
  partial.set_request_id("req_1");
  auto* event = partial.add_events();
  event->set_request_id("req_1");
  event->mutable_text()->set_text("x");
  Write(dir, "partial", true, partial);
  gantry::v1::Final final;
  final.set_request_id("req_1");
  final.mutable_terminal()->set_request_id("req_1");
  final.mutable_terminal()->mutable_terminal()->mutable_status()->set_code("OK");
  Write(dir, "final", true, final);
  gantry::v1::Heartbeat heartbeat;
  heartbeat.set_free_slots(1);
  heartbeat.add_active_request_ids("req_1");
  Write(dir, "heartbeat", true, heartbeat);
  gantry::v1::Cancel cancel;
  cancel.set_request_id("req_1");
  Write(dir, "cancel", false, cancel);
  gantry::v1::Disconnect disconnect;
  disconnect.mutable_reason()->set_code("UNAVAILABLE");
  Write(dir, "disconnect", true, disconnect);
  return 0;
}
