#include "tokenizer-svc/jinja/runtime/filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tokenizer-svc/jinja/py_str.h"
#include "tokenizer-svc/jinja/runtime/access.h"
#include "tokenizer-svc/jinja/runtime/methods.h"

namespace gantry::jinja {
namespace {

using Args = std::vector<absl::optional<Value>>;

const char* const kFilters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
    "escape", "first", "float", "forceescape", "format", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
    "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title",
    "tojson", "trim", "unique", "upper", "wordcount"};

// Jinja2's make_attrgetter: "a.b.0" looks up each part as an item (digits as ints).
absl::StatusOr<Value> GetPath(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return GetItem(item, attribute);
  if (!attribute.is_string()) return PyError("attribute must be a string or an integer");
  Value v = item;
  for (absl::string_view part : absl::StrSplit(attribute.str(), '.')) {
    bool digits = !part.empty() && part.size() < 18 &&
                  part.find_first_not_of("0123456789") == absl::string_view::npos;
    Value key = digits ? Value::Int(std::strtoll(std::string(part).c_str(), nullptr, 10))
                       : Value::String(std::string(part));
    GANTRY_ASSIGN_OR_RETURN(v, GetItem(v, key));
  }
  return v;
}

// Jinja2's ignore_case: strings compare lowercased unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::String(pystr::Lower(v.str()));
  return v;
}

absl::Status SortValues(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  absl::Status error;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& a, const auto& b) {
    if (!error.ok()) return false;
    absl::StatusOr<int> c = reverse ? Compare(b.first, a.first) : Compare(a.first, b.first);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c == -1;
  });
  return error;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

bool PyIntFromString(const std::string& text, int64_t base, int64_t* out) {
  std::string s = pystr::Strip(text, absl::nullopt, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && isalnum(static_cast<unsigned char>(s[i - 1])) &&
        isalnum(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    digits.push_back(s[i]);
  }
  if (digits.empty() || base < 2 || base > 36) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
  if (errno != 0 || end == digits.c_str() || *end != '\0') return false;
  if (digits[0] == ' ' || digits[0] == '\t') return false;
  *out = v;
  return true;
}

bool PyFloatFromString(const std::string& text, double* out) {
  std::string s = pystr::Strip(text, absl::nullopt, true, true);
  if (s.empty()) return false;
  std::string t;
  for (char c : s) {
    if (c != '_') t.push_back(c);
  }
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end != '\0') return false;
  std::string lower = pystr::Lower(t);
  if (lower.find("0x") != std::string::npos) return false;  // Python's float() reads no hex
  *out = v;
  return true;
}

absl::StatusOr<Value> ToInt(const Value& v, const Value& dflt, int64_t base) {
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
  if (v.is_float()) {
    double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return dflt;
    return Value::Int(static_cast<int64_t>(std::trunc(d)));
  }
  if (v.is_string()) {
    int64_t i;
    if (PyIntFromString(v.str(), base, &i)) return Value::Int(i);
    double d;
    if (PyFloatFromString(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(std::trunc(d)));
    }
  }
  return dflt;
}

// Rounds half to even at `precision` digits, as Python's round() (up to binary error).
double PyRound(double x, int64_t precision) {
  if (!std::isfinite(x)) return x;
  precision = std::max<int64_t>(-300, std::min<int64_t>(300, precision));
  double scale = std::pow(10.0, static_cast<double>(precision));
  double y = x * scale;
  if (!std::isfinite(y)) return x;
  double r = std::nearbyint(y);  // default rounding mode: half to even
  return r / scale;
}

