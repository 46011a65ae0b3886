// The "added_tokens" of tokenizer.json: tokens matched in the raw text before the
// normalizer and the model see it (control tokens like <|im_start|>, and non-special
// additions like Qwen's <tool_call>).
//
// Matching is leftmost-longest over a byte trie, as in Hugging Face: tokens with
// normalized=false are matched in the raw text; the text between them is normalized,
// then tokens with normalized=true are matched in that (against their normalized
// content). Flags: lstrip / rstrip extend a match over the Unicode whitespace to its
// left / right (that whitespace is absorbed by the token); single_word accepts a match
// only when no word character (letter, digit, '_') touches it on either side.
// When `split_special` is set, tokens with special=true are not matched at all, so
// their text goes through the model as plain text (the safe mode for user content).
//
// Thread-safety: immutable after construction; Split() may run concurrently.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_ADDED_TOKENS_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_ADDED_TOKENS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "tokenizer-svc/tokenizer/normalizer.h"

namespace gantry::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

class AddedVocabulary {
 public:
  // A run of text (id < 0) or one matched token, as byte offsets into the input.
  struct Segment {
    size_t begin;
    size_t end;
    int32_t id;
  };

  AddedVocabulary() = default;

  // `v` is the value of "added_tokens" (an array, or null for none). `normalizer` (may be
  // nullptr) normalizes the content of normalized=true tokens for matching.
  // INVALID_ARGUMENT for malformed entries; ids must be in [0, id_limit).
  static absl::StatusOr<AddedVocabulary> FromJson(const json::Value* v, const Normalizer* normalizer,
                                                  int64_t id_limit);

  // Byte ranges [first, second) in which special tokens are not matched (sorted).
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  // Whether [begin, end) overlaps one of the sorted `ranges`.
  static bool Overlaps(const Ranges& ranges, size_t begin, size_t end);

  // Splits `text` into segments with the tokens whose `normalized` flag equals
  // `normalized_set`. Empty text segments are dropped. With `split_special`, special
  // tokens are text everywhere; a special token whose match overlaps one of
  // `literal` (may be null) is text there.
  void Split(absl::string_view text, bool normalized_set, bool split_special,
             std::vector<Segment>* out, const Ranges* literal = nullptr) const;

  // Appends to `out` the byte range of each occurrence of a special token's text in
  // `text` (leftmost-longest, not overlapping; lstrip/rstrip/single_word ignored).
  void FindSpecial(absl::string_view text, Ranges* out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // The token with this id, or nullptr.
  const AddedToken* Find(int32_t id) const;
  // The id of the token with this content, or -1.
  int32_t FindContent(absl::string_view content) const;

 private:
  struct Trie {
    // (node << 8 | byte) -> child node; node 0 is the root.
    absl::flat_hash_map<uint64_t, int32_t> edges;
    std::vector<int32_t> terminal;  // token index per node, or -1
    bool first_byte[256] = {};
    void Insert(absl::string_view key, int32_t token_index);
  };
  // Calls visit(token index, end) for each token of `trie` that `text` spells from
  // `pos`, shortest first.
  template <typename Visit>
  static void Walk(const Trie& trie, absl::string_view text, size_t pos, Visit visit);
  // The longest match starting at `pos`, or -1; `*end` receives its end.
  int32_t LongestMatch(const Trie& trie, absl::string_view text, size_t pos, bool split_special,
                       const Ranges* literal, size_t* end) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, int32_t> by_id_;  // id -> index in tokens_
  Trie raw_trie_;
  Trie normalized_trie_;
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_ADDED_TOKENS_H_
