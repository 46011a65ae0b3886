#include "tokenizer-svc/jinja/runtime/access.h"

#include "absl/strings/str_cat.h"
#include "tokenizer-svc/jinja/py_str.h"
#include "tokenizer-svc/jinja/runtime/env.h"
#include "tokenizer-svc/jinja/runtime/methods.h"

namespace gantry::jinja {
namespace {

// Jinja2's object_type_repr: "None", "dict object", ...
std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return absl::StrCat(TypeName(v), " object");
}

Value Missing(const Value& obj, absl::string_view name) {
  return Value::Undefined(absl::StrCat("'", ObjectTypeRepr(obj), "' has no attribute '", name, "'"));
}

absl::StatusOr<Value> LoopAttr(const Value& obj, const std::string& name) {
  const LoopInfo& l = obj.loop();
  int64_t n = static_cast<int64_t>(l.items->size());
  if (name == "index") return Value::Int(l.index0 + 1);
  if (name == "index0") return Value::Int(l.index0);
  if (name == "revindex") return Value::Int(n - l.index0);
  if (name == "revindex0") return Value::Int(n - l.index0 - 1);
  if (name == "first") return Value::Bool(l.index0 == 0);
  if (name == "last") return Value::Bool(l.index0 == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(l.depth0 + 1);
  if (name == "depth0") return Value::Int(l.depth0);
  if (name == "previtem") {
    if (l.index0 == 0) return Value::Undefined("there is no previous item");
    return (*l.items)[l.index0 - 1];
  }
  if (name == "nextitem") {
    if (l.index0 + 1 >= n) return Value::Undefined("there is no next item");
    return (*l.items)[l.index0 + 1];
  }
  if (name == "cycle") {
    Callable c;
    c.kind = Callable::Kind::kMethod;
    c.name = name;
    c.self = obj;
    return Value::MakeCallable(std::move(c));
  }
  return Missing(obj, name);
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  return PyError(hint.empty() ? "value is undefined" : hint);
}

absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return UndefinedError(obj);
    case Value::Kind::kLoop: return LoopAttr(obj, name);
    case Value::Kind::kNamespace: {
      const Value* v = obj.dict().Find(name);
      return v ? *v : Missing(obj, name);
    }
    case Value::Kind::kDict: {
      if (IsMethod(obj, name)) return BindMethod(obj, name);
      const Value* v = obj.dict().Find(name);
      return v ? *v : Missing(obj, name);
    }
    default:
      if (IsMethod(obj, name)) return BindMethod(obj, name);
      return Missing(obj, name);
  }
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if ((obj.is_sequence() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      std::vector<uint32_t> cps = pystr::CodePoints(obj.str());
      int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("string index out of range");
      return Value::String(pystr::FromCodePoints(cps, i, i + 1));
    }
    int64_t n = static_cast<int64_t>(obj.list().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      return Value::Undefined(absl::StrCat("'", ObjectTypeRepr(obj), "' has no element ", key.as_int()));
    }
    return obj.list()[i];
  }
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(absl::StrCat("'", ObjectTypeRepr(obj), "' has no element ", Repr(key)));
}

absl::StatusOr<Value> Slice(const Value& obj, absl::optional<int64_t> start,
                            absl::optional<int64_t> stop, absl::optional<int64_t> step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (!obj.is_sequence() && !obj.is_string()) {
    return PyError(absl::StrCat("'", TypeName(obj), "' object is not subscriptable"));
  }
  int64_t st = step.value_or(1);
  if (st == 0) return PyError("slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = pystr::CodePoints(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else {
    n = static_cast<int64_t>(obj.list().size());
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](absl::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  // Past the length, every step size gives the same picks; clamping avoids overflow.
  if (st > n) st = n + 1;
  if (st < -n) st = -n - 1;
  int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> picks;
  if (st > 0) {
    for (int64_t i = b; i < e; i += st) picks.push_back(i);
  } else {
    for (int64_t i = b; i > e; i += st) picks.push_back(i);
  }
  if (obj.is_string()) {
    std::vector<uint32_t> out;
    out.reserve(picks.size());
    for (int64_t i : picks) out.push_back(cps[i]);
    return Value::String(pystr::FromCodePoints(out, 0, out.size()));
  }
  ValueList out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(obj.list()[i]);
  return obj.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

absl::StatusOr<ValueList> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return ValueList{};
    case Value::Kind::kList:
    case Value::Kind::kTuple: return v.list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& item : v.dict().items) keys.push_back(Value::String(item.first));
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      const std::string& s = v.str();
      size_t i = 0;
      while (i < s.size()) {
        size_t start = i;
        pystr::NextCodePoint(s, &i);
        chars.push_back(Value::String(s.substr(start, i - start)));
      }
      return chars;
    }
    default: return PyError(absl::StrCat("'", TypeName(v), "' object is not iterable"));
  }
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(pystr::Length(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple: return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict().items.size());
    default: return PyError(absl::StrCat("object of type '", TypeName(v), "' has no len()"));
  }
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return PyError(absl::StrCat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.list()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.dict().Find(item.str()) != nullptr;
    default:
      return PyError(absl::StrCat("argument of type '", TypeName(container), "' is not iterable"));
  }
}

}  // namespace gantry::jinja
