#include "router/gateway.h"

#include <openssl/crypto.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "ledger/writer.h"
#include "policy/policy_decide.h"
#include "router/http/error_response.h"
#include "router/openai/chat_request.h"
#include "router/openai/chat_response.h"
#include "tokenizer-svc/conversation/conversation.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::router {
namespace {

using json::Value;

// ---- prompt counting ---------------------------------------------------------------

class TemplateTokenizerCounter : public PromptCounter {
 public:
  TemplateTokenizerCounter(jinja::ChatTemplate chat_template,
                           std::unique_ptr<tokenizer::Tokenizer> tokenizer)
      : template_(std::move(chat_template)), tokenizer_(std::move(tokenizer)) {}

  absl::StatusOr<uint32_t> Count(const v1::InferenceRequest& request) const override {
    auto prompt = template_.Render(conversation::TemplateConversation(request));
    if (!prompt.ok()) {
      if (ReasonOf(prompt.status()).empty()) {
        return ReasonError("template_render_failed", prompt.status().message());
      }
      return prompt.status();
    }
    // The rendered prompt holds the template's control tokens, which must be matched
    // as such; user text that imitates one is counted the same way here (the worker,
    // which tokenizes for real, splits user content separately).
    auto ids = tokenizer_->Encode(*prompt);
    if (!ids.ok()) return ReasonError("invalid_request", ids.status().message());
    return static_cast<uint32_t>(ids->size());
  }

