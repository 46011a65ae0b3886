#include "router/openai/responses_request.h"

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "router/openai/request_fields.h"
#include "router/openai/responses_response.h"

namespace gantry::openai {
namespace {

using json::Value;

// Text part types the Responses API uses in input messages (input_text for user and,
// in practice, also assistant turns; output_text for replayed assistant output).
constexpr std::initializer_list<absl::string_view> kTextParts = {"input_text", "output_text",
                                                                 "text"};

// Builds the internal messages from the input items. Consecutive assistant output
// (reasoning, text, function calls) becomes ONE assistant message, the shape chat
// completions use for a turn; each function_call_output becomes a "tool" message.
class InputMapper {
 public:
  explicit InputMapper(v1::InferenceRequest* out) : out_(out) {}

  absl::Status Item(const Value& item, const std::string& path) {
    if (!item.is_object()) return WrongType(path, "an object", item);
    std::string type = "message";  // EasyInputMessage: {role, content} without a type
    if (const Value* t = Field(item, "type")) {
      auto s = GetString(*t, path + ".type");
      if (!s.ok()) return s.status();
      type = *s;
    }
    // id and status: what an item replayed from an earlier response carries.
    if (type == "message") {
      GANTRY_RETURN_IF_ERROR(CheckMembers(item, path, {"type", "role", "content", "id", "status"}));
      return Message(item, path);
    }
    if (type == "function_call") {
      GANTRY_RETURN_IF_ERROR(CheckMembers(item, path, {"type", "call_id", "name", "arguments", "id", "status"}));
      return FunctionCall(item, path);
    }
    if (type == "function_call_output") {
      GANTRY_RETURN_IF_ERROR(CheckMembers(item, path, {"type", "call_id", "output", "id", "status"}));
      return FunctionCallOutput(item, path);
    }
    if (type == "reasoning") {
      GANTRY_RETURN_IF_ERROR(
          CheckMembers(item, path, {"type", "id", "summary", "content", "encrypted_content", "status"}));
      return Reasoning(item, path);
    }
    if (type == "item_reference") {
      return Invalid(path, "item_reference needs stored responses; Gantry stores none (send "
                           "the whole item, and store: false)");
    }
    return Invalid(path + ".type",
                   absl::StrCat("unsupported input item type ", Quoted(type),
                                " (message, function_call, function_call_output, reasoning)"));
  }

  // The internal message index -> the input path of its id field (for errors).
  const std::vector<std::string>& id_paths() const { return id_paths_; }

 private:
  v1::ChatMessage* Add(const std::string& role, const std::string& id_path) {
    v1::ChatMessage* m = out_->add_messages();
    m->set_role(role);
    id_paths_.push_back(id_path);
    return m;
  }

  // The open assistant turn, if the last message is one.
  v1::ChatMessage* OpenAssistant() {
    int n = out_->messages_size();
    if (n == 0 || out_->messages(n - 1).role() != "assistant") return nullptr;
    return out_->mutable_messages(n - 1);
  }

  absl::Status Message(const Value& item, const std::string& path) {
    const Value* role = Field(item, "role");
    if (role == nullptr) return Invalid(path + ".role", "is required");
    auto role_text = GetString(*role, path + ".role");
    if (!role_text.ok()) return role_text.status();
    std::string r = *role_text == "developer" ? "system" : *role_text;
    if (r != "system" && r != "user" && r != "assistant") {
      return Invalid(path + ".role", absl::StrCat("unknown role ", Quoted(*role_text),
                                                  " (system, developer, user, assistant)"));
    }
    std::string text;
    bool is_null = false;
    GANTRY_RETURN_IF_ERROR(
        ParseTextContent(Field(item, "content"), path + ".content", kTextParts, &text, &is_null));
    if (is_null) return Invalid(path + ".content", "is required");
    if (r == "assistant") {
      // Text continues a turn that so far holds only reasoning; after text or calls it
      // starts a new turn (as a second chat-completions assistant message would).
      v1::ChatMessage* open = OpenAssistant();
      if (open == nullptr || !open->content_null() || open->tool_calls_size() > 0) {
        open = Add("assistant", path);
      }
      open->set_content(text);
      open->set_content_null(false);
      return absl::OkStatus();
    }
    v1::ChatMessage* m = Add(r, path);
    m->set_content(text);
    return absl::OkStatus();
  }

