// The merge list of a SentencePiece BPE vocabulary, rebuilt from its pieces and scores
// (what a GGUF's tokenizer.ggml.tokens / tokenizer.ggml.scores keep of it).
//
// Hugging Face's converter turns a SentencePiece model into tokenizer.json merges this
// way: every split of a piece into two pieces that are both in the vocabulary is a
// merge, and merges are ranked by the score of the piece they produce (higher first);
// merges of one piece are ordered by the ids of their left then right parts; pieces of
// equal score keep their id order. That is also llama.cpp's rule for SentencePiece
// (merge the adjacent pair whose concatenation has the best score), so the ids equal
// those of the model's tokenizer.json.
//
// Thread-safety: a pure function.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_SPM_MERGES_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_SPM_MERGES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gantry::tokenizer {

struct SpmPiece {
  std::string text;  // empty: no piece at this id (it takes part in no merge)
  double priority;   // the piece's score; higher merges first
};

// The merges as (left id, right id), best first. A piece is looked up by its first id.
// Pieces longer than kMaxSpmPieceBytes are not split (real vocabularies stay under
// about 100 bytes). RESOURCE_EXHAUSTED when the vocabulary would need more than
// kMaxSpmSplitChecks split lookups or yield more than kMaxSpmMerges merges (a hostile
// file; Gemma 3, the largest we know, needs 1.2 million lookups for 515,000 merges).
constexpr size_t kMaxSpmPieceBytes = 1024;
constexpr uint64_t kMaxSpmSplitChecks = 16u << 20;
constexpr size_t kMaxSpmMerges = 2u << 20;
absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> SpmMerges(const std::vector<SpmPiece>& pieces);

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_SPM_MERGES_H_
