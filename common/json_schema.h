// JSON Schema validation for tool arguments: a schema is compiled once (per request's
// advertised tool) and validates many values.
//
// Dialect: JSON Schema 2020-12 as coding-agent clients send it (docs/tool-protocols.md,
// "JSON Schema"). Supported keywords:
//   type (a name or an array of names), enum, const,
//   properties, patternProperties, additionalProperties, propertyNames, required,
//   minProperties, maxProperties, dependentRequired,
//   prefixItems, items, contains, minContains, maxContains, minItems, maxItems, uniqueItems,
//   minLength, maxLength (Unicode code points), pattern (ECMA-262 syntax run by PCRE2 with
//   UTF and match limits; unanchored search),
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
//   allOf, anyOf, oneOf, not, if / then / else,
//   $ref to a local JSON Pointer ("#", "#/$defs/x", "#/definitions/x", "#/properties/a").
// Earlier drafts' forms that clients still send are read too: `items` as an array (with
// `additionalItems`), boolean `exclusiveMinimum` / `exclusiveMaximum` (draft 4), and a
// boolean `required` inside a property (draft 3, ignored).
// Annotations and unknown keywords are ignored, as the spec says ($schema, $id, title,
// description, default, examples, format, deprecated, unevaluated*, ...).
//
// Numbers are compared exactly, as decimals (the JSON library keeps each literal): 1.0 is
// an integer, 1 equals 1.0 in enum/const/uniqueItems, and 9007199254740993 exceeds a
// maximum of 9007199254740992 even though both round to the same double.
//
// Outside input: schemas and values come from clients and models. Nothing here asserts or
// throws on them; compilation and validation do bounded work (node, pattern and step
// limits below) and report failures as statuses or violations.
//
// Thread-safety: a Schema is immutable after Compile; Validate may run concurrently on
// one Schema from several threads. Copies share the compiled form.
#ifndef GANTRY_COMMON_JSON_SCHEMA_H_
#define GANTRY_COMMON_JSON_SCHEMA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace gantry::json_schema {

// One reason a value does not validate.
struct Violation {
  // JSON Pointer (RFC 6901) to the offending part of the validated value; "" is the root.
  std::string path;
  // What is wrong there, e.g. "expected string, got null".
  std::string message;

  // "/edits/0/old_text: expected string, got null"; the root shows as "(root)".
  std::string ToString() const;
};

// "a; b; c" of the violations' ToString().
std::string JoinViolations(const std::vector<Violation>& violations);

struct CompileOptions {
  // Compiled schema objects at most (each object or boolean schema is one node).
  size_t max_nodes = 20000;
  // Nesting of schema objects at most.
  size_t max_depth = 200;
  // Bytes of one `pattern` / `patternProperties` regex at most, and how many of them.
  size_t max_pattern_bytes = 4096;
  size_t max_patterns = 1000;
};

struct ValidateOptions {
  // Violations reported at most; the last one then says that more were omitted.
  size_t max_violations = 50;
  // Work budget: one step per (schema node, value) visit, 1000 per regex match. Past it,
  // validation fails with the violation "validation exceeded its work limit". Real tool
  // arguments take hundreds to a few thousand steps; the budget exists for schemas whose
  // anyOf / $ref structure is exponential.
  size_t max_steps = 200000;
  // Nesting of schema applications at most (guards $ref cycles that consume no value).
  size_t max_depth = 600;
};

// Bits of a JSON Schema type set (see Schema::PropertyTypes).
enum TypeBits : uint8_t {
  kTypeNull = 1,
  kTypeBoolean = 2,
  kTypeInteger = 4,
  kTypeNumber = 8,
  kTypeString = 16,
  kTypeArray = 32,
  kTypeObject = 64,
};

namespace internal {
struct CompiledSchema;
}  // namespace internal

class Schema {
 public:
  // The `true` schema: every value validates.
  Schema();

  // Compiles `schema` (an object or a boolean). Errors: INVALID_ARGUMENT with reason
  // "invalid_request" and "schema <pointer>: <what>" for a keyword with a value of the
  // wrong form, an unknown type name, a regex PCRE2 cannot compile, a $ref that is not a
  // local JSON Pointer or points nowhere, or a schema past the CompileOptions limits.
  static absl::StatusOr<Schema> Compile(const json::Value& schema,
                                        const CompileOptions& options = {});
  // Parses `text` as JSON (errors: reason "invalid_json") and compiles it.
  static absl::StatusOr<Schema> CompileText(absl::string_view text,
                                            const CompileOptions& options = {});

  // Every violation of `value` (empty when it validates), in document order of the
  // schema's keywords and the value's members, at most options.max_violations.
  std::vector<Violation> Validate(const json::Value& value,
                                  const ValidateOptions& options = {}) const;
  bool IsValid(const json::Value& value, const ValidateOptions& options = {}) const;
  // As IsValid, against the compiled node `node` (an index of compiled()->nodes) as if it
  // were the root; false for an index out of range.
  bool IsValidAt(int node, const json::Value& value, const ValidateOptions& options = {}) const;

  // The compiled node graph (json_schema_nodes.h), or nullptr for the `true` schema. For
  // the constraint compiler (worker/constrain), which walks the same keywords the
  // validator checks.
  const internal::CompiledSchema* compiled() const { return compiled_.get(); }

  // The types the root schema declares for the object property `key` (TypeBits ORed):
  // from `type`, the types of `enum` / `const` values, and the branches of `anyOf` /
  // `oneOf`, following $ref; via additionalProperties when `key` is not in properties.
  // 0 when nothing is declared. Used to type raw-text tool parameters.
  uint8_t PropertyTypes(absl::string_view key) const;

 private:
  explicit Schema(std::shared_ptr<const internal::CompiledSchema> compiled);
  std::shared_ptr<const internal::CompiledSchema> compiled_;
};

}  // namespace gantry::json_schema

#endif  // GANTRY_COMMON_JSON_SCHEMA_H_
