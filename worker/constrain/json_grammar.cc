#include "worker/constrain/json_grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json_schema_nodes.h"
#include "common/status.h"
#include "common/utf8.h"

namespace gantry::constrain {
namespace {

using json_schema::internal::Decimal;
using json_schema::internal::Node;
using Plan = JsonGrammar::Plan;
using Frame = JsonMatcher::Frame;
using Stack = JsonMatcher::Stack;

constexpr int kMaxIntDigits = 18;
constexpr int kMaxFracDigits = 20;
constexpr int kMaxStepDepth = 32;  // alternatives followed without consuming a byte
constexpr uint8_t kSpaced = 255;    // Frame::ws after a single space
constexpr uint8_t kMaxLeading = 4;  // whitespace bytes before the root value

__int128 Pow10(int n) {
  __int128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}
const __int128 kUnit = Pow10(kMaxFracDigits);  // 1 in units
const __int128 kLimit = Pow10(kMaxIntDigits) * kUnit;  // no number reaches it

// ---- Compiling a schema's nodes into plans.

enum class Fit { kExact, kOutside, kTooFine };

// `d` in units, exactly; kOutside when |d| >= 1e18 (*units is then +-kLimit),
// kTooFine when it has more than 20 fraction digits.
Fit ToUnits(const Decimal& d, __int128* units) {
  if (d.digits.empty()) {
    *units = 0;
    return Fit::kExact;
  }
  const int64_t scale = d.exponent + kMaxFracDigits;
  if (static_cast<int64_t>(d.digits.size()) + d.exponent > kMaxIntDigits) {
    *units = d.negative ? -kLimit : kLimit;
    return Fit::kOutside;
  }
  if (scale < 0) return Fit::kTooFine;
  __int128 v = 0;
  for (char c : d.digits) v = v * 10 + (c - '0');
  v *= Pow10(static_cast<int>(scale));
  *units = d.negative ? -v : v;
  return Fit::kExact;
}

class Compiler {
 public:
  Compiler(const json_schema::Schema& schema, Fidelity fidelity, std::vector<Plan>* plans)
      : schema_(schema), nodes_(schema.compiled()->nodes), exact_(fidelity == Fidelity::kExact),
        plans_(plans) {}

  absl::Status Run() {
    const int any = static_cast<int>(nodes_.size());
    plans_->assign(nodes_.size() + 1, Plan());
    Plan& any_plan = plans_->back();
    any_plan.additional = any;
    any_plan.items = any;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      GANTRY_RETURN_IF_ERROR(Fill(static_cast<int>(i), &(*plans_)[i]));
    }
    return absl::OkStatus();
  }

 private:
  // An assertion the grammar does not enforce: refused (exact) or dropped (relaxed).
  absl::Status Unenforced(int index, absl::string_view keyword) {
    if (!exact_) return absl::OkStatus();
    return ReasonError("unsupported_parameter",
                       absl::StrCat("the constraint engine does not enforce `", keyword,
                                    "` (schema node ", index, ")"));
  }

  // The node has assertions besides its combinators ($ref, allOf, anyOf, oneOf).
  static bool HasOwnAssertions(const Node& n) {
    return n.has_type || n.has_enum || n.has_const || !n.properties.empty() ||
           !n.pattern_properties.empty() || n.additional_properties >= 0 || n.property_names >= 0 ||
           !n.required.empty() || n.min_properties || n.max_properties || !n.dependent_required.empty() ||
           !n.prefix_items.empty() || n.items >= 0 || n.contains >= 0 || n.min_items || n.max_items ||
           n.unique_items || n.min_length || n.max_length || n.pattern || n.minimum || n.maximum ||
           n.exclusive_minimum || n.exclusive_maximum || n.multiple_of || n.not_schema >= 0 ||
           n.if_schema >= 0;
  }

  // The types a node's values can have (following combinators a few levels).
  uint8_t TypesOf(int index, int depth) const {
    if (index < 0 || depth > 8) return 0x7f;
    const Node& n = nodes_[index];
    if (n.reject_all) return 0;
    if (n.ref >= 0) return TypesOf(n.ref, depth + 1);
    if (n.all_of.size() == 1) return TypesOf(n.all_of[0], depth + 1);
    uint8_t types = n.has_type ? n.types : 0x7f;
    if (n.types & json_schema::kTypeNumber) types |= json_schema::kTypeInteger;
    if (n.has_enum) types &= n.enum_types | (n.enum_types & json_schema::kTypeInteger ? json_schema::kTypeNumber : 0);
    if (!n.any_of.empty() || !n.one_of.empty()) {
      uint8_t branches = 0;
      for (int b : n.any_of.empty() ? n.one_of : n.any_of) branches |= TypesOf(b, depth + 1);
      types &= branches;
    }
    // Integers are numbers: a type set with either overlaps both.
    if (types & (json_schema::kTypeInteger | json_schema::kTypeNumber)) {
      types |= json_schema::kTypeInteger | json_schema::kTypeNumber;
    }
    return types;
  }

