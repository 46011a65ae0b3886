// Test-only: a tokenizer-only GGUF holding a SentencePiece-style BPE tokenizer.json
// (byte fallback: Mistral, Llama 2, Gemma 3) the way llama.cpp's converter writes one:
// tokenizer.ggml.model "llama", pre "default", the pieces with their scores and types
// (added tokens CONTROL when special or looking special to the converter, else
// USER_DEFINED with their U+2581 written as spaces, score -1000; <0xXX> BYTE; the unknown
// token UNKNOWN; id gaps UNUSED "[PADn]"), bos/eos/unknown ids and add_bos/add_eos from
// tokenizer_config.json, add_space_prefix false when the normalizer prepends nothing.
// The real scores live in the model's tokenizer.model; the stand-in score of a normal
// piece is minus the rank of its first merge in tokenizer.json (pieces no merge makes:
// below all of those), which keeps the ranking HF's converter derived from the real ones.
//
// Thread-safety: a pure function of the files it reads and writes.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_SPM_TEST_GGUF_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_SPM_TEST_GGUF_H_

#include <string>

#include "absl/status/status.h"

namespace gantry::tokenizer {

// Reads `dir`/tokenizer.json and `dir`/tokenizer_config.json, writes `path`. Errors:
// NOT_FOUND (a file missing), INVALID_ARGUMENT (bad JSON, or not SentencePiece-style),
// UNAVAILABLE (cannot write).
absl::Status WriteSentencePieceGgufForTest(const std::string& dir, const std::string& path);

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_SPM_TEST_GGUF_H_
