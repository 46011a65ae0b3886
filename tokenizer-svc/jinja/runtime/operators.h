// Internal to the interpreter: Python's arithmetic, concatenation and comparison
// operators on runtime values, with Python's results and TypeError messages. Integer
// arithmetic that would leave int64 fails ("integer overflow") instead of growing into
// a big integer as Python would.
//
// Thread-safety: pure functions of their arguments and the Env.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_OPERATORS_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_OPERATORS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tokenizer-svc/jinja/runtime/env.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

// op: '-' or '+'.
absl::StatusOr<Value> UnaryOp(char op, const Value& v);
// op: + - * / // % ** ~
absl::StatusOr<Value> BinaryOp(Env& env, const std::string& op, const Value& a, const Value& b);
// op: == != < <= > >= in notin
absl::StatusOr<bool> CompareOp(const std::string& op, const Value& a, const Value& b);

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_OPERATORS_H_
