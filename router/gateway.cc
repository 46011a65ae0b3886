#include "router/gateway.h"

#include <openssl/crypto.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "common/error_codes.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "policy/policy_decide.h"
#include "router/http/error_response.h"
#include "router/request_names.h"
#include "router/openai/chat_response.h"
#include "router/sentence_chunker.h"
#include "tokenizer-svc/conversation/prompt.h"

namespace gantry::router {
namespace {

using json::Value;

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

// Filled by the broker (its thread, or a Submit/Cancel caller). Either a thread waits
// in Next(), woken once per batch of events (Flush), or a consumer set with OnReady()
// is run for each batch, on the thread that delivered it, one run at a time.
class EventQueue : public broker::StreamSink,
                   public std::enable_shared_from_this<EventQueue> {
 public:
  // Returns true when it wants no more calls.
  using Consumer = std::function<bool()>;

  void OnEvent(const v1::StreamEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
  }
  // The gateway's own wake-up (the evidence of the request is durable, or failed): an
  // event with nothing set, read only while the Terminal waits for it.
  void PostDurabilityMarker() {
    OnEvent(v1::StreamEvent());
    Flush();
  }
  void Flush() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (events_.empty()) return;
      if (consumer_ == nullptr) {
        cv_.notify_one();
        return;
      }
    }
    RunConsumer();
  }
  // The next event, or nullopt when `timeout_ms` passes first.
  std::optional<v1::StreamEvent> Next(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout_ms <= 0) {
      if (events_.empty()) return std::nullopt;
    } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                             [&] { return !events_.empty(); })) {
      return std::nullopt;
    }
    v1::StreamEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // Runs the consumer (if one is set) although no event came: one that must look again
  // by a time (a held sentence) is woken so, one run at a time as always.
  void Wake() { RunConsumer(); }
  // From now on `consumer` reads the events (Next(0)) instead of a waiting thread; runs
  // it at once when events are already queued.
  void SetConsumer(Consumer consumer) {
    // Held before the consumer is published: from then on a Flush on the broker's
    // thread may run it to the end, dropping the Call and with it the Call's reference
    // to this queue, before this thread reaches RunConsumer.
    std::shared_ptr<EventQueue> keep = shared_from_this();
    {
      std::lock_guard<std::mutex> lock(mu_);
      consumer_ = std::move(consumer);
    }
    RunConsumer();
  }

 private:
  void RunConsumer() {
    // The consumer may drop its Call and with it a reference to this queue; callers hold
    // another (the broker its sink, SetConsumer its own).
    std::shared_ptr<EventQueue> keep = shared_from_this();
    std::unique_lock<std::mutex> lock(mu_);
    if (running_) {
      again_ = true;  // the running consumer looks once more
      return;
    }
    running_ = true;
    while (consumer_ != nullptr) {
      again_ = false;
      Consumer consumer = consumer_;
      lock.unlock();
      const bool finished = consumer();
      lock.lock();
      if (finished) {
        Consumer dead = std::move(consumer_);
        consumer_ = nullptr;
        lock.unlock();
        dead = nullptr;  // its captures (the Call, the writer) go outside the lock
        consumer = nullptr;
        lock.lock();
        break;
      }
      if (!again_) break;
    }
    running_ = false;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::StreamEvent> events_;
  Consumer consumer_;
  bool running_ = false;  // a thread is in RunConsumer's loop
  bool again_ = false;    // events came while it ran
};

void SetParam(policy::ParamValues* params, policy::Param p, double v) { params->Set(p, v); }

// The ledger's payload text: sorted keys, no spaces.
std::string Canonical(const Value& v) {
  json::DumpOptions options;
  options.sort_keys = true;
  options.item_separator = ",";
  options.key_separator = ":";
  return json::Dump(v, options);
}

}  // namespace

Gateway::Gateway(GatewayOptions options) : options_(std::move(options)) {}

Gateway::~Gateway() {
  for (const RefusalSampler::Counted& counted : refusals_.TakeAll(options_.clock->UnixMicros())) {
    RecordRefusalsCounted(counted);
  }
}

void Gateway::RecordRefusal(const std::string& principal, const std::string& request_id,
                            const json::Value& admission) {
  const json::Value* reason = admission.Find("error_reason");
  std::optional<RefusalSampler::Counted> ended;
  const bool record = refusals_.Take(
      principal, reason != nullptr && reason->is_string() ? reason->as_string() : "",
      options_.clock->UnixMicros(), &ended);
  if (ended) RecordRefusalsCounted(*ended);
  if (record) RecordEvent(request_id, "admission.decided", admission);
}

