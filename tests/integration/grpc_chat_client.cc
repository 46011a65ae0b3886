// A tiny gRPC Gateway client for shell tests (grpc_cli is not available offline):
//
//   grpc_chat_client [--ca CERT.pem] HOST:PORT KEY chat MODEL TEXT [--cancel-after-text]
//   grpc_chat_client [--ca CERT.pem] HOST:PORT KEY models
//   grpc_chat_client [--ca CERT.pem] HOST:PORT KEY flood STREAMS BYTES
//
// With --ca the channel is TLS, trusting CERT.pem; without it, plain text.
// chat prints one line per StreamEvent: "admitted REQ_ID PRIORITY", "text JSON_STRING",
// "reasoning JSON_STRING", "tool_call NAME ARGS", "usage COMPLETION_TOKENS",
// "terminal FINISH_REASON REASON"; models prints "model NAME CONTEXT DEFAULT_MAX_TOKENS
// LIVE_WORKERS TOOL_PROTOCOL" per model. Both end with "status CODE ERROR_CODE" (CODE
// the gRPC code number, ERROR_CODE the trailing x-gantry-error-code or "-"). Exit
// status 0 when the call ended OK, 1 otherwise, 2 on a bad command line.
// flood is a hostile client: STREAMS Chat calls at once on one connection, each a
// request of about BYTES bytes of text; it prints "COUNT status CODE ERROR_CODE" per
// distinct outcome. KEY "-" sends no authorization metadata.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "gantry/v1/gateway.grpc.pb.h"

namespace {

using gantry::v1::StreamEvent;

std::string Quoted(const std::string& text) {
  return gantry::json::DumpCompact(gantry::json::Value::String(text));
}

std::string Outcome(const grpc::Status& status, const grpc::ClientContext& ctx) {
  const auto& trailing = ctx.GetServerTrailingMetadata();
  auto it = trailing.find("x-gantry-error-code");
  std::string code = it == trailing.end() ? "-" : std::string(it->second.data(), it->second.size());
  return "status " + std::to_string(static_cast<int>(status.error_code())) + " " + code;
}

int Finish(const grpc::Status& status, const grpc::ClientContext& ctx) {
  std::printf("%s\n", Outcome(status, ctx).c_str());
  return status.ok() ? 0 : 1;
}

void Authorize(grpc::ClientContext* ctx, const std::string& key) {
  if (key != "-") ctx->AddMetadata("authorization", "Bearer " + key);
}

int Flood(gantry::v1::Gateway::Stub* stub, const std::string& key, int streams, size_t bytes) {
  gantry::v1::ChatRequest chat;
  chat.mutable_request()->set_model("any");
  auto* message = chat.mutable_request()->add_messages();
  message->set_role("user");
  message->set_content(std::string(bytes, 'a'));
  std::mutex mu;
  std::map<std::string, int> outcomes;
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&] {
      grpc::ClientContext ctx;
      Authorize(&ctx, key);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      auto reader = stub->Chat(&ctx, chat);
      StreamEvent e;
      while (reader->Read(&e)) {
      }
      grpc::Status status = reader->Finish();
      std::lock_guard<std::mutex> lock(mu);
      ++outcomes[Outcome(status, ctx)];
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& [outcome, count] : outcomes) std::printf("%d %s\n", count, outcome.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (argc > 2 && std::string(argv[1]) == "--ca") {
    std::ifstream in(argv[2]);
    std::stringstream pem;
    pem << in.rdbuf();
    grpc::SslCredentialsOptions trust;
    trust.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(trust);
    argc -= 2;
    argv += 2;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: grpc_chat_client [--ca CERT.pem] HOST:PORT KEY chat MODEL TEXT "
                         "[--cancel-after-text] | [--ca CERT.pem] HOST:PORT KEY models | "
                         "[--ca CERT.pem] HOST:PORT KEY flood STREAMS BYTES\n");
    return 2;
  }
  const std::string command = argv[3];
  auto stub = gantry::v1::Gateway::NewStub(
      grpc::CreateChannel(argv[1], credentials));
  if (command == "flood") {
    if (argc < 6) return 2;
    return Flood(stub.get(), argv[2], std::atoi(argv[4]), std::strtoull(argv[5], nullptr, 10));
  }
  grpc::ClientContext ctx;
  Authorize(&ctx, argv[2]);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (command == "models") {
    gantry::v1::ListModelsResponse response;
    grpc::Status status = stub->ListModels(&ctx, {}, &response);
    for (const auto& m : response.models()) {
      std::printf("model %s %u %u %u %s\n", m.name().c_str(), m.context_length(),
                  m.default_max_tokens(), m.live_workers(),
                  m.tool_protocol().empty() ? "-" : m.tool_protocol().c_str());
    }
    return Finish(status, ctx);
  }
  if (command != "chat" || argc < 6) return 2;
  const bool cancel_after_text = argc > 6 && std::string(argv[6]) == "--cancel-after-text";
  gantry::v1::ChatRequest chat;
  chat.set_include_usage(true);
  chat.mutable_request()->set_model(argv[4]);
  auto* message = chat.mutable_request()->add_messages();
  message->set_role("user");
  message->set_content(argv[5]);
  auto reader = stub->Chat(&ctx, chat);
  StreamEvent e;
  while (reader->Read(&e)) {
    switch (e.event_case()) {
      case StreamEvent::kAdmitted:
        std::printf("admitted %s %s\n", e.request_id().c_str(),
                    gantry::v1::PriorityClass_Name(e.admitted().priority()).c_str());
        break;
      case StreamEvent::kText: std::printf("text %s\n", Quoted(e.text().text()).c_str()); break;
      case StreamEvent::kReasoning:
        std::printf("reasoning %s\n", Quoted(e.reasoning().text()).c_str());
        break;
      case StreamEvent::kToolCall:
        std::printf("tool_call %s %s\n", e.tool_call().call().name().c_str(),
                    e.tool_call().call().arguments_json().c_str());
        break;
      case StreamEvent::kUsage: std::printf("usage %u\n", e.usage().completion_tokens()); break;
      case StreamEvent::kTerminal:
        std::printf("terminal %s %s\n",
                    gantry::v1::FinishReason_Name(e.terminal().finish_reason()).c_str(),
                    e.terminal().status().reason().empty() ? "-"
                                                           : e.terminal().status().reason().c_str());
        break;
      default: std::printf("unknown\n");
    }
    std::fflush(stdout);
    if (cancel_after_text && e.has_text()) ctx.TryCancel();
  }
  return Finish(reader->Finish(), ctx);
}
