// The "decoder" of tokenizer.json: token texts back to text.
//
// Supported: ByteLevel, Replace (String pattern), ByteFallback, Fuse, Strip, Metaspace,
// and Sequence of these; no decoder joins tokens with " " (as Hugging Face does).
// Unlike Hugging Face, the chain works on bytes and only the caller turns them into
// text: Decode() replaces each maximal invalid UTF-8 subsequence with U+FFFD (the
// WHATWG rule that HF's decoders follow), and StreamDecoder holds back an incomplete
// trailing sequence until the next token completes it.
//
// Thread-safety: immutable after FromJson(); DecodeToBytes() may run concurrently.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_DECODER_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_DECODER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace gantry::tokenizer {

struct DecodePiece {
  std::string text;    // the token's text as in tokenizer.json
  bool added = false;  // an added token: ByteLevel passes it through unchanged
};

class Decoder {
 public:
  // `v` is the value of "decoder"; null gives the " "-joining default.
  static absl::StatusOr<std::unique_ptr<Decoder>> FromJson(const json::Value& v);

  // The bytes of the decoded pieces (not necessarily valid UTF-8).
  std::string DecodeToBytes(std::vector<DecodePiece> pieces) const;

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  struct Step {
    Kind kind;
    std::string pattern, content;  // kReplace; kStrip uses content; kMetaspace pattern
    int start = 0, stop = 0;       // kStrip
    bool strip_first_space = false;  // kMetaspace
  };
  absl::Status AddSteps(const json::Value& v, const std::string& where);
  std::vector<Step> steps_;
  bool join_with_space_ = false;
};

// Appends `bytes` to `out` as valid UTF-8, each maximal invalid subsequence replaced
// by U+FFFD.
void AppendUtf8Lossy(absl::string_view bytes, std::string* out);

// The length of the longest prefix of `bytes` that does not end inside a UTF-8
// sequence that more bytes could still complete.
size_t CompleteUtf8PrefixLength(absl::string_view bytes);

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_DECODER_H_
