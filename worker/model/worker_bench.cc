// worker_bench: prefill and decode speed of Gantry's forward pass against llama.cpp
// (the node-llama-cpp peer) on the same GGUF files and the same thread count, side by
// side in one run, alternating ours and the peer's runs, best of --repeat each.
//
//   bazel run //worker/model:worker_bench -- [--quick] [--types q8_0,f16,q4_k]
//       [--threads 2] [--repeat 3] [--models DIR] [--tokenizer DIR] [--peer DIR]
//   bazel run //worker/model:worker_bench -- --streams 1,2,4,8,16 [--shape small|2b]
//       [--types q4_k_m] [--native DIR] [--pp 128] [--tg 32] [--threads 2]
//       [--kv-cache-type f16|q8_0]
//
// --streams: continuous batching. For each count S, S sequences of --pp prompt tokens
// arrive at once and are prefilled in passes of at most 512 rows (the engine's
// budget), then decode --tg tokens each, all S in one pass per step (Forward::Eval,
// what the worker's scheduler runs). Printed: aggregate and per-stream decode tok/s,
// the time to each sequence's first token (p50 / p99 over the S) and KV bytes per
// token; the peer is llama.cpp's llama-batched-bench, built natively
// (../shared/reference/build-llama-native.sh, its build/bin as --native), with the same
// -npp, -ntg, -npl and threads: its S_TG (aggregate decode) and T_PP (all S prompts).
// --shape 2b: qwen3 28 layers, width 2048, 16 / 8 heads, head 128, ff 6144 (a 2B model);
// small: the 12 x 768 model above. --kv-cache-type q8_0: our cache as Q8_0, the peer's
// too (-ctk q8_0 -ctv q8_0, with its flash attention, which a quantized V needs).
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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "common/json.h"
#include "formats/gguf/gguf.h"
#include "formats/testmodel/test_model.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/forward.h"
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

struct StreamsResult {
  double aggregate = 0;          // decode tok/s, all streams
  double ttft_p50 = 0, ttft_p99 = 0;  // s, from arrival to the first token
};

// S sequences arrive at once: prefill in passes of at most kPassRows rows (whole
// prompts or chunks, in arrival order), then tg decode steps of all S together.
StreamsResult RunOursStreams(const Model& model, kernels::ThreadPool* pool, KvType kv, const std::vector<int32_t>& prompt,
                             int streams, int tg) {
  constexpr int kPassRows = 512;
  Forward::Options options;
  options.pool = pool;
  Forward forward(model, options);
  std::vector<std::unique_ptr<KvCache>> caches;
  for (int s = 0; s < streams; ++s) {
    caches.push_back(std::make_unique<KvCache>(model.config(), static_cast<int>(prompt.size()) + tg + 1, kv));
  }
  std::vector<std::vector<float>> logits(streams);
  std::vector<int32_t> next(streams);
  std::vector<double> ttft;
  const auto t0 = Clock::now();
  std::vector<size_t> done(streams, 0);
  for (int first = 0; first < streams;) {
    std::vector<Forward::Item> items;
    std::vector<int> who;
    int budget = kPassRows;
    for (int s = first; s < streams && budget > 0; ++s) {
      const int n = std::min<int>(budget, static_cast<int>(prompt.size() - done[s]));
      Forward::Item item;
      item.cache = caches[s].get();
      item.tokens = prompt.data() + done[s];
      item.n = n;
      item.logits = done[s] + n == prompt.size() ? &logits[s] : nullptr;
      items.push_back(item);
      who.push_back(s);
      budget -= n;
    }
    forward.Eval(&items);
    for (size_t i = 0; i < items.size(); ++i) {
      const int s = who[i];
      if (!items[i].status.ok()) return {};
      done[s] += items[i].n;
      if (done[s] == prompt.size()) {
        next[s] = Argmax(logits[s]);
        ttft.push_back(Seconds(t0, Clock::now()));
        first = s + 1;
      }
    }
  }
  const auto t1 = Clock::now();
  for (int step = 0; step < tg; ++step) {
    std::vector<Forward::Item> items(streams);
    for (int s = 0; s < streams; ++s) items[s] = {caches[s].get(), &next[s], 1, &logits[s], absl::OkStatus()};
    forward.Eval(&items);
    for (int s = 0; s < streams; ++s) {
      if (!items[s].status.ok()) return {};
      next[s] = Argmax(logits[s]);
    }
  }
  StreamsResult r;
  r.aggregate = static_cast<double>(streams) * tg / Seconds(t1, Clock::now());
  std::sort(ttft.begin(), ttft.end());
  r.ttft_p50 = ttft[(ttft.size() - 1) / 2];
  r.ttft_p99 = ttft[std::min(ttft.size() - 1, static_cast<size_t>(0.99 * ttft.size()))];
  return r;
}

