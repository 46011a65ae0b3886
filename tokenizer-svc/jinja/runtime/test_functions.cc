// Jinja2's tests (`x is defined`, `x is divisibleby 3`); declared in filters.h.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "tokenizer-svc/jinja/py_str.h"
#include "tokenizer-svc/jinja/runtime/access.h"
#include "tokenizer-svc/jinja/runtime/filters.h"

namespace gantry::jinja {
namespace {

const char* const kTests[] = {
    "defined", "undefined", "none", "string", "mapping", "iterable", "number", "integer",
    "float", "sequence", "boolean", "true", "false", "callable", "in", "eq", "equalto", "==",
    "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=",
    "odd", "even", "divisibleby", "sameas", "lower", "upper", "escaped", "filter", "test"};

absl::StatusOr<Value> OneArg(const std::string& name, const CallArgs& args) {
  std::vector<absl::optional<Value>> a;
  GANTRY_RETURN_IF_ERROR(BindArgs(args, name, {"other"}, &a));
  if (!a[0]) return PyError(absl::StrCat("test '", name, "' needs an argument"));
  return *a[0];
}

absl::StatusOr<bool> Ordered(const Value& a, const Value& b, int want_low, int want_high) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  GANTRY_ASSIGN_OR_RETURN(int c, Compare(a, b));
  return c >= want_low && c <= want_high;
}

absl::StatusOr<int64_t> IntOf(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  return PyError(absl::StrCat("unsupported operand type(s) for %: '", TypeName(v), "' and 'int'"));
}

}  // namespace

bool HasTest(const std::string& name) {
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

absl::StatusOr<bool> ApplyTest(Env& env, const std::string& name, const Value& value,
                               const CallArgs& args) {
  (void)env;
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_dict();
  // Undefined is iterable and a sequence in Jinja2 (it defines __iter__, __len__, ...).
  if (name == "iterable") return value.is_string() || value.is_sequence() || value.is_dict() || value.is_undefined();
  if (name == "sequence") return value.is_string() || value.is_sequence() || value.is_dict() || value.is_undefined();
  if (name == "number") return value.is_number();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "callable") return value.is_callable();
  if (name == "escaped") return false;
  if (name == "lower") return pystr::IsLower(ToStr(value));
  if (name == "upper") return pystr::IsUpper(ToStr(value));
  if (name == "filter" || name == "test") {
    if (!value.is_string()) return false;
    return name == "filter" ? HasFilter(value.str()) : HasTest(value.str());
  }
  if (name == "odd" || name == "even") {
    GANTRY_ASSIGN_OR_RETURN(int64_t i, IntOf(value));
    bool odd = (i % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  GANTRY_ASSIGN_OR_RETURN(Value other, OneArg(name, args));
  if (name == "in") {
    return Contains(other, value);
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(value, other);
  if (name == "ne" || name == "!=") return !Equals(value, other);
  if (name == "lt" || name == "<" || name == "lessthan") return Ordered(value, other, -1, -1);
  if (name == "le" || name == "<=") return Ordered(value, other, -1, 0);
  if (name == "gt" || name == ">" || name == "greaterthan") return Ordered(value, other, 1, 1);
  if (name == "ge" || name == ">=") return Ordered(value, other, 0, 1);
  if (name == "sameas") {
    if (value.kind() != other.kind()) return false;
    if (value.is_none() || value.is_undefined()) return true;
    if (value.is_bool()) return value.as_bool() == other.as_bool();
    if (value.is_int()) return value.as_int() == other.as_int();  // small ints are shared in CPython
    return value.identity() != nullptr && value.identity() == other.identity();
  }
  if (name == "divisibleby") {
    if (value.is_float() || other.is_float()) {
      if (!value.is_number() || !other.is_number()) return PyError("divisibleby needs numbers");
      if (other.as_double() == 0) return PyError("float modulo");
      return std::fmod(value.as_double(), other.as_double()) == 0;
    }
    GANTRY_ASSIGN_OR_RETURN(int64_t a, IntOf(value));
    GANTRY_ASSIGN_OR_RETURN(int64_t b, IntOf(other));
    if (b == 0) return PyError("integer division or modulo by zero");
    if (b == -1) return true;
    return a % b == 0;
  }
  return PyError(absl::StrCat("No test named '", name, "'"));
}

}  // namespace gantry::jinja
