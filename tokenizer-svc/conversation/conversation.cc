#include "tokenizer-svc/conversation/conversation.h"

namespace gantry::conversation {
namespace {

using json::Value;

// Template variables a client may not set through template kwargs: what the request
// itself carries (and the policy checked: tools, reasoning effort), the tool lists some
// templates read besides `tools` (Llama 3.1's custom_tools and builtin_tools), and the
// special-token variables that come from the bundle.
bool IsReservedKwarg(const std::string& key) {
  static const char* const kReserved[] = {
      "messages",  "tools",     "add_generation_prompt", "custom_tools", "builtin_tools",
      "documents", "kwargs",    "reasoning_effort",      "bos_token",    "eos_token",
      "unk_token", "sep_token", "pad_token",             "cls_token",    "mask_token",
      "additional_special_tokens"};
  for (const char* reserved : kReserved) {
    if (key == reserved) return true;
  }
  return false;
}

Value ParsedOrString(const std::string& text) {
  auto v = json::Parse(text);
  return v.ok() ? *v : Value::String(text);
}

Value MessageJson(const v1::ChatMessage& m) {
  Value out = Value::EmptyObject();
  out.Set("role", Value::String(m.role()));
  out.Set("content", Value::String(m.content()));  // null is normalised to ""
  if (!m.reasoning_content().empty()) out.Set("reasoning_content", Value::String(m.reasoning_content()));
  if (m.tool_calls_size() > 0) {
    Value calls = Value::EmptyArray();
    for (const auto& call : m.tool_calls()) {
      Value function = Value::EmptyObject();
      function.Set("name", Value::String(call.name()));
      function.Set("arguments", ParsedOrString(call.arguments_json()));
      Value c = Value::EmptyObject();
      c.Set("id", Value::String(call.id()));
      c.Set("type", Value::String("function"));
      c.Set("function", std::move(function));
      calls.Append(std::move(c));
    }
    out.Set("tool_calls", std::move(calls));
  }
  if (!m.tool_call_id().empty()) out.Set("tool_call_id", Value::String(m.tool_call_id()));
  if (!m.name().empty()) out.Set("name", Value::String(m.name()));
  return out;
}

}  // namespace

json::Value TemplateTools(const google::protobuf::RepeatedPtrField<v1::ToolDefinition>& tools) {
  // Reads name, description and parameters_json only: prompt.h's ToolsCache keys by them.
  Value out = Value::EmptyArray();
  for (const auto& tool : tools) {
    Value function = Value::EmptyObject();
    function.Set("name", Value::String(tool.name()));
    if (!tool.description().empty()) function.Set("description", Value::String(tool.description()));
    if (!tool.parameters_json().empty()) function.Set("parameters", ParsedOrString(tool.parameters_json()));
    Value t = Value::EmptyObject();
    t.Set("type", Value::String("function"));
    t.Set("function", std::move(function));
    out.Append(std::move(t));
  }
  return out;
}

namespace {

Value Conversation(const v1::InferenceRequest& request, bool with_tools) {
  Value conversation = Value::EmptyObject();
  Value messages = Value::EmptyArray();
  for (const auto& m : request.messages()) messages.Append(MessageJson(m));
  conversation.Set("messages", std::move(messages));
  if (with_tools && request.tools_size() > 0) conversation.Set("tools", TemplateTools(request.tools()));
  conversation.Set("add_generation_prompt", Value::Bool(true));
  if (!request.reasoning_effort().empty()) {
    conversation.Set("reasoning_effort", Value::String(request.reasoning_effort()));
  }
  for (const auto& [key, text] : request.template_kwargs_json()) {
    if (IsReservedKwarg(key)) continue;
    auto value = json::Parse(text);
    if (value.ok()) conversation.Set(key, *value);
  }
  return conversation;
}

}  // namespace

json::Value TemplateConversation(const v1::InferenceRequest& request) {
  return Conversation(request, /*with_tools=*/true);
}

json::Value TemplateConversationWithoutTools(const v1::InferenceRequest& request) {
  return Conversation(request, /*with_tools=*/false);
}

}  // namespace gantry::conversation
