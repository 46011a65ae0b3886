#include "worker/server/engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/log.h"
#include "common/json_schema.h"
#include "common/sha256.h"
#include "common/status.h"
#include "tokenizer-svc/conversation/prompt.h"
#include "worker/constrain/json_grammar.h"
#include "worker/server/sampler.h"
#include "worker/toolcall/tool_call_stream.h"
#include "worker/toolcall/tool_protocol.h"

namespace gantry::server {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t MicrosSince(Clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string:
// text that must be held back because a stop string may be forming.
size_t HeldSuffix(const std::string& text, const google::protobuf::RepeatedPtrField<std::string>& stops) {
  size_t held = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > held; --n) {
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        held = n;
        break;
      }
    }
  }
  return held;
}

model::Forward::Options ForwardOptions(kernels::ThreadPool* pool) {
  model::Forward::Options options;
  options.pool = pool;
  return options;
}

}  // namespace

const char* SequenceStateName(SequenceState state) {
  switch (state) {
    case SequenceState::kWaiting: return "WAITING";
    case SequenceState::kPrefilling: return "PREFILLING";
    case SequenceState::kDecoding: return "DECODING";
    case SequenceState::kFinished: return "FINISHED";
  }
  return "UNKNOWN";
}

const char* SequenceEventName(SequenceEvent event) {
  switch (event) {
    case SequenceEvent::kSlotTaken: return "slot_taken";
    case SequenceEvent::kPromptEvaluated: return "prompt_evaluated";
    case SequenceEvent::kPreempted: return "preempted";
    case SequenceEvent::kEnded: return "ended";
  }
  return "unknown";
}

SequenceState NextSequenceState(SequenceState state, SequenceEvent event) {
  if (state == SequenceState::kFinished) return state;
  if (event == SequenceEvent::kEnded) return SequenceState::kFinished;
  if (state == SequenceState::kWaiting && event == SequenceEvent::kSlotTaken) return SequenceState::kPrefilling;
  if (state == SequenceState::kPrefilling && event == SequenceEvent::kPromptEvaluated) {
    return SequenceState::kDecoding;
  }
  if ((state == SequenceState::kPrefilling || state == SequenceState::kDecoding) &&
      event == SequenceEvent::kPreempted) {
    return SequenceState::kWaiting;
  }
  return state;
}

// Compiled response formats (by their type and schema text) and the masks of their
// states, shared by every sequence of the engine.
struct Engine::Constraints {
  static constexpr size_t kMaxGrammars = 256;
  // Between the parts of what a grammar is compiled from (a NUL: no name or schema
  // text holds one, so two different tool sets never share a key).
  static constexpr absl::string_view kSep{"\0", 1};
  static constexpr size_t kMaxCompiledBytes = size_t{16} << 20;
  size_t compiled_bytes = 0;
  struct Compiled {
    std::shared_ptr<const constrain::JsonGrammar> grammar;
    uint64_t id;
  };
  std::shared_ptr<const constrain::Vocabulary> vocabulary;
  constrain::MaskCache masks;
  std::map<std::string, Compiled> grammars;  // by SHA-256 of what was compiled
  uint64_t next_id = 1;

  using Compile = std::function<absl::StatusOr<std::shared_ptr<const constrain::JsonGrammar>>()>;
  absl::StatusOr<std::unique_ptr<constrain::Constraint>> Make(const ServingBundle& bundle, const std::string& what,
                                                              const Compile& compile, std::string trigger,
                                                              std::string suffix) {
    if (vocabulary == nullptr) {
      vocabulary = bundle.vocabulary ? bundle.vocabulary : constrain::Vocabulary::FromTokenizer(*bundle.tokenizer);
    }
    const std::string key = Sha256Hex(what);
    auto it = grammars.find(key);
    if (it == grammars.end()) {
      GANTRY_ASSIGN_OR_RETURN(std::shared_ptr<const constrain::JsonGrammar> grammar, compile());
      // Bounded by count and by the schema text compiled (a red team kept 35 MB per 8 MB
      // enum): past either, the cache starts over.
      if (grammars.size() >= kMaxGrammars || compiled_bytes + what.size() > kMaxCompiledBytes) {
        grammars.clear();
        compiled_bytes = 0;
      }
      compiled_bytes += what.size();
      it = grammars.emplace(key, Compiled{std::move(grammar), next_id++}).first;
    }
    return std::make_unique<constrain::Constraint>(vocabulary, it->second.grammar, it->second.id, &masks,
                                                   bundle.stop_ids, std::move(trigger), std::move(suffix));
  }

