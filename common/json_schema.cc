#include "common/json_schema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/optional.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry::json_schema {
namespace {

// ---------------------------------------------------------------------------------------
// Exact decimal numbers.

// value = (negative ? -1 : 1) * digits * 10^exponent. `digits` has no leading or trailing
// zeros; empty means zero (then negative is false and exponent 0).
struct Decimal {
  bool negative = false;
  std::string digits;
  int64_t exponent = 0;
};

// Exponents saturate here: far beyond any digit count, so comparisons stay exact.
constexpr int64_t kExponentCap = int64_t{1} << 50;

bool ParseDecimal(absl::string_view s, Decimal* out) {
  size_t i = 0;
  Decimal d;
  if (i < s.size() && s[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string mantissa;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') mantissa += s[i++], ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') mantissa += s[i++], ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  int64_t exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) exp_negative = s[i++] == '-';
    if (i >= s.size()) return false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      exp = std::min<int64_t>(exp * 10 + (s[i++] - '0'), kExponentCap);
    }
    if (exp_negative) exp = -exp;
  }
  if (i != s.size()) return false;
  exp -= static_cast<int64_t>(frac_digits);
  size_t first = mantissa.find_first_not_of('0');
  if (first == std::string::npos) {
    *out = Decimal();
    return true;
  }
  size_t last = mantissa.find_last_not_of('0');
  d.digits = mantissa.substr(first, last - first + 1);
  d.exponent = exp + static_cast<int64_t>(mantissa.size() - 1 - last);
  *out = std::move(d);
  return true;
}

Decimal NumberOf(const json::Value& v) {
  Decimal d;
  if (ParseDecimal(v.number_literal(), &d)) return d;
  // Not a literal (a non-finite double made in code): its shortest round-trip text.
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v.as_double());
  if (!ParseDecimal(buffer, &d)) d = Decimal();
  return d;
}

bool IsIntegral(const Decimal& d) { return d.digits.empty() || d.exponent >= 0; }

int CompareDecimal(const Decimal& a, const Decimal& b) {
  bool a_zero = a.digits.empty(), b_zero = b.digits.empty();
  if (a_zero && b_zero) return 0;
  if (a_zero) return b.negative ? 1 : -1;
  if (b_zero) return a.negative ? -1 : 1;
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  // Position of the most significant digit decides first; then the digits themselves
  // (a digit string that is a prefix of the other is the smaller: no trailing zeros).
  int64_t ma = static_cast<int64_t>(a.digits.size()) + a.exponent;
  int64_t mb = static_cast<int64_t>(b.digits.size()) + b.exponent;
  int magnitude = ma != mb ? (ma < mb ? -1 : 1) : a.digits.compare(b.digits);
  magnitude = magnitude < 0 ? -1 : (magnitude > 0 ? 1 : 0);
  return a.negative ? -magnitude : magnitude;
}

// Whether value / divisor is an integer. Precondition: divisor > 0.
bool IsMultipleOf(const Decimal& value, const Decimal& divisor, double value_d, double divisor_d) {
  if (value.digits.empty()) return true;
  if (value.digits.size() <= 18 && divisor.digits.size() <= 18) {
    unsigned __int128 v = 0, m = 0;
    for (char c : value.digits) v = v * 10 + (c - '0');
    for (char c : divisor.digits) m = m * 10 + (c - '0');
    int64_t k = value.exponent - divisor.exponent;
    if (k >= 0) {
      // v * 10^k mod m by square-and-multiply.
      unsigned __int128 result = v % m, base = 10 % m;
      for (int64_t e = k; e > 0; e >>= 1) {
        if (e & 1) result = result * base % m;
        base = base * base % m;
      }
      return result == 0;
    }
    if (-k > 18) return false;  // m * 10^-k > 10^18 > v, and v != 0
    unsigned __int128 scaled = m;
    for (int64_t e = 0; e < -k; ++e) scaled *= 10;
    return v % scaled == 0;
  }
  double q = value_d / divisor_d;
  if (!std::isfinite(q)) return false;
  return std::fabs(q - std::round(q)) <= 1e-9 * std::max(1.0, std::fabs(q));
}

// ---------------------------------------------------------------------------------------
// Canonical keys: equal keys <=> equal JSON values in the JSON Schema sense (numbers by
// mathematical value, objects regardless of member order).

void AppendCanonical(const json::Value& v, std::string* out) {
  switch (v.type()) {
    case json::Type::kNull: out->append("z"); break;
    case json::Type::kBool: out->append(v.as_bool() ? "t" : "f"); break;
    case json::Type::kNumber: {
      Decimal d = NumberOf(v);
      absl::StrAppend(out, "n", d.negative ? "-" : "", d.digits, "e", d.exponent, ";");
      break;
    }
    case json::Type::kString:
      absl::StrAppend(out, "s", v.as_string().size(), ":", v.as_string());
      break;
    case json::Type::kArray:
      absl::StrAppend(out, "a", v.items().size(), "[");
      for (const json::Value& item : v.items()) AppendCanonical(item, out);
      out->append("]");
      break;
    case json::Type::kObject: {
      std::vector<const json::Value::Member*> members;
      for (const auto& m : v.members()) members.push_back(&m);
      std::sort(members.begin(), members.end(),
                [](const auto* a, const auto* b) { return a->first < b->first; });
      absl::StrAppend(out, "o", members.size(), "{");
      for (const auto* m : members) {
        absl::StrAppend(out, m->first.size(), ":", m->first);
        AppendCanonical(m->second, out);
      }
      out->append("}");
      break;
    }
  }
}

