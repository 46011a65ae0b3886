// worker_bench: prefill and decode speed of Gantry's forward pass against llama.cpp
// (the node-llama-cpp peer) on the same GGUF files and the same thread count, side by
// side in one run, alternating ours and the peer's runs, best of --repeat each.
//
//   bazel run //worker/model:worker_bench -- [--quick] [--types q8_0,f16,q4_k]
//       [--threads 2] [--repeat 3] [--models DIR] [--tokenizer DIR] [--peer DIR]
//
// Models: qwen3, 12 layers, width 768, 12 / 4 heads, ff 2048, untied head, written by
// the same code as `gantry bundle make-test-model` (any type it writes, q4_k_m too) (into --models, default
// $TMPDIR/gantry-bench, reused when present) with the qwen3 tokenizer from --tokenizer,
// $GANTRY_REFERENCE_DIR/tokenizers/qwen3 or $GANTRY_LLAMA_PEER_DIR/tokenizers/qwen3.
// Peer: `node llama_peer.mjs --bench PP,TG` in --peer or $GANTRY_LLAMA_PEER_DIR
// (omitted when absent). Prompt: the peer's own pseudo-random ids. Prefill = evaluating
// the prompt and choosing the first token; decode = TG steps of one token each.
// Bandwidth: decode reads Model::WeightBytesPerToken() per token; the limit is a
// memcpy of 256 MiB split across the same threads, counted as bytes read + written
// per second (the traffic memory sustained).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "formats/gguf/gguf.h"
#include "formats/testmodel/test_model.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/model.h"
#include "worker/model/session.h"

namespace gantry::model {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool Exists(const std::string& path) { return !path.empty() && access(path.c_str(), R_OK) == 0; }

// llama_peer.mjs's bench prompt: JavaScript's (s * 1103515245 + 12345) & 0x7fffffff in
// doubles (the product is rounded to 53 bits before the mask), ids 100 + s % 100000.
std::vector<int32_t> PeerBenchIds(int n) {
  std::vector<int32_t> ids;
  double s = 42;
  while (static_cast<int>(ids.size()) < n) {
    const double v = s * 1103515245.0 + 12345.0;
    s = static_cast<double>(static_cast<uint64_t>(v) & 0x7fffffffu);
    ids.push_back(100 + static_cast<int32_t>(static_cast<uint64_t>(s) % 100000));
  }
  return ids;
}

int32_t Argmax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

struct Speed {
  double prefill = 0, decode = 0;  // tokens/s; 0 = not measured
  void KeepBest(const Speed& o) {
    if (o.prefill > prefill) prefill = o.prefill;
    if (o.decode > decode) decode = o.decode;
  }
};

Speed RunOurs(const Model& model, kernels::ThreadPool* pool, const std::vector<int32_t>& prompt, int tg) {
  Session::Options options;
  options.pool = pool;
  Session session(model, static_cast<int>(prompt.size()) + tg + 1, options);
  std::vector<float> logits;
  const auto t0 = Clock::now();
  if (!session.Eval(prompt, &logits).ok()) return {};
  int32_t next = Argmax(logits);
  const auto t1 = Clock::now();
  for (int i = 0; i < tg; ++i) {
    if (!session.Eval({next}, &logits).ok()) return {};
    next = Argmax(logits);
  }
  const auto t2 = Clock::now();
  return {prompt.size() / Seconds(t0, t1), tg / Seconds(t1, t2)};
}

Speed RunPeer(const std::string& peer_dir, const std::string& model_path, int pp, int tg, int threads) {
  const std::string cmd = absl::StrCat("cd '", peer_dir, "' && node llama_peer.mjs --model '", model_path,
                                       "' --n 1 --repeat 1 --bench ", pp, ",", tg, " --threads ", threads,
                                       " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  if (pclose(p) != 0) return {};
  auto doc = json::Parse(out);
  if (!doc.ok()) return {};
  const json::Value* bench = doc->Find("bench");
  if (!bench) return {};
  const json::Value* pps = bench->Find(absl::StrCat("pp", pp, "_tok_s"));
  const json::Value* tgs = bench->Find(absl::StrCat("tg", tg, "_tok_s"));
  Speed s;
  if (pps && pps->is_number()) s.prefill = pps->as_double();
  if (tgs && tgs->is_number()) s.decode = tgs->as_double();
  return s;
}

// Best of three copies of 256 MiB, each thread copying its share; bytes read + written
// per second.
double CopyRate(kernels::ThreadPool* pool) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    kernels::ParallelFor(pool, static_cast<int>(bytes >> 20), 1, [&](int begin, int end, int) {
      std::memcpy(dst.data() + (size_t(begin) << 20), src.data() + (size_t(begin) << 20), size_t(end - begin) << 20);
    });
    best = std::max(best, 2.0 * bytes / Seconds(t0, Clock::now()));
  }
  return best;
}

std::string Ratio(double ours, double peer) {
  return ours > 0 && peer > 0 ? absl::StrCat(static_cast<int>(ours / peer * 100 + 0.5) / 100.0, "x") : "-";
}

