// Exact Hugging Face tokenizers: a tokenizer.json (and tokenizer_config.json) loaded
// into a BPE pipeline that produces the same ids as HF's `tokenizers` for the files
// our models use (byte-level BPE: GPT-2, Llama 3, Qwen2/3; SentencePiece-style BPE with
// byte fallback: Mistral, Llama 2, Gemma 3).
//
// Encoding runs: added tokens matched in the raw text -> normalizer on the text between
// them -> normalized added tokens -> pre-tokenizer -> BPE per piece -> post-processor
// (only with add_special). Decoding maps ids to token texts and runs the decoder.
//
// Special tokens in untrusted text: with EncodeOptions::split_special, tokens marked
// special in added_tokens are not recognised, so a user who types "<|im_start|>" gets
// the ids of that text, never the control token. Non-special added tokens (Qwen's
// <tool_call>) are still matched, as in HF. Callers that tokenize user content must
// set split_special unless policy says otherwise.
//
// GGUF vocabularies (FromGguf, or Load() given a .gguf file):
// - tokenizer.ggml.model "gpt2" (byte-level BPE) with tokenizer.ggml.pre "qwen2",
//   "llama-bpe" (also "llama3", "llama-v3") or "gpt-2" builds the pipeline that family's
//   tokenizer.json has, so the ids equal Hugging Face's: the same Split regex, the same
//   normalizer (Qwen2's NFC: llama.cpp skips it, HF applies it, and HF is the reference)
//   and ignore_merges for Llama 3. Token types: NORMAL -> model vocabulary; CONTROL ->
//   special added token; USER_DEFINED -> non-special added token; UNUSED -> no token.
// - tokenizer.ggml.model "llama" (SentencePiece BPE: Llama 2, Mistral, Gemma) builds what
//   HF's converter writes for such a model: merges rebuilt from tokenizer.ggml.scores
//   (spm_merges.h), byte fallback to <0xXX> pieces, spaces as U+2581 with one prepended
//   unless tokenizer.ggml.add_space_prefix is false (Gemma), and the decoder undoing it.
//   Every piece but UNUSED ones is in the model vocabulary; CONTROL / USER_DEFINED are
//   also (special / non-special) added tokens and rank above scored pieces in merges;
//   the spaces llama.cpp's converter writes into user-defined pieces are read back as
//   U+2581 (so a user-defined piece that really holds a space is not matched as typed).
// bos/eos from tokenizer.ggml.*_token_id; add_special adds BOS/EOS when
// tokenizer.ggml.add_bos_token / add_eos_token say so (absent: BOS for SentencePiece,
// as llama.cpp defaults, nothing for byte-level).
// Known difference: a GGUF's token types come from its converter, which marks every
// "<|...|>" (and Gemma's "<unusedN>", "<mask>") added token CONTROL; HF keeps some of
// them non-special (Qwen's <|fim_prefix|>), so with split_special those few are text
// here but tokens in HF. Other tokenizer.ggml.model values and pre-tokenizers are
// UNIMPLEMENTED.
//
// Caches (both exact: a hit returns the ids a recomputation gives): the BPE model keeps
// the ids of short pieces, and Encode() keeps the ids of each text section (the text
// between two added tokens) of at least kMinCachedSectionBytes, keyed by its exact bytes
// and the flags its encoding depends on, in a bounded LRU (kSectionCacheBytes). A chat
// prompt's long sections that repeat from request to request (a system prompt, the
// tool definitions an agent sends on every turn) cost a lookup instead of an encode.
//
// Thread-safety: a loaded Tokenizer is immutable (its caches are internally
// synchronized); Encode/Decode may run from many threads. A StreamDecoder is not
// thread-safe (one per generation stream).
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_TOKENIZER_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gantry::gguf {
class GgufFile;
}  // namespace gantry::gguf

namespace gantry::tokenizer {

class AddedVocabulary;
class BpeModel;
template <typename V>
class LruCache;
class Decoder;
class Normalizer;
class PostProcessor;
class PreTokenizer;

struct EncodeOptions {
  // Apply the post-processor's template (BOS for Llama 2 / Mistral / Gemma 3; nothing
  // for Qwen 3 and Llama 3.0, whose files add nothing). HF's add_special_tokens.
  bool add_special = false;
  // Treat special added tokens as plain text (HF split_special_tokens=True).
  bool split_special = false;
  // Byte ranges [first, second) of the text in which special added tokens are plain
  // text even without split_special: a special token whose match overlaps one is not
  // recognised there (the rest of the text is matched as usual). Used for the parts of
  // a rendered prompt that came from the client (tokenizer-svc/conversation/prompt.h).
  // Sorted, non-overlapping.
  std::vector<std::pair<size_t, size_t>> literal_ranges;
  // Look sections up in (and add them to) the section cache (see Tokenizer). False
  // encodes every section afresh: the reference the cache's tests compare against.
  bool use_section_cache = true;
  // More ids than this and Encode() stops with OUT_OF_RANGE as soon as that is certain
  // (0: no limit). A counter that only needs to know whether a prompt fits a context
  // does work for at most about this many ids, not for the whole text: a piece whose
  // bytes need more ids than are left (BpeModel::max_bytes_per_token) is refused
  // unencoded, and encoding stops at the first piece that passes the limit.
  size_t max_ids = 0;
};

class Tokenizer {
 public:
  // Loads `path`: a directory holding tokenizer.json and, optionally,
  // tokenizer_config.json, or a GGUF file (recognised by its magic; see FromGguf).
  // NOT_FOUND when tokenizer.json is missing; UNIMPLEMENTED for components this
  // implementation lacks; INVALID_ARGUMENT for a malformed file (a bad GGUF: reason
  // "invalid_gguf") or a path that is neither a directory nor a GGUF file.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);

