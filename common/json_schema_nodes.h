// The compiled form of a JSON Schema (json_schema.h), shared by its compiler
// (json_schema_compile.cc) and its validator (json_schema.cc): exact decimals, canonical
// value keys, type bits, ECMA-262 regexes run by PCRE2 with match limits, and the flat
// node graph. Read also by the constraint compiler (worker/constrain/json_grammar.cc),
// which enforces the same keywords while a value is generated; nobody else.
#ifndef GANTRY_COMMON_JSON_SCHEMA_NODES_H_
#define GANTRY_COMMON_JSON_SCHEMA_NODES_H_

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/json.h"
#include "common/json_schema.h"

namespace gantry::json_schema::internal {

// ---- Exact decimal numbers.

// value = (negative ? -1 : 1) * digits * 10^exponent. `digits` has no leading or trailing
// zeros; empty means zero (then negative is false and exponent 0).
struct Decimal {
  bool negative = false;
  std::string digits;
  int64_t exponent = 0;
};

// Parses JSON number text exactly; false when it is not one.
bool ParseDecimal(absl::string_view s, Decimal* out);
// The exact value of a JSON number (its source text where kept).
Decimal NumberOf(const json::Value& v);
inline bool IsIntegral(const Decimal& d) { return d.digits.empty() || d.exponent >= 0; }
// -1, 0 or 1.
int CompareDecimal(const Decimal& a, const Decimal& b);
bool IsMultipleOf(const Decimal& value, const Decimal& divisor, double value_d, double divisor_d);

// ---- Canonical keys: equal keys <=> equal JSON values in the JSON Schema sense
// (numbers by mathematical value, objects regardless of member order).

void AppendCanonical(const json::Value& v, std::string* out);
std::string CanonicalKey(const json::Value& v);
// Short JSON text of a value for messages.
std::string Preview(const json::Value& v, size_t limit = 80);

// ---- Types (the kType* bits of json_schema.h).

const char* TypeName(uint8_t bit);
uint8_t TypeBitFromName(absl::string_view name);
// The most specific type of a value: integral numbers (also 1.0) are "integer".
uint8_t TypeOf(const json::Value& v);
bool TypeMatches(uint8_t allowed, uint8_t actual);
uint64_t CodePoints(absl::string_view s);
// A JSON Pointer token: "~" -> "~0", "/" -> "~1".
std::string EscapePointerToken(absl::string_view token);

// ---- Regexes: ECMA-262 syntax, run by PCRE2 in UTF mode with match limits.

enum class MatchResult { kMatch, kNoMatch, kLimit };

struct Regex {
  std::shared_ptr<pcre2_code> code;
  std::string source;
  MatchResult Search(absl::string_view subject) const;
};

absl::StatusOr<Regex> CompileRegex(const std::string& pattern);

// ---- The compiled form: a flat vector of nodes that refer to each other by index.

struct Node {
  bool reject_all = false;  // the `false` schema
  bool has_type = false;
  uint8_t types = 0;
  std::string type_text;  // "integer or null", in the schema's order
  int ref = -1;

  std::map<std::string, int> properties;
  std::vector<std::pair<Regex, int>> pattern_properties;
  int additional_properties = -1;
  int property_names = -1;
  std::vector<std::string> required;
  absl::optional<uint64_t> min_properties, max_properties;
  std::vector<std::pair<std::string, std::vector<std::string>>> dependent_required;

  std::vector<int> prefix_items;
  int items = -1;  // for indexes past prefix_items
  int contains = -1;
  uint64_t min_contains = 1;
  absl::optional<uint64_t> max_contains;
  absl::optional<uint64_t> min_items, max_items;
  bool unique_items = false;

  absl::optional<uint64_t> min_length, max_length;
  absl::optional<Regex> pattern;

  absl::optional<Decimal> minimum, maximum, exclusive_minimum, exclusive_maximum, multiple_of;
  std::string minimum_text, maximum_text, exclusive_minimum_text, exclusive_maximum_text,
      multiple_of_text;
  double multiple_of_double = 0;

  bool has_enum = false;
  std::vector<std::string> enum_keys;  // sorted
  std::string enum_text;
  uint8_t enum_types = 0;
  std::vector<std::string> enum_values;  // compact JSON text, in the schema's order
  bool has_const = false;
  std::string const_key, const_text;
  std::string const_value;  // compact JSON text

  std::vector<int> all_of, any_of, one_of;
  int not_schema = -1;
  int if_schema = -1, then_schema = -1, else_schema = -1;
};

struct CompiledSchema {
  std::vector<Node> nodes;  // nodes[0] is the root
};

// Compiles `root` into `nodes` (json_schema_compile.cc). Errors as Schema::Compile.
absl::Status CompileNodes(const json::Value& root, const CompileOptions& options,
                          std::vector<Node>* nodes);

}  // namespace gantry::json_schema::internal

#endif  // GANTRY_COMMON_JSON_SCHEMA_NODES_H_
