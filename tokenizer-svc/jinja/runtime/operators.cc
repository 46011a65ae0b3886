#include "tokenizer-svc/jinja/runtime/operators.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "tokenizer-svc/jinja/runtime/access.h"
#include "tokenizer-svc/jinja/runtime/methods.h"

namespace gantry::jinja {
namespace {

absl::Status Unsupported(const std::string& op, const Value& a, const Value& b) {
  return PyError(absl::StrCat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '",
                              TypeName(b), "'"));
}

absl::Status Overflow() { return PyError("integer overflow"); }

// Python's floored modulo and division for floats.
double FloorMod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  if (r == 0) r = std::copysign(0.0, b);
  return r;
}

absl::StatusOr<Value> Repeat(Env& env, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    size_t len = seq.str().size();
    if (len != 0 && static_cast<uint64_t>(n) > env.options().max_string_bytes / len) {
      return Env::Limit("a string grew beyond the limit");
    }
    GANTRY_RETURN_IF_ERROR(env.CheckString(len * static_cast<size_t>(n)));
    std::string out;
    out.reserve(len * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  size_t len = seq.list().size();
  if (len != 0 && static_cast<uint64_t>(n) > env.options().max_list_items / len) {
    return Env::Limit("a list grew beyond the limit");
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return seq.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

absl::StatusOr<Value> Power(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float() && b.as_int() >= 0) {
    int64_t base = a.as_int(), exp = b.as_int(), result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) return Overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
    }
    return Value::Int(result);
  }
  double x = a.as_double(), y = b.as_double();
  if (x == 0 && y < 0) return PyError("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) return PyError("complex results are not supported");
  double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) return PyError("(34, 'Numerical result out of range')");
  return Value::Float(r);
}

}  // namespace

absl::StatusOr<Value> UnaryOp(char op, const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_float()) return Value::Float(op == '-' ? -v.as_float() : v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (op == '+') return Value::Int(v.as_int());
    if (v.as_int() == INT64_MIN) return Overflow();
    return Value::Int(-v.as_int());
  }
  return PyError(absl::StrCat("bad operand type for unary ", std::string(1, op), ": '", TypeName(v), "'"));
}

absl::StatusOr<Value> BinaryOp(Env& env, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    // Jinja's concat: str() of both sides; undefined is "".
    std::string left = ToStr(a), right = ToStr(b);
    GANTRY_RETURN_IF_ERROR(env.CheckString(left.size() + right.size()));
    return Value::String(left + right);
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (op == "%" && a.is_string()) {
    GANTRY_ASSIGN_OR_RETURN(std::string out, PercentFormat(env, a.str(), b));
    return Value::String(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool())) {
    return Repeat(env, a, b.as_int());
  }
  if (op == "*" && (b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool())) {
    return Repeat(env, b, a.as_int());
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      GANTRY_RETURN_IF_ERROR(env.CheckString(a.str().size() + b.str().size()));
      return Value::String(a.str() + b.str());
    }
    if (a.is_sequence() && a.kind() == b.kind()) {
      if (a.list().size() + b.list().size() > env.options().max_list_items) {
        return Env::Limit("a list grew beyond the limit");
      }
      ValueList items = a.list();
      items.insert(items.end(), b.list().begin(), b.list().end());
      return a.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
    if (a.is_string() && !b.is_number()) {
      return PyError(absl::StrCat("can only concatenate str (not \"", TypeName(b), "\") to str"));
    }
    if (a.is_sequence() && !b.is_number()) {
      return PyError(absl::StrCat("can only concatenate ", TypeName(a), " (not \"", TypeName(b), "\") to ",
                                  TypeName(a)));
    }
  }
  if (!a.is_number() || !b.is_number()) {
    if (a.is_string() && op == "+") {
      return PyError(absl::StrCat("can only concatenate str (not \"", TypeName(b), "\") to str"));
    }
    return Unsupported(op, a, b);
  }
  bool floats = a.is_float() || b.is_float();
  if (op == "**") return Power(a, b);
  if (op == "/") {
    if (b.as_double() == 0) return PyError("division by zero");
    return Value::Float(a.as_double() / b.as_double());
  }
  if (floats) {
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (y == 0) return PyError(op == "//" ? "float floor division by zero" : "float modulo");
    if (op == "//") {
      // CPython's float_floor_div (via divmod).
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
      double floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
      if (div == 0) floordiv = std::copysign(0.0, x / y);
      return Value::Float(floordiv);
    }
    if (op == "%") return Value::Float(FloorMod(x, y));
  } else {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (y == 0) return PyError("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) {
      if (op == "//") return Overflow();
      return Value::Int(0);
    }
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    if (op == "//") return Value::Int(q);
    if (op == "%") return Value::Int(m);
  }
  return Unsupported(op, a, b);
}

absl::StatusOr<bool> CompareOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in" || op == "notin") {
    GANTRY_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return op == "in" ? in : !in;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  absl::StatusOr<int> c = Compare(a, b);
  if (!c.ok()) {
    return PyError(absl::StrCat("'", op, "' not supported between instances of '", TypeName(a), "' and '",
                                TypeName(b), "'"));
  }
  if (*c == 2) return false;  // NaN
  if (op == "<") return *c < 0;
  if (op == "<=") return *c <= 0;
  if (op == ">") return *c > 0;
  if (op == ">=") return *c >= 0;
  return PyError(absl::StrCat("unknown comparison ", op));
}

}  // namespace gantry::jinja