  absl::Status Fill(int index, Plan* plan) {
    const Node& n = nodes_[index];
    const int any = static_cast<int>(nodes_.size());
    if (n.reject_all) {
      plan->reject = true;
      return absl::OkStatus();
    }
    // Combinators make the plan a set of alternatives (one for $ref and allOf).
    if (n.ref >= 0) {
      if (HasOwnAssertions(n) || !n.all_of.empty() || !n.any_of.empty() || !n.one_of.empty()) {
        GANTRY_RETURN_IF_ERROR(Unenforced(index, "keywords beside $ref"));
      }
      plan->alternatives = {n.ref};
      return absl::OkStatus();
    }
    if (!n.all_of.empty()) {
      if (n.all_of.size() == 1 && !HasOwnAssertions(n) && n.any_of.empty() && n.one_of.empty()) {
        plan->alternatives = {n.all_of[0]};
        return absl::OkStatus();
      }
      GANTRY_RETURN_IF_ERROR(Unenforced(index, "allOf"));
    }
    if (!n.any_of.empty() || !n.one_of.empty()) {
      if (HasOwnAssertions(n)) GANTRY_RETURN_IF_ERROR(Unenforced(index, "keywords beside anyOf / oneOf"));
      if (!n.any_of.empty() && !n.one_of.empty()) GANTRY_RETURN_IF_ERROR(Unenforced(index, "oneOf beside anyOf"));
      if (n.any_of.empty()) {
        uint8_t seen = 0;
        for (int b : n.one_of) {
          const uint8_t t = TypesOf(b, 0);
          if (t & seen) {
            GANTRY_RETURN_IF_ERROR(Unenforced(index, "oneOf whose branches admit the same type"));
            break;
          }
          seen |= t;
        }
      }
      plan->alternatives = n.any_of.empty() ? n.one_of : n.any_of;
      return absl::OkStatus();
    }
    if (n.not_schema >= 0) GANTRY_RETURN_IF_ERROR(Unenforced(index, "not"));
    if (n.if_schema >= 0) GANTRY_RETURN_IF_ERROR(Unenforced(index, "if"));
    // enum / const: exactly the values that validate here.
    if (n.has_enum || n.has_const) {
      plan->has_literals = true;
      std::vector<std::string> texts = n.has_enum ? n.enum_values : std::vector<std::string>{n.const_value};
      for (const std::string& text : texts) {
        auto value = json::Parse(text);
        if (value.ok() && schema_.IsValidAt(index, *value)) plan->literals.push_back(text);
      }
      if (plan->literals.empty()) plan->reject = true;
      return absl::OkStatus();
    }
    plan->types = n.has_type ? n.types : 0x7f;
    // Objects.
    for (const auto& [name, sub] : n.properties) plan->properties[name] = sub;
    plan->additional = any;
    if (n.additional_properties >= 0) {
      plan->additional = nodes_[n.additional_properties].reject_all ? -1 : n.additional_properties;
    }
    if (!n.pattern_properties.empty()) {
      GANTRY_RETURN_IF_ERROR(Unenforced(index, "patternProperties"));
      plan->additional = any;
    }
    if (n.property_names >= 0) GANTRY_RETURN_IF_ERROR(Unenforced(index, "propertyNames"));
    if (!n.dependent_required.empty()) GANTRY_RETURN_IF_ERROR(Unenforced(index, "dependentRequired"));
    plan->required = n.required;
    std::sort(plan->required.begin(), plan->required.end());
    plan->required.erase(std::unique(plan->required.begin(), plan->required.end()), plan->required.end());
    if (n.min_properties) plan->min_properties = *n.min_properties;
    if (n.max_properties) plan->max_properties = *n.max_properties;
    // Arrays.
    plan->prefix_items = n.prefix_items;
    plan->items = any;
    if (n.items >= 0) plan->items = nodes_[n.items].reject_all ? -1 : n.items;
    if (n.contains >= 0) GANTRY_RETURN_IF_ERROR(Unenforced(index, "contains"));
    if (n.unique_items) GANTRY_RETURN_IF_ERROR(Unenforced(index, "uniqueItems"));
    if (n.min_items) plan->min_items = *n.min_items;
    if (n.max_items) plan->max_items = *n.max_items;
    // Strings.
    if (n.min_length) plan->min_length = *n.min_length;
    if (n.max_length) plan->max_length = *n.max_length;
    if (n.pattern) GANTRY_RETURN_IF_ERROR(Unenforced(index, "pattern"));
    // Numbers.
    if (n.multiple_of) GANTRY_RETURN_IF_ERROR(Unenforced(index, "multipleOf"));
    GANTRY_RETURN_IF_ERROR(Bound(index, n.minimum, false, false, plan));
    GANTRY_RETURN_IF_ERROR(Bound(index, n.exclusive_minimum, false, true, plan));
    GANTRY_RETURN_IF_ERROR(Bound(index, n.maximum, true, false, plan));
    GANTRY_RETURN_IF_ERROR(Bound(index, n.exclusive_maximum, true, true, plan));
    return absl::OkStatus();
  }

