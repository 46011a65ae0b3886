// The fast forward pass (chunked prefill, threads, the CPU's best kernels) against the
// scalar one-token reference path, and sequences batched against the same sequences
// alone, on small random-weight models.
// The paged cache's prefix sharing (kv_cache.h) against evaluating alone.
// Stated tolerance: every logit within 2e-3 * max|logit| (F32, F16) or 2e-2 * max|logit|
// (Q8_0, Q4_0, Q5_K, Q4_K_M, where a float difference can flip an activation's
// quantization step); the top token identical. A Q8_0 KV cache: the fast path within
// 2e-3 of the reference for F16 weights; its logits within 1e-2 of an F16 cache's. K-quant models are 256 wide (their rows
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

#include "common/status.h"
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
    KvType kv = KvType::kF16;
  };
  for (const Case& c : {Case{"qwen3", gguf::TensorType::kF32, 2e-3}, Case{"qwen3", gguf::TensorType::kF16, 2e-3},
                        Case{"llama", gguf::TensorType::kQ8_0, 2e-2}, Case{"qwen3", gguf::TensorType::kQ4_0, 2e-2},
                        Case{"llama", gguf::TensorType::kQ5_K, 2e-2},
                        Case{"qwen3", gguf::TensorType::kQ4_K, 2e-2, /*q4_k_m=*/true},
                        // A Q8_0 cache: queries quantized as Q8_0 activations are.
                        Case{"qwen3", gguf::TensorType::kF16, 2e-3, false, KvType::kQ8_0},
                        Case{"qwen3", gguf::TensorType::kQ4_K, 2e-2, /*q4_k_m=*/true, KvType::kQ8_0}}) {
    SCOPED_TRACE(std::string(c.arch) + " " + gguf::TensorTypeName(c.type) + (c.q4_k_m ? "_M" : "") + " cache " +
                 KvTypeName(c.kv));
    Loaded l = Make(c.arch, c.type, c.q4_k_m);
    ASSERT_TRUE(l.model);
    const int capacity = n_prompt + 8;
    Session::Options fast_options, reference_options;
    fast_options.pool = &pool;
    reference_options.reference = true;
    Session fast(*l.model, capacity, fast_options, c.kv), reference(*l.model, capacity, reference_options, c.kv);
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
    // Truncate and re-evaluate: the cache prefix is reused, the tail overwritten. A
    // chunk of 70: a second tile of 6 query rows (at 64), few enough rows that a Q8_0
    // cache's values are weighted position by position.
    fast.Truncate(100);
    reference.Truncate(100);
    const std::vector<int32_t> chunk(prompt.begin() + 5, prompt.begin() + 75);
    ASSERT_TRUE(fast.Eval(chunk, &got).ok());
    ASSERT_TRUE(reference.Eval(chunk, &want).ok());
    ExpectClose(got, want, c.rel, "after truncate");
    EXPECT_EQ(fast.n_past(), 170);
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

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A Q8_0 cache takes 34 bytes per 32 values against F16's 64, and its logits stay close
// to the F16 cache's (the same model, the same tokens: only the cache's rounding
// differs). A head dimension that is not a multiple of 32 cannot be kept as Q8_0.
TEST(SessionTest, AQ8_0CacheTakesLittleMoreThanHalfTheBytesAndStaysCloseToF16) {
  ASSERT_NE(TokenizerDir(), "");
  Loaded l = Make("qwen3", gguf::TensorType::kF16);
  ASSERT_TRUE(l.model);
  const ModelConfig& c = l.model->config();
  EXPECT_TRUE(KvPool::Supports(c, KvType::kQ8_0).ok());
  EXPECT_EQ(KvPool::BytesPerToken(c, KvType::kQ8_0) * 64, KvPool::BytesPerToken(c, KvType::kF16) * 34);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 300; ++i) prompt.push_back(100 + (i * 104729) % 5000);
  Session f16(*l.model, 320, Session::Options(), KvType::kF16), q8(*l.model, 320, Session::Options(), KvType::kQ8_0);
  std::vector<float> want, got;
  ASSERT_TRUE(f16.Eval(prompt, &want).ok());
  ASSERT_TRUE(q8.Eval(prompt, &got).ok());
  ExpectClose(got, want, 1e-2, "q8_0 cache against f16 cache");
  for (int step = 0; step < 4; ++step) {
    const int32_t next = Argmax(want);
    ASSERT_TRUE(f16.Eval({next}, &want).ok());
    ASSERT_TRUE(q8.Eval({next}, &got).ok());
    ExpectClose(got, want, 1e-2, "q8_0 cache against f16 cache, decoding");
  }

  Loaded llama = Make("llama", gguf::TensorType::kF16);  // head_dim 16
  ASSERT_TRUE(llama.model);
  const absl::Status refused = KvPool::Supports(llama.model->config(), KvType::kQ8_0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("multiple of 32"), std::string::npos) << refused;
  EXPECT_TRUE(KvPool::Supports(llama.model->config(), KvType::kF16).ok());
  // A pool asked for what the model cannot keep keeps F16, and says so.
  KvPool fallback(llama.model->config(), 4, KvType::kQ8_0);
  EXPECT_EQ(fallback.type(), KvType::kF16);
  EXPECT_EQ(fallback.block_bytes(), KvPool::BlockBytes(llama.model->config(), KvType::kF16));
}


