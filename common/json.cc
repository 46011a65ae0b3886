#include "common/json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/error_codes.h"
#include "common/utf8.h"

namespace gantry::json {

// ---------------------------------------------------------------------------------
// Value

Value Value::Bool(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.type_ = Type::kNumber;
  v.integer_ = true;
  v.double_ = static_cast<double>(i);
  v.text_ = std::to_string(i);
  return v;
}

Value Value::Double(double d) {
  Value v;
  v.type_ = Type::kNumber;
  v.integer_ = false;
  v.double_ = d;
  v.text_ = PythonFloatRepr(d);
  return v;
}

Value Value::NumberFromLiteral(absl::string_view text) {
  Value v;
  v.type_ = Type::kNumber;
  v.integer_ = text.find_first_of(".eE") == absl::string_view::npos;
  v.text_ = std::string(text);
  // strtod handles every JSON literal; overflow gives +-HUGE_VAL (Python: inf).
  v.double_ = std::strtod(v.text_.c_str(), nullptr);
  if (v.integer_ && v.text_ == "-0") v.text_ = "0";  // Python: int("-0") == 0
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.text_ = std::move(s);
  return v;
}

Value Value::EmptyArray() {
  Value v;
  v.type_ = Type::kArray;
  return v;
}

Value Value::EmptyObject() {
  Value v;
  v.type_ = Type::kObject;
  return v;
}

absl::optional<int64_t> Value::as_int64() const {
  int64_t out;
  if (!is_integer() || !absl::SimpleAtoi(text_, &out)) return absl::nullopt;
  return out;
}

const Value* Value::Find(absl::string_view key) const {
  for (const auto& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

Value* Value::Find(absl::string_view key) {
  for (auto& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

Value& Value::Set(std::string key, Value v) {
  if (Value* existing = Find(key)) {
    *existing = std::move(v);
    return *existing;
  }
  members_.emplace_back(std::move(key), std::move(v));
  return members_.back().second;
}

bool operator==(const Value& a, const Value& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Type::kNull: return true;
    case Type::kBool: return a.bool_ == b.bool_;
    case Type::kNumber:
      if (a.integer_ != b.integer_) return false;
      return a.integer_ ? a.text_ == b.text_ : a.double_ == b.double_;
    case Type::kString: return a.text_ == b.text_;
    case Type::kArray: return a.items_ == b.items_;
    case Type::kObject: return a.members_ == b.members_;
  }
  return false;
}

// ---------------------------------------------------------------------------------
// Parser: recursive descent over the bytes, depth-bounded. Values are built in place
// (a member's or an item's value is parsed into its slot), not built and then moved.

struct ParserAccess {
  // Makes `v` (null) a string and returns its text to fill.
  static std::string* MakeString(Value* v) {
    v->type_ = Type::kString;
    return &v->text_;
  }
  static void MakeArray(Value* v) { v->type_ = Type::kArray; }
  static void MakeObject(Value* v) { v->type_ = Type::kObject; }
};

namespace {

class Parser {
 public:
  Parser(absl::string_view text, const ParseOptions& options)
      : s_(text), options_(options) {}

  absl::StatusOr<Value> ParseDocument() {
    SkipSpace();
    Value value;
    if (!ParseValue(&value, 0)) return error_;
    SkipSpace();
    if (pos_ != s_.size()) {
      Fail("unexpected data after the JSON value");
      return error_;
    }
    return value;
  }

 private:
  void Fail(absl::string_view what) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    error_ = ReasonError("invalid_json", absl::StrCat("line ", line, ", column ", column, ": ", what));
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) {
      Fail(absl::StrCat("invalid literal (expected '", word, "')"));
      return false;
    }
    pos_ += word.size();
    return true;
  }

  // `out` is a null Value (a new one: values are parsed into fresh slots).
  bool ParseValue(Value* out, size_t depth) {
    if (pos_ >= s_.size()) {
      Fail("unexpected end of input (expected a value)");
      return false;
    }
    switch (s_[pos_]) {
      case '{': return ParseObject(out, depth + 1);
      case '[': return ParseArray(out, depth + 1);
      case '"':
        return ParseString(ParserAccess::MakeString(out));
      case 't':
        if (!Literal("true")) return false;
        *out = Value::Bool(true);
        return true;
      case 'f':
        if (!Literal("false")) return false;
        *out = Value::Bool(false);
        return true;
      case 'n':
        if (!Literal("null")) return false;
        *out = Value();
        return true;
      default:
        return ParseNumber(out);
    }
  }

  bool ParseNumber(Value* out) {
    const size_t start = pos_;
    auto digit = [&](size_t i) { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (!digit(pos_)) {
      Fail("invalid value");
      return false;
    }
    if (s_[pos_] == '0') {
      ++pos_;
      if (digit(pos_)) {
        Fail("leading zeros are not allowed in numbers");
        return false;
      }
    } else {
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digit(pos_)) {
        Fail("expected a digit after the decimal point");
        return false;
      }
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digit(pos_)) {
        Fail("expected a digit in the exponent");
        return false;
      }
      while (digit(pos_)) ++pos_;
    }
    *out = Value::NumberFromLiteral(s_.substr(start, pos_ - start));
    if (!out->is_integer() && std::isinf(out->as_double())) {
      pos_ = start;
      Fail("number out of the range of a double");
      return false;
    }
    return true;
  }

  bool Hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) {
      Fail("truncated \\u escape");
      return false;
    }
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_ + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else {
        Fail("invalid hex digit in \\u escape");
        return false;
      }
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // opening quote
    for (;;) {
      // Copy a run of plain bytes at once.
      size_t run = pos_;
      while (run < s_.size()) {
        unsigned char c = s_[run];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++run;
      }
      out->append(s_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= s_.size()) {
        Fail("unterminated string");
        return false;
      }
      unsigned char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) {
        Fail("control character in string (must be escaped)");
        return false;
      }
      if (c >= 0x80) {
        size_t n = Utf8SequenceLength(s_, pos_);
        if (n == 0) {
          Fail("invalid UTF-8 in string");
          return false;
        }
        out->append(s_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      // Backslash escape.
      ++pos_;
      if (pos_ >= s_.size()) {
        Fail("unterminated escape");
        return false;
      }
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            Fail("lone low surrogate in \\u escape");
            return false;
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low;
            if (s_.substr(pos_, 2) != "\\u") {
              Fail("high surrogate not followed by a low surrogate");
              return false;
            }
            pos_ += 2;
            if (!Hex4(&low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) {
              Fail("high surrogate not followed by a low surrogate");
              return false;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          --pos_;
          Fail("invalid escape in string");
          return false;
      }
    }
  }

  bool ParseArray(Value* out, size_t depth) {
    if (depth > options_.max_depth) {
      Fail("nesting deeper than the limit");
      return false;
    }
    ++pos_;
    ParserAccess::MakeArray(out);
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    auto& items = out->items();
    for (;;) {
      SkipSpace();
      items.emplace_back();
      if (!ParseValue(&items.back(), depth)) return false;
      SkipSpace();
      if (pos_ >= s_.size()) {
        Fail("unterminated array");
        return false;
      }
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      Fail("expected ',' or ']' in array");
      return false;
    }
  }

  bool ParseObject(Value* out, size_t depth) {
    if (depth > options_.max_depth) {
      Fail("nesting deeper than the limit");
      return false;
    }
    ++pos_;
    ParserAccess::MakeObject(out);
    constexpr size_t kIndexAbove = 16;
    std::unordered_map<std::string, size_t> index;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        Fail("expected a string key in object");
        return false;
      }
      std::string key;
      if (!ParseString(&key)) return false;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        Fail("expected ':' after object key");
        return false;
      }
      ++pos_;
      SkipSpace();
      size_t known = 0;
      if (depth == 1 && options_.known_member_value) {
        known = options_.known_member_value(key, s_.substr(pos_));
        if (known > s_.size() - pos_) known = 0;  // not a prefix of the input: parse it
      }
      // Duplicate keys keep their first position and take the last value. Small objects
      // search linearly; large ones (a tokenizer's vocab) through an index, so parsing
      // stays linear in the input. A new key's value is parsed into its new member.
      auto& members = out->members();
      Value* existing = nullptr;
      if (index.empty() && members.size() < kIndexAbove) {
        existing = out->Find(key);
      } else {
        if (index.empty()) {
          for (size_t i = 0; i < members.size(); ++i) index.emplace(members[i].first, i);
        }
        auto [it, inserted] = index.emplace(key, members.size());
        if (!inserted) existing = &members[it->second].second;
      }
      if (existing == nullptr) {
        members.emplace_back(std::move(key), Value());
        if (known > 0) {
          pos_ += known;  // a value the caller holds: left null
        } else if (!ParseValue(&members.back().second, depth)) {
          return false;
        }
      } else {
        Value value;
        if (known > 0) {
          pos_ += known;
        } else if (!ParseValue(&value, depth)) {
          return false;
        }
        if (options_.reject_duplicate_keys) {
          Fail(absl::StrCat("duplicate key '", key, "'"));
          return false;
        }
        *existing = std::move(value);
      }
      SkipSpace();
      if (pos_ >= s_.size()) {
        Fail("unterminated object");
        return false;
      }
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      Fail("expected ',' or '}' in object");
      return false;
    }
  }

  absl::string_view s_;
  ParseOptions options_;
  size_t pos_ = 0;
  absl::Status error_;
};

