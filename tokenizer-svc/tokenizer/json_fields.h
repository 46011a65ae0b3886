// Typed access to the members of tokenizer.json objects, with errors that name the
// member ("pre_tokenizer.pattern: expected a string"). Internal to this package.
//
// Thread-safety: pure functions.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_JSON_FIELDS_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_JSON_FIELDS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace gantry::tokenizer {

// INVALID_ARGUMENT "tokenizer.json: <where>: <what>".
absl::Status JsonError(absl::string_view where, absl::string_view what);

// The member `key` of object `v` (nullptr when `v` is not an object or lacks it).
const json::Value* Member(const json::Value& v, absl::string_view key);

// Optional members: absent or null gives `fallback`; a wrong type is an error.
absl::StatusOr<bool> BoolOr(const json::Value& v, absl::string_view key, bool fallback,
                            absl::string_view where);
absl::StatusOr<std::string> StringOr(const json::Value& v, absl::string_view key,
                                     absl::string_view fallback, absl::string_view where);
absl::StatusOr<int64_t> IntOr(const json::Value& v, absl::string_view key, int64_t fallback,
                              absl::string_view where);

// The "type" member, required.
absl::StatusOr<std::string> TypeOf(const json::Value& v, absl::string_view where);

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_JSON_FIELDS_H_
