#include "router/openai/chat_request.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"

namespace gantry::openai {
namespace {

using json::Value;

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return ReasonError("invalid_request", absl::StrCat(path, ": ", what));
}

const char* TypeName(const Value& v) {
  switch (v.type()) {
    case json::Type::kNull: return "null";
    case json::Type::kBool: return "a boolean";
    case json::Type::kNumber: return "a number";
    case json::Type::kString: return "a string";
    case json::Type::kArray: return "an array";
    case json::Type::kObject: return "an object";
  }
  return "a value";
}

absl::Status WrongType(absl::string_view path, absl::string_view expected, const Value& got) {
  return Invalid(path, absl::StrCat("expected ", expected, ", got ", TypeName(got)));
}

// Present and not null.
const Value* Field(const Value& object, absl::string_view key) {
  const Value* v = object.Find(key);
  return (v == nullptr || v->is_null()) ? nullptr : v;
}

absl::StatusOr<std::string> GetString(const Value& v, absl::string_view path) {
  if (!v.is_string()) return WrongType(path, "a string", v);
  return v.as_string();
}

absl::StatusOr<bool> GetBool(const Value& v, absl::string_view path) {
  if (!v.is_bool()) return WrongType(path, "a boolean", v);
  return v.as_bool();
}

absl::StatusOr<double> GetNumber(const Value& v, absl::string_view path, double lo, double hi) {
  if (!v.is_number()) return WrongType(path, "a number", v);
  double d = v.as_double();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return Invalid(path, absl::StrCat("must be between ", lo, " and ", hi));
  }
  return d;
}

absl::StatusOr<int64_t> GetInteger(const Value& v, absl::string_view path, int64_t lo,
                                   int64_t hi) {
  if (!v.is_number() || !v.is_integer()) return WrongType(path, "an integer", v);
  auto i = v.as_int64();
  if (!i.has_value() || *i < lo || *i > hi) {
    return Invalid(path, absl::StrCat("must be an integer between ", lo, " and ", hi));
  }
  return *i;
}

// string | null | [{type: "text", text}] -> text; *is_null for null/absent.
absl::Status ParseContent(const Value* content, const std::string& path, std::string* text,
                          bool* is_null) {
  *is_null = false;
  text->clear();
  if (content == nullptr) {
    *is_null = true;
    return absl::OkStatus();
  }
  if (content->is_string()) {
    *text = content->as_string();
    return absl::OkStatus();
  }
  if (!content->is_array()) {
    return WrongType(path, "a string, an array of text parts, or null", *content);
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < content->items().size(); ++i) {
    const Value& part = content->items()[i];
    std::string part_path = absl::StrCat(path, "[", i, "]");
    if (!part.is_object()) return WrongType(part_path, "an object", part);
    const Value* type = Field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return Invalid(absl::StrCat(part_path, ".type"), "expected a string");
    }
    if (type->as_string() != "text") {
      return Invalid(absl::StrCat(part_path, ".type"),
                     absl::StrCat("unsupported content part type '", type->as_string(),
                                  "' (only text is supported)"));
    }
    const Value* part_text = Field(part, "text");
    if (part_text == nullptr) return Invalid(absl::StrCat(part_path, ".text"), "is required");
    auto s = GetString(*part_text, absl::StrCat(part_path, ".text"));
    if (!s.ok()) return s.status();
    parts.push_back(*s);
  }
  *text = absl::StrJoin(parts, "\n");
  return absl::OkStatus();
}

