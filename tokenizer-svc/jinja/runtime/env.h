// Internal to the interpreter: the state one render carries (limits and budgets), call
// arguments, and Python-style argument binding, shared by the interpreter, the filters,
// the tests and the methods.
//
// Errors raised below the interpreter are plain INVALID_ARGUMENT statuses with Python's
// message; the interpreter adds the template line (error.h) where it catches them.
//
// Thread-safety: one Env per render, used on one thread.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_ENV_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_ENV_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/status.h"
#include "tokenizer-svc/jinja/runtime/interpreter.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Env {
 public:
  explicit Env(const RenderOptions& options) : options_(options) {}
  const RenderOptions& options() const { return options_; }

  // One unit of interpretation work (a statement, an expression node, a loop turn).
  absl::Status Step() {
    if (++steps_ > options_.max_steps) return Limit("the render took too many steps");
    return absl::OkStatus();
  }
  // Bytes of text produced (outputs, concatenations, conversions).
  absl::Status Charge(size_t bytes) {
    work_bytes_ += bytes;
    if (work_bytes_ > options_.max_work_bytes) return Limit("the render produced too much text");
    return absl::OkStatus();
  }
  // A new string value of `bytes` (checked before building it where possible).
  absl::Status CheckString(size_t bytes) {
    if (bytes > options_.max_string_bytes) return Limit("a string grew beyond the limit");
    return Charge(bytes);
  }
  // A new container value: its nesting and its length.
  absl::Status CheckValue(const Value& v) {
    if (v.depth() > options_.max_value_depth) return Limit("a value is nested too deeply");
    if (v.is_sequence() && v.list().size() > options_.max_list_items) {
      return Limit("a list grew beyond the limit");
    }
    return absl::OkStatus();
  }

  static absl::Status Limit(absl::string_view what) {
    return absl::ResourceExhaustedError(what);
  }

 private:
  RenderOptions options_;
  int64_t steps_ = 0;
  uint64_t work_bytes_ = 0;
};

// Binds `args` to `params` like a Python signature without *args/**kwargs: positional
// first, then by name. out[i] is absent when parameter i was not given. Errors (as
// Python phrases them): too many positional arguments, unexpected keyword, repeated.
absl::Status BindArgs(const CallArgs& args, absl::string_view function,
                      const std::vector<const char*>& params,
                      std::vector<absl::optional<Value>>* out);

// Shorthand: a plain INVALID_ARGUMENT with `message` (a Python TypeError/ValueError).
inline absl::Status PyError(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_ENV_H_
