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
//                    the client going away cancels the request on the worker. For the
//                    accessibility class an SSE stream starts at once with the comment
//                    `: admitted <request id>`, and text comes in sentences (Call)
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
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gantry/v1/inference.pb.h"
#include "policy/policy_types.h"
#include "router/broker/broker.h"
#include "router/budget/budget_tracker.h"
#include "router/http/http_server.h"
#include "router/metrics.h"
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
  uint32_t default_max_tokens = policy::kDefaultMaxTokens;
};

// --models FILE: {"models": [{"name", "tokenizer_dir", "context_length",
// "tool_protocol", "default_max_tokens"}]}; a relative tokenizer_dir is relative to the
// file's directory. Errors: NOT_FOUND, invalid_json, invalid_request (naming the field).
absl::StatusOr<std::map<std::string, ModelEntry>> LoadModelCatalog(const std::string& path);

// Where ledger events go. LedgerRecorder writes through ledger::LedgerWriter; tests
// record in memory. Record() must not block for long (LedgerWriter queues).
// Durability (docs/ledger.md, "Durability"): a request's Terminal reaches its client only
// once Mark() (taken after its outcome was recorded) is durable; WhenDurable answers on
// the recorder's thread, without blocking. Healthy() not OK (the spool failed) makes the
// gateway refuse new work with 503 evidence_unavailable. The defaults: in memory, always
// durable.
class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  virtual void Record(const std::string& stream_id, const std::string& type,
                      const std::string& payload_json) = 0;
  // A ticket covering every event recorded so far (0: nothing to wait for).
  virtual uint64_t Mark() { return 0; }
  virtual void WhenDurable(uint64_t ticket, int timeout_ms,
                           std::function<void(absl::Status)> done) {
    (void)ticket;
    (void)timeout_ms;
    done(absl::OkStatus());
  }
  virtual absl::Status Healthy() const { return absl::OkStatus(); }
};

class LedgerRecorder : public EventRecorder {
 public:
  explicit LedgerRecorder(ledger::LedgerWriter* writer) : writer_(writer) {}
  void Record(const std::string& stream_id, const std::string& type,
              const std::string& payload_json) override;
  uint64_t Mark() override;
  void WhenDurable(uint64_t ticket, int timeout_ms,
                   std::function<void(absl::Status)> done) override;
  absl::Status Healthy() const override;

 private:
  ledger::LedgerWriter* writer_;
};

struct GatewayOptions {
  // The policy in force; called once per request (PolicyReloader::Current()).
  std::function<std::shared_ptr<const policy::Snapshot>()> policy;
  std::map<std::string, ModelEntry> models;
  // Not owned; outlives the Gateway, and is stopped (Broker::Stop) before the Gateway
  // goes: a cancelled request's Terminal (which finishes its Call) may still be on its
  // way from the worker when the transports have stopped.
  broker::Broker* broker = nullptr;
  EventRecorder* recorder = nullptr;  // optional; not owned
  // How long a request's Terminal waits for its evidence to be durable; then the client
  // gets 503 evidence_unavailable instead (never a response whose evidence may be lost).
  int evidence_wait_ms = 5000;
  // Budgets and rates per principal (router/budget). gantry-router (router_main.cc)
  // always passes one, so a production router always enforces the policy's budgets;
  // nullptr (no budgets or rates enforced at all) is for tests whose subject is not
  // admission.
  BudgetTracker* budgets = nullptr;
  // Failed policy reloads so far (PolicyReloader::reload_errors()); optional. A failed
  // reload leaves the old policy in force, so this counter is how an operator sees it.
  std::function<uint64_t()> policy_reload_errors;
  const Clock* clock = &SystemClock();
};

