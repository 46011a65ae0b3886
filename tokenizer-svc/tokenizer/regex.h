// A compiled pre-tokenizer / normalizer pattern from tokenizer.json, backed by PCRE2
// (UTF + UCP, JIT-compiled when the JIT is available).
//
// Hugging Face writes these patterns for the Rust `regex`/Oniguruma dialects, where
// `\s` is Unicode White_Space. PCRE2's `\s` is not (it misses U+0085), so `\s` and `\S`
// are rewritten to `\p{White_Space}` / `\P{White_Space}` before compiling, inside and
// outside character classes. Everything else is passed to PCRE2 unchanged.
//
// Thread-safety: a Regex is immutable after Compile(); FindAll() may run from many
// threads at once (match state is per call, the JIT stack per thread).
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_REGEX_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::tokenizer {

class Regex {
 public:
  // Compiles `pattern`. INVALID_ARGUMENT with PCRE2's message when it does not compile.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(absl::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of all non-overlapping, non-empty matches in
  // `text`, left to right. Precondition: `text` is valid UTF-8. Fails (RESOURCE_EXHAUSTED
  // or INTERNAL) only when PCRE2 gives up (match limit, JIT stack), never on any text
  // that the patterns of real tokenizers see.
  absl::Status FindAll(absl::string_view text,
                       std::vector<std::pair<size_t, size_t>>* matches) const;

  // The pattern as given to PCRE2 (after the `\s` rewrite). For tests.
  const std::string& compiled_pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// The `\s` -> `\p{White_Space}` rewrite described above. Exposed for tests.
std::string RewriteWhitespaceEscapes(absl::string_view pattern);

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_REGEX_H_