std::string CanonicalKey(const json::Value& v) {
  std::string key;
  AppendCanonical(v, &key);
  return key;
}

// Short JSON text of a value for messages.
std::string Preview(const json::Value& v, size_t limit = 80) {
  std::string text = json::DumpCompact(v);
  if (text.size() > limit) {
    size_t cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  return text;
}

// ---------------------------------------------------------------------------------------
// Types.

const char* TypeName(uint8_t bit) {
  switch (bit) {
    case kTypeNull: return "null";
    case kTypeBoolean: return "boolean";
    case kTypeInteger: return "integer";
    case kTypeNumber: return "number";
    case kTypeString: return "string";
    case kTypeArray: return "array";
    case kTypeObject: return "object";
  }
  return "?";
}

uint8_t TypeBitFromName(absl::string_view name) {
  for (uint8_t bit = 1; bit != 0 && bit <= kTypeObject; bit <<= 1) {
    if (name == TypeName(bit)) return bit;
  }
  return 0;
}

// The most specific type of a value: integral numbers (also 1.0) are "integer".
uint8_t TypeOf(const json::Value& v) {
  switch (v.type()) {
    case json::Type::kNull: return kTypeNull;
    case json::Type::kBool: return kTypeBoolean;
    case json::Type::kNumber: return IsIntegral(NumberOf(v)) ? kTypeInteger : kTypeNumber;
    case json::Type::kString: return kTypeString;
    case json::Type::kArray: return kTypeArray;
    case json::Type::kObject: return kTypeObject;
  }
  return 0;
}

bool TypeMatches(uint8_t allowed, uint8_t actual) {
  if (allowed & actual) return true;
  return actual == kTypeInteger && (allowed & kTypeNumber);
}

uint64_t CodePoints(absl::string_view s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// ---------------------------------------------------------------------------------------
// Regexes: ECMA-262 syntax, run by PCRE2 in UTF mode with match limits.

enum class MatchResult { kMatch, kNoMatch, kLimit };

constexpr uint32_t kMatchLimit = 100000;
constexpr uint32_t kDepthLimit = 5000;
constexpr uint32_t kHeapLimitKiB = 8 * 1024;

struct Regex {
  std::shared_ptr<pcre2_code> code;
  std::string source;

  MatchResult Search(absl::string_view subject) const {
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
        pcre2_match_data_create_from_pattern(code.get(), nullptr), pcre2_match_data_free);
    std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> context(
        pcre2_match_context_create(nullptr), pcre2_match_context_free);
    if (data == nullptr || context == nullptr) return MatchResult::kLimit;
    pcre2_set_match_limit(context.get(), kMatchLimit);
    pcre2_set_depth_limit(context.get(), kDepthLimit);
    pcre2_set_heap_limit(context.get(), kHeapLimitKiB);
    int rc = pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                         0, 0, data.get(), context.get());
    if (rc >= 0) return MatchResult::kMatch;
    if (rc == PCRE2_ERROR_NOMATCH) return MatchResult::kNoMatch;
    return MatchResult::kLimit;  // match/depth/heap limit, or a subject PCRE2 refuses
  }
};

absl::StatusOr<Regex> CompileRegex(const std::string& pattern) {
  std::unique_ptr<pcre2_compile_context, void (*)(pcre2_compile_context*)> context(
      pcre2_compile_context_create(nullptr), pcre2_compile_context_free);
  if (context == nullptr) return absl::ResourceExhaustedError("pcre2 context");
  // ECMA-262: \uHHHH and \u{H...} escapes, `$` only at the very end, ASCII \d \w \s.
  pcre2_set_compile_extra_options(context.get(), PCRE2_EXTRA_ALT_BSUX);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C,
                    &error, &offset, context.get());
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat(
        "pattern ", Preview(json::Value::String(pattern)), " does not compile at offset ", offset,
        ": ", reinterpret_cast<const char*>(message)));
  }
  return Regex{std::shared_ptr<pcre2_code>(code, pcre2_code_free), pattern};
}

// ---------------------------------------------------------------------------------------
// The compiled form: a flat vector of nodes that refer to each other by index.

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
  bool has_const = false;
  std::string const_key, const_text;

  std::vector<int> all_of, any_of, one_of;
  int not_schema = -1;
  int if_schema = -1, then_schema = -1, else_schema = -1;
};

}  // namespace

namespace internal {
struct CompiledSchema {
  std::vector<Node> nodes;  // nodes[0] is the root
};
}  // namespace internal