class Gateway {
 public:
  explicit Gateway(GatewayOptions options);
  // The HTTP handler (router/http/http_server.h). A streamed response holds its pool
  // thread until it has ended; a whole (non-streamed) response does not: the handler
  // returns after admission, and the response is sent from the thread that delivers the
  // worker's last event (the broker's), saving a thread hand-off.
  void Handle(http::HttpRequest request, std::shared_ptr<http::ResponseWriter> writer);
  // Whether Handle() answers `request` without blocking: a non-streamed chat or
  // Responses request with a small body (8 KiB at most), whose admission (render +
  // count included) is short. The HTTP server may then run it on its loop thread
  // (HttpServerOptions::run_on_loop). Conservative: a body that might ask for a stream
  // (any "stream" in it, or any backslash-u escape that could spell it) says false.
  static bool AnswersWithoutBlocking(const http::HttpRequest& request);
  // The HTTP server's on_headers hook (HttpServerOptions::on_headers), on its loop
  // thread: a chat or Responses request whose key is missing or unknown is refused
  // (401 unauthenticated, counted as Handle counts it) as soon as its header section is
  // complete, so that its body is never read. Cheap: one SHA-256 of the key.
  absl::Status CheckHead(const http::HttpRequest& head);
  // Whether the router can take work now: OK, else evidence_unavailable (the ledger
  // writer cannot keep evidence: Admit refuses every request) or no_worker. /readyz and
  // the gRPC health service answer by it.
  absl::Status Ready() const;
  // The Prometheus text of /metrics.
  std::string MetricsText() const;

  // ---- the pipeline for every transport (HTTP here, gRPC in grpc_gateway.h) ----------

  // The principal of an "Authorization: Bearer KEY" value. Errors: unauthenticated.
  absl::StatusOr<std::string> AuthenticateKey(const policy::Snapshot& snapshot,
                                              absl::string_view authorization) const;

  // What a transport hands over once it has authenticated and parsed a request.
  struct ChatInput {
    std::string api;         // "chat.completions", "responses", "grpc": for the ledger
    std::string user_agent;  // the client's own name and version, for the evidence
    v1::InferenceRequest request;
    bool has_max_tokens = false;  // the client set an output cap
    int64_t received_us = 0;      // when the request arrived (clock()->UnixMicros())
    // The client's own deadline (a gRPC call's), Unix ms; 0: none. The request's
    // deadline is the earlier of it and the policy's request_seconds after arrival.
    uint64_t client_deadline_unix_ms = 0;
  };

  // A request that passed every check and was handed to the broker. Read its events
  // with Next() until the Terminal; the outcome (request.evidence, the budget
  // settlement, request.finished / request.failed) is recorded before Next() returns
  // the Terminal. Destroying an unfinished Call cancels the request on its worker and
  // waits for its Terminal, so every admitted request has a recorded outcome.
  // For a principal of the accessibility class, Next() gives the visible text in
  // sentence-sized chunks (router/sentence_chunker.h) and numbers the events itself.
  // Thread-safety: one thread uses a Call; Cancel() may come from any thread.
  class Call {
   public:
    ~Call();
    const std::string& request_id() const;
    const std::string& model() const;
    // The offered tools the policy removed from the request (advertised_tools: strip).
    const std::vector<std::string>& stripped_tools() const;
    // x-gantry-policy-sha256, x-gantry-policy-rule, x-gantry-request-id and, with a
    // live bundle, x-gantry-bundle-sha256.
    const http::HeaderList& headers() const;
    int64_t created_unix_s() const;
    // The admission class the policy gave the principal.
    v1::PriorityClass priority() const;
    // The next event, or nullopt when `timeout_ms` passes first (or after the end);
    // 0 does not wait.
    std::optional<v1::StreamEvent> Next(int timeout_ms);
    // Instead of a thread waiting in Next(): `ready` is called whenever events may be
    // waiting (at once if some already are), on the thread that delivered them (the
    // broker's, or a Submit or Cancel caller's), never two calls at once; it reads them
    // with Next(0) and returns true once it wants no more calls (after the Terminal).
    // It may destroy this Call when it has seen the Terminal, on another thread before
    // OnEvents returns: the caller must not touch the Call after this call. Call it at
    // most once.
    void OnEvents(std::function<bool()> ready);
    void Cancel(const std::string& reason);
    bool done() const;
    // Whether Next holds back text of an open sentence (accessibility): it releases it
    // after kSentenceHoldMaxMs of silence, at a call of Next. A consumer set with
    // OnEvents must then be run again by that time, since no event may come to run it:
    // Waker() gives a function that runs it (one run at a time with the broker's, as
    // always), valid from any thread for as long as anyone holds it, and doing nothing
    // once the Call is gone.
    bool holding() const;
    std::function<void()> Waker() const;