void Gateway::RecordRefusalsCounted(const RefusalSampler::Counted& counted) {
  Value reasons = Value::EmptyObject();
  for (const auto& [reason, n] : counted.reasons) reasons.Set(reason, Value::Int(n));
  Value event = Value::EmptyObject();
  event.Set("principal", Value::String(counted.principal));
  event.Set("refusals", Value::Int(counted.total));
  event.Set("error_reasons", std::move(reasons));
  event.Set("since_unix_ms", Value::Int(counted.since_us / 1000));
  event.Set("until_unix_ms", Value::Int(counted.until_us / 1000));
  RecordEvent(NewId("refusals"), "admission.refusals_counted", event);
}

void Gateway::RecordEvent(const std::string& stream_id, const std::string& type,
                          const json::Value& payload) {
  // Without a recorder the canonical text is never made.
  if (options_.recorder != nullptr) options_.recorder->Record(stream_id, type, Canonical(payload));
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


}  // namespace

absl::StatusOr<std::string> Gateway::AuthenticateKey(const policy::Snapshot& snapshot,
                                                     absl::string_view authorization) const {
  auto principal = Authenticate(snapshot, authorization);
  if (!principal.ok()) return principal.status();
  return (*principal)->name;
}

// ---- an admitted request ------------------------------------------------------------

struct Gateway::Call::State {
  Gateway* gateway = nullptr;
  std::string request_id;
  std::string model;
  std::string bundle_sha;
  http::HeaderList headers;
  int64_t received_us = 0;
  int64_t created_unix_s = 0;
  std::shared_ptr<EventQueue> queue;
  std::unique_ptr<BudgetSettlement> settlement;
  std::optional<RequestEvidence> evidence;
  bool first_output_seen = false;
  uint32_t prompt_tokens = 0;   // the router's count
  int64_t output_events = 0;    // text, reasoning and tool-call events seen
  bool done = false;
  v1::PriorityClass priority = v1::PRIORITY_INTERACTIVE;
  // Accessibility: the text regrouped into sentences, and the events it released that
  // Next() has not handed out yet.
  std::unique_ptr<SentenceChunkedStream> sentences;
  std::deque<v1::StreamEvent> released;
  // Monotonic; when the held text began waiting; 0: no timer (nothing held, or only the
  // word a release left, which waits for more text).
  int64_t held_since_us = 0;
  // Every tool call the model emits is decided under the snapshot that admitted the
  // request, for the principal it admitted, before it leaves the router. Allowed calls
  // wait in `held_calls` until the worker's Terminal, so that a later denied call of the
  // same turn cannot follow calls a client already received; then they go out in order.
  std::shared_ptr<const policy::Snapshot> snapshot;
  std::string principal;
  std::vector<std::string> offered_tools;  // as dispatched (the stripped ones removed)
  std::vector<std::string> stripped_tools;  // what the policy removed
  std::deque<v1::StreamEvent> held_calls;
  std::deque<v1::StreamEvent> ready;  // decided events NextFromWorker hands out first
  // Set by the first denied call: nothing more of the worker's output is handed out,
  // and its Terminal becomes this error (with the worker's usage, which is charged).
  absl::Status denied;
  // The Terminal, its outcome recorded, waiting until the recorder says the request's
  // events are durable (the answer comes as a marker event through `queue`).
  std::optional<v1::StreamEvent> pending_terminal;
  std::shared_ptr<absl::Status> durability;  // set (under durability_mu) by the answer
  std::shared_ptr<std::mutex> durability_mu;
};

Gateway::Call::Call() : s_(std::make_unique<State>()) {}

Gateway::Call::~Call() {
  if (s_->queue == nullptr) return;
  if (!s_->done) {
    // The transport went away first: stop the work, and still record how it ended (the
    // broker always ends an accepted request with a Terminal).
    Cancel("the client went away");
    while (!s_->done) Next(1000);
  }
  s_->gateway->Unregister(s_->request_id);
}

const std::string& Gateway::Call::request_id() const { return s_->request_id; }
const std::string& Gateway::Call::model() const { return s_->model; }
const std::vector<std::string>& Gateway::Call::stripped_tools() const { return s_->stripped_tools; }
const http::HeaderList& Gateway::Call::headers() const { return s_->headers; }
int64_t Gateway::Call::created_unix_s() const { return s_->created_unix_s; }
v1::PriorityClass Gateway::Call::priority() const { return s_->priority; }
bool Gateway::Call::done() const {
  return s_->done && s_->released.empty() && s_->ready.empty();
}

bool Gateway::Call::holding() const {
  return s_->sentences != nullptr && s_->sentences->holding();
}

std::function<void()> Gateway::Call::Waker() const {
  return [queue = std::weak_ptr<EventQueue>(s_->queue)] {
    if (std::shared_ptr<EventQueue> q = queue.lock()) q->Wake();
  };
}

void Gateway::Call::OnEvents(std::function<bool()> ready) {
  s_->queue->SetConsumer(std::move(ready));
}

void Gateway::Call::Cancel(const std::string& reason) {
  s_->gateway->options_.broker->Cancel(s_->request_id, reason);
}

