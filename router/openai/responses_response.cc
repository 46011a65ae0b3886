#include "router/openai/responses_response.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "router/http/error_response.h"
#include "router/openai/chat_response.h"

namespace gantry::openai {
namespace {

using json::Value;

Value UsageJsonResponses(const v1::Usage& usage) {
  Value out = Value::EmptyObject();
  out.Set("input_tokens", Value::Int(usage.prompt_tokens()));
  Value input_details = Value::EmptyObject();
  input_details.Set("cached_tokens", Value::Int(usage.cached_prompt_tokens()));
  out.Set("input_tokens_details", std::move(input_details));
  out.Set("output_tokens", Value::Int(usage.completion_tokens()));
  Value output_details = Value::EmptyObject();
  output_details.Set("reasoning_tokens", Value::Int(usage.reasoning_tokens()));
  out.Set("output_tokens_details", std::move(output_details));
  out.Set("total_tokens",
          Value::Int(int64_t{usage.prompt_tokens()} + int64_t{usage.completion_tokens()}));
  return out;
}

Value TextPart(const char* type, const std::string& text) {
  Value part = Value::EmptyObject();
  part.Set("type", Value::String(type));
  part.Set("text", Value::String(text));
  return part;
}

Value OutputTextPart(const std::string& text) {
  Value part = TextPart("output_text", text);
  part.Set("annotations", Value::EmptyArray());
  return part;
}

Value FunctionCallItem(const std::string& id, const v1::ToolCallRef& call,
                       const std::string& arguments, const char* status) {
  Value item = Value::EmptyObject();
  item.Set("id", Value::String(id));
  item.Set("type", Value::String("function_call"));
  item.Set("status", Value::String(status));
  item.Set("call_id", Value::String(call.id()));
  item.Set("name", Value::String(call.name()));
  item.Set("arguments", Value::String(arguments));
  return item;
}

}  // namespace

std::string EncodeReasoningCarrier(const std::string& reasoning) {
  return absl::StrCat(kReasoningCarrierPrefix, absl::Base64Escape(reasoning));
}

bool DecodeReasoningCarrier(absl::string_view carrier, std::string* reasoning) {
  if (!absl::ConsumePrefix(&carrier, kReasoningCarrierPrefix)) return false;
  return absl::Base64Unescape(carrier, reasoning);
}

std::string ResponseIdFor(const std::string& request_id) {
  absl::string_view id = request_id;
  absl::ConsumePrefix(&id, "req_");
  return absl::StrCat("resp_", id);
}

ResponsesRenderer::ResponsesRenderer(std::string id, std::string model, int64_t created_at,
                                     Value echo)
    : id_(std::move(id)), model_(std::move(model)), created_at_(created_at),
      echo_(std::move(echo)) {}

std::string ResponsesRenderer::Event(const char* type, Value fields) {
  Value event = Value::EmptyObject();
  event.Set("type", Value::String(type));
  event.Set("sequence_number", Value::Int(static_cast<int64_t>(sequence_++)));
  for (auto& member : fields.members()) event.Set(member.first, std::move(member.second));
  return absl::StrCat("event: ", type, "\ndata: ", json::DumpCompact(event), "\n\n");
}

std::string ResponsesRenderer::ItemId(const char* prefix, size_t index) const {
  absl::string_view hex = id_;
  absl::ConsumePrefix(&hex, "resp_");
  return absl::StrCat(prefix, hex, "_", index);
}

Value ResponsesRenderer::ReasoningItem(const std::string& status) const {
  Value item = Value::EmptyObject();
  item.Set("id", Value::String(ItemId("rs_", output_.size())));
  item.Set("type", Value::String("reasoning"));
  item.Set("status", Value::String(status));
  item.Set("summary", Value::EmptyArray());
  Value content = Value::EmptyArray();
  if (status != "in_progress" || !open_text_.empty()) {
    content.Append(TextPart("reasoning_text", open_text_));
  }
  item.Set("content", std::move(content));
  if (status == "completed") {
    item.Set("encrypted_content", Value::String(EncodeReasoningCarrier(open_text_)));
  }
  return item;
}

Value ResponsesRenderer::MessageItem(const std::string& status) const {
  Value item = Value::EmptyObject();
  item.Set("id", Value::String(ItemId("msg_", output_.size())));
  item.Set("type", Value::String("message"));
  item.Set("status", Value::String(status));
  item.Set("role", Value::String("assistant"));
  Value content = Value::EmptyArray();
  if (status != "in_progress" || !open_text_.empty()) content.Append(OutputTextPart(open_text_));
  item.Set("content", std::move(content));
  return item;
}

std::string ResponsesRenderer::Start() {
  Value fields = Value::EmptyObject();
  fields.Set("response", ResponseJson());
  std::string out = Event("response.created", fields);
  out += Event("response.in_progress", std::move(fields));
  return out;
}

std::string ResponsesRenderer::OpenItem(Open kind) {
  if (open_ == kind) return "";
  std::string out = CloseOpenItem();
  open_ = kind;
  open_text_.clear();
  const size_t index = output_.size();
  Value added = Value::EmptyObject();
  added.Set("output_index", Value::Int(index));
  if (kind == Open::kReasoning) {
    Value item = ReasoningItem("in_progress");
    item.Set("content", Value::EmptyArray());
    added.Set("item", std::move(item));
    out += Event("response.output_item.added", std::move(added));
  } else {
    Value item = MessageItem("in_progress");
    item.Set("content", Value::EmptyArray());
    added.Set("item", std::move(item));
    out += Event("response.output_item.added", std::move(added));
    Value part = Value::EmptyObject();
    part.Set("item_id", Value::String(ItemId("msg_", index)));
    part.Set("output_index", Value::Int(index));
    part.Set("content_index", Value::Int(0));
    part.Set("part", OutputTextPart(""));
    out += Event("response.content_part.added", std::move(part));
  }
  return out;
}

std::string ResponsesRenderer::CloseOpenItem() {
  if (open_ == Open::kNone) return "";
  const size_t index = output_.size();
  std::string out;
  Value item;
  Value done = Value::EmptyObject();
  done.Set("output_index", Value::Int(index));
  done.Set("content_index", Value::Int(0));
  done.Set("text", Value::String(open_text_));
  if (open_ == Open::kReasoning) {
    done.Set("item_id", Value::String(ItemId("rs_", index)));
    out += Event("response.reasoning_text.done", std::move(done));
    item = ReasoningItem("completed");
  } else {
    const std::string item_id = ItemId("msg_", index);
    done.Set("item_id", Value::String(item_id));
    out += Event("response.output_text.done", std::move(done));
    Value part = Value::EmptyObject();
    part.Set("item_id", Value::String(item_id));
    part.Set("output_index", Value::Int(index));
    part.Set("content_index", Value::Int(0));
    part.Set("part", OutputTextPart(open_text_));
    out += Event("response.content_part.done", std::move(part));
    item = MessageItem("completed");
  }
  Value item_done = Value::EmptyObject();
  item_done.Set("output_index", Value::Int(index));
  item_done.Set("item", item);
  out += Event("response.output_item.done", std::move(item_done));
  output_.push_back(std::move(item));
  open_ = Open::kNone;
  open_text_.clear();
  return out;
}

std::string ResponsesRenderer::OnEvent(const v1::StreamEvent& event) {
  if (finished_) return "";
  switch (event.event_case()) {
    case v1::StreamEvent::kText:
    case v1::StreamEvent::kReasoning: {
      const bool text = event.event_case() == v1::StreamEvent::kText;
      const std::string& delta = text ? event.text().text() : event.reasoning().text();
      if (delta.empty()) return "";
      std::string out = OpenItem(text ? Open::kMessage : Open::kReasoning);
      const size_t index = output_.size();
      open_text_ += delta;
      Value fields = Value::EmptyObject();
      fields.Set("item_id", Value::String(ItemId(text ? "msg_" : "rs_", index)));
      fields.Set("output_index", Value::Int(index));
      fields.Set("content_index", Value::Int(0));
      fields.Set("delta", Value::String(delta));
      if (text) fields.Set("logprobs", Value::EmptyArray());
      out += Event(text ? "response.output_text.delta" : "response.reasoning_text.delta",
                   std::move(fields));
      return out;
    }
    case v1::StreamEvent::kToolCall: {
      std::string out = CloseOpenItem();
      const size_t index = output_.size();
      const v1::ToolCallRef& call = event.tool_call().call();
      const std::string item_id = ItemId("fc_", index);
      Value added = Value::EmptyObject();
      added.Set("output_index", Value::Int(index));
      added.Set("item", FunctionCallItem(item_id, call, "", "in_progress"));
      out += Event("response.output_item.added", std::move(added));
      Value delta = Value::EmptyObject();
      delta.Set("item_id", Value::String(item_id));
      delta.Set("output_index", Value::Int(index));
      delta.Set("delta", Value::String(call.arguments_json()));
      out += Event("response.function_call_arguments.delta", std::move(delta));
      Value done = Value::EmptyObject();
      done.Set("item_id", Value::String(item_id));
      done.Set("output_index", Value::Int(index));
      done.Set("name", Value::String(call.name()));
      done.Set("arguments", Value::String(call.arguments_json()));
      out += Event("response.function_call_arguments.done", std::move(done));
      Value item = FunctionCallItem(item_id, call, call.arguments_json(), "completed");
      Value item_done = Value::EmptyObject();
      item_done.Set("output_index", Value::Int(index));
      item_done.Set("item", item);
      out += Event("response.output_item.done", std::move(item_done));
      output_.push_back(std::move(item));
      return out;
    }
    case v1::StreamEvent::kTerminal: {
      finished_ = true;
      terminal_ = event.terminal();
      error_ = TerminalStatus(terminal_);
      Value fields = Value::EmptyObject();
      if (!error_.ok()) {
        // The open item stays as it was (in_progress) in the failed response.
        status_ = "failed";
        fields.Set("response", ResponseJson());
        return Event("response.failed", std::move(fields));
      }
      std::string out = CloseOpenItem();
      const bool incomplete = terminal_.finish_reason() == v1::FINISH_LENGTH;
      status_ = incomplete ? "incomplete" : "completed";
      fields.Set("response", ResponseJson());
      out += Event(incomplete ? "response.incomplete" : "response.completed", std::move(fields));
      return out;
    }
    default:
      return "";  // Usage: Terminal.usage is authoritative
  }
}

Value ResponsesRenderer::ResponseJson() const {
  Value root = Value::EmptyObject();
  root.Set("id", Value::String(id_));
  root.Set("object", Value::String("response"));
  root.Set("created_at", Value::Int(created_at_));
  root.Set("status", Value::String(status_));
  root.Set("model", Value::String(model_));
  Value output = Value::EmptyArray();
  for (const Value& item : output_) output.Append(item);
  if (open_ == Open::kReasoning) output.Append(ReasoningItem("in_progress"));
  if (open_ == Open::kMessage) output.Append(MessageItem("in_progress"));
  root.Set("output", std::move(output));
  if (status_ == "failed") {
    Value error = Value::EmptyObject();
    error.Set("code", Value::String(http::ErrorCodeOf(error_)));
    error.Set("message", Value::String(std::string(error_.message())));
    root.Set("error", std::move(error));
  } else {
    root.Set("error", Value());
  }
  if (status_ == "incomplete") {
    Value details = Value::EmptyObject();
    details.Set("reason", Value::String("max_output_tokens"));
    root.Set("incomplete_details", std::move(details));
  } else {
    root.Set("incomplete_details", Value());
  }
  // The request's own settings, as the API echoes them; defaults where not sent.
  root.Set("instructions", Value());
  root.Set("tools", Value::EmptyArray());
  root.Set("tool_choice", Value::String("auto"));
  root.Set("parallel_tool_calls", Value::Bool(true));
  root.Set("max_output_tokens", Value());
  root.Set("temperature", Value());
  root.Set("top_p", Value());
  root.Set("metadata", Value::EmptyObject());
  root.Set("text", json::Parse(R"({"format":{"type":"text"}})").value());
  for (const auto& member : echo_.members()) root.Set(member.first, member.second);
  root.Set("store", Value::Bool(false));
  root.Set("previous_response_id", Value());
  root.Set("truncation", Value::String("disabled"));
  if (finished_ && (status_ == "completed" || status_ == "incomplete" || status_ == "failed")) {
    root.Set("usage", UsageJsonResponses(terminal_.usage()));
  } else {
    root.Set("usage", Value());
  }
  return root;
}

}  // namespace gantry::openai
