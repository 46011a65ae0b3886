// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary, ranked
// merges, byte fallback, unknown token, ignore_merges.
//
// A piece is split into initial symbols, then the adjacent pair with the lowest merge
// rank (leftmost on ties) is merged until no pair has a merge: the order of Hugging
// Face's implementation, done with a min-heap over a linked list of symbols, so a word
// of n symbols costs O(n log n). Initial symbols are, in byte-level mode (a ByteLevel
// pre-tokenizer is present), the tokens of the piece's raw bytes; otherwise its UTF-8
// characters, then byte-fallback tokens <0xXX>, then the unknown token (consecutive
// unknowns fused when fuse_unk), else the character is dropped, as in HF.
//
// Results for short pieces are cached (bounded, sharded, mutex-protected).
//
// Thread-safety: Encode() and the lookups may run concurrently; the cache is internal.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_MODEL_BPE_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_MODEL_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/json.h"

namespace gantry::tokenizer {

class BpeModel {
 public:
  // `model` is the value of "model". `byte_level`: see above. INVALID_ARGUMENT for a
  // malformed vocabulary or merges (a merge whose parts or result are not in the
  // vocabulary, ids out of range); UNIMPLEMENTED for other model types, dropout,
  // continuing_subword_prefix or end_of_word_suffix.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const json::Value& model,
                                                            bool byte_level);

  // Appends the ids of one pre-tokenized piece. Precondition: valid UTF-8 (in
  // byte-level mode, any bytes).
  void Encode(absl::string_view piece, std::vector<int32_t>* ids) const;

  // One more than the largest id in the vocabulary.
  int32_t id_end() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The token's text as written in tokenizer.json, or nullptr for an unused id.
  const std::string* TokenText(int32_t id) const;
  // The id of `token` (as written in tokenizer.json).
  absl::optional<int32_t> TokenId(absl::string_view token) const;
  bool byte_level() const { return byte_level_; }
  // The most bytes of a piece one token of Encode() can stand for: a piece of n bytes
  // gives at least ceil(n / this) ids. 0 when there is no such bound: a character that
  // is dropped (no unknown token, no byte fallback for it) or a run of unknowns fused
  // into one token gives fewer.
  size_t max_bytes_per_token() const { return max_bytes_per_token_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  struct CacheShard {
    // std::mutex, not absl::Mutex: this lock is taken once per piece, and the system's
    // Abseil build does deadlock bookkeeping on every absl::Mutex::Lock (a fifth of an
    // encode's time went there).
    std::mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> map;
  };
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheEntriesPerShard = 8192;
  static constexpr size_t kMaxCachedPieceBytes = 128;

  BpeModel() = default;
  void EncodeUncached(absl::string_view piece, std::vector<int32_t>* ids) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;
  size_t BoundBytesPerToken() const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  absl::flat_hash_map<std::string, int32_t> raw_vocab_;  // byte-level: raw bytes -> id
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_used_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  // Byte-level: the token of each byte's symbol; byte fallback: the id of <0xXX>; -1 none.
  std::array<int32_t, 256> byte_ids_{};
  int32_t unk_id_ = -1;
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  size_t max_bytes_per_token_ = 0;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_MODEL_BPE_H_