absl::Status ParseToolCalls(const Value& calls, const std::string& path, v1::ChatMessage* out) {
  if (!calls.is_array()) return WrongType(path, "an array", calls);
  for (size_t i = 0; i < calls.items().size(); ++i) {
    const Value& call = calls.items()[i];
    std::string call_path = absl::StrCat(path, "[", i, "]");
    if (!call.is_object()) return WrongType(call_path, "an object", call);
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
    const Value* name = Field(*function, "name");
    if (name == nullptr) return Invalid(absl::StrCat(call_path, ".function.name"), "is required");
    auto name_text = GetString(*name, absl::StrCat(call_path, ".function.name"));
    if (!name_text.ok()) return name_text.status();
    ref->set_name(*name_text);
    const Value* arguments = Field(*function, "arguments");
    std::string args_path = absl::StrCat(call_path, ".function.arguments");
    if (arguments == nullptr) {
      ref->set_arguments_json("{}");
    } else if (arguments->is_string()) {
      // Clients re-serialise arguments; what they send must still be a JSON object.
      auto parsed = json::Parse(arguments->as_string());
      if (!parsed.ok() || !parsed->is_object()) {
        return Invalid(args_path, "must be a JSON object serialized as a string");
      }
      ref->set_arguments_json(arguments->as_string());
    } else if (arguments->is_object()) {
      ref->set_arguments_json(json::DumpCompact(*arguments));
    } else {
      return WrongType(args_path, "a string holding a JSON object", *arguments);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseMessages(const Value& messages, v1::InferenceRequest* out) {
  if (!messages.is_array()) return WrongType("messages", "an array", messages);
  if (messages.items().empty()) return Invalid("messages", "must not be empty");
  for (size_t i = 0; i < messages.items().size(); ++i) {
    const Value& m = messages.items()[i];
    std::string path = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(path, "an object", m);
    v1::ChatMessage* msg = out->add_messages();
    const Value* role = Field(m, "role");
    if (role == nullptr) return Invalid(path + ".role", "is required");
    auto role_text = GetString(*role, path + ".role");
    if (!role_text.ok()) return role_text.status();
    std::string r = *role_text;
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return Invalid(path + ".role", absl::StrCat("unknown role '", *role_text,
                                                  "' (system, developer, user, assistant, tool)"));
    }
    msg->set_role(r);
    std::string text;
    bool is_null = false;
    GANTRY_RETURN_IF_ERROR(ParseContent(Field(m, "content"), path + ".content", &text, &is_null));
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

bool IsValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::Status ParseTools(const Value& tools, v1::InferenceRequest* out) {
  if (!tools.is_array()) return WrongType("tools", "an array", tools);
  std::set<std::string> names;
  for (size_t i = 0; i < tools.items().size(); ++i) {
    const Value& tool = tools.items()[i];
    std::string path = absl::StrCat("tools[", i, "]");
    if (!tool.is_object()) return WrongType(path, "an object", tool);
    const Value* type = Field(tool, "type");
    if (type == nullptr || !type->is_string() || type->as_string() != "function") {
      return Invalid(path + ".type", "must be \"function\"");
    }
    const Value* function = Field(tool, "function");
    if (function == nullptr || !function->is_object()) {
      return Invalid(path + ".function", "expected an object");
    }
    v1::ToolDefinition* def = out->add_tools();
    const Value* name = Field(*function, "name");
    if (name == nullptr) return Invalid(path + ".function.name", "is required");
    auto name_text = GetString(*name, path + ".function.name");
    if (!name_text.ok()) return name_text.status();
    if (!IsValidToolName(*name_text)) {
      return Invalid(path + ".function.name", "must be 1-64 of a-z, A-Z, 0-9, _ . -");
    }
    if (!names.insert(*name_text).second) {
      return Invalid(path + ".function.name", absl::StrCat("duplicate tool '", *name_text, "'"));
    }
    def->set_name(*name_text);
    if (const Value* description = Field(*function, "description")) {
      auto s = GetString(*description, path + ".function.description");
      if (!s.ok()) return s.status();
      def->set_description(*s);
    }
    if (const Value* parameters = Field(*function, "parameters")) {
      if (!parameters->is_object()) {
        return WrongType(path + ".function.parameters", "a JSON Schema object", *parameters);
      }
      def->set_parameters_json(json::DumpCompact(*parameters));
    }
    if (const Value* strict = Field(*function, "strict")) {
      auto b = GetBool(*strict, path + ".function.strict");
      if (!b.ok()) return b.status();
    }
  }
  return absl::OkStatus();
}

absl::Status ParseToolChoice(const Value& choice, v1::InferenceRequest* out) {
  if (choice.is_string()) {
    const std::string& s = choice.as_string();
    if (s == "auto") out->set_tool_choice(v1::TOOL_CHOICE_AUTO);
    else if (s == "none") out->set_tool_choice(v1::TOOL_CHOICE_NONE);
    else if (s == "required") out->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
    else return Invalid("tool_choice", "must be none, auto, required or a function object");
  } else if (choice.is_object()) {
    const Value* function = Field(choice, "function");
    const Value* name = function != nullptr && function->is_object() ? Field(*function, "name")
                                                                      : nullptr;
    if (name == nullptr || !name->is_string()) {
      return Invalid("tool_choice.function.name", "expected a string");
    }
    out->set_tool_choice(v1::TOOL_CHOICE_NAMED);
    out->set_tool_choice_name(name->as_string());
  } else {
    return WrongType("tool_choice", "a string or an object", choice);
  }
  if (out->tool_choice() == v1::TOOL_CHOICE_REQUIRED || out->tool_choice() == v1::TOOL_CHOICE_NAMED) {
    if (out->tools_size() == 0) return Invalid("tool_choice", "requires tools");
  }
  if (out->tool_choice() == v1::TOOL_CHOICE_NAMED) {
    bool found = false;
    for (const auto& tool : out->tools()) found = found || tool.name() == out->tool_choice_name();
    if (!found) {
      return Invalid("tool_choice.function.name",
                     absl::StrCat("'", out->tool_choice_name(), "' is not one of the tools"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatCompletionRequest> ParseChatCompletionRequest(absl::string_view body) {
  auto parsed = json::Parse(body);
  if (!parsed.ok()) return parsed.status();
  const Value& root = *parsed;
  if (!root.is_object()) return ReasonError("invalid_json", "the body must be a JSON object");
  ChatCompletionRequest result;
  v1::InferenceRequest& req = result.request;

  const Value* model = Field(root, "model");
  if (model == nullptr) return Invalid("model", "is required");
  auto model_text = GetString(*model, "model");
  if (!model_text.ok()) return model_text.status();
  if (model_text->empty()) return Invalid("model", "must not be empty");
  req.set_model(*model_text);

  const Value* messages = Field(root, "messages");
  if (messages == nullptr) return Invalid("messages", "is required");
  GANTRY_RETURN_IF_ERROR(ParseMessages(*messages, &req));

  if (const Value* tools = Field(root, "tools")) GANTRY_RETURN_IF_ERROR(ParseTools(*tools, &req));
  if (const Value* choice = Field(root, "tool_choice")) {
    GANTRY_RETURN_IF_ERROR(ParseToolChoice(*choice, &req));
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
    if (const Value* usage = Field(*options, "include_usage")) {
      auto b = GetBool(*usage, "stream_options.include_usage");
      if (!b.ok()) return b.status();
      result.include_usage = *b;
    }
  }
  if (const Value* n = Field(root, "n")) {
    auto count = GetInteger(*n, "n", 1, 1);
    if (!count.ok()) return Invalid("n", "only n = 1 is supported");
  }
  v1::SamplingParams* sampling = req.mutable_sampling();
  if (const Value* t = Field(root, "temperature")) {
    auto d = GetNumber(*t, "temperature", 0, 2);
    if (!d.ok()) return d.status();
    sampling->set_temperature(static_cast<float>(*d));
  }
  if (const Value* p = Field(root, "top_p")) {
    auto d = GetNumber(*p, "top_p", 0, 1);
    if (!d.ok()) return d.status();
    sampling->set_top_p(static_cast<float>(*d));
  }
  if (const Value* k = Field(root, "top_k")) {
    auto i = GetInteger(*k, "top_k", -1, 1 << 20);
    if (!i.ok()) return i.status();
    if (*i > 0) sampling->set_top_k(static_cast<uint32_t>(*i));  // -1 / 0: disabled
  }
  if (const Value* p = Field(root, "min_p")) {
    auto d = GetNumber(*p, "min_p", 0, 1);
    if (!d.ok()) return d.status();
    sampling->set_min_p(static_cast<float>(*d));
  }
  if (const Value* p = Field(root, "repetition_penalty")) {
    auto d = GetNumber(*p, "repetition_penalty", 0.01, 10);
    if (!d.ok()) return d.status();
    sampling->set_repetition_penalty(static_cast<float>(*d));
  }
  if (const Value* seed = Field(root, "seed")) {
    auto i = GetInteger(*seed, "seed", std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max());
    if (!i.ok()) return i.status();
    sampling->set_seed(static_cast<uint64_t>(*i));
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
  return result;
}

}  // namespace gantry::openai
