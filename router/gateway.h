// The gateway's enforcement pipeline: the one path every OpenAI HTTP request takes.
//
//   POST /v1/chat/completions and POST /v1/responses (the same pipeline; only the body
//   mapping and the rendering of the result differ)
//     authenticate   Bearer key -> principal (SHA-256 of the key looked up in the
//                    policy snapshot, then compared in constant time)   401 unauthenticated
//     parse          OpenAI body -> InferenceRequest (openai/chat_request.h,
//                    openai/responses_request.h)
//                                                         400 invalid_json / invalid_request
//     policy         Decide(); deny -> 403 policy_denied naming the rule; clamp -> the
//                    clamped values are used and the response carries
//                    x-gantry-policy-rule and x-gantry-policy-sha256
//     model          the model's entry (counter, context, tool protocol)  404 model_not_found
//     tools          tools sent to a bundle without a declared tool protocol
//                                                   400 tool_protocol_undeclared (before rendering)
//     render+count   the model's chat template and tokenizer (PromptCounter)
//                                                                  422 template_render_failed
//     context        prompt + max_tokens > context_length     400 context_length_exceeded
//     admission      Broker::Submit                      503 no_worker / 429 queue_full
//     stream back    SSE chunks or one chat.completion; exactly one terminal outcome;
//                    the client going away cancels the request on the worker
//   GET /v1/models (authenticated), /healthz, /readyz, /metrics (Prometheus text).
//
// The bundle facts (context length, tool protocol) come from a LIVE worker's READY
// when there is one, else from the model catalog (--models) until bundles exist.
// Ledger events (when a recorder is configured): admission.decided (every decision,
// allowed or not, once the principal is known), dispatch.sent (the request was handed
// to the broker), request.evidence (what the request was and how it went: client,
// bundle, prompt token count and hash, advertised tools, output cap, tool calls issued
// and answered, timings; docs/tool-protocols.md, "Evidence"), request.finished /
// request.failed.
//
// Thread-safety: Handle() runs on many HTTP pool threads at once; a Gateway is
// immutable after construction apart from its atomic counters.
#ifndef GANTRY_ROUTER_GATEWAY_H_
#define GANTRY_ROUTER_GATEWAY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gantry/v1/inference.pb.h"
#include "policy/policy_types.h"
#include "router/broker/broker.h"
#include "router/budget/budget_tracker.h"
#include "router/http/http_server.h"
#include "router/request_evidence.h"

namespace gantry {
namespace tokenizer {
class Tokenizer;
}
namespace ledger {
class LedgerWriter;
}
}  // namespace gantry

namespace gantry::router {

// Renders a request with a model's chat template and counts its tokens.
// Thread-safety: Render() is called from many threads at once.
class PromptCounter {
 public:
  virtual ~PromptCounter() = default;
  // Errors: INVALID_ARGUMENT template_render_failed (the template rejected the
  // messages), invalid_request (text the tokenizer cannot encode).
  virtual absl::StatusOr<RenderedPrompt> Render(const v1::InferenceRequest& request) const = 0;
};

// The real counter: tokenizer-svc's ChatTemplate + Tokenizer (tokenizer.json and
// tokenizer_config.json of one directory, or texts for tests).
absl::StatusOr<std::shared_ptr<const PromptCounter>> LoadPromptCounter(const std::string& dir);
absl::StatusOr<std::shared_ptr<const PromptCounter>> MakePromptCounter(
    absl::string_view template_source, absl::string_view tokenizer_json,
    absl::string_view tokenizer_config_json);

// The conversation object HF's apply_chat_template receives for `request`
// (messages, tools, add_generation_prompt: true, template kwargs).
std::string ConversationJsonForTest(const v1::InferenceRequest& request);

struct ModelEntry {
  std::string name;
  std::shared_ptr<const PromptCounter> counter;
  uint32_t context_length = 0;
  std::string tool_protocol;  // "" when the bundle declares none
  uint32_t default_max_tokens = 1024;
};

// --models FILE: {"models": [{"name", "tokenizer_dir", "context_length",
// "tool_protocol", "default_max_tokens"}]}; a relative tokenizer_dir is relative to the
// file's directory. Errors: NOT_FOUND, invalid_json, invalid_request (naming the field).
absl::StatusOr<std::map<std::string, ModelEntry>> LoadModelCatalog(const std::string& path);

// Where ledger events go. LedgerRecorder writes through ledger::LedgerWriter; tests
// record in memory. Record() must not block for long (LedgerWriter queues).
class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  virtual void Record(const std::string& stream_id, const std::string& type,
                      const std::string& payload_json) = 0;
};

class LedgerRecorder : public EventRecorder {
 public:
  explicit LedgerRecorder(ledger::LedgerWriter* writer) : writer_(writer) {}
  void Record(const std::string& stream_id, const std::string& type,
              const std::string& payload_json) override;

 private:
  ledger::LedgerWriter* writer_;
};

struct GatewayOptions {
  // The policy in force; called once per request (PolicyReloader::Current()).
  std::function<std::shared_ptr<const policy::Snapshot>()> policy;
  std::map<std::string, ModelEntry> models;
  broker::Broker* broker = nullptr;  // not owned; outlives the Gateway
  EventRecorder* recorder = nullptr;  // optional; not owned
  // Budgets and rates per principal (router/budget); optional (none: not enforced).
  BudgetTracker* budgets = nullptr;
  // Failed policy reloads so far (PolicyReloader::reload_errors()); optional. A failed
  // reload leaves the old policy in force, so this counter is how an operator sees it.
  std::function<uint64_t()> policy_reload_errors;
  const Clock* clock = &SystemClock();
};

class Gateway {
 public:
  explicit Gateway(GatewayOptions options);
  // The HTTP handler (router/http/http_server.h). Blocks its pool thread until the
  // response has ended.
  void Handle(http::HttpRequest request, std::shared_ptr<http::ResponseWriter> writer);
  // The Prometheus text of /metrics.
  std::string MetricsText() const;

 private:
  enum class Api { kChatCompletions, kResponses };
  static const char* ApiName(Api api);  // "chat.completions", "responses"
  void HandleChat(Api api, const http::HttpRequest& request, http::ResponseWriter& writer,
                  const std::shared_ptr<http::ResponseWriter>& shared_writer);
  void HandleModels(const http::HttpRequest& request, http::ResponseWriter& writer);
  void Fail(http::ResponseWriter& writer, const absl::Status& status,
            const http::HeaderList& extra = {});
  void RecordEvent(const std::string& stream_id, const std::string& type,
                   const std::string& payload_json);

  GatewayOptions options_;
  std::atomic<uint64_t> requests_total_{0};
  std::atomic<uint64_t> responses_2xx_{0};
  std::atomic<uint64_t> responses_4xx_{0};
  std::atomic<uint64_t> responses_5xx_{0};
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_GATEWAY_H_