  // The tokenizer of a GGUF file's tokenizer.ggml.* metadata (rules at the top of this
  // file). `file` is only read during the call. INVALID_ARGUMENT when the metadata is
  // missing or malformed (names the key); UNIMPLEMENTED for a tokenizer.ggml.model or
  // tokenizer.ggml.pre this implementation does not support (names it).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);

  // The same from the files' contents; `config_json` may be empty (no config).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(absl::string_view tokenizer_json,
                                                             absl::string_view config_json);

  ~Tokenizer();

  // The ids of `text`. INVALID_ARGUMENT when `text` is not valid UTF-8;
  // RESOURCE_EXHAUSTED if a pre-tokenizer pattern gives up (not seen with real files);
  // OUT_OF_RANGE when there are more than options.max_ids.
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              const EncodeOptions& options = {}) const;

  // The text of `ids` (invalid UTF-8 from partial byte tokens becomes U+FFFD);
  // `skip_special` drops special added tokens. INVALID_ARGUMENT for an unknown id.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // As Decode(), but the raw bytes before the UTF-8 repair (used by StreamDecoder).
  absl::StatusOr<std::string> DecodeToBytes(const std::vector<int32_t>& ids, bool skip_special) const;

  // The fewest ids a text of `text_bytes` bytes can encode to, known without encoding
  // it: no id stands for more bytes than the longest token (of the model's vocabulary
  // and the added tokens) times what the normalizer may shrink text by
  // (Normalizer::MaxShrink), so at least ceil(text_bytes / that). 0 when no such bound
  // holds: a normalizer may remove text, or an added token strips the whitespace beside
  // it.
  size_t MinIdsFor(size_t text_bytes) const;

  // One more than the largest id of the model and the added tokens (from a GGUF: the
  // length of tokenizer.ggml.tokens, unused ids included).
  int32_t vocab_size() const { return vocab_size_; }
  // The token's text as written in tokenizer.json (added tokens: their content), or
  // nullopt for an unused id.
  absl::optional<std::string> TokenText(int32_t id) const;
  // The id of a token by its text (added tokens first), or nullopt.
  absl::optional<int32_t> TokenId(absl::string_view text) const;
  // Whether `id` is an added token marked special.
  bool IsSpecial(int32_t id) const;
  // The byte ranges of special tokens' texts in `text` (leftmost-longest, in order):
  // where Encode() without split_special would find a control token.
  std::vector<std::pair<size_t, size_t>> FindSpecialText(absl::string_view text) const;
  // Whether some special token is matched after normalization (normalized: true), where
  // FindSpecialText's byte ranges of the raw text cannot follow it.
  bool HasNormalizedSpecialTokens() const;
  // The section cache (above): sections shorter than this are not kept; the budget of
  // keys plus ids, in bytes, and of entries (each of the four flag combinations has a
  // quarter).
  static constexpr size_t kMinCachedSectionBytes = 128;
  static constexpr size_t kSectionCacheBytes = 16u << 20;
  static constexpr size_t kSectionCacheEntries = 4096;
  // Its lookups that found / did not find their section (for tests and benchmarks).
  uint64_t section_cache_hits() const;
  uint64_t section_cache_misses() const;

  // From tokenizer_config.json's bos_token / eos_token when present and known.
  absl::optional<int32_t> bos_id() const { return bos_id_; }
  absl::optional<int32_t> eos_id() const { return eos_id_; }

 private:
  Tokenizer();
  // A text section through the section cache (EncodeSection when short or not cached).
  // Both stop with OUT_OF_RANGE once `ids` would pass `max_ids` (0: no limit).
  absl::Status EncodeSectionCached(absl::string_view raw, bool first_section, bool split_special,
                                   bool use_cache, size_t max_ids, std::vector<int32_t>* ids) const;
  absl::Status EncodeSection(absl::string_view raw, bool first_section, bool split_special,
                             size_t max_ids, std::vector<int32_t>* ids) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<AddedVocabulary> added_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  int32_t vocab_size_ = 0;
  absl::optional<int32_t> bos_id_;
  absl::optional<int32_t> eos_id_;
  // The section cache, one LRU per combination of the flags a section's encoding
  // depends on (first_section, split_special): keyed by the section's bytes alone.
  std::unique_ptr<LruCache<std::vector<int32_t>>> section_cache_[4];
};

// Incremental decoding for generation: push ids one at a time and get the text they
// complete. Never returns a broken UTF-8 sequence: bytes of a character still being
// spelled by byte tokens are held back until it is complete (or Finish() is called,
// which turns an unfinished tail into U+FFFD). The concatenation of all returned
// strings equals Decode(all ids) for the decoders supported here.
class StreamDecoder {
 public:
  // `tokenizer` must outlive this object.
  StreamDecoder(const Tokenizer* tokenizer, bool skip_special);

  // The newly completed text (possibly empty). INVALID_ARGUMENT for an unknown id
  // (the stream is unchanged then).
  absl::StatusOr<std::string> Push(int32_t id);

  // Whatever is still held back, repaired; the decoder can then start a new stream.
  std::string Finish();

 private:
  // Ids whose decoding still matters: the last fully emitted id (as context, so that
  // decoders like Strip see the same text as a whole decode) and the ones after it.
  static constexpr size_t kMaxWindow = 64;
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<int32_t> window_;
  size_t emitted_ = 0;  // bytes of DecodeToBytes(window_) already returned
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_TOKENIZER_H_