  // A response_format's value: from the first token, or after `trigger`.
  absl::StatusOr<std::unique_ptr<constrain::Constraint>> For(const v1::ResponseFormat& format,
                                                             const ServingBundle& bundle, std::string trigger) {
    auto compile = [&format]() -> absl::StatusOr<std::shared_ptr<const constrain::JsonGrammar>> {
      if (format.type() == v1::OUTPUT_JSON_OBJECT) return constrain::JsonGrammar::AnyObject();
      if (format.type() != v1::OUTPUT_JSON_SCHEMA) {
        return WithParam(ReasonError("unsupported_parameter", "unknown response_format type"), "response_format.type");
      }
      auto schema = json_schema::Schema::CompileText(format.schema_json());
      if (!schema.ok()) return WithParam(schema.status(), "response_format.json_schema.schema");
      auto compiled = constrain::JsonGrammar::Compile(*std::move(schema), constrain::Fidelity::kExact);
      if (!compiled.ok()) return WithParam(compiled.status(), "response_format.json_schema.schema");
      return compiled;
    };
    return Make(bundle, absl::StrCat("format", kSep, static_cast<int>(format.type()), kSep, format.schema_json()),
                compile, std::move(trigger), "");
  }

  // The hermes_json envelope's calls of the request's tools (only the named one under
  // a named tool_choice), each from "<tool_call>" to "</tool_call>". Tool schemas are
  // relaxed: what the grammar does not enforce, the validator after it does.
  absl::StatusOr<std::unique_ptr<constrain::Constraint>> ForToolCalls(const v1::InferenceRequest& request,
                                                                      const ServingBundle& bundle) {
    std::vector<constrain::JsonGrammar::Tool> tools;
    std::string what = "hermes_json";
    for (const auto& t : request.tools()) {
      if (request.tool_choice() == v1::TOOL_CHOICE_NAMED && t.name() != request.tool_choice_name()) continue;
      tools.push_back({t.name(), t.parameters_json()});
      absl::StrAppend(&what, kSep, t.name(), kSep, t.parameters_json());
    }
    auto compile = [&tools]() { return constrain::JsonGrammar::ForToolCall(tools, constrain::Fidelity::kRelaxed); };
    return Make(bundle, what, compile, "<tool_call>", "</tool_call>");
  }
};

// One request from Add() to its terminal event.
class Engine::Sequence {
 public:
  Sequence(const ServingBundle& bundle, const v1::InferenceRequest& request, const std::atomic<bool>* cancel,
           Emit emit)
      : bundle_(bundle), request_(request), cancel_(cancel), emit_(std::move(emit)), start_(Clock::now()) {}

  SequenceState state() const { return state_; }
  bool cancelled() const { return cancel_->load(std::memory_order_relaxed); }
  const v1::InferenceRequest& request() const { return request_; }
  bool admitted() const { return admitted_; }
  // Positions the sequence puts in its cache before its next decode step.
  size_t feed_size() const { return feed_.size(); }
  model::KvCache* cache() const { return cache_.get(); }
  uint64_t attached_at() const { return attached_at_; }

  // WAITING, first seen: the checks before any work. False when the request ended.
  bool Admit(int capacity, Constraints* constraints);
  // WAITING -> PREFILLING with a cache of `pool`, reusing the longest prefix its
  // principal has there; `order` ranks it among the attached (the newest is preempted
  // first).
  void Attach(model::KvPool* pool, int capacity, uint64_t order);
  // PREFILLING or DECODING -> WAITING: its blocks go back to the pool (cached for its
  // return); it resumes where it was, recomputing what was evicted meanwhile.
  void Preempt();
  // What this sequence evaluates in the next pass, at most `budget` rows (> 0) and
  // what its cache has room for; n == 0: nothing this pass.
  model::Forward::Item Input(int budget);
  // After the pass: `item` was this sequence's input.
  void Evaluated(const model::Forward::Item& item);
  // Ends the request as cancelled, wherever it is.
  void Cancel();

