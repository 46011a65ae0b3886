// The shared pieces of the JSON Schema compiler and validator (json_schema_nodes.h).
#include "common/json_schema_nodes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gantry::json_schema::internal {

// ---------------------------------------------------------------------------------------
// Exact decimal numbers.

namespace {

// Exponents saturate here: far beyond any digit count, so comparisons stay exact.
constexpr int64_t kExponentCap = int64_t{1} << 50;

}  // namespace

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
std::string Preview(const json::Value& v, size_t limit) {
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

namespace {

constexpr uint32_t kMatchLimit = 100000;
constexpr uint32_t kDepthLimit = 5000;
constexpr uint32_t kHeapLimitKiB = 8 * 1024;

}  // namespace

MatchResult Regex::Search(absl::string_view subject) const {
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

}  // namespace gantry::json_schema::internal