 private:
  jinja::ChatTemplate template_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

// Settles a budget reservation when the request ends, on every path: with the tokens
// the terminal event reported, or 0 when the request never reached a worker.
struct BudgetSettlement {
  BudgetSettlement(BudgetTracker* tracker, BudgetReservation reservation)
      : tracker(tracker), reservation(std::move(reservation)) {}
  ~BudgetSettlement() { tracker->Settle(reservation, used); }
  BudgetTracker* tracker;
  BudgetReservation reservation;
  int64_t used = 0;
};

// ---- per-request event queue --------------------------------------------------------

// Filled by the broker thread, drained by the HTTP handler thread.
class EventQueue : public broker::StreamSink {
 public:
  void OnEvent(const v1::StreamEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
    cv_.notify_one();
  }
  // The next event; waits as long as needed (the broker always ends a request with
  // a Terminal).
  v1::StreamEvent Next() {
    std::unique_lock<std::mutex> lock(mu_);
    while (events_.empty()) cv_.wait_for(lock, std::chrono::seconds(1));
    v1::StreamEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::StreamEvent> events_;
};

http::HttpResponse JsonResponse(int status, const Value& body, http::HeaderList headers = {}) {
  http::HttpResponse response;
  response.status = status;
  response.headers = std::move(headers);
  response.headers.emplace_back("Content-Type", "application/json");
  response.body = json::DumpCompact(body);
  return response;
}

void SetParam(policy::ParamValues* params, policy::Param p, double v) { params->Set(p, v); }

}  // namespace

std::string ConversationJsonForTest(const v1::InferenceRequest& request) {
  return json::DumpCompact(conversation::TemplateConversation(request));
}

absl::StatusOr<std::shared_ptr<const PromptCounter>> MakePromptCounter(
    absl::string_view template_source, absl::string_view tokenizer_json,
    absl::string_view tokenizer_config_json) {
  Value specials = Value::EmptyObject();
  if (!tokenizer_config_json.empty()) {
    auto config = json::Parse(tokenizer_config_json);
    if (!config.ok()) return config.status();
    auto from_config = jinja::ChatTemplate::FromConfig(*config);
    if (template_source.empty()) {
      if (!from_config.ok()) return from_config.status();
      auto tok = tokenizer::Tokenizer::FromJson(tokenizer_json, tokenizer_config_json);
      if (!tok.ok()) return tok.status();
      return std::shared_ptr<const PromptCounter>(
          std::make_shared<TemplateTokenizerCounter>(std::move(*from_config), std::move(*tok)));
    }
  }
  auto chat_template = jinja::ChatTemplate::FromSource(template_source, specials);
  if (!chat_template.ok()) return chat_template.status();
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer_json, tokenizer_config_json);
  if (!tok.ok()) return tok.status();
  return std::shared_ptr<const PromptCounter>(
      std::make_shared<TemplateTokenizerCounter>(std::move(*chat_template), std::move(*tok)));
}

absl::StatusOr<std::shared_ptr<const PromptCounter>> LoadPromptCounter(const std::string& dir) {
  auto chat_template = jinja::ChatTemplate::Load(dir);
  if (!chat_template.ok()) return chat_template.status();
  auto tok = tokenizer::Tokenizer::Load(dir);
  if (!tok.ok()) return tok.status();
  return std::shared_ptr<const PromptCounter>(
      std::make_shared<TemplateTokenizerCounter>(std::move(*chat_template), std::move(*tok)));
}

absl::StatusOr<std::map<std::string, ModelEntry>> LoadModelCatalog(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto root = json::Parse(*text);
  if (!root.ok()) return root.status();
  const Value* models = root->Find("models");
  if (models == nullptr || !models->is_array()) {
    return ReasonError("invalid_request", absl::StrCat(path, ": models: expected an array"));
  }
  std::string base = path.substr(0, path.find_last_of('/') == std::string::npos
                                        ? 0
                                        : path.find_last_of('/') + 1);
  std::map<std::string, ModelEntry> out;
  for (size_t i = 0; i < models->items().size(); ++i) {
    const Value& m = models->items()[i];
    std::string where = absl::StrCat(path, ": models[", i, "]");
    const Value* name = m.Find("name");
    const Value* dir = m.Find("tokenizer_dir");
    const Value* context = m.Find("context_length");
    if (name == nullptr || !name->is_string() || dir == nullptr || !dir->is_string() ||
        context == nullptr || !context->as_int64().has_value() || *context->as_int64() <= 0) {
      return ReasonError("invalid_request",
                         absl::StrCat(where, ": needs name, tokenizer_dir and context_length"));
    }
    ModelEntry entry;
    entry.name = name->as_string();
    entry.context_length = static_cast<uint32_t>(*context->as_int64());
    if (const Value* p = m.Find("tool_protocol"); p != nullptr && p->is_string()) {
      entry.tool_protocol = p->as_string();
    }
    if (const Value* d = m.Find("default_max_tokens"); d != nullptr && d->as_int64().has_value()) {
      entry.default_max_tokens = static_cast<uint32_t>(*d->as_int64());
    }
    std::string tokenizer_dir = dir->as_string();
    if (!tokenizer_dir.empty() && tokenizer_dir[0] != '/') tokenizer_dir = base + tokenizer_dir;
    auto counter = LoadPromptCounter(tokenizer_dir);
    if (!counter.ok()) {
      return Error(counter.status().code(), ReasonOf(counter.status()),
                   absl::StrCat(where, ": ", counter.status().message()));
    }
    entry.counter = *counter;
    out[entry.name] = std::move(entry);
  }
  return out;
}

void LedgerRecorder::Record(const std::string& stream_id, const std::string& type,
                            const std::string& payload_json) {
  ledger::EventInput input;
  input.stream_id = stream_id;
  input.type = type;
  input.actor = "router";
  input.payload_json = payload_json;
  auto appended = writer_->Append(std::move(input));
  if (!appended.ok()) {
    Log(LogLevel::kError, "router.ledger_append_failed",
        {{"stream_id", stream_id}, {"type", type}, {"error", appended.status().ToString()}});
  }
}

Gateway::Gateway(GatewayOptions options) : options_(std::move(options)) {}

void Gateway::RecordEvent(const std::string& stream_id, const std::string& type,
                          const std::string& payload_json) {
  if (options_.recorder != nullptr) options_.recorder->Record(stream_id, type, payload_json);
}

void Gateway::Fail(http::ResponseWriter& writer, const absl::Status& status,
                   const http::HeaderList& extra) {
  http::HttpResponse response = http::ErrorResponse(status);
  for (const auto& h : extra) response.headers.push_back(h);
  int code = response.status;
  (code >= 500 ? responses_5xx_ : responses_4xx_)++;
  writer.Send(response);
}

void Gateway::Handle(http::HttpRequest request, std::shared_ptr<http::ResponseWriter> writer) {
  ++requests_total_;
  const std::string& path = request.path;
  auto only = [&](const char* method) {
    if (request.method == method) return true;
    Fail(*writer, ReasonError("method_not_allowed",
                              absl::StrCat(request.method, " is not allowed on ", path)),
         {{"Allow", method}});
    return false;
  };
  if (path == "/v1/chat/completions") {
    if (only("POST")) HandleChat(request, *writer, writer);
  } else if (path == "/v1/models") {
    if (only("GET")) HandleModels(request, *writer);
  } else if (path == "/healthz") {
    if (only("GET")) {
      ++responses_2xx_;
      writer->Send(JsonResponse(200, json::Parse(R"({"status":"ok"})").value()));
    }
  } else if (path == "/readyz") {
    if (only("GET")) {
      if (options_.broker->stats().live_workers == 0) {
        Fail(*writer, WithRetryAfter(ReasonError("no_worker", "no live worker"), 1000));
      } else {
        ++responses_2xx_;
        writer->Send(JsonResponse(200, json::Parse(R"({"status":"ready"})").value()));
      }
    }
  } else if (path == "/metrics") {
    if (only("GET")) {
      ++responses_2xx_;
      http::HttpResponse response;
      response.headers.emplace_back("Content-Type", "text/plain; version=0.0.4");
      response.body = MetricsText();
      writer->Send(response);
    }
  } else {
    Fail(*writer, ReasonError("route_not_found", absl::StrCat("no route for ", path)));
  }
}

std::string Gateway::MetricsText() const {
  broker::BrokerStats s = options_.broker->stats();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name,
                    " ", value, "\n");
  };
  metric("gantry_router_http_requests_total", "counter", "HTTP requests received.",
         requests_total_.load());
  absl::StrAppend(&out,
                  "# HELP gantry_router_http_responses_total HTTP responses by status class.\n"
                  "# TYPE gantry_router_http_responses_total counter\n"
                  "gantry_router_http_responses_total{class=\"2xx\"} ", responses_2xx_.load(), "\n",
                  "gantry_router_http_responses_total{class=\"4xx\"} ", responses_4xx_.load(), "\n",
                  "gantry_router_http_responses_total{class=\"5xx\"} ", responses_5xx_.load(), "\n");
  metric("gantry_router_live_workers", "gauge", "Workers in state LIVE.", s.live_workers);
  metric("gantry_router_queued_requests", "gauge", "Requests waiting in admission queues.", s.queued);
  metric("gantry_router_inflight_requests", "gauge", "Requests dispatched to workers.", s.in_flight);
  metric("gantry_router_dispatched_total", "counter", "Requests sent to workers.", s.dispatched);
  metric("gantry_router_workers_expired_total", "counter", "Workers declared EXPIRED.",
         s.workers_expired);
  metric("gantry_router_dropped_frames_total", "counter", "Worker frames dropped.",
         s.dropped_frames);
  metric("gantry_router_rejected_queue_full_total", "counter", "Requests refused: queue_full.",
         s.rejected_queue_full);
  metric("gantry_router_rejected_no_worker_total", "counter", "Requests refused: no_worker.",
         s.rejected_no_worker);
  if (options_.policy_reload_errors) {
    metric("gantry_policy_reload_errors_total", "counter",
           "Policy reloads refused (the previous policy stayed in force).",
           options_.policy_reload_errors());
  }
  absl::StrAppend(&out, "# HELP gantry_policy_info The policy snapshot in force.\n",
                  "# TYPE gantry_policy_info gauge\n", "gantry_policy_info{sha256=\"",
                  options_.policy()->sha256, "\"} 1\n");
  return out;
}

