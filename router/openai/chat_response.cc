#include "router/openai/chat_response.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "gantry/v1/status.pb.h"
#include "router/http/error_response.h"

namespace gantry::openai {
namespace {

using json::Value;

Value ToolCallJson(const v1::ToolCallEvent& call, bool with_index) {
  Value function = Value::EmptyObject();
  function.Set("name", Value::String(call.call().name()));
  function.Set("arguments", Value::String(call.call().arguments_json()));
  Value out = Value::EmptyObject();
  if (with_index) out.Set("index", Value::Int(call.index()));
  out.Set("id", Value::String(call.call().id()));
  out.Set("type", Value::String("function"));
  out.Set("function", std::move(function));
  return out;
}

Value Envelope(const ResponseMeta& meta, const char* object) {
  Value root = Value::EmptyObject();
  root.Set("id", Value::String(meta.id));
  root.Set("object", Value::String(object));
  root.Set("created", Value::Int(meta.created));
  root.Set("model", Value::String(meta.model));
  return root;
}

std::string Sse(const Value& v) { return absl::StrCat("data: ", json::DumpCompact(v), "\n\n"); }

}  // namespace

std::string CompletionIdFor(const std::string& request_id) {
  absl::string_view id = request_id;
  absl::ConsumePrefix(&id, "req_");
  return absl::StrCat("chatcmpl-", id);
}

const char* FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_STOP: return "stop";
    case v1::FINISH_LENGTH: return "length";
    case v1::FINISH_TOOL_CALLS: return "tool_calls";
    default: return "";
  }
}

Value UsageJson(const v1::Usage& usage) {
  Value out = Value::EmptyObject();
  out.Set("prompt_tokens", Value::Int(usage.prompt_tokens()));
  out.Set("completion_tokens", Value::Int(usage.completion_tokens()));
  out.Set("total_tokens",
          Value::Int(int64_t{usage.prompt_tokens()} + int64_t{usage.completion_tokens()}));
  Value prompt_details = Value::EmptyObject();
  prompt_details.Set("cached_tokens", Value::Int(usage.cached_prompt_tokens()));
  out.Set("prompt_tokens_details", std::move(prompt_details));
  Value completion_details = Value::EmptyObject();
  completion_details.Set("reasoning_tokens", Value::Int(usage.reasoning_tokens()));
  out.Set("completion_tokens_details", std::move(completion_details));
  // Gantry's evidence: which prompt ran (docs/router.md).
  if (!usage.prompt_ids_sha256().empty()) {
    out.Set("gantry_prompt_ids_sha256", Value::String(usage.prompt_ids_sha256()));
  }
  return out;
}

absl::Status TerminalStatus(const v1::Terminal& terminal) {
  switch (terminal.finish_reason()) {
    case v1::FINISH_STOP:
    case v1::FINISH_LENGTH:
    case v1::FINISH_TOOL_CALLS:
      return absl::OkStatus();
    case v1::FINISH_CANCELLED: {
      absl::Status s = FromProto(terminal.status());
      return s.ok() ? ReasonError("cancelled", "the request was cancelled") : s;
    }
    default: {
      absl::Status s = FromProto(terminal.status());
      if (s.ok()) return ReasonError("protocol_error", "a terminal event without a finish reason");
      if (terminal.status().retry_after_ms() > 0) {
        s = WithRetryAfter(s, terminal.status().retry_after_ms());
      }
      return s;
    }
  }
}

ChatStreamRenderer::ChatStreamRenderer(ResponseMeta meta, bool include_usage)
    : meta_(std::move(meta)), include_usage_(include_usage) {}

std::string ChatStreamRenderer::Chunk(Value delta, const char* finish_reason) {
  Value choice = Value::EmptyObject();
  choice.Set("index", Value::Int(0));
  choice.Set("delta", std::move(delta));
  choice.Set("logprobs", Value());
  choice.Set("finish_reason", finish_reason ? Value::String(finish_reason) : Value());
  Value root = Envelope(meta_, "chat.completion.chunk");
  Value choices = Value::EmptyArray();
  choices.Append(std::move(choice));
  root.Set("choices", std::move(choices));
  return Sse(root);
}

std::string ChatStreamRenderer::RoleChunkIfFirst() {
  if (sent_role_) return "";
  sent_role_ = true;
  Value delta = Value::EmptyObject();
  delta.Set("role", Value::String("assistant"));
  delta.Set("content", Value::String(""));
  return Chunk(std::move(delta), nullptr);
}