absl::StatusOr<Value> MapSelect(Env& env, const std::string& name, const Value& value,
                                const CallArgs& args) {
  GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
  ValueList out;
  bool by_attr = name == "selectattr" || name == "rejectattr";
  bool negate = name == "reject" || name == "rejectattr";
  if (name == "map") {
    const Value* attribute = nullptr;
    Value dflt;
    bool has_default = false;
    for (const auto& kw : args.kw) {
      if (kw.first == "attribute") {
        attribute = &kw.second;
      } else if (kw.first == "default") {
        dflt = kw.second;
        has_default = true;
      } else if (args.pos.empty()) {
        return PyError(absl::StrCat("Unexpected keyword argument '", kw.first, "'"));
      }
    }
    if (attribute != nullptr) {
      for (const Value& item : items) {
        GANTRY_ASSIGN_OR_RETURN(Value v, GetPath(item, *attribute));
        if (v.is_undefined() && has_default) v = dflt;
        out.push_back(v);
      }
      return Value::List(std::move(out));
    }
    if (args.pos.empty() || !args.pos[0].is_string()) return PyError("map requires a filter name");
    const std::string& filter = args.pos[0].str();
    if (!HasFilter(filter)) return PyError(absl::StrCat("No filter named '", filter, "'"));
    CallArgs rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    for (const Value& item : items) {
      GANTRY_RETURN_IF_ERROR(env.Step());
      GANTRY_ASSIGN_OR_RETURN(Value v, ApplyFilter(env, filter, item, rest));
      out.push_back(std::move(v));
    }
    return Value::List(std::move(out));
  }
  size_t first_test_arg = by_attr ? 1 : 0;
  if (by_attr && args.pos.empty()) return PyError("Missing parameter for attribute name");
  const std::string* test = nullptr;
  if (args.pos.size() > first_test_arg) {
    if (!args.pos[first_test_arg].is_string()) return PyError("test name must be a string");
    test = &args.pos[first_test_arg].str();
    if (!HasTest(*test)) return PyError(absl::StrCat("No test named '", *test, "'"));
  }
  CallArgs test_args;
  if (test) test_args.pos.assign(args.pos.begin() + first_test_arg + 1, args.pos.end());
  test_args.kw = args.kw;
  for (const Value& item : items) {
    GANTRY_RETURN_IF_ERROR(env.Step());
    Value subject = item;
    if (by_attr) {
      GANTRY_ASSIGN_OR_RETURN(subject, GetPath(item, args.pos[0]));
    }
    bool keep;
    if (test) {
      GANTRY_ASSIGN_OR_RETURN(keep, ApplyTest(env, *test, subject, test_args));
    } else {
      keep = Truthy(subject);
    }
    if (keep != negate) out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> ToJsonFilter(Env& env, const Value& value, const CallArgs& args) {
  if (const ToJsonMemo* memo = env.options().tojson_memo;
      memo != nullptr && args.pos.empty() && args.kw.empty() && value.identity() != nullptr &&
      (value.is_dict() || value.kind() == Value::Kind::kList)) {
    if (auto it = memo->find(value.identity()); it != memo->end()) {
      GANTRY_RETURN_IF_ERROR(env.CheckString(it->second.size()));
      return Value::String(it->second);
    }
  }
  Args a;
  GANTRY_RETURN_IF_ERROR(BindArgs(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, &a));
  json::DumpOptions options;
  options.ensure_ascii = a[0] && Truthy(*a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (!a[1]->is_int() || a[1]->as_int() < 0 || a[1]->as_int() > 64) {
      return PyError("tojson indent must be an integer from 0 to 64");
    }
    options.indent = static_cast<int>(a[1]->as_int());
    options.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    const Value& sep = *a[2];
    if (!sep.is_sequence() || sep.list().size() != 2 || !sep.list()[0].is_string() ||
        !sep.list()[1].is_string()) {
      return PyError("tojson separators must be a pair of strings");
    }
    options.item_separator = sep.list()[0].str();
    options.key_separator = sep.list()[1].str();
  }
  options.sort_keys = a[3] && Truthy(*a[3]);
  GANTRY_ASSIGN_OR_RETURN(json::Value j, ToJson(value));
  std::string text = json::Dump(j, options);
  GANTRY_RETURN_IF_ERROR(env.CheckString(text.size()));
  return Value::String(std::move(text));
}

absl::StatusOr<Value> Aggregate(const std::string& name, const Value& value, const CallArgs& args) {
  Args a;
  GANTRY_RETURN_IF_ERROR(BindArgs(args, name, {"case_sensitive", "attribute"}, &a));
  bool cs = a[0] && Truthy(*a[0]);
  GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  const Value* best = nullptr;
  Value best_key;
  for (const Value& item : items) {
    Value key = item;
    if (a[1] && !a[1]->is_none()) {
      GANTRY_ASSIGN_OR_RETURN(key, GetPath(item, *a[1]));
    }
    key = SortKey(key, cs);
    if (best != nullptr) {
      GANTRY_ASSIGN_OR_RETURN(int c, Compare(key, best_key));
      if (!(name == "max" ? c == 1 : c == -1)) continue;
    }
    best = &item;
    best_key = key;
  }
  return *best;
}

}  // namespace

bool HasFilter(const std::string& name) {
  for (const char* f : kFilters) {
    if (name == f) return true;
  }
  return false;
}

absl::StatusOr<Value> ApplyFilter(Env& env, const std::string& name, const Value& value,
                                  const CallArgs& args) {
  Args a;
  auto bind = [&](std::vector<const char*> params) { return BindArgs(args, name, params, &a); };
  auto str_of = [&](const Value& v) { return ToStr(v); };

  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr") {
    return MapSelect(env, name, value, args);
  }
  if (name == "tojson") return ToJsonFilter(env, value, args);
  if (name == "default" || name == "d") {
    GANTRY_RETURN_IF_ERROR(bind({"default_value", "boolean"}));
    bool boolean = a[1] && Truthy(*a[1]);
    if (value.is_undefined() || (boolean && !Truthy(value))) {
      return a[0] ? *a[0] : Value::String("");
    }
    return value;
  }
  if (name == "length" || name == "count") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    GANTRY_ASSIGN_OR_RETURN(int64_t n, Length(value));
    return Value::Int(n);
  }
  if (name == "trim") {
    GANTRY_RETURN_IF_ERROR(bind({"chars"}));
    absl::optional<std::string> chars;
    if (a[0] && !a[0]->is_none()) chars = str_of(*a[0]);
    return Value::String(pystr::Strip(str_of(value), chars, true, true));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    std::string s = str_of(value);
    if (name == "upper") return Value::String(pystr::Upper(s));
    if (name == "lower") return Value::String(pystr::Lower(s));
    if (name == "capitalize") return Value::String(pystr::Capitalize(s));
    return Value::String(pystr::JinjaTitle(s));
  }
  if (name == "string" || name == "safe") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    if (value.is_string()) return value;
    return Value::String(str_of(value));
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    return Value::String(HtmlEscape(str_of(value)));
  }
  if (name == "first" || name == "last") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    if (items.empty()) {
      return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    return Value::List(std::move(items));
  }
  if (name == "join") {
    GANTRY_RETURN_IF_ERROR(bind({"d", "attribute"}));
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    std::string sep = a[0] ? str_of(*a[0]) : "";
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (a[1] && !a[1]->is_none()) {
        GANTRY_ASSIGN_OR_RETURN(item, GetPath(item, *a[1]));
      }
      if (i) out += sep;
      out += str_of(item);
      GANTRY_RETURN_IF_ERROR(env.CheckString(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "items") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    if (value.is_undefined()) return Value::List({});
    if (!value.is_dict()) return PyError("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& item : value.dict().items) {
      out.push_back(Value::Tuple({Value::String(item.first), item.second}));
    }
    return Value::List(std::move(out));
  }
  if (name == "replace") {
    GANTRY_RETURN_IF_ERROR(bind({"old", "new", "count"}));
    if (!a[0] || !a[1]) return PyError("replace() missing required arguments");
    int64_t count = -1;
    if (a[2] && !a[2]->is_none()) {
      if (!a[2]->is_int()) return PyError("replace count must be an integer");
      count = a[2]->as_int();
    }
    std::string s = str_of(value), old_text = str_of(*a[0]), new_text = str_of(*a[1]);
    size_t estimate = s.size() + (old_text.size() < new_text.size()
                                      ? (s.size() / std::max<size_t>(1, old_text.size()) + 1) * new_text.size()
                                      : 0);
    GANTRY_RETURN_IF_ERROR(env.CheckString(estimate));
    return Value::String(pystr::Replace(s, old_text, new_text, count));
  }
  if (name == "int") {
    GANTRY_RETURN_IF_ERROR(bind({"default", "base"}));
    int64_t base = 10;
    if (a[1]) {
      if (!a[1]->is_int()) return PyError("int base must be an integer");
      base = a[1]->as_int();
    }
    return ToInt(value, a[0] ? *a[0] : Value::Int(0), base);
  }
  if (name == "float") {
    GANTRY_RETURN_IF_ERROR(bind({"default"}));
    Value dflt = a[0] ? *a[0] : Value::Float(0.0);
    if (value.is_number()) return Value::Float(value.as_double());
    double d;
    if (value.is_string() && PyFloatFromString(value.str(), &d)) return Value::Float(d);
    return dflt;
  }
  if (name == "abs") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    if (value.is_float()) return Value::Float(std::fabs(value.as_float()));
    if (value.is_int() || value.is_bool()) {
      if (value.as_int() == INT64_MIN) return PyError("integer overflow");
      return Value::Int(std::llabs(value.as_int()));
    }
    return PyError(absl::StrCat("bad operand type for abs(): '", TypeName(value), "'"));
  }
  if (name == "round") {
    GANTRY_RETURN_IF_ERROR(bind({"precision", "method"}));
    int64_t precision = 0;
    if (a[0]) {
      if (!a[0]->is_int()) return PyError("round precision must be an integer");
      precision = a[0]->as_int();
    }
    std::string method = a[1] ? str_of(*a[1]) : "common";
    if (method != "common" && method != "ceil" && method != "floor") {
      return PyError("method must be common, ceil or floor");
    }
    if (!value.is_number()) return PyError(absl::StrCat("type ", TypeName(value), " doesn't define __round__ method"));
    if (method == "common" && !value.is_float()) return Value::Int(value.as_int());
    double x = value.as_double();
    if (method == "common") return Value::Float(PyRound(x, precision));
    double scale = std::pow(10.0, static_cast<double>(std::max<int64_t>(-300, std::min<int64_t>(300, precision))));
    double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
    return Value::Float(r / scale);
  }
  if (name == "center") {
    GANTRY_RETURN_IF_ERROR(bind({"width"}));
    CallArgs m;
    m.pos.push_back(a[0] ? *a[0] : Value::Int(80));
    return CallMethod(env, Value::String(str_of(value)), "center", m);
  }
  if (name == "indent") {
    GANTRY_RETURN_IF_ERROR(bind({"width", "first", "blank"}));
    std::string indention;
    if (a[0] && a[0]->is_string()) {
      indention = a[0]->str();
    } else {
      int64_t w = 4;
      if (a[0]) {
        if (!a[0]->is_int()) return PyError("indent width must be an integer or a string");
        w = a[0]->as_int();
      }
      if (w > 1024) return PyError("indent width is too large");
      indention = std::string(std::max<int64_t>(0, w), ' ');
    }
    bool first = a[1] && Truthy(*a[1]);
    bool blank = a[2] && Truthy(*a[2]);
    std::string s = str_of(value) + "\n";
    CallArgs none;
    GANTRY_ASSIGN_OR_RETURN(Value lines_v, CallMethod(env, Value::String(s), "splitlines", none));
    const ValueList& lines = lines_v.list();
    GANTRY_RETURN_IF_ERROR(env.CheckString(s.size() + lines.size() * indention.size()));
    std::string rv;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].str();
      if (i == 0) {
        rv = line;
        continue;
      }
      rv += "\n";
      if (blank || !line.empty()) rv += indention;
      rv += line;
    }
    if (first) rv = indention + rv;
    return Value::String(std::move(rv));
  }
  if (name == "format") {
    Value fmt_args;
    if (!args.kw.empty()) {
      if (!args.pos.empty()) return PyError("can't handle positional and keyword arguments at the same time");
      DictData d;
      for (const auto& kw : args.kw) d.Set(kw.first, kw.second);
      fmt_args = Value::Dict(std::move(d));
    } else {
      fmt_args = Value::Tuple(args.pos);
    }
    GANTRY_ASSIGN_OR_RETURN(std::string out, PercentFormat(env, str_of(value), fmt_args));
    return Value::String(std::move(out));
  }
  if (name == "reverse") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    if (value.is_string()) {
      std::vector<uint32_t> cps = pystr::CodePoints(value.str());
      std::reverse(cps.begin(), cps.end());
      return Value::String(pystr::FromCodePoints(cps, 0, cps.size()));
    }
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "sort" || name == "unique") {
    if (name == "sort") {
      GANTRY_RETURN_IF_ERROR(bind({"reverse", "case_sensitive", "attribute"}));
    } else {
      GANTRY_RETURN_IF_ERROR(bind({"case_sensitive", "attribute"}));
      a.insert(a.begin(), absl::nullopt);
    }
    bool reverse = a[0] && Truthy(*a[0]);
    bool cs = a[1] && Truthy(*a[1]);
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : items) {
      Value key = item;
      if (a[2] && !a[2]->is_none()) {
        GANTRY_ASSIGN_OR_RETURN(key, GetPath(item, *a[2]));
      }
      keyed.emplace_back(SortKey(key, cs), item);
    }
    ValueList out;
    if (name == "sort") {
      GANTRY_RETURN_IF_ERROR(SortValues(&keyed, reverse));
      for (auto& k : keyed) out.push_back(std::move(k.second));
    } else {
      std::vector<Value> seen;
      for (auto& k : keyed) {
        GANTRY_RETURN_IF_ERROR(env.Step());
        bool dup = false;
        for (const Value& s : seen) dup = dup || Equals(s, k.first);
        if (dup) continue;
        seen.push_back(k.first);
        out.push_back(k.second);
      }
    }
    return Value::List(std::move(out));
  }
  if (name == "dictsort") {
    GANTRY_RETURN_IF_ERROR(bind({"case_sensitive", "by", "reverse"}));
    if (!value.is_dict()) return PyError("You can only sort by either \"key\" or \"value\" of a dict");
    bool cs = a[0] && Truthy(*a[0]);
    std::string by = a[1] ? str_of(*a[1]) : "key";
    if (by != "key" && by != "value") return PyError("You can only sort by either \"key\" or \"value\"");
    std::vector<std::pair<Value, Value>> keyed;
    for (const auto& item : value.dict().items) {
      Value k = by == "key" ? Value::String(item.first) : item.second;
      keyed.emplace_back(SortKey(k, cs), Value::Tuple({Value::String(item.first), item.second}));
    }
    GANTRY_RETURN_IF_ERROR(SortValues(&keyed, a[2] && Truthy(*a[2])));
    ValueList out;
    for (auto& k : keyed) out.push_back(std::move(k.second));
    return Value::List(std::move(out));
  }
  if (name == "max" || name == "min") return Aggregate(name, value, args);
  if (name == "sum") {
    GANTRY_RETURN_IF_ERROR(bind({"attribute", "start"}));
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    Value total = a[1] ? *a[1] : Value::Int(0);
    for (const Value& item : items) {
      Value v = item;
      if (a[0] && !a[0]->is_none()) {
        GANTRY_ASSIGN_OR_RETURN(v, GetPath(item, *a[0]));
      }
      if (!total.is_number() || !v.is_number()) {
        return PyError(absl::StrCat("unsupported operand type(s) for +: '", TypeName(total), "' and '",
                                    TypeName(v), "'"));
      }
      if (total.is_float() || v.is_float()) {
        total = Value::Float(total.as_double() + v.as_double());
      } else {
        int64_t r;
        if (__builtin_add_overflow(total.as_int(), v.as_int(), &r)) return PyError("integer overflow");
        total = Value::Int(r);
      }
    }
    return total;
  }
  if (name == "attr") {
    GANTRY_RETURN_IF_ERROR(bind({"name"}));
    if (!a[0] || !a[0]->is_string()) return PyError("attr name must be a string");
    // Python getattr only: unlike `x.name`, no fallback to dict keys.
    if (value.is_dict() && !IsMethod(value, a[0]->str())) {
      return Value::Undefined(absl::StrCat("'dict object' has no attribute '", a[0]->str(), "'"));
    }
    return GetAttr(value, a[0]->str());
  }
  if (name == "batch") {
    GANTRY_RETURN_IF_ERROR(bind({"linecount", "fill_with"}));
    if (!a[0] || !a[0]->is_int() || a[0]->as_int() <= 0) return PyError("batch size must be a positive integer");
    size_t n = static_cast<size_t>(std::min<int64_t>(a[0]->as_int(), 1 << 20));
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
    ValueList out, cur;
    for (const Value& item : items) {
      cur.push_back(item);
      if (cur.size() == n) {
        out.push_back(Value::List(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (a[1] && !a[1]->is_none()) {
        while (cur.size() < n) cur.push_back(*a[1]);
      }
      out.push_back(Value::List(std::move(cur)));
    }
    return Value::List(std::move(out));
  }
  if (name == "wordcount") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    int64_t words = 0;
    bool in_word = false;
    for (uint32_t c : pystr::CodePoints(str_of(value))) {
      bool w = c == '_' || (c >= '0' && c <= '9') || (!pystr::IsSpace(c) && c > 0x7F) ||
               (c < 0x80 && isalpha(static_cast<int>(c)));
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value::Int(words);
  }
  return PyError(absl::StrCat("No filter named '", name, "'"));
}

}  // namespace gantry::jinja
