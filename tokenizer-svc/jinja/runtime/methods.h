// Internal to the interpreter: Python methods templates call on values
// (str.startswith, dict.items, ...), Jinja2's and Hugging Face's global functions
// (range, namespace, dict, raise_exception, strftime_now), loop.cycle, and Python's
// str.format and %-formatting.
//
// Supported str methods: startswith endswith split rsplit strip lstrip rstrip lower
// upper title capitalize swapcase replace format find rfind index rindex count join
// center ljust rjust zfill splitlines isdigit isalpha isalnum isspace islower isupper
// isnumeric isdecimal casefold. dict: get keys values items copy. list/tuple: index
// count. Mutating list/dict methods fail as under Jinja2's immutable sandbox.
//
// Thread-safety: pure functions of their arguments and the Env.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_METHODS_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_METHODS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tokenizer-svc/jinja/runtime/env.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

// Whether `obj.name` is a method (safe or not) of obj's Python type.
bool IsMethod(const Value& obj, const std::string& name);
// A bound method value, or, for a mutating method, an undefined whose use fails with
// Jinja2's SecurityError message.
Value BindMethod(const Value& obj, const std::string& name);
absl::StatusOr<Value> CallMethod(Env& env, const Value& self, const std::string& name,
                                 const CallArgs& args);

bool IsBuiltin(const std::string& name);
Value BuiltinValue(const std::string& name);
// raise_exception fails with its message as a TemplateError-ready plain status whose
// reason is "raise_exception" so that the interpreter keeps the message as given.
absl::StatusOr<Value> CallBuiltin(Env& env, const std::string& name, const CallArgs& args);

// Python `format % args` (args a tuple or one value).
absl::StatusOr<std::string> PercentFormat(Env& env, const std::string& format, const Value& args);
// Python str.format(*args, **kwargs).
absl::StatusOr<std::string> BraceFormat(Env& env, const std::string& format, const CallArgs& args);

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_METHODS_H_
