#include "worker/model/generate_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "formats/gguf/gguf.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"
#include "worker/kernels/thread_pool.h"
#include "worker/model/model.h"
#include "worker/model/session.h"

namespace gantry::model {
namespace {

constexpr char kUsage[] =
    "Usage: gantry generate --model FILE.gguf (--prompt-file F | --prompt-ids JSON) [options]\n"
    "\n"
    "Evaluates the prompt with Gantry's kernels and generates greedily.\n"
    "  --prompt-file F     text, tokenized with the model's own GGUF tokenizer, special\n"
    "                      tokens parsed (as llama.cpp does by default)\n"
    "  --prompt-ids JSON   a JSON array of token ids, or @FILE holding one\n"
    "  --n N               tokens to generate (32); EOS does not stop generation\n"
    "  --threads T         threads for the forward pass (1)\n"
    "  --temperature 0     greedy (the only mode of this command)\n"
    "  --json              print {\"prompt_ids\", \"top_logprobs\" (5 [id, logprob] pairs at the\n"
    "                      last prompt position), \"ids\"}\n"
    "  --bench             also print prefill and decode tokens/s\n";

int Usage(const std::string& message) {
  std::fprintf(stderr, "gantry generate: %s\n", message.c_str());
  return 2;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  auto v = json::Parse(text);
  if (!v.ok()) return v.status();
  if (!v->is_array() || v->items().empty()) return absl::InvalidArgumentError("prompt ids: need a non-empty JSON array");
  std::vector<int32_t> ids;
  for (const json::Value& item : v->items()) {
    auto i = item.as_int64();
    if (!i || *i < 0 || *i > INT32_MAX) return absl::InvalidArgumentError("prompt ids: not a token id");
    ids.push_back(static_cast<int32_t>(*i));
  }
  return ids;
}

int RunGenerate(const std::vector<std::string>& args) {
  std::string model_path, prompt_file, prompt_ids;
  int n = 32, threads = 1;
  bool json_out = false, bench = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") { json_out = true; continue; }
    if (a == "--bench") { bench = true; continue; }
    if (i + 1 >= args.size()) return Usage(a + " needs a value (or is unknown)");
    const std::string& v = args[++i];
    if (a == "--model") model_path = v;
    else if (a == "--prompt-file") prompt_file = v;
    else if (a == "--prompt-ids") prompt_ids = v;
    else if (a == "--n") { if (!absl::SimpleAtoi(v, &n) || n < 0 || n > 100000) return Usage("bad --n"); }
    else if (a == "--threads") { if (!absl::SimpleAtoi(v, &threads) || threads < 1 || threads > 256) return Usage("bad --threads"); }
    else if (a == "--temperature") { if (v != "0" && v != "0.0") return Usage("only --temperature 0 (greedy)"); }
    else return Usage("unknown option " + a);
  }
  if (model_path.empty() || prompt_file.empty() == prompt_ids.empty()) {
    return Usage("--model and exactly one of --prompt-file / --prompt-ids are required");
  }
  auto file = gguf::GgufFile::Open(model_path);
  if (!file.ok()) {
    std::fprintf(stderr, "gantry generate: %s\n", file.status().ToString().c_str());
    return 1;
  }
  auto model = Model::Load(**file);
  if (!model.ok()) {
    std::fprintf(stderr, "gantry generate: %s\n", model.status().ToString().c_str());
    return 1;
  }
  std::vector<int32_t> prompt;
  if (!prompt_ids.empty()) {
    std::string text = prompt_ids;
    if (text[0] == '@') {
      auto contents = ReadFileToString(text.substr(1));
      if (!contents.ok()) return Usage(std::string(contents.status().message()));
      text = *contents;
    }
    auto ids = ParseIds(text);
    if (!ids.ok()) return Usage(std::string(ids.status().message()));
    prompt = *ids;
  } else {
    auto text = ReadFileToString(prompt_file);
    if (!text.ok()) return Usage(std::string(text.status().message()));
    auto tokenizer = tokenizer::Tokenizer::Load(model_path);
    if (!tokenizer.ok()) {
      std::fprintf(stderr, "gantry generate: tokenizer: %s\n", tokenizer.status().ToString().c_str());
      return 1;
    }
    auto ids = (*tokenizer)->Encode(*text);
    if (!ids.ok()) {
      std::fprintf(stderr, "gantry generate: %s\n", ids.status().ToString().c_str());
      return 1;
    }
    prompt = *ids;
  }
  const int capacity = std::min<int>((*model)->config().context_length,
                                     static_cast<int>(prompt.size()) + n + 1);
  kernels::ThreadPool pool(threads);
  Session::Options options;
  options.pool = &pool;
  Session session(**model, capacity, options);
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  absl::Status s = session.Eval(prompt, &logits);
  if (!s.ok()) {
    std::fprintf(stderr, "gantry generate: %s\n", s.ToString().c_str());
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  auto top = TopLogprobs(logits, 5);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t next = TopLogprobs(logits, 1)[0].first;
    out.push_back(next);
    if (i + 1 == n) break;
    s = session.Eval({next}, &logits);
    if (!s.ok()) {
      std::fprintf(stderr, "gantry generate: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  json::Value doc = json::Value::EmptyObject();
  json::Value ids = json::Value::EmptyArray();
  for (int32_t t : prompt) ids.Append(json::Value::Int(t));
  doc.Set("prompt_ids", ids);
  json::Value tops = json::Value::EmptyArray();
  for (const auto& [id, lp] : top) {
    json::Value pair = json::Value::EmptyArray();
    pair.Append(json::Value::Int(id));
    pair.Append(json::Value::Double(lp));
    tops.Append(pair);
  }
  doc.Set("top_logprobs", tops);
  json::Value gen = json::Value::EmptyArray();
  for (int32_t t : out) gen.Append(json::Value::Int(t));
  doc.Set("ids", gen);
  if (bench) {
    const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
    const double decode_s = std::chrono::duration<double>(t2 - t1).count();
    doc.Set("prefill_tok_s", json::Value::Double(prompt.size() / prefill_s));
    if (n > 1) doc.Set("decode_tok_s", json::Value::Double((n - 1) / decode_s));
  }
  if (json_out) {
    std::printf("%s\n", json::Dump(doc).c_str());
  } else {
    std::printf("prompt %zu tokens; top-1 %d (logprob %.4f); generated:", prompt.size(), top[0].first,
                top[0].second);
    for (int32_t t : out) std::printf(" %d", t);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

const Subcommand kGenerateCommand = {
    "generate", "run a GGUF model with Gantry's kernels (greedy; agreement and speed checks)",
    kUsage, &RunGenerate};

}  // namespace gantry::model