// llama-batched-bench's table row for `streams`: S_TG (aggregate decode tok/s) and T_PP
// (seconds to prefill all the prompts).
struct PeerStreams {
  double aggregate = 0, prefill_all_s = 0;
};

std::vector<std::pair<int, PeerStreams>> RunPeerStreams(const std::string& native_dir, const std::string& model_path,
                                                        int pp, int tg, const std::string& streams, int threads,
                                                        int max_streams, KvType kv) {
  // A quantized V cache needs llama.cpp's flash attention.
  const std::string cache = kv == KvType::kQ8_0 ? " -ctk q8_0 -ctv q8_0 -fa on" : "";
  const std::string cmd = absl::StrCat("'", native_dir, "/llama-batched-bench' -m '", model_path, "' -c ",
                                       max_streams * (pp + tg) + 64, " -b 512 -ub 512 -npp ", pp, " -ntg ", tg,
                                       " -npl ", streams, " -t ", threads, " -tb ", threads, cache, " 2>/dev/null");
  std::vector<std::pair<int, PeerStreams>> rows;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return rows;
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  pclose(p);
  // |    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> cells;
    for (absl::string_view c : absl::StrSplit(line, '|')) cells.emplace_back(absl::StripAsciiWhitespace(c));
    if (cells.size() < 10) continue;
    int b = 0;
    PeerStreams row;
    if (!absl::SimpleAtoi(cells[3], &b) || !absl::SimpleAtod(cells[5], &row.prefill_all_s) ||
        !absl::SimpleAtod(cells[8], &row.aggregate)) {
      continue;
    }
    rows.emplace_back(b, row);
  }
  return rows;
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

struct BenchModel {
  std::string path;
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Model> model;
};

// The test model of `type_name` and `shape` in models_dir (written on first use, as
// `gantry bundle make-test-model` writes it). Errors are printed; null model on error.
BenchModel LoadBenchModel(const std::string& type_name, const std::string& shape, const std::string& tokenizer,
                          const std::string& models_dir) {
  BenchModel m;
  testmodel::TestModelOptions o;
  if (!testmodel::ParseWeights(type_name, &o)) {
    std::fprintf(stderr, "worker_bench: unknown type %s\n", type_name.c_str());
    return m;
  }
  o.embedding_type = o.weight_type;
  o.tokenizer_dir = tokenizer;
  o.arch = "qwen3";
  if (shape == "2b") {
    o.n_layer = 28;
    o.n_embd = 2048;
    o.n_head = 16;
    o.n_head_kv = 8;
    o.head_dim = 128;
    o.n_ff = 6144;
  } else {
    o.n_layer = 12;
    o.n_embd = 768;
    o.n_head = 12;
    o.n_head_kv = 4;
    o.n_ff = 2048;
  }
  m.path = absl::StrCat(models_dir, "/qwen3-", shape == "2b" ? "28x2048" : "12x768", "-", type_name, ".gguf");
  if (!Exists(m.path)) {
    auto made = testmodel::MakeTestModel(o, m.path);
    if (!made.ok()) {
      std::fprintf(stderr, "worker_bench: making %s: %s\n", m.path.c_str(), made.status().ToString().c_str());
      return m;
    }
  }
  auto file = gguf::GgufFile::Open(m.path);
  if (!file.ok()) {
    std::fprintf(stderr, "worker_bench: %s\n", file.status().ToString().c_str());
    return m;
  }
  m.file = std::move(*file);
  auto model = Model::Load(*m.file);
  if (!model.ok()) {
    std::fprintf(stderr, "worker_bench: %s\n", model.status().ToString().c_str());
    return m;
  }
  m.model = std::move(*model);
  return m;
}

std::string Ratio(double ours, double peer) {
  return ours > 0 && peer > 0 ? absl::StrCat(static_cast<int>(ours / peer * 100 + 0.5) / 100.0, "x") : "-";
}

