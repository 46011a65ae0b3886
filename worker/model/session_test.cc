// The fast forward pass (chunked prefill, threads, the CPU's best kernels) against the
// scalar one-token reference path, on small random-weight models.
// Stated tolerance: every logit within 2e-3 * max|logit| (F32, F16) or 2e-2 * max|logit|
// (Q8_0, Q4_0, Q5_K, Q4_K_M, where a float difference can flip an activation's
// quantization step); the top token identical. K-quant models are 256 wide (their rows
// are whole super-blocks).
// Needs a byte-level BPE tokenizer: $GANTRY_REFERENCE_DIR/tokenizers/qwen3 or
// $GANTRY_LLAMA_PEER_DIR/tokenizers/qwen3 (fails, does not skip, without one).
#include "worker/model/session.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf/gguf.h"
#include "formats/gguf/quant.h"
#include "formats/testmodel/test_model.h"
#include "gtest/gtest.h"
#include "worker/kernels/thread_pool.h"

namespace gantry::model {
namespace {

std::string TokenizerDir() {
  for (const char* var : {"GANTRY_REFERENCE_DIR", "GANTRY_LLAMA_PEER_DIR"}) {
    const char* root = std::getenv(var);
    if (root && *root) return std::string(root) + "/tokenizers/qwen3";
  }
  return "";
}

struct Loaded {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Model> model;
};

Loaded Make(const std::string& arch, gguf::TensorType type, bool q4_k_m = false) {
  testmodel::TestModelOptions o;
  o.tokenizer_dir = TokenizerDir();
  o.arch = arch;
  o.n_layer = 2;
  const bool wide = q4_k_m || gguf::IsKQuant(type);
  o.n_embd = wide ? 256 : 64;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = wide ? 512 : 192;
  if (arch == "qwen3") o.head_dim = wide ? 128 : 32;
  o.weight_type = o.embedding_type = type;
  o.q4_k_m = q4_k_m;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/session_test_" + arch + "_" +
                           gguf::TensorTypeName(type) + (q4_k_m ? "_M" : "") + ".gguf";
  Loaded l;
  auto made = testmodel::MakeTestModel(o, path);
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return l;
  auto file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return l;
  l.file = std::move(*file);
  auto model = Model::Load(*l.file);
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) l.model = std::move(*model);
  return l;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0, worst = 0;
  for (float v : want) scale = std::max(scale, std::fabs(double(v)));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  EXPECT_LE(worst, rel * scale) << what << ": max |difference| " << worst << " against max |logit| " << scale;
  const auto argmax = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
  // The same top token, unless the reference's top two are a near tie: closer than the
  // differences measured (activations quantized from float sums in another order round
  // differently, e.g. in Q4_K_M's random model the top two differ by 0.01 where the
  // logits differ by up to 0.2, well inside the tolerance).
  const auto top = argmax(want), chosen = argmax(got);
  if (chosen != top) {
    EXPECT_LE(want[top] - want[chosen], 2 * worst) << what << ": top token " << chosen << " instead of " << top;
  }
}

TEST(SessionTest, FastPathMatchesTheReferencePath) {
  ASSERT_NE(TokenizerDir(), "") << "set GANTRY_REFERENCE_DIR or GANTRY_LLAMA_PEER_DIR";
  kernels::ThreadPool pool(2);
  // Longer than one chunk, so prefill crosses a chunk boundary.
  const int n_prompt = Session::kMaxChunk + 37;
  std::vector<int32_t> prompt;
  uint32_t s = 7;
  for (int i = 0; i < n_prompt; ++i) prompt.push_back(100 + (s = s * 1664525u + 1013904223u) % 100000);
  struct Case {
    const char* arch;
    gguf::TensorType type;
    double rel;
    bool q4_k_m = false;
  };
  for (const Case& c : {Case{"qwen3", gguf::TensorType::kF32, 2e-3}, Case{"qwen3", gguf::TensorType::kF16, 2e-3},
                        Case{"llama", gguf::TensorType::kQ8_0, 2e-2}, Case{"qwen3", gguf::TensorType::kQ4_0, 2e-2},
                        Case{"llama", gguf::TensorType::kQ5_K, 2e-2},
                        Case{"qwen3", gguf::TensorType::kQ4_K, 2e-2, /*q4_k_m=*/true}}) {
    SCOPED_TRACE(std::string(c.arch) + " " + gguf::TensorTypeName(c.type) + (c.q4_k_m ? "_M" : ""));
    Loaded l = Make(c.arch, c.type, c.q4_k_m);
    ASSERT_TRUE(l.model);
    const int capacity = n_prompt + 8;
    Session::Options fast_options, reference_options;
    fast_options.pool = &pool;
    reference_options.reference = true;
    Session fast(*l.model, capacity, fast_options), reference(*l.model, capacity, reference_options);
    std::vector<float> got, want;
    ASSERT_TRUE(fast.Eval(prompt, &got).ok());
    ASSERT_TRUE(reference.Eval(prompt, &want).ok());
    ExpectClose(got, want, c.rel, "prefill");
    // Decode: a chunk of one token, three times, the reference's greedy choices.
    for (int step = 0; step < 3; ++step) {
      const int32_t next = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
      ASSERT_TRUE(fast.Eval({next}, &got).ok());
      ASSERT_TRUE(reference.Eval({next}, &want).ok());
      ExpectClose(got, want, c.rel, "decode");
    }
    // Truncate and re-evaluate: the cache prefix is reused, the tail overwritten.
    fast.Truncate(100);
    reference.Truncate(100);
    ASSERT_TRUE(fast.Eval({prompt[5], prompt[6]}, &got).ok());
    ASSERT_TRUE(reference.Eval({prompt[5], prompt[6]}, &want).ok());
    ExpectClose(got, want, c.rel, "after truncate");
    EXPECT_EQ(fast.n_past(), 102);
  }
}

TEST(SessionTest, ThreadCountDoesNotChangeTheResult) {
  ASSERT_NE(TokenizerDir(), "");
  Loaded l = Make("qwen3", gguf::TensorType::kQ8_0);
  ASSERT_TRUE(l.model);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(1000 + 17 * i);
  std::vector<float> one, three;
  kernels::ThreadPool pool1(1), pool3(3);
  Session::Options o1, o3;
  o1.pool = &pool1;
  o3.pool = &pool3;
  Session a(*l.model, 80, o1), b(*l.model, 80, o3);
  ASSERT_TRUE(a.Eval(prompt, &one).ok());
  ASSERT_TRUE(b.Eval(prompt, &three).ok());
  // Each output is computed by one thread in a fixed order: bit-identical.
  EXPECT_EQ(one, three);
}

TEST(SessionTest, ErrorsAppendNothing) {
  ASSERT_NE(TokenizerDir(), "");
  Loaded l = Make("qwen3", gguf::TensorType::kF16);
  ASSERT_TRUE(l.model);
  Session s(*l.model, 4);
  std::vector<float> logits;
  EXPECT_FALSE(s.Eval({1, 2, 3, 4, 5}, &logits).ok());
  EXPECT_FALSE(s.Eval({-1}, &logits).ok());
  EXPECT_FALSE(s.Eval({}, &logits).ok());
  EXPECT_EQ(s.n_past(), 0);
  EXPECT_TRUE(s.Eval({1, 2, 3, 4}, &logits).ok());
  EXPECT_EQ(s.n_past(), 4);
}

}  // namespace
}  // namespace gantry::model
