// The forward pass of a batch of sequences, and the KV cache each sequence keeps.
//
// Forward::Eval() takes any number of items, each a sequence (its KvCache) and the
// tokens to append at its next positions: a prompt chunk (prefill) or the one token
// sampled last (decode). All rows of all items go through every projection together:
// one matrix-matrix product per weight, so each weight is streamed from memory once
// per pass whatever the number of sequences (continuous batching: the worker's
// scheduler, worker/server/engine.h, adds and removes sequences between passes).
// Activations are rounded or quantized once per row. Attention is per sequence over
// its own cache, per head and block of query rows, with a causal mask. Logits are
// computed for the last row of each item that asks for them, in one product.
//
// Results: a row's values do not depend on the other rows of the pass (each output of
// a product is one weight row against one activation row, in the same order whatever
// the batch), so a sequence evaluated in a batch gets the logits it gets alone, up to
// the order of the attention sums when its prompt is cut into other chunks
// (session_test.cc holds eight sequences batched to the logits they get alone).
// Options::reference selects the scalar one-token-at-a-time path (ops.h), the yardstick
// the fast path is tested against.
//
// The caches are paged (kv_cache.h): each row's keys and values go to the block of its
// position, F16 or Q8_0, and attention reads a sequence's blocks in order. As ggml
// meets its caches, an F16 cache meets queries and softmaxed scores rounded to F16; a
// Q8_0 cache meets queries quantized to Q8_0 blocks and F32 scores.
//
// Errors are per item: an item whose tokens do not fit its cache's capacity
// (INVALID_ARGUMENT, reason "context_length_exceeded"), find no room in its pool
// (UNAVAILABLE, "server_busy"; the engine makes room before a pass) or name a
// token outside the vocabulary (INVALID_ARGUMENT, "invalid_request") gets that status
// and nothing appended; the other items are evaluated as if it were not there.
//
// Thread-safety: a Forward is used by one thread at a time and owns the scratch of a
// pass; the Model is shared and immutable; the pool must not be used by anyone else
// during Eval(). A KvCache belongs to one item of a pass at a time.
#ifndef GANTRY_WORKER_MODEL_FORWARD_H_
#define GANTRY_WORKER_MODEL_FORWARD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model.h"

namespace gantry::model {

class Forward {
 public:
  struct Options {
    // Threads for the pass; null runs everything on the calling thread. Not owned;
    // must outlive the Forward.
    kernels::ThreadPool* pool = nullptr;
    // The scalar reference path, one token at a time (tests and comparisons).
    bool reference = false;
  };

  struct Item {
    KvCache* cache = nullptr;
    const int32_t* tokens = nullptr;
    int n = 0;
    // Receives the logits of the item's last token (n_vocab values); null: none wanted.
    std::vector<float>* logits = nullptr;
    // Set by Eval(): OK, or why nothing was appended for this item.
    absl::Status status;
  };

  Forward(const Model& model, const Options& options);

  void Eval(std::vector<Item>* items);

  const Model& model() const { return model_; }

 private:
  struct Projection;
  // One row of a pass: the sequence it belongs to and its position there.
  struct Row {
    KvCache* cache;
    int pos;
  };

  // Fast path: every row of the valid items, one pass.
  void ForwardRows(const std::vector<Item*>& items);
  void Attention(int layer, const std::vector<Item*>& items);
  // y_j = x W_j^T for each projection, x being n rows of `cols` floats.
  void Project(const float* x, int cols, int n, std::initializer_list<Projection> outputs);
  void Reserve(int rows, int max_capacity);
  // Reference path: one token of one sequence.
  void ForwardReference(KvCache* cache, int32_t token, int pos, float* logits);
  // Writes one position's keys and values (F32, kv_dim each) into its block.
  void StoreKv(KvCache* cache, int layer, int pos, const float* k, const float* v);

  const Model& model_;
  const ModelConfig& c_;
  const Options options_;
  // Scratch of a pass, rows of all its tokens.
  int rows_reserved_ = 0;
  int capacity_reserved_ = 0;
  std::vector<float> x_, xb_, q_, k_, v_, att_out_, gate_, up_, rope_cs_, logits_;
  std::vector<Row> rows_;
  std::vector<uint8_t> prepared_;
  std::vector<float> scores_;  // per thread: [query row in block][position]
  std::vector<float> rounded_;  // per thread: the block's queries, then its scores, in F16
  std::vector<float> partial_;  // per thread: one KV block's share of the block's output
  std::vector<float> decoded_;  // per thread: a Q8_0 block's values of one head, as F32
};

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_FORWARD_H_