// Eight prompts of different lengths: four prefilled together, then the other four's
// prompts in the same passes as the first four's decode steps (sequences joining a
// running batch), then all eight decoding together. Each sequence's logits at every
// step are those it gets alone, bit for bit (a row's products do not depend on the
// other rows), and so are its greedy tokens.
TEST(ForwardTest, BatchedSequencesGetTheLogitsTheyGetAlone) {
  ASSERT_NE(TokenizerDir(), "");
  for (auto [type, kv] : {std::pair(gguf::TensorType::kQ8_0, KvType::kF16), std::pair(gguf::TensorType::kQ4_K, KvType::kF16),
                          std::pair(gguf::TensorType::kQ8_0, KvType::kQ8_0)}) {
    SCOPED_TRACE(std::string(gguf::TensorTypeName(type)) + " cache " + KvTypeName(kv));
    Loaded l = Make("qwen3", type, type == gguf::TensorType::kQ4_K);
    ASSERT_TRUE(l.model);
    constexpr int kSequences = 8, kSteps = 6, kCapacity = 128;
    std::vector<std::vector<int32_t>> prompts(kSequences);
    for (int s = 0; s < kSequences; ++s) {
      for (int i = 0; i < 9 + 11 * s; ++i) prompts[s].push_back(100 + (s * 7919 + i * 104729) % 5000);
    }
    kernels::ThreadPool pool(2);
    Forward::Options options;
    options.pool = &pool;
    // Alone: each prompt, then kSteps greedy tokens.
    std::vector<std::vector<std::vector<float>>> alone(kSequences);
    for (int s = 0; s < kSequences; ++s) {
      Session session(*l.model, kCapacity, options, kv);
      std::vector<float> logits;
      ASSERT_TRUE(session.Eval(prompts[s], &logits).ok());
      alone[s].push_back(logits);
      for (int step = 0; step < kSteps; ++step) {
        ASSERT_TRUE(session.Eval({Argmax(logits)}, &logits).ok());
        alone[s].push_back(logits);
      }
    }
    // Batched.
    Forward forward(*l.model, options);
    std::vector<std::unique_ptr<KvCache>> caches;
    for (int s = 0; s < kSequences; ++s) caches.push_back(std::make_unique<KvCache>(l.model->config(), kCapacity, kv));
    std::vector<std::vector<std::vector<float>>> batched(kSequences);
    std::vector<std::vector<float>> logits(kSequences);
    std::vector<int32_t> next(kSequences);
    // Pass p: sequences 0-3 prefill in pass 0 and decode from pass 1; sequences 4-7
    // prefill in pass 1 and decode from pass 2.
    for (int pass = 0; pass < kSteps + 2; ++pass) {
      std::vector<Forward::Item> items;
      std::vector<int> who;
      for (int s = 0; s < kSequences; ++s) {
        const int start = s < 4 ? 0 : 1;
        const int steps_done = static_cast<int>(batched[s].size());
        if (pass < start || steps_done > kSteps) continue;
        Forward::Item item;
        item.cache = caches[s].get();
        if (pass == start) {
          item.tokens = prompts[s].data();
          item.n = static_cast<int>(prompts[s].size());
        } else {
          next[s] = Argmax(logits[s]);
          item.tokens = &next[s];
          item.n = 1;
        }
        item.logits = &logits[s];
        items.push_back(item);
        who.push_back(s);
      }
      forward.Eval(&items);
      for (size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(items[i].status.ok()) << items[i].status;
        batched[who[i]].push_back(logits[who[i]]);
      }
    }
    for (int s = 0; s < kSequences; ++s) {
      ASSERT_EQ(batched[s].size(), alone[s].size()) << s;
      for (size_t step = 0; step < alone[s].size(); ++step) {
        EXPECT_EQ(batched[s][step], alone[s][step]) << gguf::TensorTypeName(type) << " sequence " << s << " step " << step;
        EXPECT_EQ(Argmax(batched[s][step]), Argmax(alone[s][step]));
      }
      EXPECT_EQ(caches[s]->n_past(), static_cast<int>(prompts[s].size()) + kSteps);
    }
  }
}

