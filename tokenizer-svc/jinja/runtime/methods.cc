#include "tokenizer-svc/jinja/runtime/methods.h"

#include <cmath>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer-svc/jinja/py_str.h"
#include "tokenizer-svc/jinja/runtime/access.h"

namespace gantry::jinja {
namespace {

const char* const kStrMethods[] = {
    "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "lower",
    "upper", "title", "capitalize", "swapcase", "replace", "format", "find", "rfind", "index",
    "rindex", "count", "join", "center", "ljust", "rjust", "zfill", "splitlines", "isdigit",
    "isalpha", "isalnum", "isspace", "islower", "isupper", "isnumeric", "isdecimal", "casefold"};
const char* const kDictMethods[] = {"get", "keys", "values", "items", "copy"};
const char* const kDictUnsafe[] = {"pop", "popitem", "update", "setdefault", "clear"};
const char* const kListMethods[] = {"index", "count"};
const char* const kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse",
                                   "sort", "clear"};
const char* const kBuiltins[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

template <size_t N>
bool In(const char* const (&table)[N], const std::string& name) {
  for (const char* entry : table) {
    if (name == entry) return true;
  }
  return false;
}

absl::StatusOr<std::string> StrArg(const absl::optional<Value>& v, absl::string_view what) {
  if (!v || !v->is_string()) {
    return PyError(absl::StrCat(what, " must be str, not ", v ? TypeName(*v) : "nothing"));
  }
  return v->str();
}

absl::StatusOr<absl::optional<std::string>> OptStrArg(const absl::optional<Value>& v,
                                                      absl::string_view what) {
  if (!v || v->is_none()) return absl::optional<std::string>();
  if (!v->is_string()) return PyError(absl::StrCat(what, " arg must be None or str"));
  return absl::optional<std::string>(v->str());
}

absl::StatusOr<int64_t> IntArg(const absl::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool()) {
    return PyError(absl::StrCat("'", TypeName(*v), "' object cannot be interpreted as an integer"));
  }
  return v->as_int();
}

// Code point offset of byte offset `b` in s.
int64_t CpOffset(const std::string& s, size_t b) { return static_cast<int64_t>(pystr::Length(s.substr(0, b))); }

std::string Pad(const std::string& s, int64_t width, char align, const std::string& fill) {
  int64_t len = static_cast<int64_t>(pystr::Length(s));
  if (width <= len) return s;
  int64_t pad = width - len;
  int64_t left = align == '<' ? 0 : align == '>' ? pad : pad / 2;
  if (align == 'c') left = pad / 2 + (pad & width & 1);  // str.center's rounding
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < pad - left; ++i) out += fill;
  return out;
}

