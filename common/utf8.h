// UTF-8 helpers shared by everything that handles text from outside (JSON, logs,
// tokenizers). Strict: overlong forms, surrogates and code points above U+10FFFF are
// invalid.
//
// Thread-safety: pure functions.
#ifndef GANTRY_COMMON_UTF8_H_
#define GANTRY_COMMON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gantry {

// Length (1-4) of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there
// are not one. Precondition: i < s.size(). When `code_point` is given, it receives the
// decoded value.
size_t Utf8SequenceLength(absl::string_view s, size_t i, uint32_t* code_point = nullptr);

bool IsValidUtf8(absl::string_view s);

// `bytes` as valid UTF-8: each byte that does not start a valid sequence becomes U+FFFD
// (bytes from outside, such as tool output or a model's raw text, on their way into
// JSON or a prompt).
std::string SanitizeUtf8(absl::string_view bytes);

// Appends `text` to `out` as a JSON string literal (with quotes): the one JSON string
// escaper (json::AppendQuoted is this). `"`, `\` and the control characters are escaped
// (\b \f \n \r \t by name, the rest as \u00XX); bytes that are not valid UTF-8 become
// U+FFFD, so the output is always valid JSON. With `ensure_ascii`, every non-ASCII
// character is written as \uXXXX (a surrogate pair above U+FFFF), as Python's
// json.dumps does by default.
void AppendJsonString(absl::string_view text, std::string* out, bool ensure_ascii = false);

// The longest prefix of `s` of at most `max_bytes` that does not end inside a UTF-8
// sequence (it backs over continuation bytes only): for keeping the start of a text
// from outside within a bound.
absl::string_view Utf8Prefix(absl::string_view s, size_t max_bytes);

// Appends the UTF-8 encoding of `code_point`. Precondition: a Unicode scalar value.
void AppendUtf8(uint32_t code_point, std::string* out);

}  // namespace gantry

#endif  // GANTRY_COMMON_UTF8_H_