// An item that cannot be evaluated (its cache full, a token outside the vocabulary, a
// cache named twice) gets its error and nothing appended; the others in the same pass
// get what they get alone.
TEST(ForwardTest, AFailingItemDoesNotDisturbTheOthers) {
  ASSERT_NE(TokenizerDir(), "");
  Loaded l = Make("qwen3", gguf::TensorType::kQ8_0);
  ASSERT_TRUE(l.model);
  const std::vector<int32_t> prompt = {11, 22, 33, 44, 55, 66};
  std::vector<float> want;
  Session alone(*l.model, 16);
  ASSERT_TRUE(alone.Eval(prompt, &want).ok());

  Forward forward(*l.model, Forward::Options());
  KvCache good(l.model->config(), 16), full(l.model->config(), 4), bad_token(l.model->config(), 16);
  const std::vector<int32_t> out_of_vocabulary = {1, l.model->config().n_vocab};
  std::vector<float> logits, ignored;
  std::vector<Forward::Item> items(4);
  items[0] = {&full, prompt.data(), static_cast<int>(prompt.size()), &ignored, absl::OkStatus()};
  items[1] = {&good, prompt.data(), static_cast<int>(prompt.size()), &logits, absl::OkStatus()};
  items[2] = {&bad_token, out_of_vocabulary.data(), 2, &ignored, absl::OkStatus()};
  items[3] = {&good, prompt.data(), 1, &ignored, absl::OkStatus()};
  forward.Eval(&items);
  EXPECT_EQ(ReasonOf(items[0].status), "context_length_exceeded");
  EXPECT_TRUE(items[1].status.ok()) << items[1].status;
  EXPECT_EQ(ReasonOf(items[2].status), "invalid_request");
  EXPECT_EQ(items[3].status.code(), absl::StatusCode::kInvalidArgument);  // `good` twice
  EXPECT_EQ(full.n_past(), 0);
  EXPECT_EQ(bad_token.n_past(), 0);
  EXPECT_EQ(good.n_past(), static_cast<int>(prompt.size()));
  EXPECT_EQ(logits, want);
}


// Evaluates `tokens` into `cache` in one item; the last token's logits.
std::vector<float> EvalInto(Forward& forward, KvCache* cache, const std::vector<int32_t>& tokens, size_t from = 0) {
  std::vector<float> logits;
  std::vector<Forward::Item> items(1);
  items[0] = {cache, tokens.data() + from, static_cast<int>(tokens.size() - from), &logits, absl::OkStatus()};
  forward.Eval(&items);
  EXPECT_TRUE(items[0].status.ok()) << items[0].status;
  return logits;
}

constexpr int B = KvPool::kBlockTokens, kCapacity = 160;

// A Q8_0 qwen3 model and a Forward over it, for the paged cache's tests.
class PagedCacheTest : public ::testing::TestWithParam<KvType> {
 protected:
  void SetUp() override {
    ASSERT_NE(TokenizerDir(), "");
    l_ = Make("qwen3", gguf::TensorType::kQ8_0);
    ASSERT_TRUE(l_.model);
    forward_ = std::make_unique<Forward>(*l_.model, Forward::Options());
  }
  // The logits of `tokens` evaluated by a Session of their own.
  std::vector<float> Alone(const std::vector<int32_t>& tokens) {
    Session session(*l_.model, kCapacity, Session::Options(), GetParam());
    std::vector<float> logits;
    EXPECT_TRUE(session.Eval(tokens, &logits).ok());
    return logits;
  }
  Loaded l_;
  std::unique_ptr<Forward> forward_;
};

std::vector<int32_t> Tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(100 + (salt * 7919 + i * 104729) % 5000);
  return t;
}

