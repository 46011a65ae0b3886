// Path globs for tool arguments and command operands.
//
// Syntax: `*` matches any run of characters within one path segment (no '/'), `?` one
// character other than '/', `**/` at the start of a segment zero or more whole
// segments, a final `**` the rest of the path (one or more characters, '/' included).
// Every other character matches itself; there are no classes or escapes.
//
// Matching is lexical. A value that is not a clean path (empty, contains NUL, an empty
// segment "//", a "." or ".." segment, or a trailing '/') never matches, so
// "/workspace/../etc/passwd" cannot pass "/workspace/**". Resolving symlinks is the
// sandbox's job (sandbox-svc/), which checks the resolved path against the same globs.
//
// Thread-safety: pure functions.
#ifndef GANTRY_POLICY_PATH_GLOB_H_
#define GANTRY_POLICY_PATH_GLOB_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gantry::policy {

// Whether `path` is clean in the sense above.
bool IsCleanPath(absl::string_view path);

// `operand` as an absolute clean path: itself when absolute, else joined to `cwd`
// (absolute); "." segments dropped, ".." pops one (at "/" it stays, as the kernel
// does). Lexical only: symlinks are not read. "" when the result is not clean (a NUL
// byte, longer than 4096 bytes) or `cwd` is not absolute for a relative operand.
std::string AbsoluteCleanPath(absl::string_view cwd, absl::string_view operand);

// Whether `path` is clean and matches `pattern`. Cost O(|pattern| * |path|) time and
// space; paths longer than 4096 bytes never match.
bool GlobMatch(absl::string_view pattern, absl::string_view path);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_PATH_GLOB_H_
