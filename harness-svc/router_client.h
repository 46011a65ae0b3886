// ModelClient over the router's OpenAI HTTP API: POST /v1/chat/completions, streamed
// (`stream: true`, `stream_options.include_usage`), with the harness's own bearer key
// (its service account in the policy). The stream is watched as it arrives to time the
// first token (the first chunk whose delta carries content, reasoning or a tool call),
// then read whole, strictly: anything malformed, an error event, or a stream that ends
// before `data: [DONE]` is an error, never a guess.
//
// Thread-safety: Complete may be called from several threads.
#ifndef GANTRY_HARNESS_SVC_ROUTER_CLIENT_H_
#define GANTRY_HARNESS_SVC_ROUTER_CLIENT_H_

#include <string>

#include "absl/strings/string_view.h"

#include "harness-svc/agent_loop.h"

namespace gantry::harness {

class RouterClient : public ModelClient {
 public:
  // `base_url`: "http://127.0.0.1:8080".
  RouterClient(std::string base_url, std::string api_key)
      : base_url_(std::move(base_url)), api_key_(std::move(api_key)) {}
  // Errors: the router's error with its reason (HTTP status in the message), or
  // UNAVAILABLE / DEADLINE_EXCEEDED / DATA_LOSS ("protocol_error") from the transport
  // and a reply that is not a chat.completion.
  absl::StatusOr<ModelReply> Complete(const json::Value& body, int timeout_ms) override;

 private:
  std::string base_url_;
  std::string api_key_;
};

// Reads a non-streamed chat.completion body (exposed for tests).
absl::StatusOr<ModelReply> ParseChatCompletion(const std::string& body);

// Reads a whole streamed body: SSE `data:` events of chat.completion.chunk objects,
// ending with `data: [DONE]` (docs/router.md). Tool-call deltas are joined by index.
// Errors: DATA_LOSS "protocol_error" (malformed, or no [DONE]); an error event is
// returned as that error's reason and message (INTERNAL).
absl::StatusOr<ModelReply> ParseChatStream(absl::string_view body);

// Whether SSE event text `event` (one event, without the blank line) is a chunk whose
// delta carries content, reasoning or a tool call: the first token of a turn.
bool IsFirstTokenEvent(absl::string_view event);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_ROUTER_CLIENT_H_