// A tenant's second sequence shares the first one's full blocks and gets the logits it
// gets alone. A third, cut back into a shared block, writes a copy of it
// (copy-on-write): the first one, still running, is not disturbed. Another tenant finds
// nothing, even with the same tokens.
TEST_P(PagedCacheTest, ATenantSharesItsPrefixAndNoOtherTenantDoes) {
  KvPool pool(l_.model->config(), 16, GetParam());
  Forward& forward = *forward_;
  const std::vector<int32_t> first = Tokens(2 * B + 16, 1);
  std::vector<int32_t> second(first.begin(), first.begin() + 2 * B + 6);
  for (int32_t t : Tokens(20, 2)) second.push_back(t);

  KvCache a(&pool, kCapacity, "alice");
  EvalInto(forward, &a, first);
  EXPECT_EQ(pool.in_use(), 3);
  KvCache b(&pool, kCapacity, "alice");
  // Full blocks only: `a`'s third block is still being written.
  EXPECT_EQ(b.Reuse(second, static_cast<int>(second.size()) - 1), 2 * B);
  EXPECT_EQ(pool.in_use(), 3);
  EXPECT_EQ(EvalInto(forward, &b, second, b.n_past()), Alone(second));
  EXPECT_EQ(pool.in_use(), 4);

  KvCache c(&pool, kCapacity, "alice");
  EXPECT_EQ(c.Reuse(first, 2 * B), 2 * B);
  c.Truncate(B + 8);
  std::vector<int32_t> third(first.begin(), first.begin() + B + 8);
  for (int32_t t : Tokens(5, 9)) third.push_back(t);
  EXPECT_EQ(EvalInto(forward, &c, third, c.n_past()), Alone(third));
  EXPECT_EQ(pool.in_use(), 5);  // c holds a's first block and a copy of her second

  std::vector<int32_t> first_then = first;
  first_then.push_back(first[0]);
  EXPECT_EQ(EvalInto(forward, &a, {first[0]}), Alone(first_then));

  KvCache bob(&pool, kCapacity, "bob");
  EXPECT_EQ(bob.Reuse(first, static_cast<int>(first.size()) - 1), 0);
  EXPECT_EQ(bob.Reuse(second, static_cast<int>(second.size()) - 1), 0);
}

// Released blocks stay cached: the next turn of a tenant finds its whole previous
// sequence, the partial last block included (copied); positions cannot be reused past
// `limit`.
TEST_P(PagedCacheTest, ReleasedBlocksServeTheNextTurn) {
  KvPool pool(l_.model->config(), 8, GetParam());
  Forward& forward = *forward_;
  const std::vector<int32_t> turn1 = Tokens(B + 20, 3);
  {
    KvCache a(&pool, kCapacity, "alice");
    EvalInto(forward, &a, turn1);
  }
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.cached(), 2);
  EXPECT_EQ(pool.tokens_held(), B + 20);
  std::vector<int32_t> turn2 = turn1;
  for (int32_t t : Tokens(10, 4)) turn2.push_back(t);
  KvCache next(&pool, kCapacity, "alice");
  EXPECT_EQ(next.Reuse(turn2, static_cast<int>(turn2.size()) - 1), B + 20);
  EXPECT_EQ(EvalInto(forward, &next, turn2, next.n_past()), Alone(turn2));
  // The same prompt again: everything but its last token.
  KvCache again(&pool, kCapacity, "alice");
  EXPECT_EQ(again.Reuse(turn1, static_cast<int>(turn1.size()) - 1), B + 19);
}

// A short pool: a sequence's room is what is left (Grow), Forward refuses a pass
// without room and appends nothing, and the least recently released blocks are evicted
// first, a prefix's tail before its start.
TEST_P(PagedCacheTest, AShortPoolEvictsTheLeastRecentlyReleasedTailFirst) {
  KvPool pool(l_.model->config(), 4, GetParam());
  Forward& forward = *forward_;
  const std::vector<int32_t> alice = Tokens(3 * B, 5);
  {
    KvCache a(&pool, kCapacity, "alice");
    EvalInto(forward, &a, alice);
    KvCache starved(&pool, kCapacity, "carol");
    EXPECT_EQ(starved.Grow(2 * B), B);  // one block left
    KvCache none(&pool, kCapacity, "dave");
    EXPECT_EQ(starved.Grow(2 * B), B);
    std::vector<Forward::Item> items(1);
    const std::vector<int32_t> two = {1, 2};
    std::vector<float> logits;
    items[0] = {&none, two.data(), 2, &logits, absl::OkStatus()};
    forward.Eval(&items);
    EXPECT_EQ(ReasonOf(items[0].status), "server_busy");
    EXPECT_EQ(none.n_past(), 0);
  }
  EXPECT_EQ(pool.cached(), 3);
  KvCache bob(&pool, kCapacity, "bob");
  EvalInto(forward, &bob, Tokens(3 * B, 6));  // one free block, then two of alice's evicted
  EXPECT_EQ(pool.cached(), 1);
  KvCache alice_again(&pool, kCapacity, "alice");
  EXPECT_EQ(alice_again.Reuse(alice, static_cast<int>(alice.size())), B);  // her first block survived
}

INSTANTIATE_TEST_SUITE_P(KvTypes, PagedCacheTest, ::testing::Values(KvType::kF16, KvType::kQ8_0),
                         [](const ::testing::TestParamInfo<KvType>& info) { return std::string(KvTypeName(info.param)); });

}  // namespace
}  // namespace gantry::model