absl::StatusOr<Value> StrMethod(Env& env, const std::string& s, const std::string& name,
                                const CallArgs& args) {
  std::vector<absl::optional<Value>> a;
  auto bind = [&](std::vector<const char*> params) {
    return BindArgs(args, absl::StrCat("str.", name), params, &a);
  };
  if (name == "startswith" || name == "endswith") {
    GANTRY_RETURN_IF_ERROR(bind({"prefix", "start", "end"}));
    std::vector<uint32_t> cps = pystr::CodePoints(s);
    int64_t n = static_cast<int64_t>(cps.size());
    GANTRY_ASSIGN_OR_RETURN(int64_t b, IntArg(a[1], 0));
    GANTRY_ASSIGN_OR_RETURN(int64_t e, IntArg(a[2], n));
    if (b < 0) b = std::max<int64_t>(0, b + n);
    if (e < 0) e = std::max<int64_t>(0, e + n);
    e = std::min(e, n);
    std::string sub = b <= e ? pystr::FromCodePoints(cps, b, e) : std::string();
    if (b > n) return Value::Bool(false);
    ValueList options;
    if (a[0] && a[0]->kind() == Value::Kind::kTuple) {
      options = a[0]->list();
    } else if (a[0]) {
      options.push_back(*a[0]);
    }
    if (!a[0] || (options.empty() && a[0]->kind() != Value::Kind::kTuple)) {
      return PyError(absl::StrCat(name, " first arg must be str or a tuple of str"));
    }
    for (const Value& o : options) {
      if (!o.is_string()) {
        return PyError(absl::StrCat(name, " first arg must be str or a tuple of str, not ", TypeName(o)));
      }
      const std::string& p = o.str();
      bool hit = name == "startswith" ? sub.compare(0, p.size(), p) == 0 && sub.size() >= p.size()
                                      : sub.size() >= p.size() &&
                                            sub.compare(sub.size() - p.size(), p.size(), p) == 0;
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "split" || name == "rsplit") {
    GANTRY_RETURN_IF_ERROR(bind({"sep", "maxsplit"}));
    GANTRY_ASSIGN_OR_RETURN(absl::optional<std::string> sep, OptStrArg(a[0], "sep"));
    if (sep && sep->empty()) return PyError("empty separator");
    GANTRY_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(a[1], -1));
    ValueList parts;
    for (auto& p : pystr::Split(s, sep, maxsplit, name == "rsplit")) parts.push_back(Value::String(std::move(p)));
    return Value::List(std::move(parts));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    GANTRY_RETURN_IF_ERROR(bind({"chars"}));
    GANTRY_ASSIGN_OR_RETURN(absl::optional<std::string> chars, OptStrArg(a[0], name));
    return Value::String(pystr::Strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "lower" || name == "upper" || name == "title" || name == "capitalize" ||
      name == "swapcase" || name == "casefold") {
    GANTRY_RETURN_IF_ERROR(bind({}));
    if (name == "lower" || name == "casefold") return Value::String(pystr::Lower(s));
    if (name == "upper") return Value::String(pystr::Upper(s));
    if (name == "title") return Value::String(pystr::Title(s));
    if (name == "capitalize") return Value::String(pystr::Capitalize(s));
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      size_t start = i;
      pystr::NextCodePoint(s, &i);
      std::string ch = s.substr(start, i - start);
      std::string up = pystr::Upper(ch);
      out += up != ch ? up : pystr::Lower(ch);
    }
    return Value::String(out);
  }
  if (name == "replace") {
    GANTRY_RETURN_IF_ERROR(bind({"old", "new", "count"}));
    GANTRY_ASSIGN_OR_RETURN(std::string old_text, StrArg(a[0], "replace() argument 1"));
    GANTRY_ASSIGN_OR_RETURN(std::string new_text, StrArg(a[1], "replace() argument 2"));
    GANTRY_ASSIGN_OR_RETURN(int64_t count, IntArg(a[2], -1));
    size_t estimate = old_text.empty() ? s.size() + (s.size() + 1) * new_text.size() : s.size();
    if (!old_text.empty() && new_text.size() > old_text.size()) {
      estimate = s.size() / old_text.size() * new_text.size() + s.size();
    }
    GANTRY_RETURN_IF_ERROR(env.CheckString(estimate));
    return Value::String(pystr::Replace(s, old_text, new_text, count));
  }
  if (name == "format") {
    GANTRY_ASSIGN_OR_RETURN(std::string out, BraceFormat(env, s, args));
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    GANTRY_RETURN_IF_ERROR(bind({"sub"}));
    GANTRY_ASSIGN_OR_RETURN(std::string sub, StrArg(a[0], "argument"));
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(pystr::Length(s)) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
      return Value::Int(n);
    }
    size_t pos = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (pos == std::string::npos) {
      if (name == "index" || name == "rindex") return PyError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CpOffset(s, pos));
  }
  if (name == "join") {
    GANTRY_RETURN_IF_ERROR(bind({"iterable"}));
    GANTRY_ASSIGN_OR_RETURN(ValueList items, Iterate(a[0] ? *a[0] : Value::None()));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return PyError(absl::StrCat("sequence item ", i, ": expected str instance, ",
                                    TypeName(items[i]), " found"));
      }
      if (i) out += s;
      out += items[i].str();
      GANTRY_RETURN_IF_ERROR(env.CheckString(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    GANTRY_RETURN_IF_ERROR(name == "zfill" ? bind({"width"}) : bind({"width", "fillchar"}));
    GANTRY_ASSIGN_OR_RETURN(int64_t width, IntArg(a[0], 0));
    GANTRY_RETURN_IF_ERROR(env.CheckString(static_cast<size_t>(std::max<int64_t>(0, width)) * 4));
    std::string fill = " ";
    if (name != "zfill" && a[1]) {
      if (!a[1]->is_string() || pystr::Length(a[1]->str()) != 1) {
        return PyError("The fill character must be exactly one character long");
      }
      fill = a[1]->str();
    }
    if (name == "zfill") {
      int64_t len = static_cast<int64_t>(pystr::Length(s));
      if (width <= len) return Value::String(s);
      std::string sign;
      std::string rest = s;
      if (!rest.empty() && (rest[0] == '-' || rest[0] == '+')) {
        sign = rest.substr(0, 1);
        rest = rest.substr(1);
      }
      return Value::String(sign + std::string(width - len, '0') + rest);
    }
    char align = name == "center" ? 'c' : name == "ljust" ? '<' : '>';
    return Value::String(Pad(s, width, align, fill));
  }
  if (name == "splitlines") {
    GANTRY_RETURN_IF_ERROR(bind({"keepends"}));
    bool keep = a[0] && Truthy(*a[0]);
    ValueList lines;
    std::string cur;
    size_t i = 0;
    while (i < s.size()) {
      size_t start = i;
      uint32_t cp = pystr::NextCodePoint(s, &i);
      if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
      if (pystr::IsLineBreak(cp)) {
        if (keep) cur += s.substr(start, i - start);
        lines.push_back(Value::String(cur));
        cur.clear();
      } else {
        cur += s.substr(start, i - start);
      }
    }
    if (!cur.empty()) lines.push_back(Value::String(cur));
    return Value::List(std::move(lines));
  }
  GANTRY_RETURN_IF_ERROR(bind({}));
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return Value::Bool(pystr::IsDigit(s));
  if (name == "isalpha") return Value::Bool(pystr::IsAlpha(s));
  if (name == "isalnum") return Value::Bool(pystr::IsAlnum(s));
  if (name == "islower") return Value::Bool(pystr::IsLower(s));
  if (name == "isupper") return Value::Bool(pystr::IsUpper(s));
  if (name == "isspace") {
    std::vector<uint32_t> cps = pystr::CodePoints(s);
    bool all = !cps.empty();
    for (uint32_t c : cps) all = all && pystr::IsSpace(c);
    return Value::Bool(all);
  }
  return PyError(absl::StrCat("'str' object has no attribute '", name, "'"));
}

