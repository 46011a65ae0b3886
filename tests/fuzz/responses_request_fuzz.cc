// Fuzz target: the OpenAI Responses API body mapping (POST /v1/responses from any
// client). Invariants: never crashes; an accepted body yields a request with at least
// one message, every tool result in it answers an earlier tool call, and its serialized
// InferenceRequest parses back.
#include <cstdlib>
#include <set>
#include <string>

#include "router/openai/responses_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = gantry::openai::ParseResponsesRequest(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  const gantry::v1::InferenceRequest& request = parsed->chat.request;
  if (request.messages_size() == 0) std::abort();
  std::set<std::string> calls;
  for (const auto& m : request.messages()) {
    for (const auto& call : m.tool_calls()) calls.insert(call.id());
    if (m.role() == "tool" && calls.count(m.tool_call_id()) == 0) std::abort();
  }
  gantry::v1::InferenceRequest again;
  if (!again.ParseFromString(request.SerializeAsString())) std::abort();
  return 0;
}
