// The inference engine of one worker slot: turns an InferenceRequest into the stream of
// events the worker protocol carries, using the bundle's own chat template, tokenizer
// and model.
//
// Run() order (docs/protocol.md, "Inference"): tools sent to a bundle without a declared
// tool protocol fail at once (tool_protocol_undeclared); render the template (a failure
// is template_render_failed, never a fallback); tokenize with the template's special
// tokens parsed and the client's text kept as text (tokenizer-svc/conversation/prompt.h);
// check prompt + max_tokens against the slot's capacity (context_length_exceeded);
// reuse the KV cache of the longest common token prefix with this slot's previous
// request of the same principal (never across principals); evaluate, in chunks of
// Session::kMaxChunk tokens (the chunks Session::Eval uses itself, so the results are the
// same) with cancellation checked before each; generate until EOS, a stop string,
// max_tokens, or cancellation (checked before every decode step).
// Exactly one terminal event ends every run, with usage, timings and the bundle
// identity. A cancelled run's usage is the work it did: `prompt_tokens` the prompt
// positions this run holds in the cache (the reused prefix plus the chunks evaluated;
// the whole prompt once the prefill is done, 0 or the reused prefix when cancelled
// before the first chunk), `completion_tokens` every token sampled (text, reasoning and
// tool-call syntax alike). A failed or cancelled run leaves no state behind that changes
// the next run's output: the cache only ever holds tokens whose keys and values are
// complete.
//
// Thread-safety: one Engine per slot, used by one thread; the Model is shared.
#ifndef GANTRY_WORKER_SERVER_ENGINE_H_
#define GANTRY_WORKER_SERVER_ENGINE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "gantry/v1/bundle.pb.h"
#include "gantry/v1/inference.pb.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"
#include "worker/model/model.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/session.h"
#include "worker/server/script.h"

namespace gantry::server {

// What a slot serves with: shared, immutable pieces of one bundle.
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

class Engine {
 public:
  using Emit = std::function<void(gantry::v1::StreamEvent)>;

  // `threads` > 1 gives this slot its own pool for the forward pass.
  Engine(const ServingBundle& bundle, int capacity, int threads = 1);

  // Streams events through `emit` (non-terminal ones first, the terminal one last) and
  // returns after the terminal event. `cancel` is polled between decode steps.
  void Run(const gantry::v1::InferenceRequest& request, const std::atomic<bool>& cancel,
           const Emit& emit);

  // Tokens currently held in this slot's cache (for tests of prefix reuse).
  int cached_tokens() const { return session_.n_past(); }
  // Tokens sampled so far by the run in progress (the last run's once it returned): what
  // its Terminal's usage.completion_tokens would say now. Read it from `emit` to report
  // a running count (worker_loop.cc puts it in each PARTIAL).
  uint32_t completion_tokens() const { return completion_tokens_; }

 private:
  const ServingBundle& bundle_;
  std::unique_ptr<kernels::ThreadPool> pool_;  // before session_: the session uses it
  model::Session session_;
  std::string session_principal_;
  uint32_t completion_tokens_ = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_ENGINE_H_