std::optional<v1::StreamEvent> Gateway::Call::Next(int timeout_ms) {
  State& st = *s_;
  if (st.sentences == nullptr) return NextFromWorker(timeout_ms);
  const Clock& clock = *st.gateway->options_.clock;
  const int64_t deadline_us = clock.MonotonicMicros() + int64_t{timeout_ms} * 1000;
  while (true) {
    // Hand out what the chunker released; while it holds an open sentence, wait on,
    // but not past kSentenceHoldMaxMs of silence.
    if (!st.released.empty()) {
      v1::StreamEvent event = std::move(st.released.front());
      st.released.pop_front();
      return event;
    }
    const int64_t now_us = clock.MonotonicMicros();
    std::vector<v1::StreamEvent> out;
    int64_t wait_us = deadline_us - now_us;
    if (st.sentences->holding() && st.held_since_us != 0) {
      const int64_t hold_left_us = st.held_since_us + kSentenceHoldMaxMs * 1000 - now_us;
      if (hold_left_us <= 0) {
        st.sentences->ReleaseHeld(st.request_id, &out);
        st.held_since_us = 0;
        for (auto& e : out) st.released.push_back(std::move(e));
        continue;
      }
      wait_us = std::min(wait_us, hold_left_us);
    }
    // wait_us <= 0: the caller's time is up; one look without waiting still.
    std::optional<v1::StreamEvent> event =
        NextFromWorker(static_cast<int>(std::max<int64_t>(0, (wait_us + 999) / 1000)));
    if (!event) {
      if (st.done || clock.MonotonicMicros() >= deadline_us) return std::nullopt;
      continue;  // the hold ran out first: release above
    }
    st.sentences->Push(*event, &out);
    // A new wait starts with the first held text, and again after each release.
    if (!st.sentences->holding()) {
      st.held_since_us = 0;
    } else if (st.held_since_us == 0 || !out.empty()) {
      st.held_since_us = clock.MonotonicMicros();
    }
    for (auto& e : out) st.released.push_back(std::move(e));
  }
}

namespace {

// The calls the policy allowed go out now, then the Terminal (`ready` is empty:
// NextFromWorker hands it out before reading the queue).
template <typename State>
std::optional<v1::StreamEvent> ReleaseHeldCallsThen(State& st, v1::StreamEvent terminal) {
  if (st.held_calls.empty()) return terminal;
  st.held_calls.push_back(std::move(terminal));
  st.ready.swap(st.held_calls);
  v1::StreamEvent first = std::move(st.ready.front());
  st.ready.pop_front();
  return first;
}

}  // namespace

std::optional<v1::StreamEvent> Gateway::Call::NextFromWorker(int timeout_ms) {
  State& st = *s_;
  if (!st.ready.empty()) {
    v1::StreamEvent event = std::move(st.ready.front());
    st.ready.pop_front();
    return event;
  }
  if (st.done) return std::nullopt;
  std::optional<v1::StreamEvent> event;
  int64_t now = 0;
  if (st.pending_terminal) {
    // The outcome is recorded; the Terminal goes out once it is durable.
    while (true) {
      std::optional<v1::StreamEvent> marker = st.queue->Next(timeout_ms);
      if (!marker) return std::nullopt;
      if (marker->event_case() == v1::StreamEvent::EVENT_NOT_SET) break;
    }
    absl::Status durable;
    {
      std::lock_guard<std::mutex> lock(*st.durability_mu);
      durable = *st.durability;
    }
    event = std::move(st.pending_terminal);
    st.pending_terminal.reset();
    st.done = true;
    if (!durable.ok()) {
      // Never a response whose evidence may be lost: the client gets the stable error
      // (its usage is kept and was charged), the calls held for it do not go out.
      Log(LogLevel::kError, "router.evidence_unavailable",
          {{"request_id", st.request_id}, {"error", durable.ToString()}});
      v1::Terminal* t = event->mutable_terminal();
      t->set_finish_reason(v1::FINISH_ERROR);
      ToProto(ReasonError("evidence_unavailable",
                          "the request's evidence could not be made durable; the router's "
                          "log says why"),
              t->mutable_status());
      st.held_calls.clear();
      return event;
    }
    return ReleaseHeldCallsThen(st, std::move(*event));
  }
  while (true) {
    event = st.queue->Next(timeout_ms);
    if (!event) return event;
    const Output output = st.gateway->DecideOutput(st, &*event);
    if (output == Output::kDrop) continue;
    now = st.gateway->options_.clock->UnixMicros();
    st.evidence->Observe(*event, now);
    if (event->has_text() || event->has_reasoning() || event->has_tool_call()) {
      ++st.output_events;
      if (!st.first_output_seen) {
        st.first_output_seen = true;
        st.gateway->metrics_.FirstOutput((now - st.received_us) / 1e6);
      }
    }
    if (output == Output::kPass) break;
    st.held_calls.push_back(std::move(*event));
  }
  if (event->has_terminal()) {
    st.gateway->RecordOutcome(st, event->terminal(), now);
    if (EventRecorder* recorder = st.gateway->options_.recorder; recorder != nullptr) {
      const uint64_t ticket = recorder->Mark();
      if (ticket != 0) {
        // Group commit: the writer acknowledges all the requests of one batch at once.
        st.pending_terminal = std::move(*event);
        st.durability = std::make_shared<absl::Status>();
        st.durability_mu = std::make_shared<std::mutex>();
        recorder->WhenDurable(
            ticket, st.gateway->options_.evidence_wait_ms,
            [queue = st.queue, result = st.durability,
             mu = st.durability_mu](absl::Status status) {
              {
                std::lock_guard<std::mutex> lock(*mu);
                *result = std::move(status);
              }
              queue->PostDurabilityMarker();
            });
        return NextFromWorker(timeout_ms);
      }
    }
    st.done = true;
    return ReleaseHeldCallsThen(st, std::move(*event));
  }
  return event;
}

