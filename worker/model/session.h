// One sequence being evaluated: its tokens and its KV cache.
//
// Eval() appends tokens at the next positions and computes the logits of the last one.
// Truncate() keeps a prefix of the cache (prefix reuse, and recovery after a failed
// request). Capacity is fixed at construction; appending beyond it is an error, never
// a silent wrap.
//
// Thread-safety: a Session is used by one thread at a time; the Model it reads is
// shared and immutable.
#ifndef GANTRY_WORKER_MODEL_SESSION_H_
#define GANTRY_WORKER_MODEL_SESSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/model/model.h"

namespace gantry::model {

class Session {
 public:
  Session(const Model& model, int capacity);

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
  void Forward(int32_t token, int pos, float* logits);

  const Model& model_;
  const ModelConfig& c_;
  const int capacity_;
  std::vector<int32_t> tokens_;
  // [layer][pos][n_head_kv * head_dim]
  std::vector<float> k_cache_, v_cache_;
  // Scratch.
  std::vector<float> x_, xb_, q_, k_, v_, att_, out_, gate_, up_, hidden_;
};

// log_softmax of `logits`, then the `k` largest as (id, logprob), best first.
std::vector<std::pair<int32_t, float>> TopLogprobs(const std::vector<float>& logits, int k);

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_SESSION_H_
