// One sequence being evaluated: its tokens and its KV cache.
//
// Eval() appends tokens at the next positions and computes the logits of the last one.
// A prompt is evaluated in chunks of up to kMaxChunk tokens at once: every projection
// is one matrix-matrix product (weights streamed once per chunk, activations rounded or
// quantized once per row), attention runs per token with a causal mask; a single token
// (decoding) is a chunk of one. Work is split across the ThreadPool given at
// construction. Truncate() keeps a prefix of the cache (prefix reuse, and recovery
// after a failed request). Capacity is fixed at construction; appending beyond it is
// an error, never a silent wrap.
//
// Results: the fast kernels (kernels.h) compute what the scalar references compute,
// in another summation order; Options::reference selects the one-token-at-a-time
// scalar path (ops.h), the yardstick session_test.cc holds the fast path to.
//
// Thread-safety: a Session is used by one thread at a time; the Model it reads is
// shared and immutable; the pool must not be used by anyone else during Eval().
#ifndef GANTRY_WORKER_MODEL_SESSION_H_
#define GANTRY_WORKER_MODEL_SESSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/model.h"

namespace gantry::model {

class Session {
 public:
  struct Options {
    // Threads for the forward pass; null runs everything on the calling thread. Not
    // owned; must outlive the Session.
    kernels::ThreadPool* pool = nullptr;
    // The scalar reference path, one token at a time (tests and comparisons).
    bool reference = false;
  };

  // Prompt tokens evaluated together (as llama.cpp's default batch).
  static constexpr int kMaxChunk = 512;

  Session(const Model& model, int capacity) : Session(model, capacity, Options()) {}
  Session(const Model& model, int capacity, const Options& options);

  // Errors: OUT_OF_RANGE (reason "context_length_exceeded") when the tokens do not fit;
  // INVALID_ARGUMENT for a token id outside the vocabulary. On error nothing is
  // appended.
  absl::Status Eval(const std::vector<int32_t>& tokens, std::vector<float>* last_logits);

  // Keeps the first `n` positions (n <= n_past()).
  void Truncate(int n);

  int n_past() const { return static_cast<int>(tokens_.size()); }
  int capacity() const { return capacity_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  struct Projection;

  // Fast path: tokens[0..n) at positions pos0.. ; logits of the last when non-null.
  void ForwardChunk(const int32_t* tokens, int n, int pos0, float* logits);
  void Attention(int layer, int n, int pos0);
  // y_j = x W_j^T for each projection, x being n rows of `cols` floats.
  void Project(const float* x, int cols, int n, std::initializer_list<Projection> outputs);
  void ReserveChunk(int n);
  // Reference path: one token.
  void ForwardReference(int32_t token, int pos, float* logits);

  const Model& model_;
  const ModelConfig& c_;
  const int capacity_;
  const Options options_;
  std::vector<int32_t> tokens_;
  // Keys: [layer][pos][n_head_kv * head_dim]. Values transposed, so that attention
  // output is a product with rows of positions: [layer][n_head_kv * head_dim][pos].
  // Zero-initialised: positions not yet written multiply a zero weight.
  std::vector<float> k_cache_, vt_cache_;
  // Chunk scratch, rows of the chunk's tokens.
  int chunk_reserved_ = 0;
  std::vector<float> x_, xb_, q_, k_, v_, att_out_, gate_, up_, rope_cs_;
  std::vector<uint8_t> prepared_;
  std::vector<float> scores_;  // per thread: [query row in block][position]
};

// log_softmax of `logits`, then the `k` largest as (id, logprob), best first.
std::vector<std::pair<int32_t, float>> TopLogprobs(const std::vector<float>& logits, int k);

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_SESSION_H_
