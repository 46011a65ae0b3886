// The `pre_tokenizer` of tokenizer.json: splits one normalized section of text into the
// pieces ("words") that the model encodes independently.
//
// Supported types: Split (String or Regex pattern; behaviors Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space,
// use_regex with GPT-2's pattern), Metaspace (replacement, prepend_scheme, split),
// Whitespace, WhitespaceSplit, Digits, and Sequence of these. Others fail to load with
// UNIMPLEMENTED.
//
// ByteLevel does not rewrite the pieces into GPT-2's alphabet here: it marks the
// pipeline as byte-level (byte_level()), and the BPE model then works on raw bytes,
// which is equivalent and avoids a copy per piece.
//
// Thread-safety: immutable after FromJson(); Split() may run concurrently.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_PRE_TOKENIZER_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_PRE_TOKENIZER_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "tokenizer-svc/tokenizer/normalizer.h"

namespace gantry::tokenizer {

// Pieces produced by Split(): views into the input or into `storage`.
struct Pieces {
  std::deque<std::string> storage;
  std::vector<absl::string_view> views;
};

class PreTokenizer {
 public:
  // `v` is the value of "pre_tokenizer" (not null).
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const json::Value& v);

  // Replaces out->views with the pieces of `text`; `text` must outlive them.
  // `first_section` says whether `text` starts the input (Metaspace's "first" scheme).
  // Precondition: valid UTF-8. Fails only when a pattern match gives up (see Regex).
  absl::Status Split(absl::string_view text, bool first_section, Pieces* out) const;

  // Whether a ByteLevel step is present: the model then works on raw bytes.
  bool byte_level() const { return byte_level_; }

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Kind { kSplit, kAddPrefixSpace, kMetaspace };
  struct Step {
    Kind kind;
    Pattern pattern;
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    std::string replacement;  // kMetaspace
    int prepend = 0;          // kMetaspace: 0 never, 1 first, 2 always
    bool split = true;        // kMetaspace
  };
  absl::Status AddSteps(const json::Value& v, absl::string_view where);
  absl::Status AddRegexSplit(absl::string_view regex, Behavior behavior, bool invert);
  static absl::Status ApplySplit(const Step& step, absl::string_view piece,
                                 std::vector<absl::string_view>* out);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_PRE_TOKENIZER_H_