// ---------------------------------------------------------------------------------
// Serializer

class Dumper {
 public:
  explicit Dumper(const DumpOptions& options) : o_(options) {
    if (o_.indent >= 0 && o_.item_separator == ", ") item_sep_ = ",";
    else item_sep_ = o_.item_separator;
  }

  void Write(const Value& v, int level, std::string* out) const {
    switch (v.type()) {
      case Type::kNull: out->append("null"); return;
      case Type::kBool: out->append(v.as_bool() ? "true" : "false"); return;
      case Type::kNumber:
        if (v.is_integer()) out->append(v.number_literal());
        else out->append(PythonFloatRepr(v.as_double()));
        return;
      case Type::kString: AppendQuoted(v.as_string(), o_.ensure_ascii, out); return;
      case Type::kArray: {
        if (v.items().empty()) {
          out->append("[]");
          return;
        }
        out->push_back('[');
        for (size_t i = 0; i < v.items().size(); ++i) {
          if (i) out->append(item_sep_);
          Newline(level + 1, out);
          Write(v.items()[i], level + 1, out);
        }
        Newline(level, out);
        out->push_back(']');
        return;
      }
      case Type::kObject: {
        if (v.members().empty()) {
          out->append("{}");
          return;
        }
        out->push_back('{');
        auto write_member = [&](size_t i, const Value::Member& m) {
          if (i) out->append(item_sep_);
          Newline(level + 1, out);
          AppendQuoted(m.first, o_.ensure_ascii, out);
          out->append(o_.key_separator);
          Write(m.second, level + 1, out);
        };
        if (o_.sort_keys) {
          std::vector<const Value::Member*> members;
          members.reserve(v.members().size());
          for (const auto& m : v.members()) members.push_back(&m);
          std::stable_sort(members.begin(), members.end(),
                           [](const Value::Member* a, const Value::Member* b) {
                             return CodePointLess(a->first, b->first);
                           });
          for (size_t i = 0; i < members.size(); ++i) write_member(i, *members[i]);
        } else {
          for (size_t i = 0; i < v.members().size(); ++i) write_member(i, v.members()[i]);
        }
        Newline(level, out);
        out->push_back('}');
        return;
      }
    }
  }