 private:
  void On(SequenceEvent event);
  v1::StreamEvent Event();
  void Finish(v1::FinishReason reason, const absl::Status& status);
  // The generation's end: held-back text, the tool-call stream's end, the terminal.
  void Conclude(v1::FinishReason reason, bool hit_stop_string);
  absl::Status CheckFormat() const;
  // One decode step on the logits of the last token evaluated.
  void Decide(const std::vector<float>& logits);
  void SendText(size_t end);
  void EmitAll();

  const ServingBundle& bundle_;
  const v1::InferenceRequest request_;
  const std::atomic<bool>* cancel_;
  const Emit emit_;
  const Clock::time_point start_;
  SequenceState state_ = SequenceState::kWaiting;
  bool admitted_ = false;
  bool decoded_ = false;  // reached DECODING (and may be back in WAITING, preempted)
  std::unique_ptr<model::KvCache> cache_;
  uint64_t attached_at_ = 0;
  uint32_t held_ = 0;  // prompt positions its cache held when last preempted
  uint64_t seq_ = 0;
  v1::Usage usage_;
  v1::Timings timings_;
  std::vector<int32_t> prompt_;
  // What goes into the cache before decoding: the prompt, or after a preemption of a
  // decoding sequence its prompt, the tokens sampled and the one sampled last.
  std::vector<int32_t> feed_;
  size_t feed_at_ = 0;  // positions of feed_ in the cache
  uint32_t max_tokens_ = 0;
  std::unique_ptr<toolcall::ToolCallStream> calls_;
  absl::Status calls_status_;
  std::vector<v1::StreamEvent> out_;
  std::optional<Sampler> sampler_;
  std::unique_ptr<constrain::Constraint> constraint_;  // under a response_format
  std::optional<tokenizer::StreamDecoder> decoder_;
  std::vector<int32_t> forced_;  // the scripted test double's tokens
  size_t forced_next_ = 0;
  std::string text_;     // everything decoded so far
  size_t emitted_ = 0;   // bytes of text_ already sent
  size_t longest_stop_ = 0;
  uint32_t step_ = 0;    // decode steps taken
  int32_t next_token_ = 0;
  std::vector<float> logits_;  // of the last token evaluated
  Clock::time_point prefill_start_, decode_start_;
};

void Engine::Sequence::On(SequenceEvent event) {
  const SequenceState next = NextSequenceState(state_, event);
  Log(LogLevel::kDebug, "worker.sequence",
      {{"state", SequenceStateName(next)}, {"from", SequenceStateName(state_)},
       {"on", SequenceEventName(event)}, {"request_id", request_.request_id()}});
  state_ = next;
}

v1::StreamEvent Engine::Sequence::Event() {
  v1::StreamEvent e;
  e.set_request_id(request_.request_id());
  e.set_seq(seq_++);
  return e;
}

void Engine::Sequence::Finish(v1::FinishReason reason, const absl::Status& status) {
  v1::StreamEvent e = Event();
  v1::Terminal* t = e.mutable_terminal();
  t->set_finish_reason(status.ok() ? reason : v1::FINISH_ERROR);
  if (reason == v1::FINISH_CANCELLED) t->set_finish_reason(v1::FINISH_CANCELLED);
  ToProto(status, t->mutable_status());
  *t->mutable_usage() = usage_;
  *t->mutable_timings() = timings_;
  *t->mutable_bundle() = bundle_.identity;
  On(SequenceEvent::kEnded);
  emit_(std::move(e), usage_.completion_tokens());
}

