// engine_bench: the worker's Engine (engine.h) as a team uses it, timed through the real
// path: template rendering, tokenization, the scheduler, the paged KV pool, sampling.
//
//   bazel run //worker/server:engine_bench -- --gguf FILE --tokenizer DIR
//       [--slots 4] [--threads 2] [--system-tokens 2000] [--streams 8] [--tg 32]
//
// Packs FILE (a qwen3 GGUF, e.g. the one `worker_bench --shape 2b` leaves in
// $TMPDIR/gantry-bench) with the tokenizer DIR into a bundle under $TMPDIR, then:
//   1. agent turns: principal A's task, a system prompt of about --system-tokens
//      tokens, served cold; then three other principals' tasks (other system prompts)
//      fill the other slots; then A's second turn (its first turn, the answer, a new
//      user message). Prints each TTFT, the cached_prompt_tokens of the second turn
//      and the ratio second/cold (goal <= 0.05 with 4 or more slots).
//   2. load: --streams requests of different principals arrive together (prompts of
//      about 120 tokens, --tg tokens each, greedy), each in a slot of its own; prints
//      the first token's time p50/p99 (its prefill's end) and the first output event's,
//      output tok/s, preemptions.
// Timings are wall clock on this machine; nothing here is asserted.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "formats/bundle/bundle_pack.h"
#include "worker/server/engine.h"
#include "worker/server/serving.h"

namespace gantry::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Text of "seedN " words, about `tokens` tokens long for `tokenizer`.
std::string Words(const tokenizer::Tokenizer& tokenizer, int tokens, const std::string& seed) {
  std::string out;
  for (int i = 0;; ++i) {
    std::string more = out;
    absl::StrAppend(&more, seed, i % 97, " ");
    auto ids = tokenizer.Encode(more);
    if (!ids.ok() || static_cast<int>(ids->size()) > tokens) return out;
    out = std::move(more);
  }
}

v1::InferenceRequest Task(const std::string& principal, const std::string& system, const std::string& user,
                          uint32_t max_tokens) {
  v1::InferenceRequest r;
  r.set_request_id(absl::StrCat("req_", principal, "_", user.size()));
  r.set_principal(principal);
  r.set_max_tokens(max_tokens);
  r.mutable_sampling()->set_temperature(0.0f);
  auto* s = r.add_messages();
  s->set_role("system");
  s->set_content(system);
  auto* u = r.add_messages();
  u->set_role("user");
  u->set_content(user);
  return r;
}

struct Timed {
  double ttft = -1;  // seconds from Add to the first output event
  double end = 0;
  std::string text;
  v1::Terminal terminal;
};

// Adds every request at once and steps until all ended.
std::vector<Timed> RunAll(Engine& engine, const std::vector<v1::InferenceRequest>& requests) {
  std::vector<Timed> out(requests.size());
  static std::atomic<bool> no{false};
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    engine.Add(requests[i], &no, [&out, i, start](v1::StreamEvent e, uint32_t) {
      const double t = Seconds(start, Clock::now());
      if (e.has_terminal()) {
        out[i].terminal = e.terminal();
        out[i].end = t;
        if (out[i].ttft < 0) out[i].ttft = t;
        return;
      }
      if (out[i].ttft < 0) out[i].ttft = t;
      if (e.has_text()) out[i].text += e.text().text();
    });
  }
  while (engine.active() > 0) engine.Step();
  return out;
}

// Nearest rank: the smallest value at least `p` of the values do not exceed.
double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * v.size()));
  return v[std::min(v.size() - 1, rank > 0 ? rank - 1 : 0)];
}

