// Internal to the interpreter: Jinja2's sandboxed attribute and item access, slicing,
// iteration, len() and `in`, with Python's results and messages.
//
// GetAttr (`x.name`): dict and str methods first (as Python's getattr), then dict
// keys; missing -> undefined carrying Jinja's "'dict object' has no attribute 'x'".
// GetItem (`x[key]`): the item first, then a string key falls back to GetAttr.
// Both fail on an undefined operand ("'x' is undefined"), as Jinja2's Undefined does.
// Mutating methods of lists and dicts give an undefined that fails with Jinja2's
// SecurityError message when called.
//
// Thread-safety: pure functions.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_ACCESS_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_ACCESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

// The error an undefined raises when used: its hint, or "value is undefined".
absl::Status UndefinedError(const Value& undefined);

absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// Python slicing of lists, tuples and strings (by code point). Absent parts are None.
absl::StatusOr<Value> Slice(const Value& obj, absl::optional<int64_t> start,
                            absl::optional<int64_t> stop, absl::optional<int64_t> step);
// The items a for loop sees: list/tuple items, dict keys, string characters; an
// undefined is empty. Others: "'int' object is not iterable".
absl::StatusOr<ValueList> Iterate(const Value& v);
// len(): code points for strings; 0 for undefined.
absl::StatusOr<int64_t> Length(const Value& v);
// `item in container`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_ACCESS_H_
