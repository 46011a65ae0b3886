// The "post_processor" of tokenizer.json: what add_special_tokens adds around the ids
// of one sequence (BOS/EOS templates).
//
// Supported: TemplateProcessing ("single" template; its special tokens' ids), BertProcessing
// and RobertaProcessing ([cls] A [sep]), ByteLevel (adds nothing: it only adjusts
// offsets), and Sequence of these. Pair templates are not used (one sequence only).
//
// Thread-safety: immutable after FromJson().
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_POST_PROCESSOR_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_POST_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace gantry::tokenizer {

class PostProcessor {
 public:
  // `v` is the value of "post_processor" (not null). INVALID_ARGUMENT for malformed
  // templates, UNIMPLEMENTED for other types.
  static absl::StatusOr<std::unique_ptr<PostProcessor>> FromJson(const json::Value& v);

  // Wraps `ids` (the encoded sequence) with the template's special tokens.
  void AddSpecialTokens(std::vector<int32_t>* ids) const;

 private:
  // The single-sequence template, flattened: ids to insert, or a marker for the sequence.
  struct Item {
    bool sequence;
    std::vector<int32_t> ids;
  };
  static absl::Status AddItems(const json::Value& v, const std::string& where,
                               std::vector<Item>* items);
  std::vector<Item> items_;
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_POST_PROCESSOR_H_
