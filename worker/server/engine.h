// The inference engine of one worker: every request it serves runs in one batch
// (continuous batching). Each Step() is one forward pass over all active sequences
// (model/forward.h): the one token each decoding sequence sampled last, and prompt
// chunks of the prefilling ones up to a budget of rows per pass (chunked prefill, so a
// long new prompt does not stall the streams already decoding); sequences join and
// leave between steps.
//
// A request (docs/protocol.md, "Inference") goes through these states, logged by name
// as event worker.sequence:
//   WAITING     added; rendered and checked when first seen, then waits for a slot;
//   PREFILLING  holds a slot: its prompt is evaluated chunk by chunk;
//   DECODING    one token sampled and fed back per step;
//   FINISHED    its terminal event was emitted; the slot is free again.
// Admission order (one request, WAITING): tools sent to a bundle without a declared
// tool protocol fail at once (tool_protocol_undeclared); render the template (a failure
// is template_render_failed, never a fallback); tokenize with the template's special
// tokens parsed and the client's text kept as text (tokenizer-svc/conversation/prompt.h);
// check prompt + max_tokens against a slot's capacity (context_length_exceeded). Then a
// slot: of the free ones, the one whose cache holds the longest common token prefix
// with this prompt for the same principal (never another principal's), else an empty
// one, else the least recently used; that prefix is reused (cached_prompt_tokens). A
// sequence generates until EOS, a stop string, max_tokens, an invalid tool call, or
// cancellation, which is read before every step the sequence takes part in (a cancel
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
};

enum class SequenceState { kWaiting, kPrefilling, kDecoding, kFinished };
// kSlotTaken: a WAITING request passed its checks and holds a slot; kPromptEvaluated:
// the last prompt chunk was evaluated; kEnded: the terminal event was emitted (a
// refusal, an error, a cancel, or the end of the generation).
enum class SequenceEvent { kSlotTaken, kPromptEvaluated, kEnded };
const char* SequenceStateName(SequenceState state);
const char* SequenceEventName(SequenceEvent event);
// The one transition function:
//   WAITING    kSlotTaken -> PREFILLING, kEnded -> FINISHED
//   PREFILLING kPromptEvaluated -> DECODING, kEnded -> FINISHED
//   DECODING   kEnded -> FINISHED
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

  // `slots` sequences at once, each holding up to `capacity` tokens; `threads` for the
  // forward pass of the whole engine.
  Engine(const ServingBundle& bundle, int capacity, int slots = 1, int threads = 1);
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

  // Tokens held in all slots' caches (for tests of prefix reuse).
  int cached_tokens() const;
  // Bytes of KV cache the slots hold.
  size_t kv_bytes() const;

 private:
  struct Slot;
  class Sequence;

  Slot* PickSlot(const Sequence& sequence);

  const ServingBundle& bundle_;
  std::unique_ptr<kernels::ThreadPool> pool_;  // before forward_: it uses the pool
  model::Forward forward_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<std::unique_ptr<Sequence>> sequences_;  // in the order they were added
  uint64_t clock_ = 0;  // steps taken: when each slot was last used
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_ENGINE_H_