int Main(int argc, char** argv) {
  std::string gguf, tokenizer;
  int slots = 4, threads = 2, system_tokens = 2000, streams = 8, tg = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    bool ok = true;
    if (a == "--gguf") gguf = v;
    else if (a == "--tokenizer") tokenizer = v;
    else if (a == "--slots") ok = absl::SimpleAtoi(v, &slots) && slots > 0;
    else if (a == "--threads") ok = absl::SimpleAtoi(v, &threads) && threads > 0;
    else if (a == "--system-tokens") ok = absl::SimpleAtoi(v, &system_tokens) && system_tokens > 0;
    else if (a == "--streams") ok = absl::SimpleAtoi(v, &streams) && streams > 0;
    else if (a == "--tg") ok = absl::SimpleAtoi(v, &tg) && tg > 0;
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "engine_bench: bad option %s %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  if (gguf.empty() || tokenizer.empty()) {
    std::fprintf(stderr, "usage: engine_bench --gguf FILE --tokenizer DIR [--slots N] [--threads T] "
                         "[--system-tokens N] [--streams S] [--tg N]\n");
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/gantry-engine-bench");
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  bundle::PackOptions pack;
  pack.gguf_path = gguf;
  pack.model = "bench";
  pack.tokenizer_dir = tokenizer;
  pack.out_dir = dir;
  auto manifest = bundle::PackBundle(pack);
  if (!manifest.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", manifest.status().ToString().c_str());
    return 1;
  }
  auto loaded = LoadedBundle::Load(dir);
  if (!loaded.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const ServingBundle& serving = (*loaded)->serving();
  const int context = static_cast<int>(serving.identity.context_length());
  Engine engine(serving, context, std::max(slots, streams), threads);
  const Engine::KvStatus kv = engine.kv_status();
  std::printf("engine_bench: %s, %d slots (%d for the load run), %d threads, KV pool %d blocks of %d (%.0f MiB)\n",
              gguf.c_str(), slots, streams, threads, kv.blocks, kv.block_tokens, kv.bytes / 1048576.0);

  // 1. Agent turns.
  Engine agents(serving, context, slots, threads);
  const tokenizer::Tokenizer& tok = *serving.tokenizer;
  const std::string system_a = Words(tok, system_tokens, "a");
  v1::InferenceRequest turn1 = Task("alice", system_a, "Fix the failing test in parser.cc.", 16);
  const Timed cold = RunAll(agents, {turn1})[0];
  std::vector<v1::InferenceRequest> others;
  for (const char* who : {"bob", "carol", "dave"}) {
    others.push_back(Task(who, Words(tok, system_tokens / 2, who), "Summarise the design.", 16));
  }
  RunAll(agents, others);
  v1::InferenceRequest turn2 = turn1;
  turn2.set_request_id("req_alice_turn2");
  auto* reply = turn2.add_messages();
  reply->set_role("assistant");
  reply->set_content(cold.text);
  auto* next = turn2.add_messages();
  next->set_role("user");
  next->set_content("The test still fails; look at the tokenizer next.");
  const Timed warm = RunAll(agents, {turn2})[0];
  for (const Timed* t : {&cold, &warm}) {
    if (t->terminal.status().code() != "OK") {
      std::fprintf(stderr, "engine_bench: a turn failed: %s\n", t->terminal.status().message().c_str());
      return 1;
    }
  }
  std::printf("agent turns (%d slots): cold TTFT %.3f s (%u prompt tokens, prefill %.3f s); turn 2 TTFT %.3f s (%u "
              "prompt, %u cached) = %.3fx cold (goal <= 0.05x)\n",
              slots, cold.ttft, cold.terminal.usage().prompt_tokens(), cold.terminal.timings().prefill_us() / 1e6,
              warm.ttft, warm.terminal.usage().prompt_tokens(), warm.terminal.usage().cached_prompt_tokens(),
              warm.ttft / cold.ttft);

  // 2. Load.
  std::vector<v1::InferenceRequest> load;
  for (int s = 0; s < streams; ++s) {
    load.push_back(Task(absl::StrCat("p", s), Words(tok, 110, absl::StrCat("s", s, "_")), "Go.", static_cast<uint32_t>(tg)));
    load.back().set_request_id(absl::StrCat("req_load_", s));
  }
  const std::vector<Timed> done = RunAll(engine, load);
  std::vector<double> ttfts, first_tokens;
  double last_end = 0, decode_tokens = 0, per_stream = 0;
  for (const Timed& t : done) {
    ttfts.push_back(t.ttft);
    // All are admitted in the first step (a slot each): the prefill's end is the first
    // token's time. The first output event can come later: this random-weight model
    // samples byte tokens whose text is held until it forms UTF-8.
    first_tokens.push_back(t.terminal.timings().prefill_us() / 1e6);
    last_end = std::max(last_end, t.end);
    const double tokens = t.terminal.usage().completion_tokens();
    decode_tokens += tokens;
    if (t.end > t.ttft) per_stream += tokens / (t.end - t.ttft);
  }
  const double first_out = *std::min_element(ttfts.begin(), ttfts.end());
  std::printf("load: %d streams, %u prompt tokens each, %d tokens each: first token p50 %.3f s p99 %.3f s (first "
              "output event p50 %.3f s p99 %.3f s); output %.1f tok/s from the first output to the last end (%.1f per "
              "stream); preemptions %lld\n",
              streams, done[0].terminal.usage().prompt_tokens(), tg, Percentile(first_tokens, 0.5),
              Percentile(first_tokens, 0.99), Percentile(ttfts, 0.5), Percentile(ttfts, 0.99),
              decode_tokens / (last_end - first_out), per_stream / streams,
              static_cast<long long>(engine.preemptions()));
  return 0;
}

}  // namespace
}  // namespace gantry::server

int main(int argc, char** argv) { return gantry::server::Main(argc, argv); }
