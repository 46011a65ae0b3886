// The inference engine of one worker: every request it serves runs in one batch
// (continuous batching). Each Step() is one forward pass over all active sequences
// (model/forward.h): the one token each decoding sequence sampled last, and prompt
// chunks of the prefilling ones up to a budget of rows per pass (chunked prefill, so a
// long new prompt does not stall the streams already decoding); sequences join and
// leave between steps.
//
// KV memory is one pool of blocks (model/kv_cache.h) sized in bytes: `slots` bounds
// the sequences running at once, the pool the positions they hold together. A
// sequence takes blocks as it grows; when a decoding sequence finds none, the newest
// running sequence is preempted: its blocks are released (and stay cached), it goes
// back to WAITING in its place in line and, admitted again, re-evaluates from what is
// still cached (vLLM's recompute preemption; its stream goes on where it was).
//
// A request (docs/protocol.md, "Inference") goes through these states, logged by name
// as event worker.sequence:
//   WAITING     added; rendered and checked when first seen, then waits for a slot
//               and room in the pool (also where a preempted sequence waits);
//   PREFILLING  holds a slot: its prompt is evaluated chunk by chunk;
//   DECODING    one token sampled and fed back per step;
//   FINISHED    its terminal event was emitted; the slot is free again.
// Admission order (one request, WAITING): tools sent to a bundle without a declared
// tool protocol fail at once (tool_protocol_undeclared); render the template (a failure
// is template_render_failed, never a fallback); tokenize with the template's special
// tokens parsed and the client's text kept as text (tokenizer-svc/conversation/prompt.h);
// check prompt + max_tokens against a sequence's capacity (context_length_exceeded);
// compile a response_format's schema (unsupported_parameter for an assertion the
// constraint engine cannot enforce; response_format with tools is refused so too);
// with hermes_json tools, a lazy grammar for each call from "<tool_call>" to
// "</tool_call>" (the tool schemas relaxed: the validator after it stays). Then a slot and a cache that starts with the longest prefix of the prompt the pool
// holds for the same principal (never another principal's: blocks are keyed by their
// tenant), shared or copied; that prefix is reused (cached_prompt_tokens). A
// sequence generates until EOS, a stop string, max_tokens, an invalid tool call, or
// cancellation. Under a response_format every token is drawn from the constraint's
// mask (worker/constrain/token_mask.h; from the first token, stop strings refused),
// a stop token only once the value is whole, and an answer that ends
// (FINISH_STOP) is parsed and validated again: a failure is invalid_output. Cancellation is which is read before every step the sequence takes part in (a cancel
// lands within one chunk or one decode step).
//
// Exactly one terminal event ends every request, with usage, timings and the bundle
// identity. A cancelled request's usage is the work it did: `prompt_tokens` the prompt
// positions it holds in the cache (the reused prefix plus the chunks evaluated; the
// whole prompt once the prefill is done, 0 or the reused prefix when cancelled before
// the first chunk), `completion_tokens` every token sampled (text, reasoning and
// tool-call syntax alike). A sequence that fails (its context full, a bad token) ends
// alone; the others in the pass go on. A failed or cancelled request leaves no state
// behind that changes a later request's output: a cache only ever holds tokens whose
// keys and values are complete.
//
// Thread-safety: one thread calls Add(), Step() and Run(); the Model is shared.
#ifndef GANTRY_WORKER_SERVER_ENGINE_H_
#define GANTRY_WORKER_SERVER_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gantry/v1/bundle.pb.h"
#include "gantry/v1/inference.pb.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"
#include "worker/constrain/token_mask.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/forward.h"
#include "worker/model/model.h"
#include "worker/server/script.h"

