// Benchmark: encode throughput (MB/s) of Gantry's tokenizers over the conformance corpus,
// side by side in one run with the Hugging Face references (JS @huggingface/tokenizers
// and the native Rust tokenizers through npm), printing the ratios.
//   bazel run -c opt //tokenizer-svc/tokenizer:tokenizer_bench -- \
//       --reference $GANTRY_REFERENCE_DIR --peer $GANTRY_LLAMA_PEER_DIR [--seconds S]
// The corpus is tests/data/tokenizer/corpus (22 files, ~100 KB including a 30 KB
// tool-bearing Qwen3 prompt). Goal: faster than the Rust tokenizer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string reference, peer, corpus = "tests/data/tokenizer/corpus";
  double seconds = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--reference") reference = argv[i + 1];
    else if (a == "--peer") peer = argv[i + 1];
    else if (a == "--corpus") corpus = argv[i + 1];
    else if (a == "--seconds") seconds = std::atof(argv[i + 1]);
  }
  if (reference.empty()) {
    std::fprintf(stderr, "usage: tokenizer_bench --reference DIR [--peer DIR] [--corpus DIR] [--seconds S]\n");
    return 2;
  }
  // The working directory of `bazel run` is the runfiles tree; resolve the corpus there
  // or from the workspace.
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY")) corpus = std::string(ws) + "/" + corpus;
  std::vector<std::string> texts;
  size_t bytes = 0;
  if (DIR* d = opendir(corpus.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      texts.push_back(Read(corpus + "/" + n));
      bytes += texts.back().size();
    }
  }
  if (texts.empty()) {
    std::fprintf(stderr, "no corpus in %s\n", corpus.c_str());
    return 1;
  }
  std::printf("corpus: %zu files, %zu bytes; %.1f s per measurement, 1 thread\n\n", texts.size(), bytes, seconds);
  std::printf("%-8s %12s %12s %12s %10s %10s\n", "tokenizer", "gantry MB/s", "HF JS MB/s", "HF Rust MB/s",
              "vs JS", "vs Rust");
  for (const char* name : {"qwen3", "llama3", "llama2", "gemma3"}) {
    const std::string dir = reference + "/tokenizers/" + name;
    auto tok = gantry::tokenizer::Tokenizer::Load(dir);
    if (!tok.ok()) {
      std::printf("%-8s load failed: %s\n", name, tok.status().ToString().c_str());
      continue;
    }
    for (const auto& t : texts) (void)(*tok)->Encode(t);  // warm the word cache as the peers warm theirs
    auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    size_t done = 0;
    while (elapsed < seconds) {
      for (const auto& t : texts) (void)(*tok)->Encode(t);
      done += bytes;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const double ours = done / 1e6 / elapsed;
    double js = 0, rust = 0;
    if (!peer.empty()) {
      std::string out = RunCommand(absl::StrCat("cd '", peer, "' && node '",
                                                std::getenv("BUILD_WORKSPACE_DIRECTORY")
                                                    ? std::string(std::getenv("BUILD_WORKSPACE_DIRECTORY")) + "/"
                                                    : std::string(),
                                                "tokenizer-svc/tokenizer/bench_peer.mjs' '", peer, "' '", dir,
                                                "' '", corpus, "' ", seconds, " 2>/dev/null"));
      auto v = gantry::json::Parse(out);
      if (v.ok() && v->is_object()) {
        if (const auto* x = v->Find("hf_js_mb_s")) js = x->as_double();
        if (const auto* x = v->Find("rust_mb_s")) rust = x->as_double();
      }
    }
    std::printf("%-8s %12.2f %12.2f %12.2f %9.2fx %9.2fx\n", name, ours, js, rust, js > 0 ? ours / js : 0.0,
                rust > 0 ? ours / rust : 0.0);
  }
  return 0;
}
