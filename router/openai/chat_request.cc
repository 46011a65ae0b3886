#include "router/openai/chat_request.h"

#include <limits>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"
#include "router/openai/request_fields.h"
#include "tokenizer-svc/tokenizer/lru_cache.h"

namespace gantry::openai {
namespace {

using json::Value;

absl::Status ParseToolCalls(const Value& calls, const std::string& path, v1::ChatMessage* out) {
  if (!calls.is_array()) return WrongType(path, "an array", calls);
  for (size_t i = 0; i < calls.items().size(); ++i) {
    const Value& call = calls.items()[i];
    std::string call_path = absl::StrCat(path, "[", i, "]");
    if (!call.is_object()) return WrongType(call_path, "an object", call);
    GANTRY_RETURN_IF_ERROR(CheckMembers(call, call_path, {"id", "type", "function"}));
    v1::ToolCallRef* ref = out->add_tool_calls();
    const Value* id = Field(call, "id");
    if (id == nullptr) return Invalid(absl::StrCat(call_path, ".id"), "is required");
    auto id_text = GetString(*id, absl::StrCat(call_path, ".id"));
    if (!id_text.ok()) return id_text.status();
    ref->set_id(*id_text);
    if (const Value* type = Field(call, "type")) {
      if (!type->is_string() || type->as_string() != "function") {
        return Invalid(absl::StrCat(call_path, ".type"), "must be \"function\"");
      }
    }
    const Value* function = Field(call, "function");
    if (function == nullptr || !function->is_object()) {
      return Invalid(absl::StrCat(call_path, ".function"), "expected an object");
    }
    GANTRY_RETURN_IF_ERROR(CheckMembers(*function, absl::StrCat(call_path, ".function"), {"name", "arguments"}));
    const Value* name = Field(*function, "name");
    if (name == nullptr) return Invalid(absl::StrCat(call_path, ".function.name"), "is required");
    auto name_text = GetString(*name, absl::StrCat(call_path, ".function.name"));
    if (!name_text.ok()) return name_text.status();
    ref->set_name(*name_text);
    GANTRY_RETURN_IF_ERROR(ParseToolArguments(Field(*function, "arguments"),
                                              absl::StrCat(call_path, ".function.arguments"),
                                              ref->mutable_arguments_json()));
  }
  return absl::OkStatus();
}

// The tool lists of recent bodies, parsed, by the exact text of their "tools" value: an
// agent sends the same tools on every turn, and parsing them (the JSON, then each
// schema re-serialized) was most of parsing its body. Exact: a body whose "tools" text
// is one of these gets the definitions that parsing that text gave, and the text is not
// parsed again (json::ParseOptions::known_member_value); only lists that parsed
// without error are kept.
using ToolList = google::protobuf::RepeatedPtrField<v1::ToolDefinition>;
constexpr size_t kKnownToolListEntries = 256;
constexpr size_t kKnownToolListBytes = 16u << 20;

tokenizer::LruCache<ToolList>& KnownToolLists() {
  static auto* cache = new tokenizer::LruCache<ToolList>(kKnownToolListEntries, kKnownToolListBytes);
  return *cache;
}

// What the parse saw of the body's top-level "tools".
struct ToolsSeen {
  int count = 0;                         // occurrences of the key
  std::shared_ptr<const ToolList> known;  // the first one's definitions, when kept
  absl::string_view text;                 // the first one's text, when not kept (a view of the body)
};

// Keeps `tools` (what ParseFunctionTools made of `value`) under `text` once `text`
// alone parses to `value`: the scan that found `text` matched only brackets, and the
// kept entry must be what parsing exactly those bytes gives.
void KeepToolList(absl::string_view text, const Value& value, const ToolList& tools) {
  json::ParseOptions options;
  options.max_depth = json::ParseOptions().max_depth - 1;  // it sat one level down
  auto alone = json::Parse(text, options);
  if (!alone.ok() || *alone != value) return;
  size_t bytes = 0;
  for (const v1::ToolDefinition& tool : tools) bytes += tool.SpaceUsedLong();
  KnownToolLists().Insert(std::string(text), std::make_shared<const ToolList>(tools), bytes);
}

absl::Status ParseMessages(const Value& messages, v1::InferenceRequest* out) {
  if (!messages.is_array()) return WrongType("messages", "an array", messages);
  if (messages.items().empty()) return Invalid("messages", "must not be empty");
  for (size_t i = 0; i < messages.items().size(); ++i) {
    const Value& m = messages.items()[i];
    std::string path = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(path, "an object", m);
    GANTRY_RETURN_IF_ERROR(CheckMembers(
        m, path, {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "reasoning"}));
    v1::ChatMessage* msg = out->add_messages();
    const Value* role = Field(m, "role");
    if (role == nullptr) return Invalid(path + ".role", "is required");
    auto role_text = GetString(*role, path + ".role");
    if (!role_text.ok()) return role_text.status();
    std::string r = *role_text;
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return Invalid(path + ".role", absl::StrCat("unknown role ", Quoted(*role_text),
                                                  " (system, developer, user, assistant, tool)"));
    }
    msg->set_role(r);
    std::string text;
    bool is_null = false;
    GANTRY_RETURN_IF_ERROR(
        ParseTextContent(Field(m, "content"), path + ".content", {"text"}, &text, &is_null));
    msg->set_content(text);
    msg->set_content_null(is_null);
    for (const char* key : {"reasoning_content", "reasoning"}) {
      if (const Value* reasoning = Field(m, key)) {
        auto s = GetString(*reasoning, absl::StrCat(path, ".", key));
        if (!s.ok()) return s.status();
        msg->set_reasoning_content(*s);
        break;
      }
    }
    if (const Value* calls = Field(m, "tool_calls")) {
      if (r != "assistant") return Invalid(path + ".tool_calls", "only assistant messages carry tool calls");
      GANTRY_RETURN_IF_ERROR(ParseToolCalls(*calls, path + ".tool_calls", msg));
    }
    if (const Value* id = Field(m, "tool_call_id")) {
      auto s = GetString(*id, path + ".tool_call_id");
      if (!s.ok()) return s.status();
      msg->set_tool_call_id(*s);
    }
    if (r == "tool" && msg->tool_call_id().empty()) {
      return Invalid(path + ".tool_call_id", "is required for role tool");
    }
    if (const Value* name = Field(m, "name")) {
      auto s = GetString(*name, path + ".name");
      if (!s.ok()) return s.status();
      msg->set_name(*s);
    }
    if (is_null && r != "assistant" && r != "tool") {
      return Invalid(path + ".content", "is required for this role");
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<FieldRule>& ChatCompletionFields() {
  static const std::vector<FieldRule> rules = {
      {"model", nullptr},
      {"messages", nullptr},
      {"tools", nullptr},
      {"tool_choice", nullptr},
      {"parallel_tool_calls", nullptr},
      {"max_completion_tokens", nullptr},
      {"max_tokens", nullptr},
      {"stop", nullptr},
      {"stream", nullptr},
      {"stream_options", nullptr},  // include_usage
      {"n", nullptr},                // 1
      {"temperature", nullptr},
      {"top_p", nullptr},
      {"seed", nullptr},
      {"presence_penalty", nullptr},
      {"frequency_penalty", nullptr},
      {"logit_bias", nullptr},
      {"reasoning_effort", nullptr},
      {"store", nullptr},            // false: Gantry stores no completions
      {"prompt_cache_key", nullptr}, // the worker that served the key's last request
      {"response_format", nullptr},  // text, json_object, json_schema (constrained)
      {"logprobs", nullptr},         // false
      {"top_logprobs", nullptr},     // 0
      {"modalities", nullptr},       // ["text"]
      {"service_tier", nullptr},     // "auto", "default"
      // Extensions (vLLM's names).
      {"top_k", nullptr},
      {"min_p", nullptr},
      {"repetition_penalty", nullptr},
      {"chat_template_kwargs", nullptr},
      // Refused.
      {"audio", "audio output is not supported"},
      {"prediction", "predicted outputs are not supported"},
      {"web_search_options", "Gantry has no web search"},
      {"functions", "the deprecated functions API is not supported: send tools"},
      {"function_call", "the deprecated functions API is not supported: send tool_choice"},
      {"metadata", "Gantry stores no completions to attach metadata to"},
      {"user", "end-user ids are not recorded: requests are attributed to the key's principal"},
      {"safety_identifier", "end-user ids are not recorded: requests are attributed to the key's principal"},
      {"verbosity", "verbosity is not supported"},
      {"prompt_cache_retention", "the prompt cache is the worker's KV pool: its retention is not set per request"},
  };
  return rules;
}

namespace {

// The fields implemented for some of their values: the others are refused.
absl::Status CheckOnlyImplementedValues(const Value& root) {
  GANTRY_RETURN_IF_ERROR(CheckSharedValues(root, "completions"));
  if (const Value* logprobs = Field(root, "logprobs")) {
    auto b = GetBool(*logprobs, "logprobs");
    if (!b.ok()) return b.status();
    if (*b) return Unsupported("logprobs", "log probabilities are not returned yet");
  }
  if (const Value* modalities = Field(root, "modalities")) {
    if (!modalities->is_array()) return WrongType("modalities", "an array", *modalities);
    for (size_t i = 0; i < modalities->items().size(); ++i) {
      const Value& m = modalities->items()[i];
      if (!m.is_string() || m.as_string() != "text") {
        return Unsupported(absl::StrCat("modalities[", i, "]"), "only \"text\" is supported");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatCompletionRequest> ParseChatCompletionRequest(absl::string_view body) {
  ToolsSeen seen;
  json::ParseOptions options;
  options.known_member_value = [&seen](absl::string_view key, absl::string_view rest) -> size_t {
    if (key != "tools" || ++seen.count > 1) return 0;
    const size_t n = json::ScanContainerLength(rest);
    if (n == 0) return 0;
    seen.known = KnownToolLists().Find(rest.substr(0, n));
    if (seen.known != nullptr) return n;
    seen.text = rest.substr(0, n);
    return 0;
  };
  auto parsed = ParseBodyObject(body, options);
  if (!parsed.ok()) return parsed.status();
  const Value& root = *parsed;
  GANTRY_RETURN_IF_ERROR(CheckFields(root, ChatCompletionFields(), "chat completions"));
  GANTRY_RETURN_IF_ERROR(CheckOnlyImplementedValues(root));
  ChatCompletionRequest result;
  v1::InferenceRequest& req = result.request;

  GANTRY_RETURN_IF_ERROR(ParseModel(root, &req));
  GANTRY_RETURN_IF_ERROR(ParsePromptCacheKey(root, &req));

  const Value* messages = Field(root, "messages");
  if (messages == nullptr) return Invalid("messages", "is required");
  GANTRY_RETURN_IF_ERROR(ParseMessages(*messages, &req));

  if (seen.count == 1 && seen.known != nullptr) {
    *req.mutable_tools() = *seen.known;  // the body's "tools" as it parsed before
  } else if (const Value* tools = Field(root, "tools")) {
    // Parsed as sent (also when "tools" is repeated: the last one counts, as for every
    // key, and nothing is kept).
    GANTRY_RETURN_IF_ERROR(ParseFunctionTools(*tools, /*nested=*/true, &req));
    if (seen.count == 1 && !seen.text.empty()) KeepToolList(seen.text, *tools, req.tools());
  }
  if (const Value* choice = Field(root, "tool_choice")) {
    if (choice->is_object()) {
      GANTRY_RETURN_IF_ERROR(CheckMembers(*choice, "tool_choice", {"type", "function"}));
      const Value* type = Field(*choice, "type");
      if (type == nullptr || !type->is_string() || type->as_string() != "function") {
        return Unsupported("tool_choice.type", "only {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      if (const Value* f = Field(*choice, "function"); f != nullptr && f->is_object()) {
        GANTRY_RETURN_IF_ERROR(CheckMembers(*f, "tool_choice.function", {"name"}));
      }
    }
    const Value* function = choice->is_object() ? Field(*choice, "function") : nullptr;
    const Value* name = function != nullptr && function->is_object() ? Field(*function, "name")
                                                                      : nullptr;
    GANTRY_RETURN_IF_ERROR(ParseToolChoiceMode(*choice, name, "tool_choice",
                                               "tool_choice.function.name", &req));
  }
  if (const Value* parallel = Field(root, "parallel_tool_calls")) {
    auto b = GetBool(*parallel, "parallel_tool_calls");
    if (!b.ok()) return b.status();
    req.set_parallel_tool_calls(*b);
  }
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    if (const Value* max = Field(root, key)) {
      auto n = GetInteger(*max, key, 1, std::numeric_limits<uint32_t>::max());
      if (!n.ok()) return n.status();
      req.set_max_tokens(static_cast<uint32_t>(*n));
      result.has_max_tokens = true;
      break;
    }
  }
  if (const Value* stop = Field(root, "stop")) {
    if (stop->is_string()) {
      if (stop->as_string().empty()) return Invalid("stop", "must not be empty");
      req.add_stop(stop->as_string());
    } else if (stop->is_array()) {
      for (size_t i = 0; i < stop->items().size(); ++i) {
        auto s = GetString(stop->items()[i], absl::StrCat("stop[", i, "]"));
        if (!s.ok()) return s.status();
        if (s->empty()) return Invalid(absl::StrCat("stop[", i, "]"), "must not be empty");
        req.add_stop(*s);
      }
    } else {
      return WrongType("stop", "a string or an array of strings", *stop);
    }
  }
  if (const Value* stream = Field(root, "stream")) {
    auto b = GetBool(*stream, "stream");
    if (!b.ok()) return b.status();
    result.stream = *b;
  }
  if (const Value* options = Field(root, "stream_options")) {
    if (!options->is_object()) return WrongType("stream_options", "an object", *options);
    for (const auto& [key, value] : options->members()) {
      if (key != "include_usage" && !value.is_null()) {
        return Unsupported(absl::StrCat("stream_options.", key.size() <= 64 ? key : Quoted(key)),
                           "only include_usage is implemented");
      }
    }
    if (const Value* usage = Field(*options, "include_usage")) {
      auto b = GetBool(*usage, "stream_options.include_usage");
      if (!b.ok()) return b.status();
      result.include_usage = *b;
    }
  }
  if (const Value* n = Field(root, "n")) {
    auto count = GetInteger(*n, "n", 1, 128);
    if (!count.ok()) return count.status();
    if (*count != 1) return Unsupported("n", "only n = 1 is supported");
  }
  GANTRY_RETURN_IF_ERROR(ParseSampling(root, &req));
  if (const Value* format = Field(root, "response_format")) {
    GANTRY_RETURN_IF_ERROR(ParseResponseFormat(*format, "response_format", /*nested=*/true, &req));
  }
  if (const Value* effort = Field(root, "reasoning_effort")) {
    auto s = GetString(*effort, "reasoning_effort");
    if (!s.ok()) return s.status();
    if (*s != "low" && *s != "medium" && *s != "high") {
      return Invalid("reasoning_effort", "must be low, medium or high");
    }
    req.set_reasoning_effort(*s);
  }
  if (const Value* kwargs = Field(root, "chat_template_kwargs")) {
    if (!kwargs->is_object()) return WrongType("chat_template_kwargs", "an object", *kwargs);
    for (const auto& [key, value] : kwargs->members()) {
      (*req.mutable_template_kwargs_json())[key] = json::DumpCompact(value);
    }
  }
  GANTRY_RETURN_IF_ERROR(CheckToolReplay(
      req, [](int i) { return absl::StrCat("messages[", i, "].tool_call_id"); }));
  return result;
}

}  // namespace gantry::openai
