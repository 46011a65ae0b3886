// Fuzz target: the gRPC Gateway's Chat request check (router/grpc_chat_request.h): a
// gantry.v1.ChatRequest from any client, as protobuf decodes it from the wire.
// Invariants: never crashes; an accepted request has a model and at least one message,
// carries none of the fields the router sets, every replayed tool call's arguments are
// a JSON object text, and it serializes and parses back.
#include <cstdlib>

#include "common/json.h"
#include "router/grpc_chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gantry::v1::ChatRequest chat;
  if (!chat.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto checked = gantry::router::CheckGrpcChatRequest(chat);
  if (!checked.ok()) return 0;
  const gantry::v1::InferenceRequest& req = checked->request;
  if (req.model().empty() || req.messages_size() == 0) std::abort();
  if (!req.request_id().empty() || !req.principal().empty() || req.priority() != 0 ||
      req.deadline_unix_ms() != 0) {
    std::abort();
  }
  for (const auto& m : req.messages()) {
    for (const auto& call : m.tool_calls()) {
      auto args = gantry::json::Parse(call.arguments_json());
      if (!args.ok() || !args->is_object()) std::abort();
    }
  }
  gantry::v1::InferenceRequest again;
  if (!again.ParseFromString(req.SerializeAsString())) std::abort();
  return 0;
}
