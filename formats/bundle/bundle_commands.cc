#include "formats/bundle/bundle_commands.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "formats/bundle/bundle.h"
#include "formats/bundle/bundle_pack.h"
#include "formats/testmodel/test_model.h"

namespace gantry::bundle {
namespace {

constexpr char kUsage[] =
    "Usage: gantry bundle pack --gguf FILE --model NAME [options] -o DIR\n"
    "       gantry bundle verify [--progress] DIR\n"
    "       gantry bundle make-test-model --tokenizer DIR -o FILE.gguf [options]\n"
    "\n"
    "pack: makes a bundle directory (docs/bundle.md): the GGUF weights, the tokenizer,\n"
    "the selected chat template (written as chat_template.jinja) and bundle.json, which\n"
    "pins each file by SHA-256 and the whole by an identity hash. Prints the identity.\n"
    "  --tokenizer-dir DIR       tokenizer.json (+ tokenizer_config.json, whose chat\n"
    "                            template wins); default: the GGUF's own tokenizer\n"
    "  --tool-protocol P         hermes_json, qwen3_coder_xml, llama31_json,\n"
    "                            mistral_tool_calls, or none (none)\n"
    "  --context N               tokens per sequence (the GGUF's context_length)\n"
    "  --max-output N            default output cap (min(4096, context))\n"
    "  --chat-template NAME      a named template (default)\n"
    "  --copy                    copy the assets instead of hard-linking them\n"
    "  --progress                progress bar while hashing (default: when stderr is a TTY)\n"
    "verify: re-hashes every asset; on a mismatch names the file and both hashes.\n"
    "Exit status: 0 success, 1 failure (bad or mismatched bundle), 2 usage error.\n"
    "\n"
    "make-test-model:\n"
    "Writes a deterministic random-weight GGUF v3 model carrying the vocabulary, merges or\n"
    "scores, token types, special tokens and chat template of the Hugging Face tokenizer in\n"
    "DIR (byte-level BPE: qwen3, llama3; SentencePiece BPE: Mistral, Gemma 3). llama.cpp\n"
    "loads these files.\n"
    "\n"
    "  --arch llama|qwen3        (qwen3)\n"
    "  --n-layer N               (2)      --n-embd N      (64)\n"
    "  --n-head N                (4)      --n-head-kv N   (2)\n"
    "  --head-dim N              (n-embd / n-head; qwen3 may differ)\n"
    "  --n-ff N                  (3 * n-embd)\n"
    "  --ctx N                   (2048)\n"
    "  --wtype f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k|q4_k_m   matrix weights (f16);\n"
    "                            K-quants need n-embd, n-head * head-dim and n-ff\n"
    "                            multiples of 256; q4_k_m is llama.cpp's mix\n"
    "                            (docs/bundle.md)\n"
    "  --embd-type TYPE          token embeddings (same as --wtype; not with q4_k_m)\n"
    "  --tied                    no output.weight: the head reuses token_embd\n"
    "  --seed N                  (1234)\n"
    "  --name NAME\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "gantry bundle make-test-model: %s\n", message.c_str());
  return 2;
}

int RunMakeTestModel(const std::vector<std::string>& args) {
  testmodel::TestModelOptions o;
  std::string out;
  bool embd_set = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--tied") {
      o.tied = true;
      continue;
    }
    if (i + 1 >= args.size()) return Fail(a + " needs a value (or is unknown)");
    const std::string& v = args[++i];
    uint32_t n = 0;
    auto number = [&](uint32_t* field) {
      if (!absl::SimpleAtoi(v, &n) || n > (1u << 20)) return false;
      *field = n;
      return true;
    };
    bool ok = true;
    if (a == "--tokenizer") o.tokenizer_dir = v;
    else if (a == "-o") out = v;
    else if (a == "--arch") o.arch = v;
    else if (a == "--n-layer") ok = number(&o.n_layer);
    else if (a == "--n-embd") ok = number(&o.n_embd);
    else if (a == "--n-head") ok = number(&o.n_head);
    else if (a == "--n-head-kv") ok = number(&o.n_head_kv);
    else if (a == "--head-dim") ok = number(&o.head_dim);
    else if (a == "--n-ff") ok = number(&o.n_ff);
    else if (a == "--ctx") ok = number(&o.context_length);
    else if (a == "--seed") ok = absl::SimpleAtoi(v, &o.seed);
    else if (a == "--name") o.name = v;
    else if (a == "--wtype") ok = testmodel::ParseWeights(v, &o);
    else if (a == "--embd-type") ok = embd_set = testmodel::ParseWeightType(v, &o.embedding_type);
    else return Fail("unknown option " + a);
    if (!ok) return Fail("bad value '" + v + "' for " + a);
  }
  if (o.tokenizer_dir.empty() || out.empty()) return Fail("--tokenizer and -o are required");
  if (o.q4_k_m && embd_set) return Fail("--embd-type does not combine with --wtype q4_k_m");
  if (!embd_set) o.embedding_type = o.weight_type;
  auto summary = testmodel::MakeTestModel(o, out);
  if (!summary.ok()) {
    std::fprintf(stderr, "gantry bundle make-test-model: %s\n", summary.status().ToString().c_str());
    return 1;
  }
  std::printf("{\"out\": \"%s\", \"bytes\": %llu, \"parameters\": %llu, \"vocab\": %u}\n",
              out.c_str(), static_cast<unsigned long long>(summary->bytes),
              static_cast<unsigned long long>(summary->parameters), summary->vocab_size);
  return 0;
}

