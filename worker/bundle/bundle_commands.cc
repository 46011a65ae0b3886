#include "worker/bundle/bundle_commands.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "worker/testmodel/test_model.h"

namespace gantry::bundle {
namespace {

constexpr char kUsage[] =
    "Usage: gantry bundle make-test-model --tokenizer DIR -o FILE.gguf [options]\n"
    "\n"
    "Writes a deterministic random-weight GGUF v3 model carrying the vocabulary, merges,\n"
    "token types, special tokens and chat template of the Hugging Face tokenizer in DIR\n"
    "(byte-level BPE: qwen3, llama3). llama.cpp loads these files.\n"
    "\n"
    "  --arch llama|qwen3        (qwen3)\n"
    "  --n-layer N               (2)      --n-embd N      (64)\n"
    "  --n-head N                (4)      --n-head-kv N   (2)\n"
    "  --head-dim N              (n-embd / n-head; qwen3 may differ)\n"
    "  --n-ff N                  (3 * n-embd)\n"
    "  --ctx N                   (2048)\n"
    "  --wtype f32|f16|bf16|q8_0|q4_0   matrix weights (f16)\n"
    "  --embd-type TYPE          token embeddings (same as --wtype)\n"
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
    else if (a == "--wtype") ok = testmodel::ParseWeightType(v, &o.weight_type);
    else if (a == "--embd-type") ok = embd_set = testmodel::ParseWeightType(v, &o.embedding_type);
    else return Fail("unknown option " + a);
    if (!ok) return Fail("bad value '" + v + "' for " + a);
  }
  if (o.tokenizer_dir.empty() || out.empty()) return Fail("--tokenizer and -o are required");
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

int RunBundle(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (args[0] == "make-test-model") {
    return RunMakeTestModel(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::fprintf(stderr, "gantry bundle: unknown verb '%s'\n%s", args[0].c_str(), kUsage);
  return 2;
}

}  // namespace

const cli::Subcommand kBundleCommand = {
    "bundle", "make deterministic test models (pack and verify: coming with bundles)", kUsage,
    &RunBundle};

}  // namespace gantry::bundle
