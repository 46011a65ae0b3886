// JSON values, a strict RFC 8259 parser and Python-compatible serializers.
//
// Objects keep their members in insertion order (Python dicts do, and chat templates,
// tool schemas and tokenizer.json depend on it). Numbers keep their kind: a literal
// without '.', 'e' or 'E' is an integer (kept exactly, also beyond 64 bits), anything
// else a float, so that `1.0` serializes back as `1.0`, as Python's json does.
//
// Dump() with default options equals Python's json.dumps(x, ensure_ascii=False);
// DumpOptions mirror json.dumps' ensure_ascii, indent, separators and sort_keys.
//
// Parse() accepts exactly RFC 8259 JSON text: no comments, no trailing commas, no NaN,
// no leading zeros, valid UTF-8 only, no lone surrogate escapes, no float literal beyond
// the range of a double (Python would read 1e400 as inf and write Infinity: not JSON). Duplicate keys keep the
// first position and the last value (Python's behaviour). Nesting is bounded. Errors:
// INVALID_ARGUMENT with reason "invalid_json" and "line L, column C: what".
//
// Thread-safety: a Value is a plain value type (copyable, movable); const use from
// several threads is safe.
#ifndef GANTRY_COMMON_JSON_H_
#define GANTRY_COMMON_JSON_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gantry::json {

enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

class Value {
 public:
  using Member = std::pair<std::string, Value>;

  Value() = default;  // null
  static Value Bool(bool b);
  static Value Int(int64_t i);
  // Precondition: finite.
  static Value Double(double d);
  // `text` must be a valid JSON number literal (not checked); used by the parser.
  static Value NumberFromLiteral(absl::string_view text);
  static Value String(std::string s);
  static Value EmptyArray();
  static Value EmptyObject();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Preconditions: the matching type (checked in debug builds only; callers check type()).
  bool as_bool() const { return bool_; }
  const std::string& as_string() const { return text_; }
  // Numbers: whether the literal was an integer; the literal itself; values.
  bool is_integer() const { return type_ == Type::kNumber && integer_; }
  const std::string& number_literal() const { return text_; }
  double as_double() const { return double_; }
  // The integer value when it is an integer that fits in int64.
  absl::optional<int64_t> as_int64() const;

  const std::vector<Value>& items() const { return items_; }
  std::vector<Value>& items() { return items_; }
  void Append(Value v) { items_.push_back(std::move(v)); }

  const std::vector<Member>& members() const { return members_; }
  std::vector<Member>& members() { return members_; }
  // nullptr when absent (or when this is not an object).
  const Value* Find(absl::string_view key) const;
  Value* Find(absl::string_view key);
  // Replaces the value of an existing key in place, or appends the member.
  Value& Set(std::string key, Value v);

  // Structural equality; numbers compare by kind and value (1 != 1.0, as in Python
  // json round trips).
  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  friend struct ParserAccess;  // json.cc: the parser builds values in place

  Type type_ = Type::kNull;
  bool bool_ = false;
  bool integer_ = false;
  double double_ = 0;
  std::string text_;  // string contents, or a number's literal
  std::vector<Value> items_;
  std::vector<Member> members_;
};

struct ParseOptions {
  size_t max_depth = 256;
  // A key repeated within one object is an error ("duplicate key") instead of the last
  // copy winning: for text whose readers may disagree on which copy counts (a tool
  // call's arguments, decided by the policy and then run by a client).
  bool reject_duplicate_keys = false;
  // Values the caller already holds, by their exact text (a cache of values parsed
  // before): called for each member of the top-level object with its key and the input
  // from the member's value on. A return n > 0 says that the first n bytes are a value
  // the caller holds (bytes Parse accepted as a value before, with these options, as a
  // member of a top-level object): they are skipped, neither parsed nor checked again,
  // and the member's value is null. 0 parses the value as usual. May be empty.
  std::function<size_t(absl::string_view key, absl::string_view rest)> known_member_value;
};

absl::StatusOr<Value> Parse(absl::string_view text, const ParseOptions& options = {});

// The length of the array or object that `text` starts with, found by matching its
// brackets outside strings (escapes honoured) and checking nothing else: exact when
// `text` starts with a valid JSON array or object. 0 when it starts with neither, or
// ends before the brackets close.
size_t ScanContainerLength(absl::string_view text);

struct DumpOptions {
  bool ensure_ascii = false;
  // < 0: one line. >= 0: newline + this many spaces per level (Python's indent=N).
  int indent = -1;
  // Python's defaults: (", ", ": ") on one line; with indent the item separator
  // becomes "," as in Python.
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

std::string Dump(const Value& value, const DumpOptions& options = {});

// Python json.dumps(x, separators=(",", ":"), ensure_ascii=False): the compact form for
// wire bodies and logs.
std::string DumpCompact(const Value& value);

// Python's repr() of a float, which json.dumps uses: the shortest text that reads back
// as the same double, "1.0" for integral values, exponent form outside [1e-4, 1e16),
// "Infinity" / "-Infinity" / "NaN".
std::string PythonFloatRepr(double d);

// Appends `text` as a JSON string literal with Python's escaping.
void AppendQuoted(absl::string_view text, bool ensure_ascii, std::string* out);

}  // namespace gantry::json

#endif  // GANTRY_COMMON_JSON_H_