  absl::Status Reasoning(const Value& item, const std::string& path) {
    // The full reasoning: its content, else the text our own encrypted_content carries
    // (responses_response.h), else the summary. Another server's encrypted_content is
    // opaque and skipped.
    std::string reasoning;
    for (const char* key : {"content", "encrypted_content", "summary"}) {
      const Value* field = Field(item, key);
      if (field == nullptr) continue;
      std::string text;
      if (std::string(key) == "encrypted_content") {
        if (!field->is_string()) return WrongType(path + ".encrypted_content", "a string", *field);
        if (!DecodeReasoningCarrier(field->as_string(), &text)) continue;
      } else {
        bool is_null = false;
        GANTRY_RETURN_IF_ERROR(ParseTextContent(field, absl::StrCat(path, ".", key),
                                                {"reasoning_text", "summary_text"}, &text,
                                                &is_null));
      }
      if (!text.empty()) {
        reasoning = text;
        break;
      }
    }
    // Reasoning opens an assistant turn (it comes before that turn's text and calls).
    v1::ChatMessage* m = Add("assistant", path);
    m->set_content_null(true);
    m->set_reasoning_content(reasoning);
    return absl::OkStatus();
  }

  absl::Status FunctionCall(const Value& item, const std::string& path) {
    const Value* call_id = Field(item, "call_id");
    if (call_id == nullptr) return Invalid(path + ".call_id", "is required");
    auto id = GetString(*call_id, path + ".call_id");
    if (!id.ok()) return id.status();
    const Value* name = Field(item, "name");
    if (name == nullptr) return Invalid(path + ".name", "is required");
    auto name_text = GetString(*name, path + ".name");
    if (!name_text.ok()) return name_text.status();
    v1::ChatMessage* open = OpenAssistant();
    if (open == nullptr) {
      open = Add("assistant", path + ".call_id");
      open->set_content_null(true);
    }
    v1::ToolCallRef* ref = open->add_tool_calls();
    ref->set_id(*id);
    ref->set_name(*name_text);
    return ParseToolArguments(Field(item, "arguments"), path + ".arguments",
                              ref->mutable_arguments_json());
  }

  absl::Status FunctionCallOutput(const Value& item, const std::string& path) {
    const Value* call_id = Field(item, "call_id");
    if (call_id == nullptr) return Invalid(path + ".call_id", "is required");
    auto id = GetString(*call_id, path + ".call_id");
    if (!id.ok()) return id.status();
    std::string text;
    bool is_null = false;
    GANTRY_RETURN_IF_ERROR(
        ParseTextContent(Field(item, "output"), path + ".output", kTextParts, &text, &is_null));
    v1::ChatMessage* m = Add("tool", path + ".call_id");
    m->set_tool_call_id(*id);
    m->set_content(text);
    return absl::OkStatus();
  }