namespace {

// The principal of a presented key, or an unauthenticated error.
absl::StatusOr<const policy::Principal*> Authenticate(const policy::Snapshot& snapshot,
                                                      absl::string_view authorization) {
  absl::string_view key = authorization;
  if (!absl::ConsumePrefix(&key, "Bearer ") && !absl::ConsumePrefix(&key, "bearer ")) {
    return ReasonError("unauthenticated", "missing 'Authorization: Bearer <key>'");
  }
  key = absl::StripAsciiWhitespace(key);
  if (key.empty()) return ReasonError("unauthenticated", "empty API key");
  std::string digest = Sha256Hex(key);
  auto it = snapshot.by_key_sha256.find(digest);
  if (it == snapshot.by_key_sha256.end() || it->second < 0 ||
      static_cast<size_t>(it->second) >= snapshot.principals.size()) {
    return ReasonError("unauthenticated", "unknown API key");
  }
  const policy::Principal& principal = snapshot.principals[it->second];
  // The map lookup already matched the hash; compare again in constant time so that no
  // path compares key material with an early exit.
  if (principal.key_sha256.size() != digest.size() ||
      CRYPTO_memcmp(principal.key_sha256.data(), digest.data(), digest.size()) != 0) {
    return ReasonError("unauthenticated", "unknown API key");
  }
  return &principal;
}

v1::PriorityClass ToPriorityClass(policy::Priority p) {
  switch (p) {
    case policy::Priority::kAccessibility: return v1::PRIORITY_ACCESSIBILITY;
    case policy::Priority::kBatch: return v1::PRIORITY_BATCH;
    default: return v1::PRIORITY_INTERACTIVE;
  }
}

std::string Canonical(const Value& v) {
  json::DumpOptions options;
  options.sort_keys = true;
  options.item_separator = ",";
  options.key_separator = ":";
  return json::Dump(v, options);
}

}  // namespace

