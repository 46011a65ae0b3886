// Python str semantics over UTF-8 text, for the Jinja runtime: templates index, slice,
// strip, split and case-map strings by code point, as Python does.
//
// Input is expected to be UTF-8; an invalid byte is treated as one code point of that
// byte's value (never a crash, never a read past the end). Case mapping covers ASCII,
// Latin-1, Latin Extended-A, Greek and Cyrillic (one-to-one mappings, plus "ß".upper() ==
// "SS"; other one-to-many mappings and Greek final-sigma rules are not reproduced).
//
// Thread-safety: pure functions.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_PY_STR_H_
#define GANTRY_TOKENIZER_SVC_JINJA_PY_STR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gantry::jinja::pystr {

// Decodes the code point at s[*i] and advances *i (by 1 for an invalid byte).
uint32_t NextCodePoint(absl::string_view s, size_t* i);
std::vector<uint32_t> CodePoints(absl::string_view s);
std::string FromCodePoints(const std::vector<uint32_t>& cps, size_t begin, size_t end);
size_t Length(absl::string_view s);  // in code points

// Python str.isspace() for one code point.
bool IsSpace(uint32_t cp);
// Python's line-break code points (str.splitlines()).
bool IsLineBreak(uint32_t cp);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace, present strips any of
// its code points.
std::string Strip(absl::string_view s, const absl::optional<std::string>& chars, bool left,
                  bool right);
// str.split(sep=None, maxsplit=-1) / str.rsplit. Precondition: sep, when given, is not
// empty (callers report Python's "empty separator" error).
std::vector<std::string> Split(absl::string_view s, const absl::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right);
// str.replace(old, new, count); an empty `old` inserts between code points as Python.
std::string Replace(absl::string_view s, absl::string_view old_text,
                    absl::string_view new_text, int64_t count);

std::string Upper(absl::string_view s);
std::string Lower(absl::string_view s);
// str.capitalize(), str.title(), Jinja's title filter (words start after - space ( { [ <).
std::string Capitalize(absl::string_view s);
std::string Title(absl::string_view s);
std::string JinjaTitle(absl::string_view s);
bool IsLower(absl::string_view s);
bool IsUpper(absl::string_view s);
bool IsAlpha(absl::string_view s);   // letters as far as the case tables know, plus CJK
bool IsDigit(absl::string_view s);   // ASCII digits
bool IsAlnum(absl::string_view s);

// Python repr() of a str: single quotes unless the text has ' and no ", escapes for
// backslash, quotes, \t \n \r and non-printable code points.
std::string Repr(absl::string_view s);

}  // namespace gantry::jinja::pystr

#endif  // GANTRY_TOKENIZER_SVC_JINJA_PY_STR_H_
