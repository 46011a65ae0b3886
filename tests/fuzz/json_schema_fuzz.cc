// Fuzz target: JSON Schema compilation of arbitrary schema text, then validation of fixed
// values. Invariants: nothing crashes or hangs (bounded work); Validate() finds no
// violation exactly when IsValid() holds; every violation has a message. A smaller work
// budget than the default keeps each input fast under sanitizers; the bound is the same code.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/json.h"
#include "common/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry;
  auto schema = json_schema::Schema::CompileText(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!schema.ok()) return 0;
  static const std::vector<json::Value> values = [] {
    std::vector<json::Value> out;
    for (const char* text :
         {"null", "true", "0", "-1.5", "9007199254740993", "1e308", "\"\"", "\"a/b~c\\u00e9\"",
          "[]", "[1, 1.0, \"1\", null, [1], {\"a\": 1}]",
          "{\"command\": \"ls\", \"timeout\": 0, \"todos\": [{\"content\": null}], \"a\": {\"b\": "
          "[true, {\"c\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"}]}}"}) {
      auto v = json::Parse(text);
      if (!v.ok()) std::abort();
      out.push_back(*v);
    }
    return out;
  }();
  json_schema::ValidateOptions options;
  options.max_steps = 20000;
  for (const json::Value& value : values) {
    std::vector<json_schema::Violation> violations = schema->Validate(value, options);
    if (violations.empty() != schema->IsValid(value, options)) std::abort();
    for (const auto& v : violations) {
      if (v.message.empty()) std::abort();
    }
  }
  schema->PropertyTypes("a");
  return 0;
}