// Draws "\rNAME [=====     ]  45%  12.0/40.0 MiB" on stderr, once per percent.
class ProgressBar {
 public:
  explicit ProgressBar(bool force) : force_(force) {}
  void operator()(const std::string& name, uint64_t done, uint64_t total) {
    if (total == 0 || (!force_ && total < (16u << 20))) return;
    int percent = static_cast<int>(done * 100 / total);
    if (name == name_ && percent == percent_) return;
    name_ = name;
    percent_ = percent;
    std::string bar(30, ' ');
    for (int i = 0; i < percent * 30 / 100; ++i) bar[i] = '=';
    std::fprintf(stderr, "\rhashing %s [%s] %3d%% %.1f/%.1f MiB", name.c_str(), bar.c_str(), percent,
                 done / 1048576.0, total / 1048576.0);
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool force_;
  std::string name_;
  int percent_ = -1;
};

bundle::HashProgress MakeProgress(bool flag) {
  if (!flag && !isatty(STDERR_FILENO)) return nullptr;
  auto bar = std::make_shared<ProgressBar>(flag);
  return [bar](const std::string& name, uint64_t done, uint64_t total) { (*bar)(name, done, total); };
}

std::string IdentityJson(const Manifest& m, const std::string& dir) {
  json::Value v = json::Value::EmptyObject();
  v.Set("dir", json::Value::String(dir));
  v.Set("model", json::Value::String(m.model));
  v.Set("identity_sha256", json::Value::String(m.identity_sha256));
  v.Set("architecture", json::Value::String(m.architecture));
  v.Set("weights_sha256", json::Value::String(m.weights.sha256));
  v.Set("tokenizer_sha256", json::Value::String(m.tokenizer.sha256));
  v.Set("chat_template_sha256", json::Value::String(m.chat_template.sha256));
  v.Set("tool_protocol", json::Value::String(m.tool_protocol));
  v.Set("context_length", json::Value::Int(m.context_length));
  v.Set("default_max_tokens", json::Value::Int(m.default_max_tokens));
  return json::Dump(v) + "\n";
}

int RunPack(const std::vector<std::string>& args) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "gantry bundle pack: %s\n", message.c_str());
    return 2;
  };
  PackOptions o;
  bool progress = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--copy") {
      o.copy = true;
      continue;
    }
    if (a == "--progress") {
      progress = true;
      continue;
    }
    if (i + 1 >= args.size()) return fail(a + " needs a value (or is unknown)");
    const std::string& v = args[++i];
    bool ok = true;
    if (a == "--gguf") o.gguf_path = v;
    else if (a == "--model") o.model = v;
    else if (a == "--tokenizer-dir") o.tokenizer_dir = v;
    else if (a == "--tool-protocol") o.tool_protocol = v == "none" ? "" : v;
    else if (a == "--context") ok = absl::SimpleAtoi(v, &o.context_length) && o.context_length > 0;
    else if (a == "--max-output") ok = absl::SimpleAtoi(v, &o.max_output) && o.max_output > 0;
    else if (a == "--chat-template") o.chat_template_name = v;
    else if (a == "-o") o.out_dir = v;
    else return fail("unknown option " + a);
    if (!ok) return fail("bad value '" + v + "' for " + a);
  }
  if (o.gguf_path.empty() || o.model.empty() || o.out_dir.empty()) {
    return fail("--gguf, --model and -o are required");
  }
  auto manifest = PackBundle(o, MakeProgress(progress));
  if (!manifest.ok()) {
    std::fprintf(stderr, "gantry bundle pack: %s\n", manifest.status().ToString().c_str());
    return 1;
  }
  std::fputs(IdentityJson(*manifest, o.out_dir).c_str(), stdout);
  return 0;
}

int RunVerify(const std::vector<std::string>& args) {
  std::string dir;
  bool progress = false;
  for (const std::string& a : args) {
    if (a == "--progress") {
      progress = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "gantry bundle verify: unknown option %s\n", a.c_str());
      return 2;
    } else if (!dir.empty()) {
      std::fputs("gantry bundle verify: one bundle directory at a time\n", stderr);
      return 2;
    } else {
      dir = a;
    }
  }
  if (dir.empty()) {
    std::fputs("gantry bundle verify: a bundle directory is required\n", stderr);
    return 2;
  }
  auto bundle = LoadAndVerify(dir, MakeProgress(progress));
  if (!bundle.ok()) {
    std::fprintf(stderr, "gantry bundle verify: %s\n", bundle.status().ToString().c_str());
    return 1;
  }
  std::fputs(IdentityJson(bundle->manifest(), dir).c_str(), stdout);
  return 0;
}

int RunBundle(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "pack") return RunPack(rest);
  if (args[0] == "verify") return RunVerify(rest);
  if (args[0] == "make-test-model") {
    return RunMakeTestModel(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::fprintf(stderr, "gantry bundle: unknown verb '%s'\n%s", args[0].c_str(), kUsage);
  return 2;
}

}  // namespace

const Subcommand kBundleCommand = {
    "bundle", "pack and verify model bundles; make deterministic test models", kUsage,
    &RunBundle};

}  // namespace gantry::bundle
