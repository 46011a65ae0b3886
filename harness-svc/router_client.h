// ModelClient over the router's OpenAI HTTP API: POST /v1/chat/completions, not
// streamed, with the harness's own bearer key (its service account in the policy).
// The reply is read strictly; anything malformed is an error, never a guess.
//
// Thread-safety: Complete may be called from several threads.
#ifndef GANTRY_HARNESS_SVC_ROUTER_CLIENT_H_
#define GANTRY_HARNESS_SVC_ROUTER_CLIENT_H_

#include <string>

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

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_ROUTER_CLIENT_H_
