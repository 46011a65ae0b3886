#include "tokenizer-svc/jinja/value.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "tokenizer-svc/jinja/py_str.h"

namespace gantry::jinja {
namespace {

const std::string& EmptyString() {
  static const std::string* empty = new std::string();
  return *empty;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return json::PythonFloatRepr(d);
}

void AppendRepr(const Value& v, std::string* out);

void AppendItems(const ValueList& items, std::string* out) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out->append(", ");
    AppendRepr(items[i], out);
  }
}

void AppendDict(const DictData& d, std::string* out) {
  out->push_back('{');
  for (size_t i = 0; i < d.items.size(); ++i) {
    if (i) out->append(", ");
    out->append(pystr::Repr(d.items[i].first));
    out->append(": ");
    AppendRepr(d.items[i].second, out);
  }
  out->push_back('}');
}

void AppendRepr(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: out->append("Undefined"); return;
    case Value::Kind::kString: out->append(pystr::Repr(v.str())); return;
    case Value::Kind::kList:
      out->push_back('[');
      AppendItems(v.list(), out);
      out->push_back(']');
      return;
    case Value::Kind::kTuple:
      out->push_back('(');
      AppendItems(v.list(), out);
      if (v.list().size() == 1) out->push_back(',');
      out->push_back(')');
      return;
    case Value::Kind::kDict: AppendDict(v.dict(), out); return;
    case Value::Kind::kNamespace:
      out->append("<Namespace ");
      AppendDict(v.dict(), out);
      out->push_back('>');
      return;
    default: out->append(ToStr(v)); return;
  }
}

template <typename T>
int Cmp(T a, T b) { return a < b ? -1 : (b < a ? 1 : 0); }

}  // namespace

const Value* DictData::Find(absl::string_view key) const {
  for (const auto& item : items) {
    if (item.first == key) return &item.second;
  }
  return nullptr;
}

void DictData::Set(std::string key, Value value) {
  for (auto& item : items) {
    if (item.first == key) {
      item.second = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  v.i_ = b ? 1 : 0;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::List(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  for (const Value& item : items) {
    v.depth_ = std::max(v.depth_, item.depth_);
    v.has_ns_ = v.has_ns_ || item.has_ns_;
  }
  ++v.depth_;
  v.ptr_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::Dict(DictData data) {
  Value v;
  v.kind_ = Kind::kDict;
  for (const auto& item : data.items) {
    v.depth_ = std::max(v.depth_, item.second.depth_);
    v.has_ns_ = v.has_ns_ || item.second.has_ns_;
  }
  ++v.depth_;
  v.ptr_ = std::make_shared<DictData>(std::move(data));
  return v;
}

Value Value::Namespace(DictData data) {
  Value v = Dict(std::move(data));
  v.kind_ = Kind::kNamespace;
  v.has_ns_ = true;
  return v;
}

Value Value::MakeCallable(Callable c) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.has_ns_ = c.self.has_ns_;
  v.depth_ = c.self.depth_ + 1;
  v.ptr_ = std::make_shared<Callable>(std::move(c));
  return v;
}

Value Value::Loop(LoopInfo info) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.has_ns_ = true;  // its items may hold namespaces: never stored in one
  v.depth_ = 1;  // no walk (str, ==, tojson) recurses into a loop's items
  v.ptr_ = std::make_shared<LoopInfo>(std::move(info));
  return v;
}

double Value::as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
const std::string& Value::str() const { return *static_cast<const std::string*>(ptr_.get()); }
const ValueList& Value::list() const { return *static_cast<const ValueList*>(ptr_.get()); }
const DictData& Value::dict() const { return *static_cast<const DictData*>(ptr_.get()); }
DictData& Value::mutable_namespace() const { return *static_cast<DictData*>(ptr_.get()); }
const Callable& Value::callable() const { return *static_cast<const Callable*>(ptr_.get()); }
const LoopInfo& Value::loop() const { return *static_cast<const LoopInfo*>(ptr_.get()); }
const std::string& Value::undefined_hint() const {
  return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : EmptyString();
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.as_bool();
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_float() != 0;
    case Value::Kind::kString: return !v.str().empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple: return !v.list().empty();
    case Value::Kind::kDict: return !v.dict().items.empty();
    default: return true;
  }
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable:
      return v.callable().kind == Callable::Kind::kMacro ? "Macro" : "function";
    case Value::Kind::kLoop: return "LoopContext";
  }
  return "object";
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return FloatRepr(v.as_float());
    case Value::Kind::kString: return v.str();
    case Value::Kind::kCallable: {
      const Callable& c = v.callable();
      if (c.kind == Callable::Kind::kMacro) return absl::StrCat("<Macro '", c.name, "'>");
      if (c.kind == Callable::Kind::kMethod) {
        return absl::StrCat("<built-in method ", c.name, " of ", TypeName(c.self), " object>");
      }
      return absl::StrCat("<function ", c.name, ">");
    }
    case Value::Kind::kLoop: {
      const LoopInfo& l = v.loop();
      return absl::StrCat("<LoopContext ", l.index0 + 1, "/", l.items ? l.items->size() : 0, ">");
    }
    default: {
      std::string out;
      AppendRepr(v, &out);
      return out;
    }
  }
}