  v1::InferenceRequest* out_;
  std::vector<std::string> id_paths_;
};

// Responses reasoning.effort -> the internal low / medium / high. "none" is refused,
// not read as "unset" (which is decided as medium): reasoning cannot be switched off
// this way, and a client asking for none must not silently get some.
absl::StatusOr<std::string> ReasoningEffort(const Value& reasoning) {
  if (!reasoning.is_object()) return WrongType("reasoning", "an object", reasoning);
  GANTRY_RETURN_IF_ERROR(CheckMembers(reasoning, "reasoning", {"effort"}));
  const Value* effort = Field(reasoning, "effort");
  if (effort == nullptr) return std::string();
  auto s = GetString(*effort, "reasoning.effort");
  if (!s.ok()) return s.status();
  if (*s == "none") {
    return Invalid("reasoning.effort",
                   "none is not supported (send minimal, low, medium, high or xhigh; a "
                   "thinking template is switched off with chat_template_kwargs "
                   "enable_thinking where the policy grants it)");
  }
  if (*s == "minimal" || *s == "low") return std::string("low");
  if (*s == "medium") return std::string("medium");
  if (*s == "high" || *s == "xhigh") return std::string("high");
  return Invalid("reasoning.effort", "must be minimal, low, medium, high or xhigh");
}

}  // namespace

const std::vector<FieldRule>& ResponsesFields() {
  static const std::vector<FieldRule> rules = {
      {"model", nullptr},
      {"input", nullptr},
      {"instructions", nullptr},
      {"tools", nullptr},
      {"tool_choice", nullptr},
      {"parallel_tool_calls", nullptr},
      {"max_tool_calls", nullptr},
      {"max_output_tokens", nullptr},
      {"stream", nullptr},
      {"temperature", nullptr},
      {"top_p", nullptr},
      {"reasoning", nullptr},
      {"text", nullptr},              // format: text, json_object, json_schema (constrained)
      {"metadata", nullptr},          // echoed in the response object
      {"store", nullptr},             // false: Gantry stores no responses
      {"prompt_cache_key", nullptr},  // the worker that served the key's last request
      {"include", nullptr},           // "reasoning.encrypted_content" (always there)
      {"truncation", nullptr},        // "disabled"
      {"top_logprobs", nullptr},      // 0
      {"service_tier", nullptr},      // "auto", "default"
      {"background", nullptr},        // false
      // Extensions (vLLM's names), as on chat completions.
      {"top_k", nullptr},
      {"min_p", nullptr},
      {"repetition_penalty", nullptr},
      {"presence_penalty", nullptr},
      {"frequency_penalty", nullptr},
      {"logit_bias", nullptr},
      {"seed", nullptr},
      // Refused.
      {"previous_response_id", "Gantry stores no responses; send the whole conversation as input"},
      {"conversation", "Gantry stores no conversations; send the whole conversation as input"},
      {"prompt", "stored prompts are not supported"},
      {"stream_options", "no stream options are implemented"},
      {"user", "end-user ids are not recorded: requests are attributed to the key's principal"},
      {"safety_identifier", "end-user ids are not recorded: requests are attributed to the key's principal"},
      {"prompt_cache_retention", "the prompt cache is the worker's KV pool: its retention is not set per request"},
  };
  return rules;
}

namespace {

// The fields implemented for some of their values: the others are refused.
absl::Status CheckOnlyImplementedValues(const Value& root) {
  GANTRY_RETURN_IF_ERROR(CheckSharedValues(root, "responses"));
  if (const Value* background = Field(root, "background")) {
    if (!background->is_bool() || background->as_bool()) {
      return Unsupported("background", "background responses are not supported");
    }
  }
  if (const Value* include = Field(root, "include")) {
    if (!include->is_array()) return WrongType("include", "an array", *include);
    for (size_t i = 0; i < include->items().size(); ++i) {
      // Reasoning items always carry their text in encrypted_content (docs/router.md).
      const Value& item = include->items()[i];
      if (!item.is_string() || item.as_string() != "reasoning.encrypted_content") {
        return Unsupported(absl::StrCat("include[", i, "]"), "only \"reasoning.encrypted_content\" is implemented");
      }
    }
  }
  if (const Value* truncation = Field(root, "truncation")) {
    auto s = GetString(*truncation, "truncation");
    if (!s.ok()) return s.status();
    if (*s != "disabled") {
      return Unsupported("truncation", "only \"disabled\": a conversation that does not fit is refused");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResponsesRequest> ParseResponsesRequest(absl::string_view body) {
  auto parsed = ParseBodyObject(body);
  if (!parsed.ok()) return parsed.status();
  const Value& root = *parsed;
  GANTRY_RETURN_IF_ERROR(CheckFields(root, ResponsesFields(), "Responses"));
  GANTRY_RETURN_IF_ERROR(CheckOnlyImplementedValues(root));
  ResponsesRequest result;
  result.chat.include_usage = true;
  v1::InferenceRequest& req = result.chat.request;
  GANTRY_RETURN_IF_ERROR(ParseModel(root, &req));
  GANTRY_RETURN_IF_ERROR(ParsePromptCacheKey(root, &req));

  InputMapper mapper(&req);
  if (const Value* instructions = Field(root, "instructions")) {
    auto s = GetString(*instructions, "instructions");
    if (!s.ok()) return s.status();
    v1::ChatMessage* system = req.add_messages();
    system->set_role("system");
    system->set_content(*s);
    result.echo.Set("instructions", *instructions);
  }
  std::vector<std::string> id_paths(req.messages_size(), "instructions");
  const Value* input = Field(root, "input");
  if (input == nullptr) return Invalid("input", "is required");
  if (input->is_string()) {
    v1::ChatMessage* user = req.add_messages();
    user->set_role("user");
    user->set_content(input->as_string());
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->items().size(); ++i) {
      GANTRY_RETURN_IF_ERROR(mapper.Item(input->items()[i], absl::StrCat("input[", i, "]")));
    }
    id_paths.insert(id_paths.end(), mapper.id_paths().begin(), mapper.id_paths().end());
  } else {
    return WrongType("input", "a string or an array of items", *input);
  }
  if (req.messages_size() == 0) return Invalid("input", "must not be empty");

  if (const Value* tools = Field(root, "tools")) {
    GANTRY_RETURN_IF_ERROR(ParseFunctionTools(*tools, /*nested=*/false, &req));
    result.echo.Set("tools", *tools);
  }
  if (const Value* choice = Field(root, "tool_choice")) {
    const Value* name = choice->is_object() ? Field(*choice, "name") : nullptr;
    if (choice->is_object()) {
      const Value* type = Field(*choice, "type");
      if (type == nullptr || !type->is_string() || type->as_string() != "function") {
        return Invalid("tool_choice.type", "must be \"function\"");
      }
    }
    GANTRY_RETURN_IF_ERROR(
        ParseToolChoiceMode(*choice, name, "tool_choice", "tool_choice.name", &req));
    result.echo.Set("tool_choice", *choice);
  }
  if (const Value* parallel = Field(root, "parallel_tool_calls")) {
    auto b = GetBool(*parallel, "parallel_tool_calls");
    if (!b.ok()) return b.status();
    req.set_parallel_tool_calls(*b);
    result.echo.Set("parallel_tool_calls", *parallel);
  }
  if (const Value* max_calls = Field(root, "max_tool_calls")) {
    auto n = GetInteger(*max_calls, "max_tool_calls", 1, 1 << 20);
    if (!n.ok()) return n.status();
    req.set_max_tool_calls(static_cast<uint32_t>(*n));
    result.echo.Set("max_tool_calls", *max_calls);
  }
  if (const Value* max = Field(root, "max_output_tokens")) {
    auto n = GetInteger(*max, "max_output_tokens", 1, std::numeric_limits<uint32_t>::max());
    if (!n.ok()) return n.status();
    req.set_max_tokens(static_cast<uint32_t>(*n));
    result.chat.has_max_tokens = true;
    result.echo.Set("max_output_tokens", *max);
  }
  if (const Value* stream = Field(root, "stream")) {
    auto b = GetBool(*stream, "stream");
    if (!b.ok()) return b.status();
    result.chat.stream = *b;
  }
  GANTRY_RETURN_IF_ERROR(ParseSampling(root, &req));
  for (const char* key : {"temperature", "top_p"}) {
    if (const Value* v = Field(root, key)) result.echo.Set(key, *v);
  }
  if (const Value* reasoning = Field(root, "reasoning")) {
    auto effort = ReasoningEffort(*reasoning);
    if (!effort.ok()) return effort.status();
    req.set_reasoning_effort(*effort);
    result.echo.Set("reasoning", *reasoning);
  }
  if (const Value* text = Field(root, "text")) {
    if (!text->is_object()) return WrongType("text", "an object", *text);
    for (const auto& [key, value] : text->members()) {
      if (key != "format" && !value.is_null()) {
        return Unsupported(absl::StrCat("text.", key.size() <= 64 ? key : Quoted(key)), "only format is implemented");
      }
    }
    if (const Value* format = Field(*text, "format")) {
      GANTRY_RETURN_IF_ERROR(ParseResponseFormat(*format, "text.format", /*nested=*/false, &req));
      result.echo.Set("text", *text);
    }
  }
  if (const Value* metadata = Field(root, "metadata")) {
    if (!metadata->is_object()) return WrongType("metadata", "an object", *metadata);
    result.echo.Set("metadata", *metadata);
  }
  GANTRY_RETURN_IF_ERROR(CheckToolReplay(req, [&](int i) {
    return i < static_cast<int>(id_paths.size()) ? id_paths[i] : std::string("input");
  }));
  return result;
}

}  // namespace gantry::openai
