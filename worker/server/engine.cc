#include "worker/server/engine.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/status.h"
#include "tokenizer-svc/conversation/prompt.h"
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

}  // namespace

namespace {
model::Session::Options SessionOptions(kernels::ThreadPool* pool) {
  model::Session::Options options;
  options.pool = pool;
  return options;
}
}  // namespace

Engine::Engine(const ServingBundle& bundle, int capacity, int threads)
    : bundle_(bundle),
      pool_(threads > 1 ? std::make_unique<kernels::ThreadPool>(threads) : nullptr),
      session_(*bundle.model, capacity, SessionOptions(pool_.get())) {}


void Engine::Run(const v1::InferenceRequest& request, const std::atomic<bool>& cancel,
                 const Emit& emit) {
  const auto start = Clock::now();
  uint64_t seq = 0;
  completion_tokens_ = 0;
  v1::Usage usage;
  v1::Timings timings;
  auto event = [&]() {
    v1::StreamEvent e;
    e.set_request_id(request.request_id());
    e.set_seq(seq++);
    return e;
  };
  auto finish = [&](v1::FinishReason reason, const absl::Status& status) {
    v1::StreamEvent e = event();
    v1::Terminal* t = e.mutable_terminal();
    t->set_finish_reason(status.ok() ? reason : v1::FINISH_ERROR);
    if (reason == v1::FINISH_CANCELLED) t->set_finish_reason(v1::FINISH_CANCELLED);
    ToProto(status, t->mutable_status());
    *t->mutable_usage() = usage;
    *t->mutable_timings() = timings;
    *t->mutable_bundle() = bundle_.identity;
    emit(std::move(e));
  };

  // 1. Tools need a declared protocol; checked before any rendering or generation.
  if (request.tools_size() > 0 && bundle_.identity.tool_protocol().empty()) {
    finish(v1::FINISH_ERROR, ReasonError("tool_protocol_undeclared",
                                         absl::StrCat("model ", bundle_.identity.model(),
                                                      " declares no tool protocol; send the "
                                                      "request without tools")));
    return;
  }
  // The declared protocol's parser and the validation of calls (or a pass-through when
  // no tools were advertised). Bad tools or tool_choice fail here, before rendering.
  auto protocol = toolcall::ParseToolProtocol(bundle_.identity.tool_protocol());
  if (!protocol.ok()) {
    finish(v1::FINISH_ERROR, protocol.status());
    return;
  }
  toolcall::ParserOptions parser_options;
  // Templates that write <think>...</think> get reasoning split from text.
  parser_options.reasoning = bundle_.chat_template->source().find("<think>") != std::string::npos;
  // 2-3. Render with the bundle's own template and tokenize: the template's control
  // tokens are special tokens, the client's text never becomes one (prompt.h).
  if (request.messages_size() == 0) {
    finish(v1::FINISH_ERROR, ReasonError("invalid_request", "the request has no messages"));
    return;
  }
  auto built = conversation::BuildPrompt(*bundle_.chat_template, *bundle_.tokenizer, request);
  if (!built.ok()) {
    finish(v1::FINISH_ERROR, built.status());
    return;
  }
  const std::string* prompt_text = &built->text;
  const std::vector<int32_t>* prompt = &built->ids;
  usage.set_prompt_tokens(static_cast<uint32_t>(prompt->size()));
  usage.set_prompt_ids_sha256(TokenIdsSha256Hex(*prompt));
  {
    // A prompt that ends inside an opened <think> makes the output start in reasoning.
    const size_t open = prompt_text->rfind("<think>");
    parser_options.starts_in_reasoning =
        parser_options.reasoning && open != std::string::npos &&
        prompt_text->find("</think>", open) == std::string::npos;
  }
  auto calls = toolcall::ToolCallStream::Create(*protocol, request, parser_options);
  if (!calls.ok()) {
    finish(v1::FINISH_ERROR, calls.status());
    return;
  }
  // 4. The context contract.
  const uint32_t max_tokens = request.max_tokens() > 0 ? request.max_tokens()
                                                       : bundle_.identity.default_max_tokens();
  if (prompt->empty() || prompt->size() + max_tokens > static_cast<size_t>(session_.capacity())) {
    finish(v1::FINISH_ERROR,
           ReasonError("context_length_exceeded",
                       absl::StrCat(prompt->size(), " prompt tokens + ", max_tokens,
                                    " reserved output exceed the context of ", session_.capacity())));
    return;
  }
  // 5. Prefix reuse within one principal; at least one token is evaluated for logits.
  size_t common = 0;
  if (session_principal_ == request.principal()) {
    const auto& cached = session_.tokens();
    while (common < cached.size() && common < prompt->size() && cached[common] == (*prompt)[common]) ++common;
    common = std::min(common, prompt->size() - 1);
  }
  session_.Truncate(static_cast<int>(common));
  session_principal_ = request.principal();
  usage.set_cached_prompt_tokens(static_cast<uint32_t>(common));

  // The prefill, chunk by chunk (Session::Eval's own chunks: the same results), so that
  // a cancel lands within one chunk. A cancelled prefill reports the positions it holds
  // (the reused prefix and the chunks evaluated) as its prompt tokens; those stay cached
  // for the principal's next request like any complete prefix.
  std::vector<float> logits;
  const auto prefill_start = Clock::now();
  absl::Status s;
  for (size_t at = common; at < prompt->size(); at += model::Session::kMaxChunk) {
    if (cancel.load(std::memory_order_relaxed)) {
      timings.set_prefill_us(MicrosSince(prefill_start));
      usage.set_prompt_tokens(static_cast<uint32_t>(session_.n_past()));
      finish(v1::FINISH_CANCELLED, ReasonError("cancelled", "the request was cancelled"));
      return;
    }
    const size_t end = std::min(prompt->size(), at + model::Session::kMaxChunk);
    s = session_.Eval(std::vector<int32_t>(prompt->begin() + at, prompt->begin() + end), &logits);
    if (!s.ok()) break;
  }
  timings.set_prefill_us(MicrosSince(prefill_start));
  if (!s.ok()) {
    session_.Truncate(0);
    finish(v1::FINISH_ERROR, s);
    return;
  }

  // 6. Generate.
  std::vector<int32_t> forced;
  size_t forced_next = 0;
  if (bundle_.script) {
    const std::string& last = request.messages_size() > 0
                                  ? request.messages(request.messages_size() - 1).content()
                                  : std::string();
    auto ids = bundle_.tokenizer->Encode(bundle_.script->TextFor(last, request.tools_size() > 0));
    if (!ids.ok()) {
      finish(v1::FINISH_ERROR, ids.status());
      return;
    }
    forced = *ids;
    if (!bundle_.stop_ids.empty()) forced.push_back(bundle_.stop_ids.front());
  }
  SamplingConfig sampling;
  const auto& sp = request.sampling();
  if (sp.has_temperature()) sampling.temperature = sp.temperature();
  if (sp.has_top_k()) sampling.top_k = static_cast<int>(sp.top_k());
  if (sp.has_top_p()) sampling.top_p = sp.top_p();
  if (sp.has_min_p()) sampling.min_p = sp.min_p();
  sampling.seed = sp.has_seed() ? sp.seed() : static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  Sampler sampler(sampling);
  tokenizer::StreamDecoder decoder(bundle_.tokenizer, /*skip_special=*/true);
  std::string text;      // everything decoded so far
  size_t emitted = 0;    // bytes of `text` already sent
  const size_t longest_stop = [&] {
    size_t n = 0;
    for (const auto& stop : request.stop()) n = std::max(n, stop.size());
    return n;
  }();
  // Decoded text goes through the tool-call stream, which emits text and reasoning
  // deltas at once and complete, validated calls when their closing syntax arrives.
  absl::Status calls_status;
  std::vector<v1::StreamEvent> out;
  auto emit_all = [&]() {
    for (v1::StreamEvent& payload : out) {
      v1::StreamEvent e = event();
      e.MergeFrom(payload);
      e.set_request_id(request.request_id());
      if (timings.first_token_us() == 0) timings.set_first_token_us(MicrosSince(start));
      emit(std::move(e));
    }
    out.clear();
  };
  auto send_text = [&](size_t end) {
    if (end <= emitted || !calls_status.ok()) return;
    calls_status = (*calls)->Feed(absl::string_view(text).substr(emitted, end - emitted), &out);
    emitted = end;
    emit_all();
  };
  const auto decode_start = Clock::now();
  v1::FinishReason reason = v1::FINISH_LENGTH;
  bool hit_stop_string = false;
  for (uint32_t step = 0; step < max_tokens; ++step) {
    if (cancel.load(std::memory_order_relaxed)) {
      reason = v1::FINISH_CANCELLED;
      break;
    }
    int32_t token;
    if (bundle_.script) {
      token = forced_next < forced.size() ? forced[forced_next++] : bundle_.stop_ids.front();
    } else {
      token = sampler.Sample(logits);
    }
    if (std::find(bundle_.stop_ids.begin(), bundle_.stop_ids.end(), token) != bundle_.stop_ids.end()) {
      reason = v1::FINISH_STOP;
      break;
    }
    usage.set_completion_tokens(usage.completion_tokens() + 1);
    completion_tokens_ = usage.completion_tokens();
    auto piece = decoder.Push(token);
    if (piece.ok()) text += *piece;
    // Stop strings: end at the first occurrence; hold back a possible beginning of one.
    bool stopped = false;
    if (longest_stop > 0) {
      const size_t from = emitted > longest_stop ? emitted - longest_stop : 0;
      size_t cut = std::string::npos;
      for (const auto& stop : request.stop()) {
        if (stop.empty()) continue;
        size_t at = text.find(stop, from);
        if (at != std::string::npos) cut = std::min(cut, at);
      }
      if (cut != std::string::npos) {
        send_text(cut);
        stopped = true;
      } else {
        send_text(text.size() - HeldSuffix(text, request.stop()));
      }
    } else {
      send_text(text.size());
    }
    if (stopped) {
      reason = v1::FINISH_STOP;
      hit_stop_string = true;
      break;
    }
    if (!calls_status.ok()) break;  // an invalid call ends the generation
    if (step + 1 == max_tokens) break;  // the cap: no need for the next logits
    s = session_.Eval({token}, &logits);
    if (!s.ok()) {
      session_.Truncate(0);
      finish(v1::FINISH_ERROR, s);
      return;
    }
  }
  if (!hit_stop_string && reason != v1::FINISH_CANCELLED) {
    // Held-back text that never became a stop string belongs to the output.
    text += decoder.Finish();
    send_text(text.size());
  }
  if (calls_status.ok() && reason != v1::FINISH_CANCELLED) {
    calls_status = (*calls)->Finish(&out);
    emit_all();
  }
  timings.set_decode_us(MicrosSince(decode_start));
  if (reason == v1::FINISH_CANCELLED) {
    finish(reason, ReasonError("cancelled", "the request was cancelled"));
  } else if (!calls_status.ok()) {
    finish(v1::FINISH_ERROR, calls_status);
  } else {
    if (reason == v1::FINISH_STOP && (*calls)->calls() > 0) reason = v1::FINISH_TOOL_CALLS;
    finish(reason, absl::OkStatus());
  }
}

}  // namespace gantry::server