std::string Repr(const Value& v) {
  std::string out;
  AppendRepr(v, &out);
  return out;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const ValueList& x = a.list();
      const ValueList& y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& item : x.items) {
        const Value* other = y.Find(item.first);
        if (other == nullptr || !Equals(item.second, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

absl::StatusOr<int> Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every test false
      return Cmp(x, y);
    }
    return Cmp(a.as_int(), b.as_int());
  }
  if (a.is_string() && b.is_string()) return Cmp(a.str().compare(b.str()), 0);
  if (a.kind() == b.kind() && a.is_sequence()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Compare(x[i], y[i]);
    }
    return Cmp(x.size(), y.size());
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'<' not supported between instances of '", TypeName(a), "' and '", TypeName(b), "'"));
}

Value FromJson(const json::Value& v) {
  switch (v.type()) {
    case json::Type::kNull: return Value::None();
    case json::Type::kBool: return Value::Bool(v.as_bool());
    case json::Type::kNumber:
      if (v.is_integer()) {
        if (auto i = v.as_int64()) return Value::Int(*i);
      }
      return Value::Float(v.as_double());
    case json::Type::kString: return Value::String(v.as_string());
    case json::Type::kArray: {
      ValueList items;
      items.reserve(v.items().size());
      for (const json::Value& item : v.items()) items.push_back(FromJson(item));
      return Value::List(std::move(items));
    }
    case json::Type::kObject: {
      DictData d;
      d.items.reserve(v.members().size());
      for (const auto& m : v.members()) d.items.emplace_back(m.first, FromJson(m.second));
      return Value::Dict(std::move(d));
    }
  }
  return Value::None();
}

absl::StatusOr<json::Value> ToJson(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone: return json::Value();
    case Value::Kind::kBool: return json::Value::Bool(v.as_bool());
    case Value::Kind::kInt: return json::Value::Int(v.as_int());
    case Value::Kind::kFloat: {
      double d = v.as_float();
      if (std::isnan(d)) return json::Value::NumberFromLiteral("NaN");
      if (std::isinf(d)) return json::Value::NumberFromLiteral(d > 0 ? "Infinity" : "-Infinity");
      return json::Value::Double(d);
    }
    case Value::Kind::kString: return json::Value::String(v.str());
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      json::Value out = json::Value::EmptyArray();
      for (const Value& item : v.list()) {
        absl::StatusOr<json::Value> j = ToJson(item);
        if (!j.ok()) return j.status();
        out.Append(*std::move(j));
      }
      return out;
    }
    case Value::Kind::kDict: {
      json::Value out = json::Value::EmptyObject();
      for (const auto& item : v.dict().items) {
        absl::StatusOr<json::Value> j = ToJson(item.second);
        if (!j.ok()) return j.status();
        out.members().emplace_back(item.first, *std::move(j));
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Object of type ", TypeName(v), " is not JSON serializable"));
  }
}

}  // namespace gantry::jinja