namespace {

std::string EscapePointerToken(absl::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

class Compiler {
 public:
  Compiler(const json::Value& root, const CompileOptions& options)
      : root_(root), options_(options) {}

  absl::Status Run(std::vector<Node>* nodes) {
    GANTRY_ASSIGN_OR_RETURN(int root, Reserve());
    GANTRY_RETURN_IF_ERROR(Fill(root, root_, "", 0));
    // $ref targets are compiled here, not where the $ref is, so that a chain of $defs
    // referring to each other never deepens the C++ stack.
    while (!pending_.empty()) {
      auto [index, target] = pending_.back();
      pending_.pop_back();
      GANTRY_RETURN_IF_ERROR(Fill(index, *target.first, target.second, 0));
    }
    *nodes = std::move(nodes_);
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(const std::string& pointer, absl::string_view what) {
    return ReasonError("invalid_request",
                       absl::StrCat("schema ", pointer.empty() ? "(root)" : pointer, ": ", what));
  }

  absl::StatusOr<int> Reserve() {
    if (nodes_.size() >= options_.max_nodes) {
      return ReasonError("invalid_request",
                         absl::StrCat("schema has more than ", options_.max_nodes, " subschemas"));
    }
    nodes_.emplace_back();
    return static_cast<int>(nodes_.size() - 1);
  }

  absl::StatusOr<int> Sub(const json::Value& v, const std::string& pointer, size_t depth) {
    GANTRY_ASSIGN_OR_RETURN(int index, Reserve());
    GANTRY_RETURN_IF_ERROR(Fill(index, v, pointer, depth + 1));
    return index;
  }

  absl::StatusOr<std::vector<int>> SubArray(const json::Value& v, const std::string& pointer,
                                            size_t depth, bool non_empty) {
    if (!v.is_array() || (non_empty && v.items().empty())) {
      return Fail(pointer, non_empty ? "expected a non-empty array of schemas"
                                     : "expected an array of schemas");
    }
    std::vector<int> out;
    for (size_t i = 0; i < v.items().size(); ++i) {
      GANTRY_ASSIGN_OR_RETURN(int index, Sub(v.items()[i], absl::StrCat(pointer, "/", i), depth));
      out.push_back(index);
    }
    return out;
  }

  absl::StatusOr<uint64_t> Count(const json::Value& v, const std::string& pointer) {
    if (!v.is_number()) return Fail(pointer, "expected a non-negative integer");
    Decimal d = NumberOf(v);
    if (d.negative || !IsIntegral(d)) return Fail(pointer, "expected a non-negative integer");
    if (d.digits.empty()) return 0;
    if (static_cast<int64_t>(d.digits.size()) + d.exponent > 19) return UINT64_MAX;
    unsigned __int128 x = 0;
    for (char c : d.digits) x = x * 10 + (c - '0');
    for (int64_t e = 0; e < d.exponent; ++e) x *= 10;
    return x > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(x);
  }

  absl::StatusOr<std::string> PatternSource(const json::Value& v, const std::string& pointer) {
    if (!v.is_string()) return Fail(pointer, "expected a regex string");
    if (v.as_string().size() > options_.max_pattern_bytes) {
      return Fail(pointer,
                  absl::StrCat("regex longer than ", options_.max_pattern_bytes, " bytes"));
    }
    if (++patterns_ > options_.max_patterns) {
      return Fail(pointer, absl::StrCat("more than ", options_.max_patterns, " regexes"));
    }
    return v.as_string();
  }

  absl::StatusOr<Regex> Pattern(const std::string& source, const std::string& pointer) {
    auto regex = CompileRegex(source);
    if (!regex.ok()) return Fail(pointer, regex.status().message());
    return std::move(regex).value();
  }

  // Resolves a local JSON Pointer reference ("#", "#/a/b") within the root document.
  absl::StatusOr<const json::Value*> Resolve(const std::string& ref, const std::string& pointer) {
    if (ref.empty() || ref[0] != '#') {
      return Fail(pointer, absl::StrCat("$ref \"", ref,
                                        "\" is not local: only \"#\" and \"#/...\" JSON Pointers "
                                        "are supported"));
    }
    const json::Value* at = &root_;
    absl::string_view rest = absl::string_view(ref).substr(1);
    if (!rest.empty() && rest[0] != '/') {
      return Fail(pointer, absl::StrCat("$ref \"", ref, "\": anchors are not supported"));
    }
    while (!rest.empty()) {
      rest.remove_prefix(1);
      size_t end = rest.find('/');
      absl::string_view raw = rest.substr(0, end);
      rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end);
      // Undo URI percent-encoding, then JSON Pointer escapes.
      std::string token;
      for (size_t i = 0; i < raw.size(); ++i) {
        auto hex = [](char c) {
          return c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
        };
        if (raw[i] == '%' && i + 2 < raw.size() && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
          token += static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2]));
          i += 2;
        } else if (raw[i] == '~' && i + 1 < raw.size() &&
                   (raw[i + 1] == '0' || raw[i + 1] == '1')) {
          token += raw[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          token += raw[i];
        }
      }
      const json::Value* next = nullptr;
      if (at->is_object()) {
        next = at->Find(token);
      } else if (at->is_array() && !token.empty() && token.size() < 10 &&
                 token.find_first_not_of("0123456789") == std::string::npos &&
                 (token == "0" || token[0] != '0')) {
        size_t i = 0;
        for (char c : token) i = i * 10 + static_cast<size_t>(c - '0');
        if (i < at->items().size()) next = &at->items()[i];
      }
      if (next == nullptr) return Fail(pointer, absl::StrCat("$ref \"", ref, "\" points nowhere"));
      at = next;
    }
    return at;
  }