absl::StatusOr<Value> DictMethod(const Value& self, const std::string& name, const CallArgs& args) {
  std::vector<absl::optional<Value>> a;
  if (name == "get") {
    GANTRY_RETURN_IF_ERROR(BindArgs(args, "dict.get", {"key", "default"}, &a));
    if (!a[0]) return PyError("get expected at least 1 argument, got 0");
    if (a[0]->is_string()) {
      if (const Value* v = self.dict().Find(a[0]->str())) return *v;
    }
    return a[1] ? *a[1] : Value::None();
  }
  GANTRY_RETURN_IF_ERROR(BindArgs(args, absl::StrCat("dict.", name), {}, &a));
  if (name == "copy") return Value::Dict(self.dict());
  ValueList out;
  for (const auto& item : self.dict().items) {
    if (name == "keys") {
      out.push_back(Value::String(item.first));
    } else if (name == "values") {
      out.push_back(item.second);
    } else {
      out.push_back(Value::Tuple({Value::String(item.first), item.second}));
    }
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> ListMethod(const Value& self, const std::string& name, const CallArgs& args) {
  std::vector<absl::optional<Value>> a;
  GANTRY_RETURN_IF_ERROR(BindArgs(args, absl::StrCat("list.", name), {"value"}, &a));
  if (!a[0]) return PyError(absl::StrCat(name, "() takes exactly one argument (0 given)"));
  int64_t count = 0;
  const ValueList& items = self.list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equals(items[i], *a[0])) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return PyError(absl::StrCat(Repr(*a[0]), " is not in list"));
  return Value::Int(count);
}

}  // namespace

bool IsMethod(const Value& obj, const std::string& name) {
  if (obj.is_string()) return In(kStrMethods, name);
  if (obj.is_dict()) return In(kDictMethods, name) || In(kDictUnsafe, name);
  if (obj.is_sequence()) {
    return In(kListMethods, name) || (obj.kind() == Value::Kind::kList && In(kListUnsafe, name));
  }
  return false;
}

Value BindMethod(const Value& obj, const std::string& name) {
  if ((obj.is_dict() && In(kDictUnsafe, name)) || (obj.is_sequence() && In(kListUnsafe, name))) {
    return Value::Undefined(absl::StrCat("access to attribute '", name, "' of '", TypeName(obj),
                                         "' object is unsafe."));
  }
  Callable c;
  c.kind = Callable::Kind::kMethod;
  c.name = name;
  c.self = obj;
  return Value::MakeCallable(std::move(c));
}