int Main(int argc, char** argv) {
  bool quick = false;
  int threads = 2, repeat = 3;
  bool repeat_set = false;  // --quick runs one round unless --repeat says otherwise
  std::string types = "q8_0,f16,q4_k";
  std::string models_dir = (Env("TMPDIR").empty() ? "/tmp" : Env("TMPDIR")) + "/gantry-bench";
  std::string tokenizer = Env("GANTRY_REFERENCE_DIR").empty() ? "" : Env("GANTRY_REFERENCE_DIR") + "/tokenizers/qwen3";
  std::string peer = Env("GANTRY_LLAMA_PEER_DIR");
  if (tokenizer.empty() && !peer.empty()) tokenizer = peer + "/tokenizers/qwen3";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") { quick = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "worker_bench: %s needs a value\n", a.c_str()); return 2; }
    const std::string v = argv[++i];
    bool ok = true;
    if (a == "--threads") ok = absl::SimpleAtoi(v, &threads) && threads >= 1;
    else if (a == "--repeat") ok = (repeat_set = absl::SimpleAtoi(v, &repeat)) && repeat >= 1;
    else if (a == "--types") types = v;
    else if (a == "--models") models_dir = v;
    else if (a == "--tokenizer") tokenizer = v;
    else if (a == "--peer") peer = v;
    else ok = false;
    if (!ok) { std::fprintf(stderr, "worker_bench: bad option %s %s\n", a.c_str(), v.c_str()); return 2; }
  }
  const int pp = quick ? 128 : 512, tg = quick ? 32 : 128;
  if (quick && !repeat_set) repeat = 1;
  if (!Exists(peer + "/llama_peer.mjs")) peer.clear();
  std::error_code ignored;  // writing the models there fails with a clear message if it is not
  std::filesystem::create_directories(models_dir, ignored);

  kernels::ThreadPool pool(threads);
  const double copy = CopyRate(&pool);
  std::printf("worker_bench: qwen3 12 layers x 768, prefill %d, decode %d, %d threads, best of %d, kernels %s\n",
              pp, tg, threads, repeat, kernels::Kernels().name);
  std::printf("memcpy rate (%d threads, read + written): %.1f GB/s\n", threads, copy / 1e9);
  if (peer.empty()) std::printf("peer: not available (set GANTRY_LLAMA_PEER_DIR or --peer)\n");
  std::printf("\n| type | weight MB/token | prefill ours | prefill peer | ratio | decode ours | decode peer | ratio "
              "| decode bandwidth fraction ours / peer |\n|---|---|---|---|---|---|---|---|---|\n");
  const std::vector<int32_t> prompt = PeerBenchIds(pp);
  for (const std::string& type_name : std::vector<std::string>(absl::StrSplit(types, ','))) {
    testmodel::TestModelOptions o;
    if (!testmodel::ParseWeights(type_name, &o)) {
      std::fprintf(stderr, "worker_bench: unknown type %s\n", type_name.c_str());
      return 2;
    }
    o.embedding_type = o.weight_type;
    o.tokenizer_dir = tokenizer;
    o.arch = "qwen3";
    o.n_layer = 12;
    o.n_embd = 768;
    o.n_head = 12;
    o.n_head_kv = 4;
    o.n_ff = 2048;
    const std::string path = absl::StrCat(models_dir, "/qwen3-12x768-", type_name, ".gguf");
    if (!Exists(path)) {
      auto made = testmodel::MakeTestModel(o, path);
      if (!made.ok()) {
        std::fprintf(stderr, "worker_bench: making %s: %s\n", path.c_str(), made.status().ToString().c_str());
        return 1;
      }
    }
    auto file = gguf::GgufFile::Open(path);
    if (!file.ok()) { std::fprintf(stderr, "worker_bench: %s\n", file.status().ToString().c_str()); return 1; }
    auto model = Model::Load(**file);
    if (!model.ok()) { std::fprintf(stderr, "worker_bench: %s\n", model.status().ToString().c_str()); return 1; }
    Speed ours, theirs;
    RunOurs(**model, &pool, std::vector<int32_t>(prompt.begin(), prompt.begin() + 16), 4);  // page in
    for (int r = 0; r < repeat; ++r) {
      ours.KeepBest(RunOurs(**model, &pool, prompt, tg));
      if (!peer.empty()) theirs.KeepBest(RunPeer(peer, path, pp, tg, threads));
    }
    const double bytes = static_cast<double>((*model)->WeightBytesPerToken());
    std::printf("| %s | %.0f | %.1f | %.1f | %s | %.2f | %.2f | %s | %.2f / %.2f |\n", type_name.c_str(),
                bytes / 1e6, ours.prefill, theirs.prefill, Ratio(ours.prefill, theirs.prefill).c_str(), ours.decode,
                theirs.decode, Ratio(ours.decode, theirs.decode).c_str(), bytes * ours.decode / copy,
                bytes * theirs.decode / copy);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace gantry::model

int main(int argc, char** argv) { return gantry::model::Main(argc, argv); }
