#include "worker/toolcall/tool_set.h"

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry::toolcall {

absl::StatusOr<ToolSet> ToolSet::Compile(
    const google::protobuf::RepeatedPtrField<v1::ToolDefinition>& tools) {
  ToolSet set;
  for (int i = 0; i < tools.size(); ++i) {
    const v1::ToolDefinition& definition = tools.Get(i);
    Tool tool;
    tool.name = definition.name();
    if (tool.name.empty()) {
      return ReasonError("invalid_request", absl::StrCat("tools[", i, "] has an empty name"));
    }
    if (set.tools_.count(tool.name) != 0) {
      return ReasonError("invalid_request",
                         absl::StrCat("tool \"", tool.name, "\" is advertised twice"));
    }
    if (!definition.parameters_json().empty()) {
      auto parameters = json::Parse(definition.parameters_json());
      if (!parameters.ok()) {
        return ReasonError("invalid_request",
                           absl::StrCat("tool \"", tool.name, "\" parameters are not JSON: ",
                                        parameters.status().message()));
      }
      auto schema = json_schema::Schema::Compile(*parameters);
      if (!schema.ok()) {
        return ReasonError(
            "invalid_request",
            absl::StrCat("tool \"", tool.name, "\" parameters: ", schema.status().message()));
      }
      tool.has_schema = true;
      tool.schema = *std::move(schema);
    }
    set.names_.push_back(tool.name);
    set.tools_.emplace(tool.name, std::move(tool));
  }
  return set;
}

const Tool* ToolSet::Find(absl::string_view name) const {
  auto found = tools_.find(name);
  return found == tools_.end() ? nullptr : &found->second;
}

absl::Status ToolSet::ValidateArguments(absl::string_view name,
                                        const json::Value& arguments) const {
  const Tool* tool = Find(name);
  if (tool == nullptr) {
    return ReasonError("invalid_tool_call",
                       absl::StrCat("\"", name, "\" is not an advertised tool"));
  }
  if (!arguments.is_object()) {
    return ReasonError("invalid_tool_call",
                       absl::StrCat("the arguments of \"", name, "\" are not a JSON object"));
  }
  if (!tool->has_schema) return absl::OkStatus();
  std::vector<json_schema::Violation> violations = tool->schema.Validate(arguments);
  if (violations.empty()) return absl::OkStatus();
  return ReasonError("invalid_tool_call",
                     absl::StrCat("the arguments of \"", name, "\" do not match its schema: ",
                                  json_schema::JoinViolations(violations)));
}

uint8_t ToolSet::ParameterTypes(absl::string_view name, absl::string_view key) const {
  const Tool* tool = Find(name);
  if (tool == nullptr || !tool->has_schema) return 0;
  return tool->schema.PropertyTypes(key);
}

}  // namespace gantry::toolcall
