// The gateway's enforcement pipeline: the one path every request takes, whatever its
// transport (HTTP in http_gateway.h, gRPC in grpc_gateway.h). A transport
// authenticates (AuthenticateKey) and maps its request onto a v1::InferenceRequest,
// then Admit runs the rest:
//
//     names          the model, tool and kwarg names bounded (1 MiB names filled the
//                    ledger of a red team)                         invalid_request
//     policy         Decide(); deny -> policy_denied naming the rule; clamp -> the
//                    clamped values are used and the answer carries
//                    x-gantry-policy-rule and x-gantry-policy-sha256
//     model          the model's entry (counter, context, tool protocol)  model_not_found
//     tools          tools sent to a bundle without a declared tool protocol
//                                             tool_protocol_undeclared (before rendering)
//     rates          concurrency, requests per minute: charged for every request
//                    after the policy (denials too), refused here, before rendering
//                                                                   rate_limited
//     render+count   the model's chat template and tokenizer (PromptCounter), counted
//                    no further than the context      template_render_failed /
//                                                                 context_length_exceeded
//     context        prompt + max_tokens > context_length         context_length_exceeded
//     budgets        tokens of the day and month, reserved        budget_exhausted
//     admission      Broker::Submit                               no_worker / queue_full
//
// and the admitted Call gives the events: exactly one Terminal, the client going away
// cancels the request on the worker, tool calls decided by the policy before they go
// out, and for the accessibility class text in sentences.
//
// The bundle facts (context length, tool protocol) come from a LIVE worker's READY
// when there is one, else from the model catalog (--models, model_catalog.h).
// Ledger events (when a recorder is configured, event_recorder.h): admission.decided
// (every decision, allowed or not, once the principal is known), dispatch.sent (the
// request was handed to the broker), request.evidence (what the request was and how it
// went: client, bundle, prompt token count and hash, advertised tools, output cap, tool
// calls issued and answered, timings; docs/tool-protocols.md, "Evidence"),
// request.finished / request.failed.
//
// Thread-safety: every transport calls it from many threads at once; a Gateway is
// immutable after construction apart from its atomic counters and its table of live
// requests (under a mutex).
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
#include "router/event_recorder.h"
#include "router/refusal_sampler.h"
#include "router/http/http_server.h"
#include "router/metrics.h"
#include "router/model_catalog.h"
#include "router/request_evidence.h"

namespace gantry::router {

struct GatewayOptions {
  // The policy in force; called once per request (PolicyReloader::Current()).
  std::function<std::shared_ptr<const policy::Snapshot>()> policy;
  std::map<std::string, ModelEntry> models;
  // Not owned; outlives the Gateway, and is stopped (Broker::Stop) before the Gateway
  // goes: a cancelled request's Terminal (which finishes its Call) may still be on its
  // way from the worker when the transports have stopped.
  broker::Broker* broker = nullptr;
  EventRecorder* recorder = nullptr;  // optional; not owned; must outlive the Gateway
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
  // Records the refusals still counted (RecordRefusal).
  ~Gateway();
  // Whether the router can take work now: OK, else evidence_unavailable (the ledger
  // writer cannot keep evidence: Admit refuses every request) or no_worker. /readyz and
  // the gRPC health service answer by it.
  absl::Status Ready() const;
  // The pipeline's part of /metrics (Prometheus text): the broker, the policy, errors
  // by code, request durations and tokens.
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
  // Records `payload` (as canonical JSON) when a recorder is configured.
  void RecordEvent(const std::string& stream_id, const std::string& type,
                   const json::Value& payload);
  void RecordOutcome(Call::State& call, const v1::Terminal& terminal, int64_t now_us);
  // A refusal's admission.decided, one event each up to kRecordedRefusalsPerMinute of a
  // principal in a minute; past that counted, and the count recorded as one
  // admission.refusals_counted event (principal, refusals, error_reasons,
  // since_unix_ms, until_unix_ms) when the minute is over or the Gateway ends
  // (refusal_sampler.h).
  static constexpr int kRecordedRefusalsPerMinute = 60;
  void RecordRefusal(const std::string& principal, const std::string& request_id,
                     const json::Value& admission);
  void RecordRefusalsCounted(const RefusalSampler::Counted& counted);
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
  RefusalSampler refusals_{kRecordedRefusalsPerMinute};
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_GATEWAY_H_
