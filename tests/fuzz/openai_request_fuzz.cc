// Fuzz target: the OpenAI chat-completions body mapping (HTTP bodies from any client).
// Invariants: never crashes; an accepted body yields a request with at least one
// message, and its serialized InferenceRequest parses back.
#include <cstdlib>

#include "router/openai/chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = gantry::openai::ParseChatCompletionRequest(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  if (parsed->request.messages_size() == 0) std::abort();
  gantry::v1::InferenceRequest again;
  if (!again.ParseFromString(parsed->request.SerializeAsString())) std::abort();
  return 0;
}
