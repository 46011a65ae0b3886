// Deterministic random-weight GGUF models for tests, benchmarks and the demo bring-up
// (`gantry bundle make-test-model`). The vocabulary, merges, token types, special
// token ids and chat template come from a real Hugging Face tokenizer directory,
// converted the way llama.cpp's converter does: byte-level BPE as "gpt2" (merges), and
// SentencePiece-style BPE (byte_fallback: Mistral, Gemma) as "llama" (pieces, scores,
// types; the scores, which live in tokenizer.model, are stood in for by minus the rank
// of each piece's first merge in tokenizer.json, the ranking HF derived from them);
// the weights are random but a pure function of the options (seeded), so the same
// options always give the same bytes. llama.cpp loads these files.
//
// Thread-safety: pure function of its options (plus the files it reads and writes).
#ifndef GANTRY_FORMATS_TESTMODEL_TEST_MODEL_H_
#define GANTRY_FORMATS_TESTMODEL_TEST_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "formats/gguf/gguf.h"

namespace gantry::testmodel {

struct TestModelOptions {
  std::string tokenizer_dir;  // holds tokenizer.json (+ tokenizer_config.json)
  std::string arch = "qwen3";  // "llama" or "qwen3"
  uint32_t n_layer = 2;
  uint32_t n_embd = 64;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 0;  // 0: n_embd / n_head (qwen3 may differ; llama may not)
  uint32_t n_ff = 0;      // 0: 3 * n_embd
  uint32_t context_length = 2048;
  float rms_eps = 1e-6f;
  float rope_base = 0;    // 0: 1e6 for qwen3, 5e5 for llama
  gguf::TensorType weight_type = gguf::TensorType::kF16;
  gguf::TensorType embedding_type = gguf::TensorType::kF16;
  // llama.cpp's Q4_K_M mix (overrides weight_type and embedding_type): Q4_K for every
  // matrix except Q6_K for the output head (the token embedding when tied) and for
  // attn_v and ffn_down in the layers llama.cpp gives more bits (UsesMoreBits).
  bool q4_k_m = false;
  bool tied = false;      // no output.weight: the head reuses token_embd
  uint64_t seed = 1234;
  std::string name;
};

struct TestModelSummary {
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  uint32_t vocab_size = 0;
};

// Writes the model to `path`. Errors: INVALID_ARGUMENT for inconsistent options or an
// unsupported tokenizer (a model other than BPE), NOT_FOUND for a missing
// tokenizer.json, UNAVAILABLE when the file cannot be written.
absl::StatusOr<TestModelSummary> MakeTestModel(const TestModelOptions& options,
                                               const std::string& path);

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k" -> type; false for other
// names. K-quant matrices need rows of a multiple of 256 values (n_embd, n_head *
// head_dim and n_ff).
bool ParseWeightType(const std::string& name, gguf::TensorType* type);

// As ParseWeightType into options->weight_type, plus "q4_k_m" (options->q4_k_m).
bool ParseWeights(const std::string& name, TestModelOptions* options);

// llama.cpp's choice of layers that keep more bits in its _M mixes: the first and last
// eighth of the layers and every third layer between.
bool UsesMoreBits(uint32_t layer, uint32_t n_layer);

}  // namespace gantry::testmodel

#endif  // GANTRY_FORMATS_TESTMODEL_TEST_MODEL_H_
