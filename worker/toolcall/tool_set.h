// The tools a request advertises, with their argument schemas compiled once.
//
// Thread-safety: immutable after Compile; safe to share between threads.
#ifndef GANTRY_WORKER_TOOLCALL_TOOL_SET_H_
#define GANTRY_WORKER_TOOLCALL_TOOL_SET_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "common/json_schema.h"
#include "gantry/v1/inference.pb.h"
#include "google/protobuf/repeated_field.h"

namespace gantry::toolcall {

struct Tool {
  std::string name;
  // False when the client sent no `parameters`: any JSON object is accepted.
  bool has_schema = false;
  json_schema::Schema schema;
};

class ToolSet {
 public:
  ToolSet() = default;

  // Compiles every tool's parameters_json. Errors: INVALID_ARGUMENT "invalid_request"
  // naming the tool for an empty or repeated name, parameters that are not JSON, or a
  // schema that does not compile (json_schema::Schema::Compile).
  static absl::StatusOr<ToolSet> Compile(
      const google::protobuf::RepeatedPtrField<v1::ToolDefinition>& tools);

  bool empty() const { return tools_.empty(); }
  size_t size() const { return tools_.size(); }
  // nullptr when no tool has this name.
  const Tool* Find(absl::string_view name) const;
  // Names in advertised order.
  const std::vector<std::string>& names() const { return names_; }

  // OK, or INVALID_ARGUMENT "invalid_tool_call" naming the tool and every schema violation
  // of `arguments`. Arguments must be an object even when the tool has no schema.
  // Precondition: Find(name) != nullptr.
  absl::Status ValidateArguments(absl::string_view name, const json::Value& arguments) const;

  // The declared JSON Schema types of parameter `key` of tool `name` (0 when unknown).
  uint8_t ParameterTypes(absl::string_view name, absl::string_view key) const;

 private:
  std::map<std::string, Tool, std::less<>> tools_;
  std::vector<std::string> names_;
};

}  // namespace gantry::toolcall

#endif  // GANTRY_WORKER_TOOLCALL_TOOL_SET_H_