  absl::Status Bound(int index, const absl::optional<Decimal>& d, bool upper, bool exclusive, Plan* plan) {
    if (!d) return absl::OkStatus();
    __int128 units = 0;
    switch (ToUnits(*d, &units)) {
      case Fit::kTooFine:
        return Unenforced(index, "a bound with more than 20 fraction digits");
      case Fit::kOutside:
        // Past every number the syntax writes: no bound on that side, or none possible.
        if ((upper && units > 0) || (!upper && units < 0)) return absl::OkStatus();
        break;
      case Fit::kExact:
        break;
    }
    if (exclusive) units += upper ? -1 : 1;
    if (upper) {
      plan->hi = plan->has_hi ? std::min(plan->hi, units) : units;
      plan->has_hi = true;
    } else {
      plan->lo = plan->has_lo ? std::max(plan->lo, units) : units;
      plan->has_lo = true;
    }
    return absl::OkStatus();
  }

  const json_schema::Schema& schema_;
  const std::vector<Node>& nodes_;
  const bool exact_;
  std::vector<Plan>* plans_;
};

// ---- Matching.

enum Kind : uint8_t { kValue, kObject, kArray, kString, kNumber, kLiteral, kKeyword, kSuffix };
enum ObjectPhase : uint8_t { kObjOpen, kObjKey, kObjColon, kObjAfterValue, kObjNextKey };
enum ArrayPhase : uint8_t { kArrOpen, kArrAfterItem, kArrNextItem };
constexpr const char* kKeywords[] = {"true", "false", "null"};

bool IsWs(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }

// One byte of a string's contents (after its opening quote). -1: refused; 0: taken;
// 1: the closing quote. *completed: a code point ended with this byte. `decoded` (may
// be null) receives the string's text.
int Lex(Frame* f, uint8_t b, bool* completed, std::string* decoded) {
  *completed = false;
  if (f->need > 0) {
    if (b < f->lo || b > f->hi) return -1;
    f->lo = 0x80;
    f->hi = 0xbf;
    if (decoded) decoded->push_back(static_cast<char>(b));
    *completed = --f->need == 0;
    return 0;
  }
  if (f->esc == 1) {
    static constexpr char kFrom[] = "\"\\/bfnrt";
    static constexpr char kTo[] = "\"\\/\b\f\n\r\t";
    if (b == 'u') {
      f->esc = 2;
      f->hex = 0;
      return 0;
    }
    for (int i = 0; kFrom[i] != 0; ++i) {
      if (b == static_cast<uint8_t>(kFrom[i])) {
        f->esc = 0;
        if (decoded) decoded->push_back(kTo[i]);
        *completed = true;
        return 0;
      }
    }
    return -1;
  }
  if (f->esc >= 2) {
    int v;
    if (b >= '0' && b <= '9') v = b - '0';
    else if (b >= 'a' && b <= 'f') v = b - 'a' + 10;
    else if (b >= 'A' && b <= 'F') v = b - 'A' + 10;
    else return -1;
    f->hex = static_cast<uint16_t>(f->hex * 16 + v);
    if (f->esc == 3 && f->hex >= 0xd8 && f->hex <= 0xdf) return -1;  // no surrogates
    if (f->esc == 5) {
      if (decoded) AppendUtf8(f->hex, decoded);
      f->esc = 0;
      *completed = true;
    } else {
      ++f->esc;
    }
    return 0;
  }
  if (b == '"') return 1;
  if (b == '\\') {
    f->esc = 1;
    return 0;
  }
  if (b < 0x20) return -1;
  if (b < 0x80) {
    if (decoded) decoded->push_back(static_cast<char>(b));
    *completed = true;
    return 0;
  }
  if (b >= 0xc2 && b <= 0xdf) {
    f->need = 1;
  } else if (b == 0xe0) {
    f->need = 2, f->lo = 0xa0;
  } else if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) {
    f->need = 2;
  } else if (b == 0xed) {
    f->need = 2, f->hi = 0x9f;
  } else if (b == 0xf0) {
    f->need = 3, f->lo = 0x90;
  } else if (b >= 0xf1 && b <= 0xf3) {
    f->need = 3;
  } else if (b == 0xf4) {
    f->need = 3, f->hi = 0x8f;
  } else {
    return -1;
  }
  if (decoded) decoded->push_back(static_cast<char>(b));
  return 0;
}