namespace gantry::server {

// What the engine serves with: shared, immutable pieces of one bundle.
struct ServingBundle {
  gantry::v1::BundleIdentity identity;
  const model::Model* model = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const jinja::ChatTemplate* chat_template = nullptr;
  // Token ids that end generation (EOS and the template's end-of-turn token).
  std::vector<int32_t> stop_ids;
  // Test double: when set, outputs are forced (see script.h).
  const Script* script = nullptr;
  // The tokenizer's vocabulary as bytes, for constrained output (response_format).
  // Null: the engine builds it from `tokenizer` when first needed.
  std::shared_ptr<const constrain::Vocabulary> vocabulary;
  // Keep hermes_json tool calls on their grammar while the model writes them (lazily,
  // from "<tool_call>"). False only to measure what the grammar saves (tests, benches).
  bool constrain_tool_calls = true;
};

enum class SequenceState { kWaiting, kPrefilling, kDecoding, kFinished };
// kSlotTaken: a WAITING request passed its checks and holds a slot; kPromptEvaluated:
// the last prompt chunk was evaluated; kEnded: the terminal event was emitted (a
// refusal, an error, a cancel, or the end of the generation).
// kPreempted: the pool ran out and this was the newest running sequence.
enum class SequenceEvent { kSlotTaken, kPromptEvaluated, kPreempted, kEnded };
const char* SequenceStateName(SequenceState state);
const char* SequenceEventName(SequenceEvent event);
// The one transition function:
//   WAITING    kSlotTaken -> PREFILLING, kEnded -> FINISHED
//   PREFILLING kPromptEvaluated -> DECODING, kPreempted -> WAITING, kEnded -> FINISHED
//   DECODING   kPreempted -> WAITING, kEnded -> FINISHED
//   FINISHED   stays FINISHED
// Any other pair is not a transition: the state stays (Engine never asks for one).
SequenceState NextSequenceState(SequenceState state, SequenceEvent event);

class Engine {
 public:
  // Receives each event of a request (non-terminal ones first, the terminal one last)
  // and the request's running count of tokens sampled: what its Terminal's
  // usage.completion_tokens would say now (worker_loop.cc puts it in each PARTIAL).
  using Emit = std::function<void(gantry::v1::StreamEvent, uint32_t completion_tokens)>;

  // Rows of prompt chunks and decode tokens in one pass.
  static constexpr int kMaxBatchTokens = 512;

  // KV memory now: blocks of the pool in use, cached and in all.
  struct KvStatus {
    int block_tokens = 0;
    int blocks = 0;
    int in_use = 0;
    int cached = 0;
    size_t bytes = 0;
    int64_t preemptions = 0;
    model::KvType type = model::KvType::kF16;
  };

  // `slots` sequences at once, each holding up to `capacity` tokens, in a pool of
  // `kv_bytes` (0: room for every slot's whole context; never less than one context:
  // a request that fits its capacity always fits the pool alone) keeping keys and
  // values as `kv_type` (F16 where KvPool::Supports refuses it: kv_status().type
  // says); `threads` for the forward pass of the whole engine.
  Engine(const ServingBundle& bundle, int capacity, int slots = 1, int threads = 1, size_t kv_bytes = 0,
         model::KvType kv_type = model::KvType::kF16);
  ~Engine();

  // Adds a request (WAITING); it joins the batch at the next Step(). `cancel` must stay
  // valid until the request's terminal event has been emitted.
  void Add(const gantry::v1::InferenceRequest& request, const std::atomic<bool>* cancel, Emit emit);
  // One step: admits what waits while slots are free, ends what was cancelled, runs
  // one forward pass over the rest and emits what it produced. Nothing to do: returns.
  void Step();
  // Requests added whose terminal event has not been emitted yet.
  int active() const { return static_cast<int>(sequences_.size()); }

  // Runs one request to its end (Add, then Step until its terminal event).
  void Run(const gantry::v1::InferenceRequest& request, const std::atomic<bool>& cancel, const Emit& emit);

  // Positions the pool's blocks hold, in use or cached (for tests of prefix reuse).
  int64_t cached_tokens() const;
  // As of the last Step(); safe to call from any thread.
  KvStatus kv_status() const;
  // Sequences preempted so far.
  int64_t preemptions() const { return preemptions_.load(std::memory_order_relaxed); }
  // Blocks of the pool for these arguments (as the constructor sizes it).
  static int KvBlocks(const model::ModelConfig& config, int capacity, int slots, size_t kv_bytes,
                      model::KvType kv_type);

 private:
  class Sequence;
  // Compiled response formats and their masks, shared by the sequences.
  struct Constraints;

  // The running sequence attached last, or null.
  Sequence* Newest() const;
  void PublishKvStatus();

  const ServingBundle& bundle_;
  const int capacity_;
  const int slots_;
  model::KvPool pool_;  // before sequences_: their caches release into it
  std::unique_ptr<kernels::ThreadPool> thread_pool_;  // before forward_: it uses it
  model::Forward forward_;
  std::unique_ptr<Constraints> constraints_;
  std::deque<std::unique_ptr<Sequence>> sequences_;  // in the order they were added
  uint64_t attach_count_ = 0;
  std::atomic<int64_t> preemptions_{0};
  std::atomic<int> kv_in_use_{0}, kv_cached_{0};
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_ENGINE_H_