  absl::Status Fill(int index, const json::Value& v, const std::string& pointer, size_t depth) {
    if (depth > options_.max_depth) {
      return Fail(pointer, absl::StrCat("nested deeper than ", options_.max_depth));
    }
    Node node;
    if (v.is_bool()) {
      node.reject_all = !v.as_bool();
      nodes_[index] = std::move(node);
      return absl::OkStatus();
    }
    if (!v.is_object()) return Fail(pointer, "a schema must be an object or a boolean");
    const json::Value* additional_items = nullptr;
    bool items_is_array = false;
    const json::Value* minimum_draft4 = nullptr;
    const json::Value* maximum_draft4 = nullptr;
    for (const auto& [key, value] : v.members()) {
      const std::string at = absl::StrCat(pointer, "/", EscapePointerToken(key));
      if (key == "type") {
        node.has_type = true;
        std::vector<const json::Value*> names;
        if (value.is_string()) {
          names.push_back(&value);
        } else if (value.is_array()) {
          for (const auto& item : value.items()) names.push_back(&item);
        } else {
          return Fail(at, "expected a type name or an array of type names");
        }
        for (const json::Value* name : names) {
          uint8_t bit = name->is_string() ? TypeBitFromName(name->as_string()) : 0;
          if (bit == 0) {
            return Fail(at, absl::StrCat("unknown type ", Preview(*name),
                                         " (null, boolean, integer, number, string, array, "
                                         "object)"));
          }
          if (!(node.types & bit)) {
            absl::StrAppend(&node.type_text, node.types ? " or " : "", TypeName(bit));
          }
          node.types |= bit;
        }
        if (node.type_text.empty()) node.type_text = "nothing (an empty type array)";
      } else if (key == "properties" || key == "patternProperties" || key == "dependentSchemas") {
        if (!value.is_object()) return Fail(at, "expected an object of schemas");
        for (const auto& [name, sub] : value.members()) {
          std::string sub_at = absl::StrCat(at, "/", EscapePointerToken(name));
          if (key == "dependentSchemas") continue;  // not enforced (documented)
          if (key == "patternProperties") {
            GANTRY_ASSIGN_OR_RETURN(std::string source,
                                    PatternSource(json::Value::String(name), sub_at));
            GANTRY_ASSIGN_OR_RETURN(Regex regex, Pattern(source, sub_at));
            GANTRY_ASSIGN_OR_RETURN(int child, Sub(sub, sub_at, depth));
            node.pattern_properties.emplace_back(std::move(regex), child);
          } else {
            GANTRY_ASSIGN_OR_RETURN(int child, Sub(sub, sub_at, depth));
            node.properties[name] = child;
          }
        }
      } else if (key == "additionalProperties") {
        GANTRY_ASSIGN_OR_RETURN(node.additional_properties, Sub(value, at, depth));
      } else if (key == "propertyNames") {
        GANTRY_ASSIGN_OR_RETURN(node.property_names, Sub(value, at, depth));
      } else if (key == "required") {
        if (value.is_bool()) continue;  // draft 3's per-property form: ignored
        if (!value.is_array()) return Fail(at, "expected an array of property names");
        for (const auto& name : value.items()) {
          if (!name.is_string()) return Fail(at, "expected an array of property names");
          node.required.push_back(name.as_string());
        }
      } else if (key == "minProperties") {
        GANTRY_ASSIGN_OR_RETURN(node.min_properties, Count(value, at));
      } else if (key == "maxProperties") {
        GANTRY_ASSIGN_OR_RETURN(node.max_properties, Count(value, at));
      } else if (key == "dependentRequired") {
        if (!value.is_object()) return Fail(at, "expected an object of name arrays");
        for (const auto& [name, list] : value.members()) {
          std::vector<std::string> names;
          if (!list.is_array()) return Fail(at, "expected an object of name arrays");
          for (const auto& item : list.items()) {
            if (!item.is_string()) return Fail(at, "expected an object of name arrays");
            names.push_back(item.as_string());
          }
          node.dependent_required.emplace_back(name, std::move(names));
        }
      } else if (key == "prefixItems") {
        GANTRY_ASSIGN_OR_RETURN(node.prefix_items, SubArray(value, at, depth, false));
      } else if (key == "items") {
        if (value.is_array()) {  // drafts 4-2019: tuple form
          items_is_array = true;
          GANTRY_ASSIGN_OR_RETURN(node.prefix_items, SubArray(value, at, depth, false));
        } else {
          GANTRY_ASSIGN_OR_RETURN(node.items, Sub(value, at, depth));
        }
      } else if (key == "additionalItems") {
        additional_items = &value;
      } else if (key == "contains") {
        GANTRY_ASSIGN_OR_RETURN(node.contains, Sub(value, at, depth));
      } else if (key == "minContains") {
        GANTRY_ASSIGN_OR_RETURN(node.min_contains, Count(value, at));
      } else if (key == "maxContains") {
        GANTRY_ASSIGN_OR_RETURN(node.max_contains, Count(value, at));
      } else if (key == "minItems") {
        GANTRY_ASSIGN_OR_RETURN(node.min_items, Count(value, at));
      } else if (key == "maxItems") {
        GANTRY_ASSIGN_OR_RETURN(node.max_items, Count(value, at));
      } else if (key == "uniqueItems") {
        if (!value.is_bool()) return Fail(at, "expected a boolean");
        node.unique_items = value.as_bool();
      } else if (key == "minLength") {
        GANTRY_ASSIGN_OR_RETURN(node.min_length, Count(value, at));
      } else if (key == "maxLength") {
        GANTRY_ASSIGN_OR_RETURN(node.max_length, Count(value, at));
      } else if (key == "pattern") {
        GANTRY_ASSIGN_OR_RETURN(std::string source, PatternSource(value, at));
        GANTRY_ASSIGN_OR_RETURN(node.pattern, Pattern(source, at));
      } else if (key == "minimum" || key == "maximum" || key == "multipleOf" ||
                 key == "exclusiveMinimum" || key == "exclusiveMaximum") {
        if (value.is_bool() && key == "exclusiveMinimum") {
          if (value.as_bool()) minimum_draft4 = &value;
          continue;
        }
        if (value.is_bool() && key == "exclusiveMaximum") {
          if (value.as_bool()) maximum_draft4 = &value;
          continue;
        }
        if (!value.is_number()) return Fail(at, "expected a number");
        Decimal d = NumberOf(value);
        std::string text = value.number_literal();
        if (key == "minimum") node.minimum = d, node.minimum_text = text;
        if (key == "maximum") node.maximum = d, node.maximum_text = text;
        if (key == "exclusiveMinimum")
          node.exclusive_minimum = d, node.exclusive_minimum_text = text;
        if (key == "exclusiveMaximum")
          node.exclusive_maximum = d, node.exclusive_maximum_text = text;
        if (key == "multipleOf") {
          if (d.negative || d.digits.empty()) return Fail(at, "expected a number > 0");
          node.multiple_of = d;
          node.multiple_of_text = text;
          node.multiple_of_double = value.as_double();
        }
      } else if (key == "enum") {
        if (!value.is_array()) return Fail(at, "expected an array");
        node.has_enum = true;
        for (const auto& item : value.items()) {
          node.enum_keys.push_back(CanonicalKey(item));
          node.enum_types |= TypeOf(item);
        }
        std::sort(node.enum_keys.begin(), node.enum_keys.end());
        node.enum_text = Preview(value, 200);
      } else if (key == "const") {
        node.has_const = true;
        node.const_key = CanonicalKey(value);
        node.const_text = Preview(value);
      } else if (key == "allOf") {
        GANTRY_ASSIGN_OR_RETURN(node.all_of, SubArray(value, at, depth, true));
      } else if (key == "anyOf") {
        GANTRY_ASSIGN_OR_RETURN(node.any_of, SubArray(value, at, depth, true));
      } else if (key == "oneOf") {
        GANTRY_ASSIGN_OR_RETURN(node.one_of, SubArray(value, at, depth, true));
      } else if (key == "not") {
        GANTRY_ASSIGN_OR_RETURN(node.not_schema, Sub(value, at, depth));
      } else if (key == "if") {
        GANTRY_ASSIGN_OR_RETURN(node.if_schema, Sub(value, at, depth));
      } else if (key == "then") {
        GANTRY_ASSIGN_OR_RETURN(node.then_schema, Sub(value, at, depth));
      } else if (key == "else") {
        GANTRY_ASSIGN_OR_RETURN(node.else_schema, Sub(value, at, depth));
      } else if (key == "$ref") {
        if (!value.is_string()) return Fail(at, "expected a string");
        GANTRY_ASSIGN_OR_RETURN(const json::Value* target, Resolve(value.as_string(), at));
        auto found = ref_nodes_.find(target);
        if (found != ref_nodes_.end()) {
          node.ref = found->second;
        } else {
          GANTRY_ASSIGN_OR_RETURN(node.ref, Reserve());
          ref_nodes_[target] = node.ref;
          pending_.emplace_back(node.ref, std::make_pair(target, value.as_string().substr(1)));
        }
      }
      // Everything else is an annotation or a keyword we do not know: ignored.
    }
    if (items_is_array && additional_items != nullptr) {
      GANTRY_ASSIGN_OR_RETURN(node.items,
                              Sub(*additional_items, pointer + "/additionalItems", depth));
    }
    // Draft 4: a boolean exclusiveMinimum makes `minimum` exclusive.
    if (minimum_draft4 != nullptr && node.minimum) {
      node.exclusive_minimum = node.minimum;
      node.exclusive_minimum_text = node.minimum_text;
      node.minimum.reset();
    }
    if (maximum_draft4 != nullptr && node.maximum) {
      node.exclusive_maximum = node.maximum;
      node.exclusive_maximum_text = node.maximum_text;
      node.maximum.reset();
    }
    nodes_[index] = std::move(node);
    return absl::OkStatus();
  }