   private:
    friend class Gateway;
    struct State;
    Call();
    std::optional<v1::StreamEvent> NextFromWorker(int timeout_ms);
    std::unique_ptr<State> s_;
  };

  // Steps 3-8 of the pipeline (policy, model, tools, render + count, context, budgets,
  // admission) for an authenticated principal. A refusal is returned after its
  // admission.decided event was recorded; `headers` then holds the policy headers once
  // the policy was consulted (they belong on the error response too).
  absl::StatusOr<std::unique_ptr<Call>> Admit(
      const std::shared_ptr<const policy::Snapshot>& snapshot, const std::string& principal,
      ChatInput input, http::HeaderList* headers);

  // A served model's facts as a request sees them now: the catalog entry, with a LIVE
  // worker's READY bundle winning where it says (context length, tool protocol, default
  // output cap). nullopt when the router does not serve `model`.
  struct ModelFacts {
    const ModelEntry* entry = nullptr;
    uint32_t context_length = 0;
    std::string tool_protocol;
    uint32_t default_max_tokens = 0;
    std::string bundle_sha256;  // "" without a live bundle
  };
  std::optional<ModelFacts> FactsOf(const std::string& model) const;

  // Cancels the live request `request_id` when `principal` admitted it (whatever the
  // transport). Returns false, and does nothing, when the id is unknown, already
  // finished, or another principal's: a principal cannot even learn that another's
  // request exists.
  bool CancelOwned(const std::string& principal, const std::string& request_id,
                   const std::string& reason);

  // The policy in force and the models served (for transports' model lists).
  std::shared_ptr<const policy::Snapshot> policy() const { return options_.policy(); }
  const std::map<std::string, ModelEntry>& models() const { return options_.models; }
  broker::Broker* broker() const { return options_.broker; }
  const Clock* clock() const { return options_.clock; }
  // Request metrics, for transports to count what they send (errors by code).
  RouterMetrics& metrics() { return metrics_; }

 private:
  enum class Api { kChatCompletions, kResponses };
  static const char* ApiName(Api api);  // "chat.completions", "responses"
  void HandleChat(Api api, const http::HttpRequest& request, http::ResponseWriter& writer,
                  const std::shared_ptr<http::ResponseWriter>& shared_writer);
  void HandleModels(const http::HttpRequest& request, http::ResponseWriter& writer);
  void Fail(http::ResponseWriter& writer, const absl::Status& status,
            const http::HeaderList& extra = {});
  // Records `payload` (as canonical JSON) when a recorder is configured.
  void RecordEvent(const std::string& stream_id, const std::string& type,
                   const json::Value& payload);
  void RecordOutcome(Call::State& call, const v1::Terminal& terminal, int64_t now_us);
  // Decides one worker event before the client may see it: a tool call by the policy
  // (held until the Terminal when allowed; dropped, and the request cancelled on its
  // worker, when denied), any output after a denied call dropped, and the Terminal
  // after one turned into the denial (tool_call_denied), keeping the worker's usage.
  enum class Output { kPass, kHold, kDrop };
  Output DecideOutput(Call::State& call, v1::StreamEvent* event);

  void Unregister(const std::string& request_id);
  // OK, or evidence_unavailable when the recorder is unhealthy.
  absl::Status EvidenceHealthy() const;

  GatewayOptions options_;
  RouterMetrics metrics_;
  // Live admitted requests -> the principal that admitted each (CancelOwned).
  std::mutex live_mu_;
  std::map<std::string, std::string> live_owner_;
  std::atomic<uint64_t> requests_total_{0};
  std::atomic<uint64_t> responses_2xx_{0};
  std::atomic<uint64_t> responses_4xx_{0};
  std::atomic<uint64_t> responses_5xx_{0};
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_GATEWAY_H_