// A number's text split; false when `text` is not a prefix of the number syntax.
struct NumberText {
  bool negative = false;
  std::string int_digits, frac_digits;
  bool dot = false;
};

bool SplitNumber(absl::string_view text, bool integer_only, NumberText* t) {
  size_t i = 0;
  if (i < text.size() && text[i] == '-') t->negative = true, ++i;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (t->int_digits == "0" || t->int_digits.size() == kMaxIntDigits) return false;
    t->int_digits.push_back(text[i]);
  }
  if (i == text.size()) return true;
  if (text[i] != '.' || integer_only || t->int_digits.empty()) return false;
  t->dot = true;
  for (++i; i < text.size(); ++i) {
    if (!IsDigit(text[i]) || t->frac_digits.size() == kMaxFracDigits) return false;
    t->frac_digits.push_back(text[i]);
  }
  return true;
}

__int128 DigitsValue(const std::string& digits) {
  __int128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

// Some complete number that starts with `t` lies within the plan's bounds.
bool Feasible(const Plan& p, bool integer_only, const NumberText& t) {
  // Bounds on the magnitude x (value = -x for a negative number).
  bool has_lo = p.has_lo, has_hi = p.has_hi;
  __int128 lo = p.lo, hi = p.hi;
  if (t.negative) {
    has_lo = p.has_hi, lo = -p.hi;
    has_hi = p.has_lo, hi = -p.lo;
  }
  const __int128 step = integer_only ? kUnit : 1;
  // A multiple of `step` in [a, b) and within the bounds (a >= 0).
  auto hits = [&](__int128 a, __int128 b) {
    __int128 from = a, to = b - 1;
    if (has_lo) from = std::max(from, lo);
    if (has_hi) to = std::min(to, hi);
    if (from > to) return false;
    if (from < 0) from = 0;
    const __int128 first = (from + step - 1) / step * step;
    return first <= to;
  };
  if (t.int_digits.empty()) return hits(0, kLimit);
  const __int128 whole = DigitsValue(t.int_digits);
  if (t.dot) {
    const __int128 ulp = Pow10(kMaxFracDigits - static_cast<int>(t.frac_digits.size()));
    const __int128 a = whole * kUnit + DigitsValue(t.frac_digits) * ulp;
    return hits(a, a + ulp);
  }
  if (whole == 0) return hits(0, integer_only ? 1 : kUnit);
  const int more = kMaxIntDigits - static_cast<int>(t.int_digits.size());
  for (int k = 0; k <= more; ++k) {
    const __int128 scale = Pow10(k) * kUnit;
    if (hits(whole * scale, (whole + 1) * scale)) return true;
  }
  return false;
}

bool NumberComplete(const Plan& p, bool integer_only, absl::string_view text) {
  NumberText t;
  if (!SplitNumber(text, integer_only, &t) || t.int_digits.empty() || (t.dot && t.frac_digits.empty())) {
    return false;
  }
  __int128 v = DigitsValue(t.int_digits) * kUnit;
  if (t.dot) v += DigitsValue(t.frac_digits) * Pow10(kMaxFracDigits - static_cast<int>(t.frac_digits.size()));
  if (t.negative) v = -v;
  return (!p.has_lo || v >= p.lo) && (!p.has_hi || v <= p.hi);
}

bool IntegerOnly(const Plan& p) {
  return (p.types & json_schema::kTypeInteger) && !(p.types & json_schema::kTypeNumber);
}

bool NumericText(absl::string_view text) { return !text.empty() && (text[0] == '-' || IsDigit(text[0])); }

bool ObjectCanClose(const Plan& p, const Frame& f) {
  if (f.seen.size() < p.min_properties) return false;
  return std::includes(f.seen.begin(), f.seen.end(), p.required.begin(), p.required.end());
}

// The plan of a key's value, or -1 when the key is not allowed there.
int MemberPlan(const Plan& p, const std::vector<Plan>& plans, const std::string& key) {
  auto it = p.properties.find(key);
  const int plan = it != p.properties.end() ? it->second : p.additional;
  return plan >= 0 && !plans[plan].reject ? plan : -1;
}

// Some allowed, unseen key starts with `prefix`.
bool KeyPrefixAllowed(const Plan& p, const std::vector<Plan>& plans, const Frame& f) {
  if (p.additional >= 0) return true;
  for (auto it = p.properties.lower_bound(f.buf); it != p.properties.end(); ++it) {
    if (it->first.compare(0, f.buf.size(), f.buf) != 0) break;
    if (!plans[it->second].reject && !std::binary_search(f.seen.begin(), f.seen.end(), it->first)) return true;
  }
  return false;
}

bool MoreKeysPossible(const Plan& p, const std::vector<Plan>& plans, const Frame& f) {
  if (f.seen.size() >= p.max_properties) return false;
  Frame probe;
  probe.seen = f.seen;
  return KeyPrefixAllowed(p, plans, probe);
}

int ItemPlan(const Plan& p, uint64_t index) {
  return index < p.prefix_items.size() ? p.prefix_items[index] : p.items;
}

bool ItemPossible(const Plan& p, const std::vector<Plan>& plans, uint64_t index) {
  const int plan = ItemPlan(p, index);
  return index < p.max_items && plan >= 0 && !plans[plan].reject;
}

Frame ValueFrame(int plan) {
  Frame f;
  f.kind = kValue;
  f.plan = plan;
  return f;
}

void AppendField(uint64_t v, std::string* out) {
  absl::StrAppend(out, v, ",");
}

void AppendBytes(absl::string_view s, std::string* out) {
  absl::StrAppend(out, s.size(), ":", s);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const JsonGrammar>> JsonGrammar::Compile(json_schema::Schema schema,
                                                                        Fidelity fidelity) {
  std::shared_ptr<JsonGrammar> g(new JsonGrammar());
  g->schema_ = std::move(schema);
  if (g->schema_.compiled() == nullptr) {
    Plan any;
    any.additional = 0;
    any.items = 0;
    g->plans_ = {any};
    return std::shared_ptr<const JsonGrammar>(std::move(g));
  }
  GANTRY_RETURN_IF_ERROR(Compiler(g->schema_, fidelity, &g->plans_).Run());
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

std::shared_ptr<const JsonGrammar> JsonGrammar::AnyObject() {
  static const std::shared_ptr<const JsonGrammar> grammar = [] {
    std::shared_ptr<JsonGrammar> g(new JsonGrammar());
    Plan object, any;
    object.types = json_schema::kTypeObject;
    object.additional = any.additional = any.items = object.items = 1;
    g->plans_ = {object, any};
    g->root_ = 0;
    return std::shared_ptr<const JsonGrammar>(std::move(g));
  }();
  return grammar;
}

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar, std::string suffix)
    : grammar_(std::move(grammar)), suffix_(std::move(suffix)) {
  Stack start;
  if (!suffix_.empty()) {
    Frame tail;
    tail.kind = kSuffix;
    tail.plan = grammar_->root();
    start.push_back(tail);
  }
  start.push_back(ValueFrame(grammar_->root()));
  stacks_.push_back(std::move(start));
}

namespace {

// Each "$ref": "#..." in `schema` made relative to `base` ("#/anyOf/3/..."), so that a
// tool's parameters keep their meaning inside the call's schema.
void Rebase(json::Value* schema, const std::string& base) {
  if (schema->is_array()) {
    for (json::Value& item : schema->items()) Rebase(&item, base);
    return;
  }
  if (!schema->is_object()) return;
  for (auto& [key, value] : schema->members()) {
    if (key == "$ref" && value.is_string() && !value.as_string().empty() && value.as_string()[0] == '#') {
      value = json::Value::String(base + value.as_string().substr(1));
    } else {
      Rebase(&value, base);
    }
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const JsonGrammar>> JsonGrammar::ForToolCall(const std::vector<Tool>& tools,
                                                                            Fidelity fidelity) {
  json::Value branches = json::Value::EmptyArray();
  for (size_t i = 0; i < tools.size(); ++i) {
    json::Value parameters = json::Value::EmptyObject();
    if (tools[i].parameters_json.empty()) {
      parameters.Set("type", json::Value::String("object"));
    } else {
      GANTRY_ASSIGN_OR_RETURN(parameters, json::Parse(tools[i].parameters_json));
      Rebase(&parameters, absl::StrCat("#/anyOf/", i, "/properties/arguments"));
    }
    json::Value name = json::Value::EmptyObject();
    name.Set("const", json::Value::String(tools[i].name));
    json::Value properties = json::Value::EmptyObject();
    properties.Set("name", std::move(name));
    properties.Set("arguments", std::move(parameters));
    json::Value required = json::Value::EmptyArray();
    required.Append(json::Value::String("name"));
    required.Append(json::Value::String("arguments"));
    json::Value call = json::Value::EmptyObject();
    call.Set("type", json::Value::String("object"));
    call.Set("properties", std::move(properties));
    call.Set("required", std::move(required));
    call.Set("additionalProperties", json::Value::Bool(false));
    branches.Append(std::move(call));
  }
  json::Value root = json::Value::EmptyObject();
  root.Set("anyOf", std::move(branches));
  GANTRY_ASSIGN_OR_RETURN(json_schema::Schema schema, json_schema::Schema::Compile(root));
  return Compile(std::move(schema), fidelity);
}

void JsonMatcher::Step(Stack s, uint8_t b, std::vector<Stack>* out, int depth) const {
  if (s.empty() || depth > kMaxStepDepth || out->size() >= kMaxStacks) return;
  const std::vector<Plan>& plans = grammar_->plans();
  Frame& f = s.back();
  const Plan& p = plans[f.plan];
  // Whitespace where JSON allows it, as llama.cpp's schema grammars allow it: one space,
  // or a newline and at most kMaxIndent spaces or tabs (f.ws: 0 none yet, 1 + the
  // indentation after a newline, kSpaced after a space). A whitespace byte past that is
  // refused, never taken as a value's first byte.
  auto take_ws = [&]() {
    if (!IsWs(b)) return false;
    if (s.size() == 1 && f.kind == kValue) {  // before the root value: a few of any kind
      if (f.ws < kMaxLeading) {
        ++f.ws;
        out->push_back(std::move(s));
      }
      return true;
    }
    if (f.ws == 0 && (b == ' ' || b == '\n')) {
      f.ws = b == ' ' ? kSpaced : 1;
      out->push_back(std::move(s));
    } else if (f.ws >= 1 && f.ws <= kMaxIndent && (b == ' ' || b == '\t')) {
      ++f.ws;
      out->push_back(std::move(s));
    }
    return true;
  };
  // The value on top is complete: it leaves the stack (its parent's phase was set when
  // it was pushed).
  auto done = [&]() {
    s.pop_back();
    out->push_back(std::move(s));
  };
  // The value on top ended before `b`, which belongs to its parent.
  auto ended_before = [&]() {
    s.pop_back();
    if (!s.empty()) Step(std::move(s), b, out, depth + 1);
  };
  switch (f.kind) {
    case kValue: {
      if (take_ws() || p.reject) return;
      if (!p.alternatives.empty()) {
        for (int alternative : p.alternatives) {
          Stack branch = s;
          const uint8_t ws = branch.back().ws;
          branch.back() = ValueFrame(alternative);
          branch.back().ws = ws;
          Step(std::move(branch), b, out, depth + 1);
        }
        return;
      }
      if (p.has_literals) {
        f.kind = kLiteral;
        f.ws = 0;
        Step(std::move(s), b, out, depth + 1);
        return;
      }
      f.ws = 0;
      if (b == '{' && (p.types & json_schema::kTypeObject)) {
        f.kind = kObject, f.phase = kObjOpen;
      } else if (b == '[' && (p.types & json_schema::kTypeArray)) {
        f.kind = kArray, f.phase = kArrOpen;
      } else if (b == '"' && (p.types & json_schema::kTypeString)) {
        f.kind = kString;
      } else if ((b == '-' || IsDigit(b)) && (p.types & (json_schema::kTypeInteger | json_schema::kTypeNumber))) {
        f.kind = kNumber;
        Step(std::move(s), b, out, depth + 1);
        return;
      } else if ((b == 't' || b == 'f') && (p.types & json_schema::kTypeBoolean)) {
        f.kind = kKeyword, f.phase = b == 't' ? 0 : 1, f.count = 1;
      } else if (b == 'n' && (p.types & json_schema::kTypeNull)) {
        f.kind = kKeyword, f.phase = 2, f.count = 1;
      } else {
        return;
      }
      out->push_back(std::move(s));
      return;
    }
    case kSuffix: {
      if (f.buf.empty() && take_ws()) return;
      if (f.buf.size() >= suffix_.size() || b != static_cast<uint8_t>(suffix_[f.buf.size()])) return;
      f.buf.push_back(static_cast<char>(b));
      f.ws = 0;
      if (f.buf.size() == suffix_.size()) return done();
      out->push_back(std::move(s));
      return;
    }
    case kKeyword: {
      const absl::string_view word = kKeywords[f.phase];
      if (b != static_cast<uint8_t>(word[f.count])) return;
      if (++f.count == word.size()) return done();
      out->push_back(std::move(s));
      return;
    }
    case kLiteral: {
      f.buf.push_back(static_cast<char>(b));
      bool extends = false, exact = false;
      for (const std::string& literal : p.literals) {
        if (literal.compare(0, f.buf.size(), f.buf) != 0) continue;
        extends = true;
        exact |= literal.size() == f.buf.size() && !NumericText(literal);
      }
      if (exact) return done();
      if (extends) {
        out->push_back(std::move(s));
        return;
      }
      f.buf.pop_back();
      if (std::find(p.literals.begin(), p.literals.end(), f.buf) != p.literals.end() && NumericText(f.buf)) {
        ended_before();
      }
      return;
    }
    case kString: {
      // No character starts once the string has its most (a started escape or UTF-8
      // sequence would have no way to end).
      if (f.esc == 0 && f.need == 0 && b != '"' && f.count >= p.max_length) return;
      bool completed;
      const int r = Lex(&f, b, &completed, nullptr);
      if (r < 0) return;
      if (r == 1) {
        if (f.count >= p.min_length) done();
        return;
      }
      if (completed && ++f.count > p.max_length) return;
      out->push_back(std::move(s));
      return;
    }
    case kNumber: {
      const bool integer_only = IntegerOnly(p);
      f.buf.push_back(static_cast<char>(b));
      NumberText t;
      if (SplitNumber(f.buf, integer_only, &t) && Feasible(p, integer_only, t)) {
        out->push_back(std::move(s));
        return;
      }
      f.buf.pop_back();
      if (NumberComplete(p, integer_only, f.buf)) ended_before();
      return;
    }
    case kObject:
      switch (f.phase) {
        case kObjOpen:
        case kObjNextKey:
          if (take_ws()) return;
          if (b == '"') {
            if (!MoreKeysPossible(p, plans, f)) return;
            f.phase = kObjKey, f.buf.clear(), f.ws = 0;
            out->push_back(std::move(s));
          } else if (b == '}' && f.phase == kObjOpen && ObjectCanClose(p, f)) {
            done();
          }
          return;
        case kObjKey: {
          // A closed set's keys are written as their bytes: an escape could spell a
          // character no declared key continues with.
          if (b == '\\' && f.esc == 0 && f.need == 0 && p.additional < 0) return;
          bool completed;
          const int r = Lex(&f, b, &completed, &f.buf);
          if (r < 0) return;
          if (r == 0) {
            if (KeyPrefixAllowed(p, plans, f)) out->push_back(std::move(s));
            return;
          }
          if (std::binary_search(f.seen.begin(), f.seen.end(), f.buf)) return;
          f.child = MemberPlan(p, plans, f.buf);
          if (f.child < 0) return;
          f.seen.insert(std::upper_bound(f.seen.begin(), f.seen.end(), f.buf), f.buf);
          f.buf.clear();
          f.phase = kObjColon;
          out->push_back(std::move(s));
          return;
        }
        case kObjColon:
          if (take_ws()) return;
          if (b != ':') return;
          f.phase = kObjAfterValue, f.ws = 0;
          s.push_back(ValueFrame(f.child));
          out->push_back(std::move(s));
          return;
        case kObjAfterValue:
          if (take_ws()) return;
          if (b == ',' && MoreKeysPossible(p, plans, f)) {
            f.phase = kObjNextKey, f.ws = 0;
            out->push_back(std::move(s));
          } else if (b == '}' && ObjectCanClose(p, f)) {
            done();
          }
          return;
      }
      return;
    case kArray:
      switch (f.phase) {
        case kArrOpen:
        case kArrNextItem: {
          if (take_ws()) return;
          if (b == ']' && f.phase == kArrOpen) {
            if (p.min_items == 0) done();
            return;
          }
          if (!ItemPossible(p, plans, f.count)) return;
          const int item = ItemPlan(p, f.count);
          f.phase = kArrAfterItem, f.ws = 0, ++f.count;
          s.push_back(ValueFrame(item));
          Step(std::move(s), b, out, depth + 1);
          return;
        }
        case kArrAfterItem:
          if (take_ws()) return;
          if (b == ',' && ItemPossible(p, plans, f.count)) {
            f.phase = kArrNextItem, f.ws = 0;
            out->push_back(std::move(s));
          } else if (b == ']' && f.count >= p.min_items) {
            done();
          }
          return;
      }
      return;
  }
}

bool JsonMatcher::Feed(uint8_t byte) {
  std::vector<Stack> next;
  for (const Stack& s : stacks_) Step(s, byte, &next, 0);
  if (next.empty()) return false;
  if (next.size() > 1) {
    std::vector<std::pair<std::string, size_t>> keys(next.size());
    for (size_t i = 0; i < next.size(); ++i) {
      AppendStackKey(next[i], &keys[i].first);
      keys[i].second = i;
    }
    std::sort(keys.begin(), keys.end());
    std::vector<Stack> unique;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i > 0 && keys[i].first == keys[i - 1].first) continue;
      unique.push_back(std::move(next[keys[i].second]));
    }
    next = std::move(unique);
  }
  stacks_ = std::move(next);
  return true;
}

bool JsonMatcher::Feed(absl::string_view bytes) {
  JsonMatcher copy(*this);
  for (char c : bytes) {
    if (!copy.Feed(static_cast<uint8_t>(c))) return false;
  }
  *this = std::move(copy);
  return true;
}

bool JsonMatcher::Complete() const {
  const std::vector<Plan>& plans = grammar_->plans();
  for (const Stack& s : stacks_) {
    if (s.empty()) return true;
    if (s.size() != 1) continue;
    const Frame& f = s.back();
    const Plan& p = plans[f.plan];
    if (f.kind == kNumber && NumberComplete(p, IntegerOnly(p), f.buf)) return true;
    if (f.kind == kLiteral && NumericText(f.buf) &&
        std::find(p.literals.begin(), p.literals.end(), f.buf) != p.literals.end()) {
      return true;
    }
  }
  return false;
}

uint64_t JsonMatcher::PlainTextRoom() const {
  const std::vector<Plan>& plans = grammar_->plans();
  uint64_t room = UINT64_MAX;
  for (const Stack& s : stacks_) {
    if (s.empty()) return 0;
    const Frame& f = s.back();
    const Plan& p = plans[f.plan];
    if (f.esc != 0 || f.need != 0) return 0;
    if (f.kind == kString) {
      if (f.count >= p.max_length) return 0;
      if (p.max_length != UINT64_MAX) room = std::min(room, p.max_length - f.count);
    } else if (!(f.kind == kObject && f.phase == kObjKey && p.additional >= 0)) {
      return 0;
    }
  }
  return room;
}

// An open object's key that no declared or seen key starts with: its future no longer
// depends on its text (it is a new key of the additional plan), so its state key
// leaves the text out and the masks of all such keys are one.
static bool FreeKey(const Plan& p, const Frame& f) {
  if (f.kind != kObject || f.phase != kObjKey || p.additional < 0) return false;
  auto starts = [&](const std::string& name) { return name.compare(0, f.buf.size(), f.buf) == 0; };
  for (auto it = p.properties.lower_bound(f.buf); it != p.properties.end() && starts(it->first); ++it) {
    return false;
  }
  for (const std::string& k : f.seen) {
    if (starts(k)) return false;
  }
  return true;
}

void JsonMatcher::AppendStackKey(const Stack& s, std::string* key) const {
  const std::vector<Plan>& plans = grammar_->plans();
  key->push_back('[');
  for (const Frame& f : s) {
    const Plan& p = plans[f.plan];
    uint64_t count = 0;  // only as far as it can still matter
    if (f.kind == kString) {
      count = std::min(f.count, p.max_length != UINT64_MAX ? p.max_length : p.min_length);
    } else if (f.kind == kArray) {
      uint64_t cap = std::max<uint64_t>(p.prefix_items.size(), p.min_items);
      if (p.max_items != UINT64_MAX) cap = std::max(cap, p.max_items);
      count = std::min(f.count, cap);
    } else if (f.kind == kKeyword) {
      count = f.count;
    }
    for (uint64_t v : {uint64_t{f.kind}, uint64_t{f.phase}, uint64_t{f.ws}, uint64_t{f.esc}, uint64_t{f.need},
                       uint64_t{f.lo}, uint64_t{f.hi}, uint64_t{f.hex}, static_cast<uint64_t>(f.plan),
                       static_cast<uint64_t>(f.child), count}) {
      AppendField(v, key);
    }
    AppendBytes(FreeKey(p, f) ? "\x01free" : f.buf, key);
    AppendField(f.seen.size(), key);
    for (const std::string& k : f.seen) AppendBytes(k, key);
    key->push_back(';');
  }
  key->push_back(']');
}

std::string JsonMatcher::Key() const {
  std::string key;
  for (const Stack& s : stacks_) AppendStackKey(s, &key);
  return key;
}

}  // namespace gantry::constrain
