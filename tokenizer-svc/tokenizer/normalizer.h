// The `normalizer` of tokenizer.json: text rewriting before pre-tokenization.
//
// Supported types: NFC, NFD, NFKC, NFKD (ICU), Lowercase (ICU full case mapping),
// Replace (a String or Regex pattern), Prepend, Strip, and Sequence of these. Others
// (Precompiled, BertNormalizer, StripAccents, NMT) fail to load with UNIMPLEMENTED.
//
// Thread-safety: immutable after FromJson(); Normalize() may run concurrently.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_NORMALIZER_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_NORMALIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "tokenizer-svc/tokenizer/regex.h"

namespace gantry::tokenizer {

// Shared by the normalizer, pre-tokenizer and decoder: a {"String": s} or
// {"Regex": r} pattern.
struct Pattern {
  std::string literal;            // when regex == nullptr
  std::unique_ptr<Regex> regex;   // when set
  // Appends the [begin, end) ranges of the non-overlapping matches in `text`.
  absl::Status FindAll(absl::string_view text,
                       std::vector<std::pair<size_t, size_t>>* matches) const;
};
absl::StatusOr<Pattern> ParsePattern(const json::Value& v, absl::string_view where);

class Normalizer {
 public:
  // `v` is the value of "normalizer" (not null). INVALID_ARGUMENT for malformed
  // members, UNIMPLEMENTED for unsupported types.
  static absl::StatusOr<std::unique_ptr<Normalizer>> FromJson(const json::Value& v);

  // Rewrites `text` in place. Precondition: valid UTF-8; the result is valid UTF-8.
  absl::Status Normalize(std::string* text) const;

  // A factor k such that normalized text has at least 1/k of the input's bytes, or 0
  // when none holds (Replace and Strip may remove any amount). Per step, from the
  // largest shrink of one character or composed sequence in UTF-8: NFC and NFD 3 (a
  // Hangul syllable from three jamo, 9 bytes to 3), NFKC and NFKD 4 (U+1D400 to "A"),
  // Lowercase 3 (the Kelvin sign to "k"), Prepend 1; a Sequence multiplies.
  size_t MaxShrink() const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kReplace, kPrepend, kStrip };
  struct Step {
    Kind kind;
    Pattern pattern;      // kReplace
    std::string content;  // kReplace, kPrepend
    bool left = false, right = false;  // kStrip
  };
  static absl::Status AddSteps(const json::Value& v, absl::string_view where,
                               std::vector<Step>* steps);
  std::vector<Step> steps_;
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_NORMALIZER_H_