  const json::Value& root_;
  const CompileOptions& options_;
  std::vector<Node> nodes_;
  std::map<const json::Value*, int> ref_nodes_;
  std::vector<std::pair<int, std::pair<const json::Value*, std::string>>> pending_;
  size_t patterns_ = 0;
};

// ---------------------------------------------------------------------------------------
// Validation.

class Validator {
 public:
  Validator(const std::vector<Node>& nodes, const ValidateOptions& options)
      : nodes_(nodes), options_(options) {}

  std::vector<Violation> Run(const json::Value& value) {
    std::vector<Violation> out;
    std::string path;
    Check(0, value, &path, &out, 0);
    if (exhausted_) {
      out.clear();
      out.push_back({"", "validation exceeded its work limit"});
    }
    if (out.size() > options_.max_violations) {
      out.resize(options_.max_violations);
      out.back() = {"", "further violations omitted"};
    }
    return out;
  }

  bool Valid(const json::Value& value) {
    std::string path;
    return Check(0, value, &path, nullptr, 0) && !exhausted_;
  }

 private:
  // Adds a violation at `path` (when collecting); always returns false.
  bool Add(const std::string& path, std::string message, std::vector<Violation>* out) {
    if (out != nullptr && out->size() <= options_.max_violations) {
      out->push_back({path, std::move(message)});
    }
    return false;
  }

  bool Spend(size_t steps) {
    steps_ += steps;
    if (steps_ > options_.max_steps) exhausted_ = true;
    return !exhausted_;
  }