Gateway::Output Gateway::DecideOutput(Call::State& st, v1::StreamEvent* event) {
  if (event->has_terminal()) {
    if (!st.denied.ok()) {
      // The worker's own end (usually cancelled, by the denial) keeps its usage and
      // timings; what it reports is the denial.
      v1::Terminal* t = event->mutable_terminal();
      t->set_finish_reason(v1::FINISH_ERROR);
      ToProto(st.denied, t->mutable_status());
    }
    return Output::kPass;
  }
  if (!st.denied.ok()) return Output::kDrop;  // after a denied call nothing more goes out
  if (!event->has_tool_call()) return Output::kPass;
  const v1::ToolCallRef& call = event->tool_call().call();
  policy::PolicyRequest ask;
  ask.principal = st.principal;
  ask.tools.push_back(policy::ToolCallFromJson(call.name(), call.arguments_json()));
  policy::Decision decision = policy::Decide(*st.snapshot, ask);
  if (decision.verdict != policy::Verdict::kDeny &&
      std::find(st.offered_tools.begin(), st.offered_tools.end(), call.name()) ==
          st.offered_tools.end()) {
    // Granted, but not a tool this request offered the model (or one the policy
    // stripped): a worker validates calls against the offered tools, so only a faulty or
    // rogue one sends this, and it is not passed on.
    decision.verdict = policy::Verdict::kDeny;
    decision.rule_id = "request";
    decision.reason = "tool_not_offered";
  }
  const bool allowed = decision.verdict != policy::Verdict::kDeny;
  // The ledger gets the call's name, index, verdict and rule, never its argument
  // values (a denied call may name a secret path).
  Value record = Value::EmptyObject();
  record.Set("principal", Value::String(st.principal));
  record.Set("tool", Value::String(call.name()));
  record.Set("index", Value::Int(event->tool_call().index()));
  record.Set("verdict", Value::String(policy::VerdictName(decision.verdict)));
  record.Set("rule_id", Value::String(decision.rule_id));
  if (!allowed) record.Set("reason", Value::String(decision.reason));
  record.Set("policy_sha256", Value::String(decision.policy_sha256));
  RecordEvent(st.request_id, "tool_call.decided", record);
  if (allowed) return Output::kHold;
  st.denied = ReasonError(
      "tool_call_denied",
      absl::StrCat("the model called tool '", call.name(), "', which the policy denies to '",
                   st.principal, "': rule ", decision.rule_id, " (", decision.reason, ")"));
  st.held_calls.clear();
  // Stop the work; the worker's Terminal ends the request (and is charged).
  options_.broker->Cancel(st.request_id, "tool_call_denied");
  return Output::kDrop;
}

// The outcome goes to the ledger (and the budget is settled) before the client sees
// the end of the response.
void Gateway::RecordOutcome(Call::State& st, const v1::Terminal& terminal, int64_t now_us) {
  const std::string& request_id = st.request_id;
  if (options_.recorder != nullptr) {
    RecordEvent(request_id, "request.evidence",
                st.evidence->Finish(terminal, st.bundle_sha, now_us));
  }
  // What the request used: Terminal.usage on every path. A request the broker ended
  // (cancelled, deadline_exceeded) carries its worker's own usage: the broker waits for
  // the worker's FINAL, so this runs, and the slot is freed, once the worker has stopped.
  // A worker lost (or one that never answered the CANCEL) leaves the broker's count: the
  // router's prompt count and the worker's last running count of generated tokens
  // (docs/router.md, "Budgets and rates"). Only a Terminal without any usage after output
  // (a worker that reports none) falls back to the router's prompt count and one token
  // per output event, so an answer is never free.
  uint32_t prompt_used = terminal.usage().prompt_tokens();
  uint32_t completion_used = terminal.usage().completion_tokens();
  if (prompt_used == 0 && completion_used == 0 && st.output_events > 0) {
    prompt_used = st.prompt_tokens;
    completion_used = static_cast<uint32_t>(st.output_events);
  }
  metrics_.RequestFinished((now_us - st.received_us) / 1e6, prompt_used, completion_used);
  Unregister(request_id);
  if (st.settlement) st.settlement->used = int64_t{prompt_used} + completion_used;
  absl::Status outcome = openai::TerminalStatus(terminal);
  Value finished = Value::EmptyObject();
  finished.Set("gen_ai.request.model", Value::String(st.model));
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
    RecordEvent(request_id, "request.finished", finished);
  } else {
    finished.Set("error_reason", Value::String(http::ErrorCodeOf(outcome)));
    finished.Set("error_code", Value::String(CodeName(outcome.code())));
    RecordEvent(request_id, "request.failed", finished);
  }
}