bool Engine::Sequence::Admit(int capacity, Constraints* constraints) {
  admitted_ = true;
  // 1. Tools need a declared protocol; checked before any rendering or generation.
  if (request_.tools_size() > 0 && bundle_.identity.tool_protocol().empty()) {
    Finish(v1::FINISH_ERROR, ReasonError("tool_protocol_undeclared",
                                         absl::StrCat("model ", bundle_.identity.model(),
                                                      " declares no tool protocol; send the "
                                                      "request without tools")));
    return false;
  }
  // The declared protocol's parser and the validation of calls (or a pass-through when
  // no tools were advertised). Bad tools or tool_choice fail here, before rendering.
  auto protocol = toolcall::ParseToolProtocol(bundle_.identity.tool_protocol());
  if (!protocol.ok()) {
    Finish(v1::FINISH_ERROR, protocol.status());
    return false;
  }
  toolcall::ParserOptions parser_options;
  // Templates that write <think>...</think> get reasoning split from text.
  parser_options.reasoning = bundle_.chat_template->source().find("<think>") != std::string::npos;
  // 2-3. Render with the bundle's own template and tokenize: the template's control
  // tokens are special tokens, the client's text never becomes one (prompt.h).
  if (request_.messages_size() == 0) {
    Finish(v1::FINISH_ERROR, ReasonError("invalid_request", "the request has no messages"));
    return false;
  }
  auto built = conversation::BuildPrompt(*bundle_.chat_template, *bundle_.tokenizer, request_);
  if (!built.ok()) {
    Finish(v1::FINISH_ERROR, built.status());
    return false;
  }
  prompt_ = std::move(built->ids);
  feed_ = prompt_;
  usage_.set_prompt_tokens(static_cast<uint32_t>(prompt_.size()));
  usage_.set_prompt_ids_sha256(TokenIdsSha256Hex(prompt_));
  {
    // A prompt that ends inside an opened <think> makes the output start in reasoning.
    const size_t open = built->text.rfind("<think>");
    parser_options.starts_in_reasoning = parser_options.reasoning && open != std::string::npos &&
                                         built->text.find("</think>", open) == std::string::npos;
  }
  // Under a response_format the answer is the value: no reasoning or call markup is
  // looked for in it (a red team's "<think>" inside a JSON string split the answer).
  const bool formatted = request_.response_format().type() != v1::OUTPUT_TEXT;
  if (formatted) parser_options.reasoning = parser_options.starts_in_reasoning = false;
  auto calls = toolcall::ToolCallStream::Create(formatted && request_.tools_size() == 0 ? toolcall::ToolProtocol::kNone
                                                                                         : *protocol,
                                                request_, parser_options);
  if (!calls.ok()) {
    Finish(v1::FINISH_ERROR, calls.status());
    return false;
  }
  calls_ = std::move(*calls);
  // 4. The context contract.
  max_tokens_ = request_.max_tokens() > 0 ? request_.max_tokens() : bundle_.identity.default_max_tokens();
  if (prompt_.empty() || prompt_.size() + max_tokens_ > static_cast<size_t>(capacity)) {
    Finish(v1::FINISH_ERROR,
           ReasonError("context_length_exceeded",
                       absl::StrCat(prompt_.size(), " prompt tokens + ", max_tokens_,
                                    " reserved output exceed the context of ", capacity)));
    return false;
  }
  // The sampler, or the scripted test double's forced tokens.
  if (bundle_.script) {
    const std::string& last = request_.messages(request_.messages_size() - 1).content();
    auto ids = bundle_.tokenizer->Encode(bundle_.script->TextFor(last, request_.tools_size() > 0));
    if (!ids.ok()) {
      Finish(v1::FINISH_ERROR, ids.status());
      return false;
    }
    forced_ = *ids;
    if (!bundle_.stop_ids.empty()) forced_.push_back(bundle_.stop_ids.front());
  }
  SamplingConfig sampling;
  const auto& sp = request_.sampling();
  if (sp.has_temperature()) sampling.temperature = sp.temperature();
  if (sp.has_top_k()) sampling.top_k = static_cast<int>(sp.top_k());
  if (sp.has_top_p()) sampling.top_p = sp.top_p();
  if (sp.has_min_p()) sampling.min_p = sp.min_p();
  if (sp.has_repetition_penalty()) sampling.repetition_penalty = sp.repetition_penalty();
  if (sp.has_presence_penalty()) sampling.presence_penalty = sp.presence_penalty();
  if (sp.has_frequency_penalty()) sampling.frequency_penalty = sp.frequency_penalty();
  const uint32_t vocab = static_cast<uint32_t>(bundle_.model->config().n_vocab);
  for (const auto& [id, bias] : sp.logit_bias()) {
    if (id >= vocab) {
      Finish(v1::FINISH_ERROR, ReasonError("invalid_request", absl::StrCat("logit_bias: token id ", id,
                                                                           " is outside the vocabulary of ", vocab)));
      return false;
    }
    sampling.logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  sampling.seed = sp.has_seed() ? sp.seed() : static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  sampler_.emplace(sampling, prompt_);
  // 5. The output's constraint: from the first token, or from the end of a reasoning
  // section the prompt opened.
  if (request_.response_format().type() != v1::OUTPUT_TEXT) {
    if (request_.tools_size() > 0) {
      Finish(v1::FINISH_ERROR, WithParam(ReasonError("unsupported_parameter",
                                                     "response_format together with tools is not "
                                                     "supported yet: send one or the other"),
                                         "response_format"));
      return false;
    }
    if (request_.stop_size() > 0) {  // a stop string would cut the value it promised
      Finish(v1::FINISH_ERROR, WithParam(ReasonError("unsupported_parameter",
                                                     "stop strings cannot end a response_format's value"),
                                         "stop"));
      return false;
    }
    // From the first token: a prompt that seems to open a reasoning section may do so
    // only through the client's text (a red team's "<think>" in a message switched the
    // constraint off), so the value is never waited for.
    auto constraint = constraints->For(request_.response_format(), bundle_, "");
    if (!constraint.ok()) {
      Finish(v1::FINISH_ERROR, constraint.status());
      return false;
    }
    constraint_ = std::move(*constraint);
  } else if (request_.tools_size() > 0 && *protocol == toolcall::ToolProtocol::kHermesJson &&
             request_.tool_choice() != v1::TOOL_CHOICE_NONE && bundle_.constrain_tool_calls && !bundle_.script) {
    // (The scripted test double forces its calls: they meet the validator alone.)
    auto constraint = constraints->ForToolCalls(request_, bundle_);
    if (!constraint.ok()) {
      Finish(v1::FINISH_ERROR, constraint.status());
      return false;
    }
    constraint_ = std::move(*constraint);
  }
  decoder_.emplace(bundle_.tokenizer, /*skip_special=*/true);
  for (const auto& stop : request_.stop()) longest_stop_ = std::max(longest_stop_, stop.size());
  return true;
}

void Engine::Sequence::Attach(model::KvPool* pool, int capacity, uint64_t order) {
  // 5. Prefix reuse within one principal; at least one token is evaluated for logits.
  cache_ = std::make_unique<model::KvCache>(pool, capacity, request_.principal());
  feed_at_ = static_cast<size_t>(cache_->Reuse(feed_, static_cast<int>(feed_.size()) - 1));
  attached_at_ = order;
  if (!decoded_ && held_ == 0) {  // first attached
    usage_.set_cached_prompt_tokens(static_cast<uint32_t>(feed_at_));
    prefill_start_ = Clock::now();
  }
  On(SequenceEvent::kSlotTaken);
}

void Engine::Sequence::Preempt() {
  if (state_ == SequenceState::kDecoding) {
    feed_ = cache_->tokens();
    feed_.push_back(next_token_);
  } else {
    held_ = std::max<uint32_t>(held_, static_cast<uint32_t>(cache_->n_past()));
  }
  cache_.reset();
  Log(LogLevel::kInfo, "worker.preempted",
      {{"request_id", request_.request_id()}, {"positions", std::to_string(feed_.size())}});
  On(SequenceEvent::kPreempted);
}

model::Forward::Item Engine::Sequence::Input(int budget) {
  model::Forward::Item item;
  item.cache = cache_.get();
  if (state_ == SequenceState::kDecoding) {
    item.tokens = &next_token_;
    item.n = 1;
    item.logits = &logits_;
    return item;
  }
  size_t n = std::min<size_t>(feed_.size() - feed_at_, static_cast<size_t>(budget));
  n = static_cast<size_t>(cache_->Grow(static_cast<int>(n)));
  item.tokens = feed_.data() + feed_at_;
  item.n = static_cast<int>(n);
  // Only the last position fed needs the head.
  item.logits = n > 0 && feed_at_ + n == feed_.size() ? &logits_ : nullptr;
  return item;
}

void Engine::Sequence::Evaluated(const model::Forward::Item& item) {
  if (!item.status.ok()) {
    if (state_ == SequenceState::kPrefilling) timings_.set_prefill_us(MicrosSince(prefill_start_));
    Finish(v1::FINISH_ERROR, item.status);
    return;
  }
  if (state_ == SequenceState::kPrefilling) {
    feed_at_ += item.n;
    if (feed_at_ < feed_.size()) return;
    On(SequenceEvent::kPromptEvaluated);
    if (decoded_) {  // back from a preemption: the next token is sampled as before
      Decide(*item.logits);
      return;
    }
    decoded_ = true;
    timings_.set_prefill_us(MicrosSince(prefill_start_));
    decode_start_ = Clock::now();
    if (max_tokens_ == 0) {
      Conclude(v1::FINISH_LENGTH, false);
      return;
    }
  }
  Decide(*item.logits);
}

void Engine::Sequence::Cancel() {
  if (decoded_) {  // decoding, or preempted while decoding
    Conclude(v1::FINISH_CANCELLED, false);
    return;
  }
  // Before or during the prefill: the prompt positions held are the work done.
  uint32_t held = held_;
  if (state_ == SequenceState::kPrefilling) {
    timings_.set_prefill_us(MicrosSince(prefill_start_));
    held = std::max(held, static_cast<uint32_t>(cache_->n_past()));
  }
  usage_.set_prompt_tokens(held);
  Finish(v1::FINISH_CANCELLED, ReasonError("cancelled", "the request was cancelled"));
}

void Engine::Sequence::EmitAll() {
  for (v1::StreamEvent& payload : out_) {
    v1::StreamEvent e = Event();
    e.MergeFrom(payload);
    e.set_request_id(request_.request_id());
    if (timings_.first_token_us() == 0) timings_.set_first_token_us(MicrosSince(start_));
    emit_(std::move(e), usage_.completion_tokens());
  }
  out_.clear();
}

// Decoded text goes through the tool-call stream, which emits text and reasoning
// deltas at once and complete, validated calls when their closing syntax arrives.
void Engine::Sequence::SendText(size_t end) {
  if (end <= emitted_ || !calls_status_.ok()) return;
  calls_status_ = calls_->Feed(absl::string_view(text_).substr(emitted_, end - emitted_), &out_);
  emitted_ = end;
  EmitAll();
}

void Engine::Sequence::Decide(const std::vector<float>& logits) {
  if (cancelled()) {
    Conclude(v1::FINISH_CANCELLED, false);
    return;
  }
  int32_t token;
  const std::vector<uint64_t>* allowed = constraint_ ? constraint_->Allowed() : nullptr;
  if (bundle_.script) {
    token = forced_next_ < forced_.size() ? forced_[forced_next_++] : bundle_.stop_ids.front();
  } else {
    token = sampler_->Sample(logits, allowed);
  }
  if (constraint_) {
    absl::Status fits = token < 0 ? ReasonError("invalid_output", "the constraint allows no token here")
                                  : constraint_->Accept(token);
    if (!fits.ok()) {
      calls_status_ = fits;
      Conclude(v1::FINISH_ERROR, false);
      return;
    }
  }
  if (std::find(bundle_.stop_ids.begin(), bundle_.stop_ids.end(), token) != bundle_.stop_ids.end()) {
    Conclude(v1::FINISH_STOP, false);
    return;
  }
  usage_.set_completion_tokens(usage_.completion_tokens() + 1);
  auto piece = decoder_->Push(token);
  if (piece.ok()) text_ += *piece;
  // Stop strings: end at the first occurrence; hold back a possible beginning of one.
  if (longest_stop_ > 0) {
    const size_t from = emitted_ > longest_stop_ ? emitted_ - longest_stop_ : 0;
    size_t cut = std::string::npos;
    for (const auto& stop : request_.stop()) {
      if (stop.empty()) continue;
      size_t at = text_.find(stop, from);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
    if (cut != std::string::npos) {
      SendText(cut);
      Conclude(v1::FINISH_STOP, /*hit_stop_string=*/true);
      return;
    }
    SendText(text_.size() - HeldSuffix(text_, request_.stop()));
  } else {
    SendText(text_.size());
  }
  if (!calls_status_.ok() || ++step_ == max_tokens_) {  // an invalid call, or the cap
    Conclude(v1::FINISH_LENGTH, false);
    return;
  }
  next_token_ = token;
}

// The answer under a response_format, checked again: the constraint's value is whole,
// it parses, and it validates against the schema.
absl::Status Engine::Sequence::CheckFormat() const {
  if (constraint_ == nullptr || !constraint_->complete()) {
    return ReasonError("invalid_output", "the answer ended before its JSON value was complete");
  }
  absl::string_view answer = text_;
  if (const size_t end = answer.rfind("</think>"); end != absl::string_view::npos && constraint_->started_late()) {
    answer.remove_prefix(end + 8);
  }
  auto value = json::Parse(answer);
  if (!value.ok()) return ReasonError("invalid_output", absl::StrCat("the answer is not JSON: ", value.status().message()));
  const json_schema::Schema& schema = constraint_->grammar().schema();
  if (request_.response_format().type() == v1::OUTPUT_JSON_OBJECT && !value->is_object()) {
    return ReasonError("invalid_output", "the answer is not a JSON object");
  }
  auto violations = schema.Validate(*value);
  if (!violations.empty()) {
    return ReasonError("invalid_output", absl::StrCat("the answer does not validate: ",
                                                      json_schema::JoinViolations(violations)));
  }
  return absl::OkStatus();
}

void Engine::Sequence::Conclude(v1::FinishReason reason, bool hit_stop_string) {
  if (!hit_stop_string && reason != v1::FINISH_CANCELLED) {
    // Held-back text that never became a stop string belongs to the output.
    text_ += decoder_->Finish();
    SendText(text_.size());
  }
  if (calls_status_.ok() && reason != v1::FINISH_CANCELLED) {
    calls_status_ = calls_->Finish(&out_);
    EmitAll();
  }
  if (calls_status_.ok() && reason == v1::FINISH_STOP && request_.response_format().type() != v1::OUTPUT_TEXT) {
    calls_status_ = CheckFormat();
  }
  timings_.set_decode_us(MicrosSince(decode_start_));
  if (reason == v1::FINISH_CANCELLED) {
    Finish(reason, ReasonError("cancelled", "the request was cancelled"));
  } else if (!calls_status_.ok()) {
    Finish(v1::FINISH_ERROR, calls_status_);
  } else {
    if (reason == v1::FINISH_STOP && calls_->calls() > 0) reason = v1::FINISH_TOOL_CALLS;
    Finish(reason, absl::OkStatus());
  }
}

Engine::Engine(const ServingBundle& bundle, int capacity, int slots, int threads, size_t kv_bytes,
               model::KvType kv_type)
    : bundle_(bundle),
      capacity_(capacity),
      slots_(std::max(1, slots)),
      pool_(bundle.model->config(), KvBlocks(bundle.model->config(), capacity, slots_, kv_bytes, kv_type), kv_type),
      thread_pool_(threads > 1 ? std::make_unique<kernels::ThreadPool>(threads) : nullptr),
      forward_(*bundle.model, ForwardOptions(thread_pool_.get())),
      constraints_(std::make_unique<Constraints>()) {
  PublishKvStatus();
}

Engine::~Engine() = default;

int Engine::KvBlocks(const model::ModelConfig& config, int capacity, int slots, size_t kv_bytes,
                     model::KvType kv_type) {
  const int one_context = model::KvPool::BlocksFor(capacity) + 1;
  if (kv_bytes == 0) return slots * one_context;
  const size_t blocks = kv_bytes / model::KvPool::BlockBytes(config, model::KvPool::Kept(config, kv_type));
  return static_cast<int>(std::clamp<size_t>(blocks, one_context, std::numeric_limits<int>::max()));
}

void Engine::Add(const v1::InferenceRequest& request, const std::atomic<bool>* cancel, Emit emit) {
  sequences_.push_back(std::make_unique<Sequence>(bundle_, request, cancel, std::move(emit)));
}

Engine::Sequence* Engine::Newest() const {
  Sequence* newest = nullptr;
  for (const auto& s : sequences_) {
    const SequenceState state = s->state();
    if (state != SequenceState::kPrefilling && state != SequenceState::kDecoding) continue;
    if (!newest || s->attached_at() > newest->attached_at()) newest = s.get();
  }
  return newest;
}

void Engine::Step() {
  // Admission, in the order requests came (a preempted one keeps its place): a request
  // waits while every slot is taken or, with others running, while the pool cannot
  // hold its prompt; the ones behind it wait too.
  int attached = 0;
  for (const auto& s : sequences_) {
    attached += s->state() == SequenceState::kPrefilling || s->state() == SequenceState::kDecoding;
  }
  for (auto& s : sequences_) {
    if (s->state() != SequenceState::kWaiting) continue;
    if (!s->admitted() && !s->Admit(capacity_, constraints_.get())) continue;
    if (attached >= slots_) break;
    if (attached > 0 && pool_.available() < model::KvPool::BlocksFor(s->feed_size() + 1)) break;
    s->Attach(&pool_, capacity_, ++attach_count_);
    ++attached;
  }
  // Cancellation, read once per sequence and step (a cancel that lands while the
  // batch is built waits for the next step: read twice, a sequence already in the
  // batch could end here and again after the pass).
  for (auto& s : sequences_) {
    if (s->state() != SequenceState::kFinished && s->cancelled()) s->Cancel();
  }
  // Room for every decoding sequence's next token, the oldest first: when the pool is
  // out of blocks, the newest attached sequence is preempted (its blocks released)
  // until there is (vLLM's recompute preemption).
  for (auto& s : sequences_) {
    if (s->state() != SequenceState::kDecoding) continue;
    while (s->state() == SequenceState::kDecoding && s->cache()->Grow(1) < 1) {
      Newest()->Preempt();
      ++preemptions_;
    }
  }
  // The pass: the decoding sequences first (one row each), then prompt chunks in
  // arrival order within the budget and the room the pool has.
  std::vector<Sequence*> batch;
  std::vector<model::Forward::Item> items;
  int budget = kMaxBatchTokens;
  bool prefilling = false;
  for (int pass = 0; pass < 2; ++pass) {
    const SequenceState wanted = pass == 0 ? SequenceState::kDecoding : SequenceState::kPrefilling;
    for (size_t i = 0; i < sequences_.size(); ++i) {
      Sequence& s = *sequences_[i];
      if (s.state() != wanted) continue;
      prefilling |= pass == 1;
      if (budget == 0) continue;
      model::Forward::Item item = s.Input(budget);
      if (item.n == 0) continue;
      budget -= item.n;
      items.push_back(item);
      batch.push_back(&s);
    }
  }
  // Prompts that found no room and nothing else to run: the newest gives way.
  if (items.empty() && prefilling) {
    Newest()->Preempt();
    ++preemptions_;
  }
  if (!items.empty()) forward_.Eval(&items);
  for (size_t i = 0; i < items.size(); ++i) batch[i]->Evaluated(items[i]);
  // The finished leave; their blocks stay cached for the next request.
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    it = (*it)->state() == SequenceState::kFinished ? sequences_.erase(it) : it + 1;
  }
  PublishKvStatus();
}

void Engine::PublishKvStatus() {
  kv_in_use_.store(pool_.in_use(), std::memory_order_relaxed);
  kv_cached_.store(pool_.cached(), std::memory_order_relaxed);
}

Engine::KvStatus Engine::kv_status() const {
  KvStatus status;
  status.block_tokens = model::KvPool::kBlockTokens;
  status.blocks = pool_.blocks();
  status.in_use = kv_in_use_.load(std::memory_order_relaxed);
  status.cached = kv_cached_.load(std::memory_order_relaxed);
  status.bytes = pool_.bytes();
  status.preemptions = preemptions();
  status.type = pool_.type();
  return status;
}

void Engine::Run(const v1::InferenceRequest& request, const std::atomic<bool>& cancel, const Emit& emit) {
  bool ended = false;
  Add(request, &cancel, [&](v1::StreamEvent e, uint32_t completion_tokens) {
    if (e.has_terminal()) ended = true;
    emit(std::move(e), completion_tokens);
  });
  while (!ended) Step();
}

int64_t Engine::cached_tokens() const { return pool_.tokens_held(); }

}  // namespace gantry::server