int StreamsMain(const std::string& streams, const std::string& shape, const std::string& types,
                const std::string& tokenizer, const std::string& models_dir, const std::string& native, int pp,
                int tg, int threads, int repeat, KvType kv) {
  std::vector<int> counts;
  for (absl::string_view c : absl::StrSplit(streams, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(c, &n) || n < 1 || n > 64) {
      std::fprintf(stderr, "worker_bench: bad --streams %s\n", streams.c_str());
      return 2;
    }
    counts.push_back(n);
  }
  const bool have_peer = Exists(native + "/llama-batched-bench");
  kernels::ThreadPool pool(threads);
  std::printf("worker_bench --streams: qwen3 %s, prompt %d, decode %d each, %d threads, best of %d, kernels %s, "
              "KV cache %s\n",
              shape == "2b" ? "28 layers x 2048 (2B)" : "12 layers x 768", pp, tg, threads, repeat,
              kernels::Kernels().name, KvTypeName(kv));
  if (!have_peer) std::printf("peer: not available (--native DIR with llama-batched-bench)\n");
  const std::vector<int32_t> prompt = PeerBenchIds(pp);
  for (const std::string& type_name : std::vector<std::string>(absl::StrSplit(types, ','))) {
    BenchModel m = LoadBenchModel(type_name, shape, tokenizer, models_dir);
    if (!m.model) return 1;
    const ModelConfig& c = m.model->config();
    if (absl::Status supported = KvPool::Supports(c, kv); !supported.ok()) {
      std::fprintf(stderr, "worker_bench: %s\n", std::string(supported.message()).c_str());
      return 2;
    }
    const double kv_ours = static_cast<double>(KvPool::BytesPerToken(c, kv));
    // llama.cpp's cache: 2 bytes a value for F16, 34 per 32 for Q8_0.
    const double kv_peer = 2.0 * c.n_layer * c.n_head_kv * c.head_dim * (kv == KvType::kQ8_0 ? 34.0 / 32 : 2.0);
    std::printf("\n%s: KV bytes per token ours %.0f, llama.cpp %.0f (%s)\n\n", type_name.c_str(), kv_ours,
                kv_peer, KvTypeName(kv));
    std::printf("| streams | decode tok/s ours (per stream) | peer (per stream) | ratio | ours / our 1 stream "
                "| TTFT p50 / p99 ours s | peer all prompts s |\n|---|---|---|---|---|---|---|\n");
    RunOursStreams(*m.model, &pool, kv, std::vector<int32_t>(prompt.begin(), prompt.begin() + 16), 1, 2);  // page in
    std::map<int, StreamsResult> ours;
    std::map<int, PeerStreams> theirs;
    for (int r = 0; r < repeat; ++r) {
      for (int n : counts) {
        StreamsResult got = RunOursStreams(*m.model, &pool, kv, prompt, n, tg);
        if (got.aggregate > ours[n].aggregate) ours[n] = got;
      }
      if (have_peer) {
        for (auto& [n, row] : RunPeerStreams(native, m.path, pp, tg, streams, threads,
                                             *std::max_element(counts.begin(), counts.end()), kv)) {
          if (row.aggregate > theirs[n].aggregate) theirs[n] = row;
        }
      }
    }
    const double one = ours.count(1) ? ours[1].aggregate : 0;
    for (int n : counts) {
      const StreamsResult& o = ours[n];
      const PeerStreams& p = theirs[n];
      std::printf("| %d | %.1f (%.2f) | %.1f (%.2f) | %s | %s | %.2f / %.2f | %.2f |\n", n, o.aggregate,
                  o.aggregate / n, p.aggregate, p.aggregate / n, Ratio(o.aggregate, p.aggregate).c_str(),
                  Ratio(o.aggregate, one).c_str(), o.ttft_p50, o.ttft_p99, p.prefill_all_s);
      std::fflush(stdout);
    }
  }
  return 0;
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
  std::string streams, shape = "small", native;
  int stream_pp = 128, stream_tg = 32;
  KvType kv = KvType::kF16;
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
    else if (a == "--streams") streams = v;
    else if (a == "--shape") ok = (shape = v) == "small" || shape == "2b";
    else if (a == "--native") native = v;
    else if (a == "--pp") ok = absl::SimpleAtoi(v, &stream_pp) && stream_pp >= 1;
    else if (a == "--tg") ok = absl::SimpleAtoi(v, &stream_tg) && stream_tg >= 1;
    else if (a == "--kv-cache-type") ok = ParseKvType(v, &kv);
    else ok = false;
    if (!ok) { std::fprintf(stderr, "worker_bench: bad option %s %s\n", a.c_str(), v.c_str()); return 2; }
  }
  if (!streams.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(models_dir, ignored);
    return StreamsMain(streams, shape, repeat_set ? types : "q4_k_m", tokenizer, models_dir, native, stream_pp,
                       stream_tg, threads, repeat_set ? repeat : 1, kv);
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
    BenchModel m = LoadBenchModel(type_name, "small", tokenizer, models_dir);
    if (!m.model) return 1;
    const Model& model = *m.model;
    const std::string& path = m.path;
    Speed ours, theirs;
    RunOurs(model, &pool, std::vector<int32_t>(prompt.begin(), prompt.begin() + 16), 4);  // page in
    for (int r = 0; r < repeat; ++r) {
      ours.KeepBest(RunOurs(model, &pool, prompt, tg));
      if (!peer.empty()) theirs.KeepBest(RunPeer(peer, path, pp, tg, threads));
    }
    const double bytes = static_cast<double>(model.WeightBytesPerToken());
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