  // Validates `v` against nodes_[index]; `path` is v's JSON Pointer (restored on return).
  // With out == nullptr it stops at the first failure.
  bool Check(int index, const json::Value& v, std::string* path, std::vector<Violation>* out,
             size_t depth) {
    if (!Spend(1)) return false;
    if (depth > options_.max_depth) {
      return Add(*path, "schema nesting exceeds the depth limit (a $ref cycle?)", out);
    }
    const Node& node = nodes_[index];
    if (node.reject_all) return Add(*path, "no value is allowed here", out);
    bool ok = true;
    auto failed = [&]() {
      ok = false;
      return out == nullptr || exhausted_;  // whether to stop now
    };
    if (node.has_type) {
      uint8_t type = TypeOf(v);
      if (!TypeMatches(node.types, type)) {
        Add(*path, absl::StrCat("expected ", node.type_text, ", got ", TypeName(type)), out);
        if (failed()) return false;
      }
    }
    if (node.has_enum) {
      std::string key = CanonicalKey(v);
      if (!std::binary_search(node.enum_keys.begin(), node.enum_keys.end(), key)) {
        Add(*path, absl::StrCat("must be one of ", node.enum_text, ", got ", Preview(v)), out);
        if (failed()) return false;
      }
    }
    if (node.has_const && CanonicalKey(v) != node.const_key) {
      Add(*path, absl::StrCat("must be ", node.const_text, ", got ", Preview(v)), out);
      if (failed()) return false;
    }
    if (v.is_number() && !CheckNumber(node, v, *path, out) && failed()) return false;
    if (v.is_string() && !CheckString(node, v, *path, out) && failed()) return false;
    if (v.is_array() && !CheckArray(node, v, path, out, depth) && failed()) return false;
    if (v.is_object() && !CheckObject(node, v, path, out, depth) && failed()) return false;
    if (!CheckCombinators(node, v, path, out, depth) && failed()) return false;
    return ok && !exhausted_;
  }

  bool CheckNumber(const Node& node, const json::Value& v, const std::string& path,
                   std::vector<Violation>* out) {
    if (!node.minimum && !node.maximum && !node.exclusive_minimum && !node.exclusive_maximum &&
        !node.multiple_of) {
      return true;
    }
    Decimal d = NumberOf(v);
    bool ok = true;
    auto bound = [&](const absl::optional<Decimal>& limit, const std::string& text,
                     bool pass_if_less, bool inclusive, const char* keyword, const char* words) {
      if (!limit || (!ok && out == nullptr)) return;
      int c = CompareDecimal(d, *limit);
      bool pass = (pass_if_less ? c < 0 : c > 0) || (inclusive && c == 0);
      if (!pass) {
        ok = Add(path,
                 absl::StrCat("must be ", words, " ", text, " (", keyword, "), got ",
                              v.number_literal()),
                 out);
      }
    };
    bound(node.minimum, node.minimum_text, false, true, "minimum", ">=");
    bound(node.maximum, node.maximum_text, true, true, "maximum", "<=");
    bound(node.exclusive_minimum, node.exclusive_minimum_text, false, false, "exclusiveMinimum",
          ">");
    bound(node.exclusive_maximum, node.exclusive_maximum_text, true, false, "exclusiveMaximum",
          "<");
    if (node.multiple_of && (ok || out != nullptr) &&
        !IsMultipleOf(d, *node.multiple_of, v.as_double(), node.multiple_of_double)) {
      ok = Add(path,
               absl::StrCat("must be a multiple of ", node.multiple_of_text, ", got ",
                            v.number_literal()),
               out);
    }
    return ok;
  }

  bool CheckString(const Node& node, const json::Value& v, const std::string& path,
                   std::vector<Violation>* out) {
    bool ok = true;
    if (node.min_length || node.max_length) {
      uint64_t n = CodePoints(v.as_string());
      if (node.min_length && n < *node.min_length) {
        ok = Add(path,
                 absl::StrCat("must have at least ", *node.min_length,
                              " characters (minLength), got ", n),
                 out);
        if (out == nullptr) return false;
      }
      if (node.max_length && n > *node.max_length) {
        ok = Add(path,
                 absl::StrCat("must have at most ", *node.max_length,
                              " characters (maxLength), got ", n),
                 out);
        if (out == nullptr) return false;
      }
    }
    if (node.pattern) {
      if (!Spend(1000)) return false;
      MatchResult r = node.pattern->Search(v.as_string());
      if (r == MatchResult::kNoMatch) {
        ok = Add(
            path,
            absl::StrCat("must match the pattern ",
                         Preview(json::Value::String(node.pattern->source)), ", got ", Preview(v)),
            out);
      } else if (r == MatchResult::kLimit) {
        ok = Add(path, "matching the pattern exceeded its work limit", out);
      }
    }
    return ok;
  }