absl::Status Gateway::EvidenceHealthy() const {
  if (options_.recorder == nullptr) return absl::OkStatus();
  absl::Status healthy = options_.recorder->Healthy();
  if (healthy.ok()) return healthy;
  // The database's own text (event ids, table names, an owner's trigger) stays in the
  // writer's log: clients and the unauthenticated /readyz get the stable code only
  // (found by a red team).
  return ReasonError("evidence_unavailable",
                     "the ledger cannot keep evidence; the router's log says why");
}

absl::Status Gateway::Ready() const {
  GANTRY_RETURN_IF_ERROR(EvidenceHealthy());
  if (options_.broker->stats().live_workers == 0) return ReasonError("no_worker", "no live worker");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Gateway::Call>> Gateway::Admit(
    const std::shared_ptr<const policy::Snapshot>& snapshot, const std::string& principal_name,
    ChatInput input, http::HeaderList* headers) {
  // Evidence that cannot be kept: refuse new work rather than serve it unrecorded.
  GANTRY_RETURN_IF_ERROR(EvidenceHealthy());
  v1::InferenceRequest& req = input.request;
  const std::string request_id = NewId("req");
  req.set_request_id(request_id);
  req.set_principal(principal_name);
  if (absl::Status names = CheckRequestNames(req); !names.ok()) {
    // Refused before the policy reads a name of unbounded size (and recorded without
    // it). It still spends the principal's rate, as every refusal does below (the
    // principal's budgets come with any decision, here one that names nothing).
    if (options_.budgets) {
      policy::PolicyRequest who;
      who.principal = principal_name;
      const policy::Decision d = policy::Decide(*snapshot, who);
      if (!d.principal.empty()) {
        auto began = options_.budgets->Begin(d.principal, d.budgets);
        if (began.ok()) options_.budgets->Settle(*began, 0);  // the place stays taken
      }
    }
    Value refusal = Value::EmptyObject();
    refusal.Set("principal", Value::String(principal_name));
    refusal.Set("api", Value::String(input.api));
    refusal.Set("admitted", Value::Bool(false));
    refusal.Set("error_reason", Value::String("invalid_request"));
    RecordRefusal(principal_name, request_id, refusal);
    *headers = {{"x-gantry-request-id", request_id}};
    return names;
  }

  // The bundle's facts first: an omitted parameter is decided as the value the worker
  // will use, which depends on the bundle. An unknown model is reported after the
  // policy (a principal learns nothing about models it may not use).
  std::optional<ModelFacts> facts = FactsOf(req.model());

  // 3. Policy: parameters as they will be used, the offered tools, template kwargs.
  policy::PolicyRequest ask;
  ask.principal = principal_name;
  ask.model = req.model();
  using P = policy::Param;
  if (input.has_max_tokens) SetParam(&ask.params, P::kMaxTokens, req.max_tokens());
  if (req.sampling().has_temperature()) SetParam(&ask.params, P::kTemperature, req.sampling().temperature());
  if (req.sampling().has_top_p()) SetParam(&ask.params, P::kTopP, req.sampling().top_p());
  if (req.sampling().has_top_k()) SetParam(&ask.params, P::kTopK, req.sampling().top_k());
  if (req.sampling().has_seed()) SetParam(&ask.params, P::kSeed, static_cast<double>(req.sampling().seed()));
  if (req.stop_size() > 0) SetParam(&ask.params, P::kStopStrings, req.stop_size());
  if (req.tools_size() > 0) SetParam(&ask.params, P::kToolChoice, static_cast<double>(req.tool_choice()));
  if (req.has_parallel_tool_calls()) {
    SetParam(&ask.params, P::kParallelToolCalls, req.parallel_tool_calls() ? 1 : 0);
  }
  absl::Status malformed;  // refused below, once the refusal can be recorded
  if (!req.reasoning_effort().empty()) {
    auto effort = policy::ParseParamValue(P::kReasoningEffort, req.reasoning_effort());
    if (effort.ok()) {
      SetParam(&ask.params, P::kReasoningEffort, *effort);
    } else {
      malformed = ReasonError("invalid_request", effort.status().message());
    }
  }
  for (const auto& [key, value_json] : req.template_kwargs_json()) {
    absl::Status added = policy::AddTemplateKwarg(&ask, key, value_json);
    if (!added.ok() && malformed.ok()) malformed = ReasonError("invalid_request", added.message());
  }
  for (const v1::ToolDefinition& tool : req.tools()) ask.offered_tools.push_back(tool.name());
  ask.tool_choice_name = req.tool_choice_name();
  policy::CompleteAsServed(&ask, facts ? facts->default_max_tokens : policy::kDefaultMaxTokens);
  policy::Decision decision = policy::Decide(*snapshot, ask);
  http::HeaderList policy_headers = {{"x-gantry-policy-sha256", decision.policy_sha256},
                                     {"x-gantry-policy-rule", decision.rule_id},
                                     {"x-gantry-request-id", request_id}};
  Value admission = Value::EmptyObject();
  admission.Set("principal", Value::String(principal_name));
  admission.Set("api", Value::String(input.api));
  admission.Set("gen_ai.request.model", Value::String(req.model()));
  admission.Set("verdict", Value::String(policy::VerdictName(decision.verdict)));
  admission.Set("rule_id", Value::String(decision.rule_id));
  admission.Set("policy_sha256", Value::String(decision.policy_sha256));
  if (!decision.offered_tools.empty()) {
    Value offered = Value::EmptyArray();
    for (const policy::OfferedToolVerdict& t : decision.offered_tools) {
      Value v = Value::EmptyObject();
      v.Set("name", Value::String(t.name));
      v.Set("verdict", Value::String(t.granted ? "allow" : "deny"));
      v.Set("rule_id", Value::String(t.rule_id));
      offered.Append(std::move(v));
    }
    admission.Set("offered_tools", std::move(offered));
  }
  *headers = policy_headers;
  auto reject = [&](const absl::Status& status) {
    admission.Set("admitted", Value::Bool(false));
    admission.Set("error_reason", Value::String(http::ErrorCodeOf(status)));
    RecordRefusal(principal_name, request_id, admission);
    return status;
  };
  if (decision.verdict == policy::Verdict::kDeny && decision.reason == "unknown_principal") {
    return reject(ReasonError("unauthenticated", decision.message));
  }
  // Rates: every request of a known principal takes a place in its minute's window and
  // a slot in flight here, refused later or not: a denial, an unknown model, a prompt
  // too long for the context all spend the principal's rate (a refusal frees the slot;
  // the place stays taken). A request over its rate is refused rate_limited just before
  // its prompt is rendered; one refused by a cheaper check before that (malformed,
  // denied, no such model, no tool protocol) is answered with that reason, as `policy
  // explain` answers it.
  auto call = std::unique_ptr<Call>(new Call());
  Call::State& st = *call->s_;
  absl::Status over_rate;
  if (options_.budgets) {
    auto began = options_.budgets->Begin(decision.principal, decision.budgets);
    if (began.ok()) {
      st.settlement = std::make_unique<BudgetSettlement>(options_.budgets, *began);
    } else {
      over_rate = began.status();
    }
  }
  if (!malformed.ok()) return reject(malformed);
  if (decision.verdict == policy::Verdict::kDeny) {
    if (decision.reason == "invalid_request") {  // a malformed request, not a refusal
      return reject(ReasonError("invalid_request", decision.message));
    }
    return reject(ReasonError("policy_denied", absl::StrCat("denied by rule ", decision.rule_id,
                                                            " (", decision.reason, "): ",
                                                            decision.message)));
  }
  // The decided values go to the worker explicitly, so that no omitted field can mean
  // something the policy did not see. Sampling and parallel_tool_calls are always sent;
  // reasoning_effort and enable_thinking when a grant bounds them (unset, a template
  // keeps its own default, which the policy did not constrain).
  const policy::ParamValues& e = decision.effective;
  auto value_of = [&](P p) { return e.Has(p) ? e.Get(p) : ask.defaults.Get(p); };  // always has one
  absl::optional<uint32_t> policy_max_tokens;
  if (input.has_max_tokens) {
    req.set_max_tokens(static_cast<uint32_t>(e.Get(P::kMaxTokens)));
  } else if (e.Has(P::kMaxTokens)) {
    // No max_tokens asked: the decided value caps the default reserve below (which
    // the room left in the context may lower further).
    policy_max_tokens = static_cast<uint32_t>(e.Get(P::kMaxTokens));
  }
  req.mutable_sampling()->set_temperature(static_cast<float>(value_of(P::kTemperature)));
  req.mutable_sampling()->set_top_p(static_cast<float>(value_of(P::kTopP)));
  req.mutable_sampling()->set_top_k(static_cast<uint32_t>(value_of(P::kTopK)));
  // A seed is rewritten only when the policy changed or chose it: carried as a double,
  // a 64-bit seed would lose its low bits.
  for (const policy::ClampRecord& c : decision.clamps) {
    if (c.field == "seed") req.mutable_sampling()->set_seed(static_cast<uint64_t>(e.Get(P::kSeed)));
  }
  req.set_parallel_tool_calls(value_of(P::kParallelToolCalls) != 0);
  if (e.Has(P::kStopStrings) && e.Get(P::kStopStrings) < req.stop_size()) {
    // A clamped number of stop strings: the first ones are kept.
    const int keep = static_cast<int>(e.Get(P::kStopStrings));
    req.mutable_stop()->DeleteSubrange(keep, req.stop_size() - keep);
  }
  if (e.Has(P::kReasoningEffort)) {
    req.set_reasoning_effort(policy::FormatParamValue(P::kReasoningEffort, e.Get(P::kReasoningEffort)));
  }
  if (e.Has(P::kEnableThinking)) {
    (*req.mutable_template_kwargs_json())["enable_thinking"] =
        e.Get(P::kEnableThinking) != 0 ? "true" : "false";
  }
  if (!decision.clamps.empty()) {
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
  // The deadline: the policy's request_seconds from arrival, or the client's own
  // deadline when that comes first. The broker ends the request there (queued or
  // running) with deadline_exceeded and cancels it on its worker.
  uint64_t deadline_ms = static_cast<uint64_t>(input.received_us / 1000) +
                         static_cast<uint64_t>(decision.budgets.request_seconds) * 1000;
  if (input.client_deadline_unix_ms != 0) {
    deadline_ms = std::min(deadline_ms, input.client_deadline_unix_ms);
  }
  req.set_deadline_unix_ms(deadline_ms);
  // Never the client's say (a gRPC client sends an InferenceRequest of its own).
  req.set_special_tokens_in_content(decision.special_tokens_in_content);

  // 3b. Offered tools the principal is not granted are removed (advertised_tools:
  // strip; under reject the decision has refused the request already).
  if (!decision.stripped_tools.empty()) {
    auto* tools = req.mutable_tools();
    for (int i = 0; i < tools->size();) {
      const std::string& name = tools->Get(i).name();
      if (std::find(decision.stripped_tools.begin(), decision.stripped_tools.end(), name) !=
          decision.stripped_tools.end()) {
        tools->erase(tools->begin() + i);
      } else {
        ++i;
      }
    }
    if (req.tools_size() == 0) req.set_tool_choice(v1::TOOL_CHOICE_NONE);
    Value names = Value::EmptyArray();
    for (const auto& n : decision.stripped_tools) names.Append(Value::String(n));
    admission.Set("stripped_tools", std::move(names));
    policy_headers.emplace_back("x-gantry-tools-stripped",
                                absl::StrJoin(decision.stripped_tools, ","));
    *headers = policy_headers;
  }

  // 4. Model and bundle facts.
  if (!facts) {
    return reject(ReasonError("model_not_found", absl::StrCat("no model '", req.model(), "'")));
  }
  const uint32_t context_length = facts->context_length;
  const std::string& tool_protocol = facts->tool_protocol;
  const uint32_t default_max_tokens = facts->default_max_tokens;
  const std::string& bundle_sha = facts->bundle_sha256;
  // 5. Tools need a declared protocol (checked before any rendering).
  if (req.tools_size() > 0 && tool_protocol.empty()) {
    return reject(ReasonError(
        "tool_protocol_undeclared",
        absl::StrCat("model '", req.model(), "' declares no tool protocol; send the request "
                     "without tools, or use a model whose bundle declares one")));
  }
  // 6. The rates, charged above.
  if (!over_rate.ok()) return reject(over_rate);
  // 7. Render + count, no further than the context: a prompt longer than the context
  // is refused without tokenizing all of it.
  auto rendered = facts->entry->counter->Render(req, context_length);
  if (http::ErrorCodeOf(rendered.status()) == "context_length_exceeded") {
    return reject(ReasonError("context_length_exceeded",
                              absl::StrCat(rendered.status().message(),
                                           "; the model's context is ", context_length,
                                           " tokens")));
  }
  if (!rendered.ok()) return reject(rendered.status());
  const uint32_t prompt_count = rendered->tokens;
  // 8. Context.
  if (!input.has_max_tokens) {
    uint32_t room = context_length > prompt_count ? context_length - prompt_count : 0;
    uint32_t reserve = std::min(default_max_tokens, room);
    if (policy_max_tokens) reserve = std::min(reserve, *policy_max_tokens);
    if (policy_max_tokens && reserve < *policy_max_tokens) {
      // The room the prompt leaves lowers the output cap below what was decided: decide
      // the value that will be used (a grant's min may refuse it).
      policy::PolicyRequest lowered = ask;
      lowered.params.Set(P::kMaxTokens, reserve);
      const policy::Decision again = policy::Decide(*snapshot, lowered);
      if (again.verdict == policy::Verdict::kDeny) {
        return reject(ReasonError(
            "policy_denied", absl::StrCat("denied by rule ", again.rule_id, " (", again.reason,
                                          "): the prompt has ", prompt_count,
                                          " tokens, which leaves room for ", reserve,
                                          " output tokens of the context's ", context_length,
                                          ": ", again.message)));
      }
      if (again.effective.Has(P::kMaxTokens)) {
        reserve = static_cast<uint32_t>(again.effective.Get(P::kMaxTokens));  // a clamp up
      }
    }
    req.set_max_tokens(reserve);
  }
  if (prompt_count >= context_length ||
      uint64_t{prompt_count} + req.max_tokens() > context_length) {
    return reject(ReasonError(
        "context_length_exceeded",
        absl::StrCat("the prompt has ", prompt_count, " tokens and ", req.max_tokens(),
                     " are reserved for output; the model's context is ", context_length,
                     " tokens")));
  }
  // 9. Token budgets, by reservation of the prompt plus the whole output cap.
  if (st.settlement) {
    BudgetReservation& reservation = st.settlement->reservation;
    absl::Status reserved = options_.budgets->Reserve(
        decision.budgets, int64_t{prompt_count} + req.max_tokens(), &reservation);
    if (!reserved.ok()) return reject(reserved);
    if (reservation.warning_percent > 0) {
      Value warning = Value::EmptyObject();
      warning.Set("principal", Value::String(decision.principal));
      warning.Set("percent_of_day_budget", Value::Int(reservation.warning_percent));
      warning.Set("tokens_per_day", Value::Int(decision.budgets.tokens_per_day));
      RecordEvent(request_id, "budget.warning", warning);
    }
  }
  req.set_router_prompt_tokens(prompt_count);
  st.prompt_tokens = prompt_count;
  admission.Set("gen_ai.usage.input_tokens", Value::Int(prompt_count));
  admission.Set("gen_ai.request.max_tokens", Value::Int(req.max_tokens()));
  admission.Set("priority", Value::String(policy::PriorityName(decision.priority)));

  // The evidence record takes what it needs from the request before it moves on.
  st.evidence.emplace(req, *rendered, input.api, input.user_agent, input.received_us);
  // 10. Admission and dispatch.
  st.gateway = this;
  st.snapshot = snapshot;
  st.principal = principal_name;
  for (const v1::ToolDefinition& tool : req.tools()) st.offered_tools.push_back(tool.name());
  st.stripped_tools = decision.stripped_tools;
  st.request_id = request_id;
  st.model = req.model();
  st.received_us = input.received_us;
  st.created_unix_s = options_.clock->UnixMicros() / 1000000;
  st.bundle_sha = bundle_sha;
  st.priority = req.priority();
  if (st.priority == v1::PRIORITY_ACCESSIBILITY) {
    st.sentences = std::make_unique<SentenceChunkedStream>();
  }
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    live_owner_[request_id] = principal_name;
  }
  st.queue = std::make_shared<EventQueue>();
  absl::Status admitted = options_.broker->Submit(std::move(req), st.queue);
  if (!admitted.ok()) {
    st.done = true;  // never reached the broker: nothing to wait for
    return reject(admitted);  // ~Call unregisters it
  }
  admission.Set("admitted", Value::Bool(true));
  RecordEvent(request_id, "admission.decided", admission);
  {
    Value dispatch = Value::EmptyObject();
    dispatch.Set("gen_ai.request.model", Value::String(st.model));
    RecordEvent(request_id, "dispatch.sent", dispatch);
  }
  if (!bundle_sha.empty()) policy_headers.emplace_back("x-gantry-bundle-sha256", bundle_sha);
  st.headers = policy_headers;
  return call;
}


std::optional<Gateway::ModelFacts> Gateway::FactsOf(const std::string& model) const {
  auto it = options_.models.find(model);
  if (it == options_.models.end()) return std::nullopt;
  ModelFacts facts;
  facts.entry = &it->second;
  facts.context_length = it->second.context_length;
  facts.tool_protocol = it->second.tool_protocol;
  facts.default_max_tokens = it->second.default_max_tokens;
  if (auto bundle = options_.broker->LiveBundle(model)) {
    if (bundle->context_length() > 0) facts.context_length = bundle->context_length();
    facts.tool_protocol = bundle->tool_protocol();
    if (bundle->default_max_tokens() > 0) facts.default_max_tokens = bundle->default_max_tokens();
    facts.bundle_sha256 = bundle->identity_sha256();
  }
  return facts;
}

bool Gateway::CancelOwned(const std::string& principal, const std::string& request_id,
                          const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    auto it = live_owner_.find(request_id);
    if (it == live_owner_.end() || it->second != principal) return false;
  }
  // The broker ignores an id that finished in between.
  options_.broker->Cancel(request_id, reason);
  return true;
}

void Gateway::Unregister(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_owner_.erase(request_id);
}

}  // namespace gantry::router
