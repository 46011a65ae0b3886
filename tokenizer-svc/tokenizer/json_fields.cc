#include "tokenizer-svc/tokenizer/json_fields.h"

#include "absl/strings/str_cat.h"

namespace gantry::tokenizer {

absl::Status JsonError(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", where, ": ", what));
}

const json::Value* Member(const json::Value& v, absl::string_view key) {
  return v.is_object() ? v.Find(key) : nullptr;
}

absl::StatusOr<bool> BoolOr(const json::Value& v, absl::string_view key, bool fallback,
                            absl::string_view where) {
  const json::Value* m = Member(v, key);
  if (m == nullptr || m->is_null()) return fallback;
  if (!m->is_bool()) return JsonError(absl::StrCat(where, ".", key), "expected true or false");
  return m->as_bool();
}

absl::StatusOr<std::string> StringOr(const json::Value& v, absl::string_view key,
                                     absl::string_view fallback, absl::string_view where) {
  const json::Value* m = Member(v, key);
  if (m == nullptr || m->is_null()) return std::string(fallback);
  if (!m->is_string()) return JsonError(absl::StrCat(where, ".", key), "expected a string");
  return m->as_string();
}

absl::StatusOr<int64_t> IntOr(const json::Value& v, absl::string_view key, int64_t fallback,
                              absl::string_view where) {
  const json::Value* m = Member(v, key);
  if (m == nullptr || m->is_null()) return fallback;
  auto value = m->as_int64();
  if (!m->is_integer() || !value.has_value()) {
    return JsonError(absl::StrCat(where, ".", key), "expected an integer");
  }
  return *value;
}

absl::StatusOr<std::string> TypeOf(const json::Value& v, absl::string_view where) {
  if (!v.is_object()) return JsonError(where, "expected an object");
  const json::Value* type = v.Find("type");
  if (type == nullptr || !type->is_string()) return JsonError(where, "missing \"type\"");
  return type->as_string();
}

}  // namespace gantry::tokenizer