absl::StatusOr<Value> CallMethod(Env& env, const Value& self, const std::string& name,
                                 const CallArgs& args) {
  if (self.is_string()) return StrMethod(env, self.str(), name, args);
  if (self.is_dict()) return DictMethod(self, name, args);
  if (self.is_sequence()) return ListMethod(self, name, args);
  if (self.is_loop() && name == "cycle") {
    if (args.pos.empty()) return PyError("no items for cycling given");
    return args.pos[static_cast<size_t>(self.loop().index0) % args.pos.size()];
  }
  return PyError(absl::StrCat("'", TypeName(self), "' object has no attribute '", name, "'"));
}

bool IsBuiltin(const std::string& name) { return In(kBuiltins, name); }

Value BuiltinValue(const std::string& name) {
  Callable c;
  c.kind = Callable::Kind::kBuiltin;
  c.name = name;
  return Value::MakeCallable(std::move(c));
}

absl::StatusOr<Value> CallBuiltin(Env& env, const std::string& name, const CallArgs& args) {
  if (name == "range") {
    if (!args.kw.empty()) return PyError("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3) return PyError("range expected 1 to 3 arguments");
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < args.pos.size(); ++i) {
      GANTRY_ASSIGN_OR_RETURN(v[i], IntArg(args.pos[i], 0));
    }
    int64_t start = 0, stop = v[0], step = 1;
    if (args.pos.size() >= 2) {
      start = v[0];
      stop = v[1];
    }
    if (args.pos.size() == 3) step = v[2];
    if (step == 0) return PyError("range() arg 3 must not be zero");
    // Length computed in floating point first: no overflow for any int64 bounds.
    double span = (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step);
    if (span > static_cast<double>(env.options().max_range)) {
      return PyError(absl::StrCat("Range too big. The sandbox blocks ranges larger than MAX_RANGE (",
                                  env.options().max_range, ")."));
    }
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(Value::Int(i));
      if ((step > 0 && stop - i <= step) || (step < 0 && i - stop <= -step)) break;
    }
    return Value::List(std::move(out));
  }
  if (name == "namespace" || name == "dict") {
    DictData d;
    if (args.pos.size() > 1) return PyError(absl::StrCat(name, " expected at most 1 argument"));
    if (!args.pos.empty()) {
      const Value& init = args.pos[0];
      if (init.is_dict()) {
        d = init.dict();
      } else {
        GANTRY_ASSIGN_OR_RETURN(ValueList pairs, Iterate(init));
        for (const Value& p : pairs) {
          if (!p.is_sequence() || p.list().size() != 2 || !p.list()[0].is_string()) {
            return PyError("dictionary update sequence element has wrong form");
          }
          d.Set(p.list()[0].str(), p.list()[1]);
        }
      }
    }
    for (const auto& kw : args.kw) d.Set(kw.first, kw.second);
    for (const auto& item : d.items) {
      if (name == "namespace" && item.second.has_namespace()) {
        return PyError("a namespace cannot hold a namespace or loop");
      }
    }
    return name == "namespace" ? Value::Namespace(std::move(d)) : Value::Dict(std::move(d));
  }
  if (name == "raise_exception") {
    std::vector<absl::optional<Value>> a;
    GANTRY_RETURN_IF_ERROR(BindArgs(args, name, {"message"}, &a));
    return PyError(a[0] ? ToStr(*a[0]) : std::string());
  }
  if (name == "strftime_now") {
    std::vector<absl::optional<Value>> a;
    GANTRY_RETURN_IF_ERROR(BindArgs(args, name, {"format"}, &a));
    GANTRY_ASSIGN_OR_RETURN(std::string fmt, StrArg(a[0], "strftime() argument 1"));
    if (fmt.size() > 256) return PyError("strftime format is too long");
    std::time_t now = env.options().now_for_test >= 0
                          ? static_cast<std::time_t>(env.options().now_for_test)
                          : std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[4096];
    size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    return Value::String(std::string(buf, n));
  }
  return PyError(absl::StrCat("'", name, "' is undefined"));
}

}  // namespace gantry::jinja