  bool CheckArray(const Node& node, const json::Value& v, std::string* path,
                  std::vector<Violation>* out, size_t depth) {
    bool ok = true;
    const auto& items = v.items();
    if (node.min_items && items.size() < *node.min_items) {
      ok = Add(*path,
               absl::StrCat("must have at least ", *node.min_items, " items (minItems), got ",
                            items.size()),
               out);
      if (out == nullptr) return false;
    }
    if (node.max_items && items.size() > *node.max_items) {
      ok = Add(*path,
               absl::StrCat("must have at most ", *node.max_items, " items (maxItems), got ",
                            items.size()),
               out);
      if (out == nullptr) return false;
    }
    size_t base = path->size();
    for (size_t i = 0; i < items.size(); ++i) {
      int child = i < node.prefix_items.size() ? node.prefix_items[i] : node.items;
      if (child < 0) continue;
      absl::StrAppend(path, "/", i);
      bool item_ok = Check(child, items[i], path, out, depth + 1);
      path->resize(base);
      if (!item_ok) {
        ok = false;
        if (out == nullptr || exhausted_) return false;
      }
    }
    if (node.contains >= 0) {
      uint64_t matches = 0;
      for (const auto& item : items) {
        if (Check(node.contains, item, path, nullptr, depth + 1)) ++matches;
        if (exhausted_) return false;
      }
      if (matches < node.min_contains) {
        ok = Add(*path,
                 absl::StrCat("must contain at least ", node.min_contains,
                              " matching items (contains), got ", matches),
                 out);
      } else if (node.max_contains && matches > *node.max_contains) {
        ok = Add(*path,
                 absl::StrCat("must contain at most ", *node.max_contains,
                              " matching items (maxContains), got ", matches),
                 out);
      }
    }
    if (node.unique_items && (ok || out != nullptr)) {
      std::map<std::string, size_t> seen;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!Spend(1)) return false;
        auto [it, inserted] = seen.emplace(CanonicalKey(items[i]), i);
        if (!inserted) {
          ok = Add(*path,
                   absl::StrCat("items ", it->second, " and ", i, " are equal (uniqueItems)"), out);
          break;
        }
      }
    }
    return ok;
  }

  bool CheckObject(const Node& node, const json::Value& v, std::string* path,
                   std::vector<Violation>* out, size_t depth) {
    bool ok = true;
    for (const std::string& name : node.required) {
      if (v.Find(name) == nullptr) {
        ok = Add(*path,
                 absl::StrCat("missing required property ", Preview(json::Value::String(name))),
                 out);
        if (out == nullptr) return false;
      }
    }
    const auto& members = v.members();
    if (node.min_properties && members.size() < *node.min_properties) {
      ok = Add(*path,
               absl::StrCat("must have at least ", *node.min_properties,
                            " properties (minProperties), got ", members.size()),
               out);
      if (out == nullptr) return false;
    }
    if (node.max_properties && members.size() > *node.max_properties) {
      ok = Add(*path,
               absl::StrCat("must have at most ", *node.max_properties,
                            " properties (maxProperties), got ", members.size()),
               out);
      if (out == nullptr) return false;
    }
    for (const auto& [name, deps] : node.dependent_required) {
      if (v.Find(name) == nullptr) continue;
      for (const std::string& dep : deps) {
        if (v.Find(dep) == nullptr) {
          ok = Add(
              *path,
              absl::StrCat("property ", Preview(json::Value::String(name)), " requires property ",
                           Preview(json::Value::String(dep)), " (dependentRequired)"),
              out);
          if (out == nullptr) return false;
        }
      }
    }
    size_t base = path->size();
    for (const json::Value::Member& member : members) {
      const std::string& name = member.first;
      const json::Value& value = member.second;
      absl::StrAppend(path, "/", EscapePointerToken(name));
      bool member_ok = true;
      bool matched = false;
      auto check = [&](int child) {
        if (!Check(child, value, path, out, depth + 1)) member_ok = false;
      };
      auto found = node.properties.find(name);
      if (found != node.properties.end()) {
        matched = true;
        check(found->second);
      }
      for (const auto& [regex, child] : node.pattern_properties) {
        if (!member_ok && out == nullptr) break;
        if (!Spend(1000)) break;
        MatchResult r = regex.Search(name);
        if (r == MatchResult::kLimit) {
          member_ok = Add(*path, "matching a patternProperties regex exceeded its work limit", out);
        } else if (r == MatchResult::kMatch) {
          matched = true;
          check(child);
        }
      }
      if (!matched && node.additional_properties >= 0 && (member_ok || out != nullptr)) {
        if (nodes_[node.additional_properties].reject_all) {
          member_ok = Add(*path, "unexpected property (additionalProperties is false)", out);
        } else {
          check(node.additional_properties);
        }
      }
      if (node.property_names >= 0 && (member_ok || out != nullptr)) {
        if (!Check(node.property_names, json::Value::String(name), path, nullptr, depth + 1)) {
          member_ok = Add(*path, "property name does not match propertyNames", out);
        }
      }
      path->resize(base);
      if (!member_ok) {
        ok = false;
        if (out == nullptr || exhausted_) return false;
      }
    }
    return ok;
  }

  // The first violation of `v` against `index`, for anyOf/oneOf messages; "" when valid.
  std::string FirstViolation(int index, const json::Value& v, std::string* path, size_t depth) {
    std::vector<Violation> branch;
    size_t base = path->size();
    Check(index, v, path, &branch, depth + 1);
    if (branch.empty()) return "";
    Violation first = branch.front();
    // Relative to the value the combinator applies to.
    first.path = first.path.substr(std::min(base, first.path.size()));
    return first.path.empty() ? first.message : first.ToString();
  }

  bool CheckCombinators(const Node& node, const json::Value& v, std::string* path,
                        std::vector<Violation>* out, size_t depth) {
    bool ok = true;
    if (node.ref >= 0 && !Check(node.ref, v, path, out, depth + 1)) {
      ok = false;
      if (out == nullptr || exhausted_) return false;
    }
    for (int child : node.all_of) {
      if (!Check(child, v, path, out, depth + 1)) {
        ok = false;
        if (out == nullptr || exhausted_) return false;
      }
    }
    if (!node.any_of.empty()) {
      bool any = false;
      for (int child : node.any_of) {
        if (Check(child, v, path, nullptr, depth + 1)) {
          any = true;
          break;
        }
        if (exhausted_) return false;
      }
      if (!any) ok = Add(*path, BranchMessage("anyOf", node.any_of, v, path, depth), out);
      if (!ok && out == nullptr) return false;
    }
    if (!node.one_of.empty()) {
      std::vector<size_t> valid;
      for (size_t i = 0; i < node.one_of.size() && valid.size() < 2; ++i) {
        if (Check(node.one_of[i], v, path, nullptr, depth + 1)) valid.push_back(i);
        if (exhausted_) return false;
      }
      if (valid.empty()) {
        ok = Add(*path, BranchMessage("oneOf", node.one_of, v, path, depth), out);
      } else if (valid.size() > 1) {
        ok = Add(*path,
                 absl::StrCat("matches more than one schema in oneOf (", valid[0], " and ",
                              valid[1], ")"),
                 out);
      }
      if (!ok && out == nullptr) return false;
    }
    if (node.not_schema >= 0) {
      bool matched = Check(node.not_schema, v, path, nullptr, depth + 1);
      if (exhausted_) return false;
      if (matched) ok = Add(*path, "must not match the schema in not", out);
      if (!ok && out == nullptr) return false;
    }
    if (node.if_schema >= 0) {
      bool condition = Check(node.if_schema, v, path, nullptr, depth + 1);
      if (exhausted_) return false;
      int branch = condition ? node.then_schema : node.else_schema;
      if (branch >= 0 && !Check(branch, v, path, out, depth + 1)) ok = false;
    }
    return ok;
  }

  std::string BranchMessage(const char* keyword, const std::vector<int>& branches,
                            const json::Value& v, std::string* path, size_t depth) {
    std::string message = absl::StrCat("does not match any schema in ", keyword);
    if (out_of_detail_) return message;
    // Details cost a second pass; keep them for the top-level report only.
    out_of_detail_ = true;
    std::vector<std::string> parts;
    for (size_t i = 0; i < branches.size() && i < 4; ++i) {
      std::string first = FirstViolation(branches[i], v, path, depth);
      if (!first.empty()) parts.push_back(absl::StrCat("[", i, "] ", first));
    }
    if (branches.size() > 4) parts.push_back("...");
    out_of_detail_ = false;
    if (!parts.empty()) absl::StrAppend(&message, " (", absl::StrJoin(parts, "; "), ")");
    return message;
  }

  const std::vector<Node>& nodes_;
  const ValidateOptions& options_;
  size_t steps_ = 0;
  bool exhausted_ = false;
  bool out_of_detail_ = false;
};

}  // namespace