 private:
  // Python sorts str keys by code point; UTF-8 byte order is the same order.
  static bool CodePointLess(const std::string& a, const std::string& b) {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](char x, char y) { return static_cast<unsigned char>(x) < static_cast<unsigned char>(y); });
  }

  void Newline(int level, std::string* out) const {
    if (o_.indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(level) * o_.indent, ' ');
  }

  const DumpOptions& o_;
  std::string item_sep_;
};

}  // namespace

absl::StatusOr<Value> Parse(absl::string_view text, const ParseOptions& options) {
  return Parser(text, options).ParseDocument();
}

size_t ScanContainerLength(absl::string_view text) {
  if (text.empty() || (text[0] != '[' && text[0] != '{')) return 0;
  size_t depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    switch (text[i]) {
      case '"':
        // To the closing quote; an escape is a backslash and the byte after it (the
        // rest of a \uXXXX escape is hex digits).
        for (++i; i < text.size() && text[i] != '"'; ++i) {
          if (text[i] == '\\') ++i;
        }
        if (i >= text.size()) return 0;
        break;
      case '[':
      case '{':
        ++depth;
        break;
      case ']':
      case '}':
        if (--depth == 0) return i + 1;
        break;
      default:
        break;
    }
  }
  return 0;
}

std::string Dump(const Value& value, const DumpOptions& options) {
  std::string out;
  Dumper(options).Write(value, 0, &out);
  return out;
}

std::string DumpCompact(const Value& value) {
  DumpOptions options;
  options.item_separator = ",";
  options.key_separator = ":";
  return Dump(value, options);
}

std::string PythonFloatRepr(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-tripping digits, as Python's repr (David Gay's algorithm) gives.
  char buf[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf is "[-]D.DDDDe[+-]XX": split into digits and decimal exponent.
  std::string text(buf);
  bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  size_t e = text.find('e');
  int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (text[i] != '.') digits.push_back(text[i]);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  const int n = static_cast<int>(digits.size());
  // Python's repr: fixed notation for decimal exponents in [-4, 16), else exponent form.
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
      return out;
    } else if (exponent + 1 >= n) {
      out += digits;
      out.append(static_cast<size_t>(exponent + 1 - n), '0');
      out += ".0";
      return out;
    } else {
      out += digits.substr(0, exponent + 1);
      out += '.';
      out += digits.substr(exponent + 1);
      return out;
    }
  }
  out += digits.substr(0, 1);
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
  return out;
}

void AppendQuoted(absl::string_view text, bool ensure_ascii, std::string* out) {
  AppendJsonString(text, out, ensure_ascii);
}

}  // namespace gantry::json
