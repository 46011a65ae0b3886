// One sequence evaluated alone: a KvCache and a Forward pass of its own (forward.h).
//
// Eval() appends tokens at the next positions and computes the logits of the last one.
// A prompt is evaluated in chunks of up to kMaxChunk tokens at once (every projection
// one matrix-matrix product); a single token (decoding) is a chunk of one. Work is
// split across the ThreadPool given at construction. Truncate() keeps a prefix of the
// cache (prefix reuse, and recovery after a failed request). Capacity is fixed at
// construction; appending beyond it is an error, never a silent wrap. The worker runs
// many sequences in one pass instead (worker/server/engine.h); this is the one-sequence
// form `gantry generate`, the benchmark and the tests use.
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
#include "worker/model/forward.h"
#include "worker/model/model.h"

namespace gantry::model {

class Session {
 public:
  using Options = Forward::Options;

  // Prompt tokens evaluated together (as llama.cpp's default batch).
  static constexpr int kMaxChunk = 512;

  Session(const Model& model, int capacity) : Session(model, capacity, Options()) {}
  // Keys and values kept as `kv_type` (F16 where KvPool::Supports refuses it).
  Session(const Model& model, int capacity, const Options& options, KvType kv_type = KvType::kF16)
      : cache_(model.config(), capacity, kv_type), forward_(model, options) {}

  // Errors: INVALID_ARGUMENT with reason "context_length_exceeded" when the tokens do not fit;
  // with "invalid_request" for a token id outside the vocabulary. On error nothing is
  // appended.
  absl::Status Eval(const std::vector<int32_t>& tokens, std::vector<float>* last_logits);

  // Keeps the first `n` positions (n <= n_past()).
  void Truncate(int n) { cache_.Truncate(n); }

  int n_past() const { return cache_.n_past(); }
  int capacity() const { return cache_.capacity(); }
  const std::vector<int32_t>& tokens() const { return cache_.tokens(); }

 private:
  KvCache cache_;
  Forward forward_;
};

// log_softmax of `logits`, then the `k` largest as (id, logprob), best first.
std::vector<std::pair<int32_t, float>> TopLogprobs(const std::vector<float>& logits, int k);

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_SESSION_H_