std::string Violation::ToString() const {
  return absl::StrCat(path.empty() ? "(root)" : path, ": ", message);
}

std::string JoinViolations(const std::vector<Violation>& violations) {
  std::vector<std::string> parts;
  for (const Violation& v : violations) parts.push_back(v.ToString());
  return absl::StrJoin(parts, "; ");
}

Schema::Schema() : Schema(nullptr) {}

Schema::Schema(std::shared_ptr<const internal::CompiledSchema> compiled)
    : compiled_(std::move(compiled)) {}

absl::StatusOr<Schema> Schema::Compile(const json::Value& schema, const CompileOptions& options) {
  auto compiled = std::make_shared<internal::CompiledSchema>();
  Compiler compiler(schema, options);
  GANTRY_RETURN_IF_ERROR(compiler.Run(&compiled->nodes));
  return Schema(std::move(compiled));
}

absl::StatusOr<Schema> Schema::CompileText(absl::string_view text, const CompileOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(json::Value value, json::Parse(text));
  return Compile(value, options);
}

std::vector<Violation> Schema::Validate(const json::Value& value,
                                        const ValidateOptions& options) const {
  if (compiled_ == nullptr) return {};
  return Validator(compiled_->nodes, options).Run(value);
}

bool Schema::IsValid(const json::Value& value, const ValidateOptions& options) const {
  if (compiled_ == nullptr) return true;
  return Validator(compiled_->nodes, options).Valid(value);
}

namespace {

uint8_t DeclaredTypes(const std::vector<Node>& nodes, int index, int budget) {
  if (index < 0 || budget <= 0) return 0;
  const Node& node = nodes[index];
  uint8_t types = node.has_type ? node.types : 0;
  types |= node.enum_types;
  if (node.has_const && !node.const_key.empty()) {
    switch (node.const_key[0]) {
      case 'z': types |= kTypeNull; break;
      case 't':
      case 'f': types |= kTypeBoolean; break;
      case 'n': types |= kTypeNumber; break;
      case 's': types |= kTypeString; break;
      case 'a': types |= kTypeArray; break;
      case 'o': types |= kTypeObject; break;
    }
  }
  if (types != 0) return types;
  types |= DeclaredTypes(nodes, node.ref, budget - 1);
  for (int child : node.any_of) types |= DeclaredTypes(nodes, child, budget - 1);
  for (int child : node.one_of) types |= DeclaredTypes(nodes, child, budget - 1);
  return types;
}

}  // namespace

uint8_t Schema::PropertyTypes(absl::string_view key) const {
  if (compiled_ == nullptr) return 0;
  const std::vector<Node>& nodes = compiled_->nodes;
  // Follow a root that is only a $ref (a schema kept in $defs).
  int root = 0;
  for (int hops = 0; hops < 8 && nodes[root].ref >= 0 && nodes[root].properties.empty(); ++hops) {
    root = nodes[root].ref;
  }
  const Node& node = nodes[root];
  auto found = node.properties.find(std::string(key));
  if (found != node.properties.end()) return DeclaredTypes(nodes, found->second, 8);
  return DeclaredTypes(nodes, node.additional_properties, 8);
}

}  // namespace gantry::json_schema