std::string ChatStreamRenderer::OnEvent(const v1::StreamEvent& event) {
  if (finished_) return "";
  switch (event.event_case()) {
    case v1::StreamEvent::kText: {
      if (event.text().text().empty()) return "";
      Value delta = Value::EmptyObject();
      delta.Set("content", Value::String(event.text().text()));
      return RoleChunkIfFirst() + Chunk(std::move(delta), nullptr);
    }
    case v1::StreamEvent::kReasoning: {
      if (event.reasoning().text().empty()) return "";
      Value delta = Value::EmptyObject();
      delta.Set("reasoning_content", Value::String(event.reasoning().text()));
      return RoleChunkIfFirst() + Chunk(std::move(delta), nullptr);
    }
    case v1::StreamEvent::kToolCall: {
      Value calls = Value::EmptyArray();
      calls.Append(ToolCallJson(event.tool_call(), /*with_index=*/true));
      Value delta = Value::EmptyObject();
      delta.Set("tool_calls", std::move(calls));
      return RoleChunkIfFirst() + Chunk(std::move(delta), nullptr);
    }
    case v1::StreamEvent::kUsage:
      return "";  // Terminal.usage is authoritative and always filled
    case v1::StreamEvent::kTerminal: {
      finished_ = true;
      const v1::Terminal& terminal = event.terminal();
      absl::Status status = TerminalStatus(terminal);
      if (!status.ok()) return absl::StrCat("data: ", http::ErrorJson(status), "\n\n");
      std::string out = RoleChunkIfFirst();
      out += Chunk(Value::EmptyObject(), FinishReasonName(terminal.finish_reason()));
      if (include_usage_) {
        Value root = Envelope(meta_, "chat.completion.chunk");
        root.Set("choices", Value::EmptyArray());
        root.Set("usage", UsageJson(terminal.usage()));
        out += Sse(root);
      }
      out += "data: [DONE]\n\n";
      return out;
    }
    default:
      return "";
  }
}

ChatCompletionAccumulator::ChatCompletionAccumulator(ResponseMeta meta)
    : meta_(std::move(meta)) {}

void ChatCompletionAccumulator::Add(const v1::StreamEvent& event) {
  if (finished_) return;
  switch (event.event_case()) {
    case v1::StreamEvent::kText: content_ += event.text().text(); break;
    case v1::StreamEvent::kReasoning: reasoning_ += event.reasoning().text(); break;
    case v1::StreamEvent::kToolCall: calls_.push_back(event.tool_call()); break;
    case v1::StreamEvent::kTerminal:
      finished_ = true;
      terminal_ = event.terminal();
      error_ = TerminalStatus(terminal_);
      break;
    default: break;
  }
}

Value ChatCompletionAccumulator::ToJson() const {
  Value message = Value::EmptyObject();
  message.Set("role", Value::String("assistant"));
  message.Set("content", content_.empty() && !calls_.empty() ? Value() : Value::String(content_));
  if (!reasoning_.empty()) message.Set("reasoning_content", Value::String(reasoning_));
  if (!calls_.empty()) {
    Value calls = Value::EmptyArray();
    for (const auto& call : calls_) calls.Append(ToolCallJson(call, /*with_index=*/false));
    message.Set("tool_calls", std::move(calls));
  }
  Value choice = Value::EmptyObject();
  choice.Set("index", Value::Int(0));
  choice.Set("message", std::move(message));
  choice.Set("logprobs", Value());
  choice.Set("finish_reason", Value::String(FinishReasonName(terminal_.finish_reason())));
  Value root = Envelope(meta_, "chat.completion");
  Value choices = Value::EmptyArray();
  choices.Append(std::move(choice));
  root.Set("choices", std::move(choices));
  root.Set("usage", UsageJson(terminal_.usage()));
  if (!terminal_.bundle().identity_sha256().empty()) {
    root.Set("system_fingerprint", Value::String(terminal_.bundle().identity_sha256()));
  }
  return root;
}

Value ModelListJson(const std::vector<ModelListing>& models, int64_t created) {
  Value data = Value::EmptyArray();
  for (const auto& listing : models) {
    Value model = Value::EmptyObject();
    model.Set("id", Value::String(listing.id));
    model.Set("object", Value::String("model"));
    model.Set("created", Value::Int(created));
    model.Set("owned_by", Value::String("gantry"));
    model.Set("context_length", Value::Int(listing.context_length));
    model.Set("max_output_tokens", Value::Int(listing.default_max_tokens));
    data.Append(std::move(model));
  }
  Value root = Value::EmptyObject();
  root.Set("object", Value::String("list"));
  root.Set("data", std::move(data));
  return root;
}

}  // namespace gantry::openai