void Gateway::HandleModels(const http::HttpRequest& request, http::ResponseWriter& writer) {
  std::shared_ptr<const policy::Snapshot> snapshot = options_.policy();
  auto principal = Authenticate(*snapshot, request.Header("authorization"));
  if (!principal.ok()) return Fail(writer, principal.status());
  std::vector<std::string> names;
  for (const auto& [name, entry] : options_.models) names.push_back(name);
  ++responses_2xx_;
  writer.Send(JsonResponse(
      200, openai::ModelListJson(names, options_.clock->UnixMicros() / 1000000)));
}

void Gateway::HandleChat(const http::HttpRequest& http_request, http::ResponseWriter& writer,
                         const std::shared_ptr<http::ResponseWriter>& shared_writer) {
  // 1. Authenticate.
  std::shared_ptr<const policy::Snapshot> snapshot = options_.policy();
  auto principal = Authenticate(*snapshot, http_request.Header("authorization"));
  if (!principal.ok()) return Fail(writer, principal.status());
  const std::string principal_name = (*principal)->name;

  // 2. Parse.
  auto parsed = openai::ParseChatCompletionRequest(http_request.body);
  if (!parsed.ok()) return Fail(writer, parsed.status());
  v1::InferenceRequest& req = parsed->request;
  const std::string request_id = NewId("req");
  req.set_request_id(request_id);
  req.set_principal(principal_name);

  // 3. Policy.
  policy::PolicyRequest ask;
  ask.principal = principal_name;
  ask.model = req.model();
  using P = policy::Param;
  if (parsed->has_max_tokens) SetParam(&ask.params, P::kMaxTokens, req.max_tokens());
  if (req.sampling().has_temperature()) SetParam(&ask.params, P::kTemperature, req.sampling().temperature());
  if (req.sampling().has_top_p()) SetParam(&ask.params, P::kTopP, req.sampling().top_p());
  if (req.sampling().has_top_k()) SetParam(&ask.params, P::kTopK, req.sampling().top_k());
  if (req.sampling().has_seed()) SetParam(&ask.params, P::kSeed, static_cast<double>(req.sampling().seed()));
  if (req.stop_size() > 0) SetParam(&ask.params, P::kStopStrings, req.stop_size());
  if (req.tools_size() > 0) SetParam(&ask.params, P::kToolChoice, static_cast<double>(req.tool_choice()));
  if (req.has_parallel_tool_calls()) {
    SetParam(&ask.params, P::kParallelToolCalls, req.parallel_tool_calls() ? 1 : 0);
  }
  if (!req.reasoning_effort().empty()) {
    double effort = req.reasoning_effort() == "low" ? 1 : req.reasoning_effort() == "medium" ? 2 : 3;
    SetParam(&ask.params, P::kReasoningEffort, effort);
  }
  policy::Decision decision = policy::Decide(*snapshot, ask);
  http::HeaderList policy_headers = {{"x-gantry-policy-sha256", decision.policy_sha256},
                                     {"x-gantry-policy-rule", decision.rule_id},
                                     {"x-gantry-request-id", request_id}};
  Value admission = Value::EmptyObject();
  admission.Set("principal", Value::String(principal_name));
  admission.Set("gen_ai.request.model", Value::String(req.model()));
  admission.Set("verdict", Value::String(policy::VerdictName(decision.verdict)));
  admission.Set("rule_id", Value::String(decision.rule_id));
  admission.Set("policy_sha256", Value::String(decision.policy_sha256));
  auto reject = [&](const absl::Status& status) {
    admission.Set("admitted", Value::Bool(false));
    admission.Set("error_reason", Value::String(http::ErrorCodeOf(status)));
    RecordEvent(request_id, "admission.decided", Canonical(admission));
    Fail(writer, status, policy_headers);
  };
  if (decision.verdict == policy::Verdict::kDeny) {
    if (decision.reason == "unknown_principal") {
      return reject(ReasonError("unauthenticated", decision.message));
    }
    return reject(ReasonError("policy_denied", absl::StrCat("denied by rule ", decision.rule_id,
                                                            " (", decision.reason, "): ",
                                                            decision.message)));
  }
  absl::optional<uint32_t> policy_max_tokens;
  if (decision.verdict == policy::Verdict::kClamp) {
    const policy::ParamValues& e = decision.effective;
    if (e.Has(P::kMaxTokens)) {
      if (parsed->has_max_tokens) {
        req.set_max_tokens(static_cast<uint32_t>(e.Get(P::kMaxTokens)));
      } else {
        // No max_tokens asked: the policy's bound caps the default reserve below,
        // it does not become the reserve itself.
        policy_max_tokens = static_cast<uint32_t>(e.Get(P::kMaxTokens));
      }
    }
    if (e.Has(P::kTemperature)) req.mutable_sampling()->set_temperature(static_cast<float>(e.Get(P::kTemperature)));
    if (e.Has(P::kTopP)) req.mutable_sampling()->set_top_p(static_cast<float>(e.Get(P::kTopP)));
    if (e.Has(P::kTopK)) req.mutable_sampling()->set_top_k(static_cast<uint32_t>(e.Get(P::kTopK)));
    if (e.Has(P::kReasoningEffort)) {
      int effort = static_cast<int>(e.Get(P::kReasoningEffort));
      req.set_reasoning_effort(effort <= 1 ? "low" : effort == 2 ? "medium" : "high");
    }
    if (e.Has(P::kParallelToolCalls)) req.set_parallel_tool_calls(e.Get(P::kParallelToolCalls) != 0);
    Value clamps = Value::EmptyArray();
    for (const auto& c : decision.clamps) {
      Value v = Value::EmptyObject();
      v.Set("field", Value::String(c.field));
      v.Set("requested", Value::String(c.requested));
      v.Set("applied", Value::String(c.applied));
      clamps.Append(std::move(v));
    }
    admission.Set("clamps", std::move(clamps));
  }
  req.set_priority(ToPriorityClass(decision.priority));

  // 4. Model and bundle facts.
  auto model = options_.models.find(req.model());
  if (model == options_.models.end()) {
    return reject(ReasonError("model_not_found", absl::StrCat("no model '", req.model(), "'")));
  }
  uint32_t context_length = model->second.context_length;
  std::string tool_protocol = model->second.tool_protocol;
  uint32_t default_max_tokens = model->second.default_max_tokens;
  std::string bundle_sha;
  if (auto bundle = options_.broker->LiveBundle(req.model())) {
    if (bundle->context_length() > 0) context_length = bundle->context_length();
    tool_protocol = bundle->tool_protocol();
    if (bundle->default_max_tokens() > 0) default_max_tokens = bundle->default_max_tokens();
    bundle_sha = bundle->identity_sha256();
  }
  // 5. Tools need a declared protocol (checked before any rendering).
  if (req.tools_size() > 0 && tool_protocol.empty()) {
    return reject(ReasonError(
        "tool_protocol_undeclared",
        absl::StrCat("model '", req.model(), "' declares no tool protocol; send the request "
                     "without tools, or use a model whose bundle declares one")));
  }
  // 6. Render + count.
  auto prompt_tokens = model->second.counter->Count(req);
  if (!prompt_tokens.ok()) return reject(prompt_tokens.status());
  // 7. Context.
  if (!parsed->has_max_tokens) {
    uint32_t room = context_length > *prompt_tokens ? context_length - *prompt_tokens : 0;
    uint32_t reserve = std::min(default_max_tokens, room);
    if (policy_max_tokens) reserve = std::min(reserve, *policy_max_tokens);
    req.set_max_tokens(reserve);
  }
  if (*prompt_tokens >= context_length ||
      uint64_t{*prompt_tokens} + req.max_tokens() > context_length) {
    return reject(ReasonError(
        "context_length_exceeded",
        absl::StrCat("the prompt has ", *prompt_tokens, " tokens and ", req.max_tokens(),
                     " are reserved for output; the model's context is ", context_length,
                     " tokens")));
  }
  // 8a. Budgets and rates, by reservation of the prompt plus the whole output cap.
  std::unique_ptr<BudgetSettlement> settlement;
  if (options_.budgets) {
    auto reservation = options_.budgets->Admit(decision.principal, decision.budgets,
                                               int64_t{*prompt_tokens} + req.max_tokens());
    if (!reservation.ok()) return reject(reservation.status());
    if (reservation->warning_percent > 0) {
      Value warning = Value::EmptyObject();
      warning.Set("principal", Value::String(decision.principal));
      warning.Set("percent_of_day_budget", Value::Int(reservation->warning_percent));
      warning.Set("tokens_per_day", Value::Int(decision.budgets.tokens_per_day));
      RecordEvent(request_id, "budget.warning", Canonical(warning));
    }
    settlement = std::make_unique<BudgetSettlement>(options_.budgets, *reservation);
  }
  req.set_router_prompt_tokens(*prompt_tokens);
  admission.Set("gen_ai.usage.input_tokens", Value::Int(*prompt_tokens));
  admission.Set("gen_ai.request.max_tokens", Value::Int(req.max_tokens()));
  admission.Set("priority", Value::String(policy::PriorityName(decision.priority)));

  // 8. Admission and dispatch.
  auto queue = std::make_shared<EventQueue>();
  const bool stream = parsed->stream;
  const bool include_usage = parsed->include_usage;
  const std::string model_name = req.model();
  absl::Status admitted = options_.broker->Submit(std::move(req), queue);
  if (!admitted.ok()) return reject(admitted);
  admission.Set("admitted", Value::Bool(true));
  RecordEvent(request_id, "admission.decided", Canonical(admission));
  {
    Value dispatch = Value::EmptyObject();
    dispatch.Set("gen_ai.request.model", Value::String(model_name));
    RecordEvent(request_id, "dispatch.sent", Canonical(dispatch));
  }
  broker::Broker* broker = options_.broker;
  shared_writer->OnClose([broker, request_id] {
    broker->Cancel(request_id, "the client closed the connection");
  });
  if (!bundle_sha.empty()) policy_headers.emplace_back("x-gantry-bundle-sha256", bundle_sha);

  // 9. Stream back; exactly one terminal outcome.
  openai::ResponseMeta meta{openai::CompletionIdFor(request_id), model_name,
                            options_.clock->UnixMicros() / 1000000};
  openai::ChatStreamRenderer renderer(meta, include_usage);
  openai::ChatCompletionAccumulator accumulator(meta);
  // The outcome goes to the ledger before the client sees the end of the response.
  auto record_outcome = [&](const v1::Terminal& terminal) {
    if (settlement) {
      settlement->used = int64_t{terminal.usage().prompt_tokens()} + terminal.usage().completion_tokens();
    }
    absl::Status outcome = openai::TerminalStatus(terminal);
    Value finished = Value::EmptyObject();
    finished.Set("gen_ai.request.model", Value::String(model_name));
    finished.Set("gen_ai.usage.input_tokens", Value::Int(terminal.usage().prompt_tokens()));
    if (!terminal.usage().prompt_ids_sha256().empty()) {
      finished.Set("gantry.prompt.ids_sha256", Value::String(terminal.usage().prompt_ids_sha256()));
    }
    finished.Set("gen_ai.usage.output_tokens", Value::Int(terminal.usage().completion_tokens()));
    if (!terminal.bundle().identity_sha256().empty()) {
      finished.Set("bundle_sha256", Value::String(terminal.bundle().identity_sha256()));
    }
    if (outcome.ok()) {
      finished.Set("finish_reason", Value::String(openai::FinishReasonName(terminal.finish_reason())));
      RecordEvent(request_id, "request.finished", Canonical(finished));
    } else {
      finished.Set("error_reason", Value::String(http::ErrorCodeOf(outcome)));
      finished.Set("error_code", Value::String(CodeName(outcome.code())));
      RecordEvent(request_id, "request.failed", Canonical(finished));
    }
  };
  bool started = false;
  while (true) {
    v1::StreamEvent event = queue->Next();
    if (stream) {
      if (!started) {
        if (event.has_terminal() && !openai::TerminalStatus(event.terminal()).ok()) {
          record_outcome(event.terminal());
          Fail(writer, openai::TerminalStatus(event.terminal()), policy_headers);
          break;
        }
        http::HeaderList headers = policy_headers;
        headers.emplace_back("Content-Type", "text/event-stream");
        headers.emplace_back("Cache-Control", "no-cache");
        writer.StartChunked(200, headers);
        ++responses_2xx_;
        started = true;
      }
      if (event.has_terminal()) record_outcome(event.terminal());
      writer.WriteChunk(renderer.OnEvent(event));
      if (event.has_terminal()) {
        writer.EndChunked();
        break;
      }
    } else {
      accumulator.Add(event);
      if (accumulator.finished()) {
        record_outcome(event.terminal());
        if (!accumulator.error().ok()) {
          Fail(writer, accumulator.error(), policy_headers);
        } else {
          ++responses_2xx_;
          writer.Send(JsonResponse(200, accumulator.ToJson(), policy_headers));
        }
        break;
      }
    }
  }
}

}  // namespace gantry::router
