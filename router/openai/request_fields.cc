#include "router/openai/request_fields.h"

#include "common/utf8.h"
#include "worker/constrain/json_grammar.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/json_schema.h"
#include "common/status.h"

namespace gantry::openai {
namespace {

using json::Value;

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

}  // namespace

bool IsValidToolName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<Value> ParseBodyObject(absl::string_view body, const json::ParseOptions& options) {
  auto parsed = json::Parse(body, options);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return ReasonError("invalid_json", "the body must be a JSON object");
  return std::move(*parsed);
}

absl::Status CheckMembers(const Value& object, absl::string_view path,
                          std::initializer_list<absl::string_view> known) {
  for (const auto& [key, value] : object.members()) {
    if (value.is_null() || std::find(known.begin(), known.end(), key) != known.end()) continue;
    return Unsupported(absl::StrCat(path, ".", key.size() <= 64 ? key : Quoted(key)),
                       absl::StrCat("not a field Gantry implements here (", absl::StrJoin(known, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::Status ParseResponseFormat(const Value& format, absl::string_view path, bool nested,
                                 v1::InferenceRequest* out) {
  const Value* type = format.is_object() ? Field(format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) return WrongType(path, "{\"type\": ...}", format);
  const std::string type_path = absl::StrCat(path, ".type");
  v1::ResponseFormat* f = out->mutable_response_format();
  if (type->as_string() == "text" || type->as_string() == "json_object") {
    GANTRY_RETURN_IF_ERROR(CheckMembers(format, path, {"type"}));
    f->set_type(type->as_string() == "text" ? v1::OUTPUT_TEXT : v1::OUTPUT_JSON_OBJECT);
    return absl::OkStatus();
  }
  if (type->as_string() != "json_schema") {
    return Unsupported(type_path, absl::StrCat(Quoted(type->as_string()),
                                               " is not a format: \"text\", \"json_object\" or \"json_schema\""));
  }
  std::string spec_path(path);
  const Value* spec = &format;
  if (nested) {
    GANTRY_RETURN_IF_ERROR(CheckMembers(format, path, {"type", "json_schema"}));
    spec_path = absl::StrCat(path, ".json_schema");
    spec = Field(format, "json_schema");
    if (spec == nullptr) return Invalid(spec_path, "required with type \"json_schema\"");
    if (!spec->is_object()) return WrongType(spec_path, "an object", *spec);
    GANTRY_RETURN_IF_ERROR(CheckMembers(*spec, spec_path, {"name", "schema", "strict", "description"}));
  } else {
    GANTRY_RETURN_IF_ERROR(CheckMembers(format, path, {"type", "name", "schema", "strict", "description"}));
  }
  f->set_type(v1::OUTPUT_JSON_SCHEMA);
  const Value* name = Field(*spec, "name");
  if (name == nullptr) return Invalid(absl::StrCat(spec_path, ".name"), "required");
  GANTRY_ASSIGN_OR_RETURN(std::string name_text, GetString(*name, absl::StrCat(spec_path, ".name")));
  f->set_name(std::move(name_text));
  if (const Value* description = Field(*spec, "description")) {
    return Unsupported(absl::StrCat(spec_path, ".description"),
                       "the model is not shown a format's description: put it in a message");
  }
  if (const Value* strict = Field(*spec, "strict")) {
    GANTRY_ASSIGN_OR_RETURN(bool b, GetBool(*strict, absl::StrCat(spec_path, ".strict")));
    f->set_strict(b);
  }
  const Value* schema = Field(*spec, "schema");
  if (schema == nullptr) return Invalid(absl::StrCat(spec_path, ".schema"), "required: the output is constrained to it");
  if (!schema->is_object()) return WrongType(absl::StrCat(spec_path, ".schema"), "an object", *schema);
  f->set_schema_json(json::DumpCompact(*schema));
  return CheckResponseFormat(*f, spec_path);
}

absl::Status CheckResponseFormat(const v1::ResponseFormat& f, absl::string_view path) {
  if (f.type() != v1::OUTPUT_JSON_SCHEMA) {
    if (!f.schema_json().empty() || !f.name().empty() || f.strict()) {
      return Invalid(path, "name, schema and strict belong to type json_schema");
    }
    if (f.type() != v1::OUTPUT_TEXT && f.type() != v1::OUTPUT_JSON_OBJECT) {
      return Unsupported(absl::StrCat(path, ".type"), "not a format Gantry knows");
    }
    return absl::OkStatus();
  }
  const std::string name_path = absl::StrCat(path, ".name");
  if (f.name().empty() || f.name().size() > 64) return Invalid(name_path, "1 to 64 characters");
  for (char c : f.name()) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return Invalid(name_path, "only letters, digits, '_' and '-'");
    }
  }
  const std::string schema_path = absl::StrCat(path, ".schema");
  auto schema = json_schema::Schema::CompileText(f.schema_json());
  if (!schema.ok()) return Invalid(schema_path, schema.status().message());
  auto grammar = constrain::JsonGrammar::Compile(*std::move(schema), constrain::Fidelity::kExact);
  if (!grammar.ok()) return Unsupported(schema_path, grammar.status().message());
  return absl::OkStatus();
}

absl::Status CheckSharedValues(const Value& root, absl::string_view stored) {
  if (const Value* store = Field(root, "store")) {
    auto b = GetBool(*store, "store");
    if (!b.ok()) return b.status();
    if (*b) return Unsupported("store", absl::StrCat("Gantry stores no ", stored, ": send false or leave it out"));
  }
  if (const Value* top = Field(root, "top_logprobs")) {
    auto n = GetInteger(*top, "top_logprobs", 0, 20);
    if (!n.ok()) return n.status();
    if (*n > 0) return Unsupported("top_logprobs", "log probabilities are not returned yet");
  }
  if (const Value* tier = Field(root, "service_tier")) {
    auto s = GetString(*tier, "service_tier");
    if (!s.ok()) return s.status();
    if (*s != "auto" && *s != "default") return Unsupported("service_tier", "one tier: \"auto\" or \"default\"");
  }
  return absl::OkStatus();
}

absl::Status ParsePromptCacheKey(const Value& root, v1::InferenceRequest* out) {
  const Value* key = Field(root, "prompt_cache_key");
  if (key == nullptr) return absl::OkStatus();
  auto s = GetString(*key, "prompt_cache_key");
  if (!s.ok()) return s.status();
  if (s->size() > 256) return Invalid("prompt_cache_key", "at most 256 bytes");
  out->set_prompt_cache_key(*s);
  return absl::OkStatus();
}

absl::Status ParseModel(const Value& root, v1::InferenceRequest* out) {
  const Value* model = Field(root, "model");
  if (model == nullptr) return Invalid("model", "is required");
  auto model_text = GetString(*model, "model");
  if (!model_text.ok()) return model_text.status();
  if (model_text->empty()) return Invalid("model", "must not be empty");
  out->set_model(*model_text);
  return absl::OkStatus();
}

std::string Quoted(absl::string_view value) {
  constexpr size_t kMaxQuotedBytes = 64;
  if (value.size() <= kMaxQuotedBytes) return absl::StrCat("'", value, "'");
  return absl::StrCat("'", Utf8Prefix(value, kMaxQuotedBytes), "...' (", value.size(), " bytes)");
}

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return WithParam(ReasonError("invalid_request", absl::StrCat(path, ": ", what)), path);
}

absl::Status Unsupported(absl::string_view path, absl::string_view what) {
  return WithParam(ReasonError("unsupported_parameter", absl::StrCat(path, ": ", what)), path);
}

absl::Status CheckFields(const Value& root, const std::vector<FieldRule>& rules, absl::string_view api) {
  for (const auto& [key, value] : root.members()) {
    if (value.is_null()) continue;
    const FieldRule* rule = nullptr;
    for (const FieldRule& r : rules) {
      if (key == r.name) rule = &r;
    }
    if (rule == nullptr) {
      const std::string path = key.size() <= 64 ? std::string(key) : Quoted(key);
      return Unsupported(path, absl::StrCat("not a field of the ", api, " request that Gantry implements"));
    }
    if (rule->refused != nullptr) return Unsupported(key, rule->refused);
  }
  return absl::OkStatus();
}

absl::Status WrongType(absl::string_view path, absl::string_view expected, const Value& got) {
  return Invalid(path, absl::StrCat("expected ", expected, ", got ", TypeName(got)));
}

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

absl::Status ParseTextContent(const Value* content, const std::string& path,
                              std::initializer_list<absl::string_view> part_types,
                              std::string* text, bool* is_null) {
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
    bool known = false;
    for (absl::string_view t : part_types) known = known || type->as_string() == t;
    if (!known) {
      return Invalid(absl::StrCat(part_path, ".type"),
                     absl::StrCat("unsupported content part type ", Quoted(type->as_string()),
                                  " (only text is supported: ", absl::StrJoin(part_types, ", "),
                                  ")"));
    }
    // A replayed output_text part may carry the empty annotations and logprobs the
    // answer had; anything in them would be dropped.
    for (const char* echo : {"annotations", "logprobs"}) {
      const Value* v = Field(part, echo);
      if (v != nullptr && !(v->is_array() && v->items().empty())) {
        return Unsupported(absl::StrCat(part_path, ".", echo), "only an empty array");
      }
    }
    GANTRY_RETURN_IF_ERROR(CheckMembers(part, part_path, {"type", "text", "annotations", "logprobs"}));
    const Value* part_text = Field(part, "text");
    if (part_text == nullptr) return Invalid(absl::StrCat(part_path, ".text"), "is required");
    auto s = GetString(*part_text, absl::StrCat(part_path, ".text"));
    if (!s.ok()) return s.status();
    parts.push_back(*s);
  }
  *text = absl::StrJoin(parts, "\n");
  return absl::OkStatus();
}

absl::Status ParseToolArguments(const Value* arguments, const std::string& path,
                                std::string* out) {
  if (arguments == nullptr) {
    *out = "{}";
  } else if (arguments->is_string()) {
    // Clients re-serialise arguments; what they send must still be a JSON object.
    auto parsed = json::Parse(arguments->as_string());
    if (!parsed.ok() || !parsed->is_object()) {
      return Invalid(path, "must be a JSON object serialized as a string");
    }
    *out = arguments->as_string();
  } else if (arguments->is_object()) {
    *out = json::DumpCompact(*arguments);
  } else {
    return WrongType(path, "a string holding a JSON object", *arguments);
  }
  return absl::OkStatus();
}

namespace {

absl::Status ParseFunctionTool(const Value& function, const std::string& path, bool nested,
                               std::set<std::string>* names, v1::InferenceRequest* out) {
  if (nested) {
    GANTRY_RETURN_IF_ERROR(CheckMembers(function, path, {"name", "description", "parameters", "strict"}));
  } else {
    GANTRY_RETURN_IF_ERROR(CheckMembers(function, path, {"type", "name", "description", "parameters", "strict"}));
  }
  v1::ToolDefinition* def = out->add_tools();
  const Value* name = Field(function, "name");
  if (name == nullptr) return Invalid(path + ".name", "is required");
  auto name_text = GetString(*name, path + ".name");
  if (!name_text.ok()) return name_text.status();
  if (!IsValidToolName(*name_text)) {
    return Invalid(path + ".name", "must be 1-64 of a-z, A-Z, 0-9, _ . -");
  }
  if (!names->insert(*name_text).second) {
    return Invalid(path + ".name", absl::StrCat("duplicate tool ", Quoted(*name_text)));
  }
  def->set_name(*name_text);
  if (const Value* description = Field(function, "description")) {
    auto s = GetString(*description, path + ".description");
    if (!s.ok()) return s.status();
    def->set_description(*s);
  }
  if (const Value* parameters = Field(function, "parameters")) {
    if (!parameters->is_object()) {
      return WrongType(path + ".parameters", "a JSON Schema object", *parameters);
    }
    def->set_parameters_json(json::DumpCompact(*parameters));
  }
  if (const Value* strict = Field(function, "strict")) {
    auto b = GetBool(*strict, path + ".strict");
    if (!b.ok()) return b.status();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseFunctionTools(const Value& tools, bool nested, v1::InferenceRequest* out) {
  if (!tools.is_array()) return WrongType("tools", "an array", tools);
  std::set<std::string> names;
  for (size_t i = 0; i < tools.items().size(); ++i) {
    const Value& tool = tools.items()[i];
    std::string path = absl::StrCat("tools[", i, "]");
    if (!tool.is_object()) return WrongType(path, "an object", tool);
    const Value* type = Field(tool, "type");
    if (type == nullptr || !type->is_string() || type->as_string() != "function") {
      return Invalid(path + ".type", "must be \"function\" (only function tools are supported)");
    }
    if (!nested) {
      GANTRY_RETURN_IF_ERROR(ParseFunctionTool(tool, path, false, &names, out));
      continue;
    }
    GANTRY_RETURN_IF_ERROR(CheckMembers(tool, path, {"type", "function"}));
    const Value* function = Field(tool, "function");
    if (function == nullptr || !function->is_object()) {
      return Invalid(path + ".function", "expected an object");
    }
    GANTRY_RETURN_IF_ERROR(ParseFunctionTool(*function, path + ".function", true, &names, out));
  }
  return absl::OkStatus();
}

absl::Status ParseToolChoiceMode(const Value& choice, const Value* named_function,
                                 absl::string_view path, absl::string_view name_path,
                                 v1::InferenceRequest* out) {
  if (choice.is_string()) {
    const std::string& s = choice.as_string();
    if (s == "auto") out->set_tool_choice(v1::TOOL_CHOICE_AUTO);
    else if (s == "none") out->set_tool_choice(v1::TOOL_CHOICE_NONE);
    else if (s == "required") out->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
    else return Invalid(path, "must be none, auto, required or a function object");
  } else if (choice.is_object()) {
    if (named_function == nullptr || !named_function->is_string()) {
      return Invalid(name_path, "expected a string");
    }
    out->set_tool_choice(v1::TOOL_CHOICE_NAMED);
    out->set_tool_choice_name(named_function->as_string());
  } else {
    return WrongType(path, "a string or an object", choice);
  }
  if (out->tool_choice() == v1::TOOL_CHOICE_REQUIRED || out->tool_choice() == v1::TOOL_CHOICE_NAMED) {
    if (out->tools_size() == 0) return Invalid(path, "requires tools");
  }
  if (out->tool_choice() == v1::TOOL_CHOICE_NAMED) {
    bool found = false;
    for (const auto& tool : out->tools()) found = found || tool.name() == out->tool_choice_name();
    if (!found) {
      return Invalid(name_path,
                     absl::StrCat(Quoted(out->tool_choice_name()), " is not one of the tools"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const Value& root, v1::InferenceRequest* req) {
  v1::SamplingParams* sampling = req->mutable_sampling();
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
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    const Value* v = Field(root, key);
    if (v == nullptr) continue;
    auto d = GetNumber(*v, key, -2, 2);
    if (!d.ok()) return d.status();
    if (key[0] == 'p') {
      sampling->set_presence_penalty(static_cast<float>(*d));
    } else {
      sampling->set_frequency_penalty(static_cast<float>(*d));
    }
  }
  if (const Value* bias = Field(root, "logit_bias")) {
    if (!bias->is_object()) return WrongType("logit_bias", "an object of token ids to numbers", *bias);
    if (bias->members().size() > kMaxLogitBias) {
      return Invalid("logit_bias", absl::StrCat("at most ", kMaxLogitBias, " token ids"));
    }
    for (const auto& [key, value] : bias->members()) {
      uint32_t id = 0;
      if (key.empty() || key.size() > 10 || !std::all_of(key.begin(), key.end(), absl::ascii_isdigit) ||
          !absl::SimpleAtoi(key, &id) || id > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
        return Invalid(absl::StrCat("logit_bias[", Quoted(key), "]"), "keys are token ids (decimal)");
      }
      auto d = GetNumber(value, absl::StrCat("logit_bias[", Quoted(key), "]"), -100, 100);
      if (!d.ok()) return d.status();
      (*sampling->mutable_logit_bias())[id] = static_cast<float>(*d);
    }
  }
  if (const Value* seed = Field(root, "seed")) {
    auto i = GetInteger(*seed, "seed", std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max());
    if (!i.ok()) return i.status();
    sampling->set_seed(static_cast<uint64_t>(*i));
  }
  return absl::OkStatus();
}

absl::Status CheckToolReplay(const v1::InferenceRequest& request,
                             const std::function<std::string(int)>& path_of) {
  std::set<std::string> issued;
  for (int i = 0; i < request.messages_size(); ++i) {
    const v1::ChatMessage& m = request.messages(i);
    for (const auto& call : m.tool_calls()) issued.insert(call.id());
    if (m.role() == "tool" && issued.count(m.tool_call_id()) == 0) {
      return ReasonError(
          "unknown_tool_call_id",
          absl::StrCat(path_of(i), ": ", Quoted(m.tool_call_id()),
                       " matches no earlier assistant tool call in this request (send the "
                       "call before its result, under the id the server issued)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gantry::openai
