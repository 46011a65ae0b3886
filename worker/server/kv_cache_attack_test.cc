// Attacks on the paged KV cache (worker/model/kv_cache.h) through its public API, on
// the engine tests' bundle model: random sequences of several tenants share one short
// pool (reuse, growth, truncation, release, eviction) and every evaluation must give
// the logits the same tokens give alone; a tenant may never reuse more than its own
// history allows; the pool's accounting must come back to exactly what is held.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/forward.h"
#include "worker/model/kv_cache.h"
#include "worker/model/session.h"
#include "worker/server/engine.h"
#include "worker/server/serving.h"
#include "worker/server/test_bundle.h"

namespace gantry::server {
namespace {

using model::Forward;
using model::KvCache;
using model::KvPool;
using model::KvType;
constexpr int B = KvPool::kBlockTokens;
constexpr int kCapacity = 160;

class KvCacheAttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TestBundleDirForTest(false);
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto loaded = LoadedBundle::Load(*dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    bundle_ = loaded->release();
  }
  static const model::Model& Model() { return *bundle_->serving().model; }

  std::vector<float> Alone(const std::vector<int32_t>& tokens) {
    model::Session session(Model(), kCapacity);
    std::vector<float> logits;
    EXPECT_TRUE(session.Eval(tokens, &logits).ok());
    return logits;
  }
  // Evaluates tokens[from..to) into `cache` in one pass; returns the status.
  absl::Status EvalInto(Forward& forward, KvCache* cache, const std::vector<int32_t>& tokens, size_t from,
                        size_t to, std::vector<float>* logits) {
    std::vector<Forward::Item> items(1);
    items[0] = {cache, tokens.data() + from, static_cast<int>(to - from), logits, absl::OkStatus()};
    forward.Eval(&items);
    return items[0].status;
  }

  static LoadedBundle* bundle_;
};
LoadedBundle* KvCacheAttackTest::bundle_ = nullptr;

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// Random workloads: every logit equals the alone logit, bit for bit; no reuse beyond
// the tenant's own history; accounting exact after everything is evicted.
TEST_F(KvCacheAttackTest, RandomTenantsOnAShortPoolNeverSeeWrongOrForeignKeysAndValues) {
  Forward forward(Model(), Forward::Options());
  const std::vector<std::string> tenants = {"alice", "bob", "", std::string("alice\0", 6)};
  std::vector<std::vector<int32_t>> bases;
  std::mt19937 rng(1234);
  for (int b = 0; b < 3; ++b) {
    std::vector<int32_t> t;
    for (int i = 0; i < kCapacity; ++i) t.push_back(100 + static_cast<int32_t>(rng() % 3000));
    bases.push_back(t);
  }
  int mismatches = 0, foreign = 0, evals = 0;
  for (int round = 0; round < 6; ++round) {
    const int blocks = 6 + static_cast<int>(rng() % 6);
    KvPool pool(Model().config(), blocks);
    std::map<std::string, std::vector<std::vector<int32_t>>> history;  // committed, per tenant
    struct Live {
      std::string tenant;
      std::unique_ptr<KvCache> cache;
      std::vector<int32_t> tokens;
    };
    std::vector<Live> live;
    for (int op = 0; op < 40; ++op) {
      const int what = static_cast<int>(rng() % 10);
      if (what < 4 || live.empty()) {
        if (live.size() >= 3) {
          live.erase(live.begin() + rng() % live.size());
          continue;
        }
        Live l;
        l.tenant = tenants[rng() % tenants.size()];
        const auto& base = bases[rng() % bases.size()];
        const size_t keep = rng() % 120;
        l.tokens.assign(base.begin(), base.begin() + keep);
        const size_t extra = 1 + rng() % 30;
        for (size_t i = 0; i < extra; ++i) l.tokens.push_back(100 + static_cast<int32_t>(rng() % 3000));
        l.cache = std::make_unique<KvCache>(&pool, kCapacity, l.tenant);
        const int reused = l.cache->Reuse(l.tokens, static_cast<int>(l.tokens.size()) - 1);
        size_t allowed = 0;
        for (const auto& h : history[l.tenant]) allowed = std::max(allowed, CommonPrefix(h, l.tokens));
        if (static_cast<size_t>(reused) > allowed) {
          ++foreign;
          ADD_FAILURE() << "tenant '" << l.tenant << "' reused " << reused << " positions, its history allows "
                        << allowed;
        }
        EXPECT_EQ(l.cache->n_past(), reused);
        live.push_back(std::move(l));
      }
      // Evaluate the rest of a random live sequence in random chunks.
      Live& l = live[rng() % live.size()];
      bool ok = true;
      std::vector<float> logits;
      while (ok && static_cast<size_t>(l.cache->n_past()) < l.tokens.size()) {
        const size_t from = l.cache->n_past();
        const size_t to = std::min(l.tokens.size(), from + 1 + rng() % 40);
        absl::Status s = EvalInto(forward, l.cache.get(), l.tokens, from, to, &logits);
        if (!s.ok()) {
          EXPECT_EQ(ReasonOf(s), "server_busy") << s;
          EXPECT_EQ(static_cast<size_t>(l.cache->n_past()), from);
          ok = false;
          break;
        }
        if (to == l.tokens.size()) {
          ++evals;
          std::vector<int32_t> prefix(l.tokens.begin(), l.tokens.begin() + to);
          if (logits != Alone(prefix)) {
            ++mismatches;
            ADD_FAILURE() << "round " << round << " op " << op << " tenant '" << l.tenant << "' "
                          << l.tokens.size() << " tokens: logits differ from alone";
          }
        }
      }
      if (l.cache->n_past() > 0) {
        history[l.tenant].push_back(
            std::vector<int32_t>(l.tokens.begin(), l.tokens.begin() + l.cache->n_past()));
      }
      // Sometimes: truncate and diverge (copy-on-write into a possibly shared block).
      if (ok && rng() % 3 == 0 && l.cache->n_past() > 2) {
        const int cut = 1 + static_cast<int>(rng() % (l.cache->n_past() - 1));
        l.cache->Truncate(cut);
        l.tokens.resize(cut);
        const size_t extra = 1 + rng() % 20;
        for (size_t i = 0; i < extra && l.tokens.size() < static_cast<size_t>(kCapacity); ++i) {
          l.tokens.push_back(100 + static_cast<int32_t>(rng() % 3000));
        }
      }
      if (rng() % 4 == 0) live.erase(live.begin() + rng() % live.size());
      // The pool's own invariants.
      EXPECT_GE(pool.in_use(), 0);
      EXPECT_LE(pool.in_use(), pool.blocks());
      EXPECT_LE(pool.cached(), pool.available());
      EXPECT_GE(pool.tokens_held(), 0);
      EXPECT_LE(pool.tokens_held(), static_cast<int64_t>(pool.in_use() + pool.cached()) * B);
    }
    live.clear();
    EXPECT_EQ(pool.in_use(), 0);
    // A fresh tenant takes every block (evicting all): exactly its positions are held.
    {
      const int n = std::min(blocks * B, 4 * kCapacity);
      std::vector<int32_t> fill;
      for (int i = 0; i < n; ++i) fill.push_back(200 + i % 1000);
      KvCache big(&pool, n, "zz-fresh");
      std::vector<float> logits;
      for (int from = 0; from < n; from += 64) {
        absl::Status s = EvalInto(forward, &big, fill, from, std::min(n, from + 64), &logits);
        ASSERT_TRUE(s.ok()) << s;
      }
      EXPECT_EQ(pool.in_use(), blocks);
      EXPECT_EQ(pool.cached(), 0);
      EXPECT_EQ(pool.tokens_held(), n) << "round " << round;
    }
    EXPECT_EQ(pool.in_use(), 0);
  }
  EXPECT_GT(evals, 20);
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(foreign, 0);
}

// A tenant named so that its root seed could be confused with another's: "a" + NUL and
// "a" are different tenants; an empty tenant is a tenant of its own.
TEST_F(KvCacheAttackTest, TenantNamesThatDifferOnlyByNulOrEmptinessShareNothing) {
  Forward forward(Model(), Forward::Options());
  KvPool pool(Model().config(), 16);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 3 * B + 5; ++i) tokens.push_back(300 + i);
  std::vector<float> logits;
  {
    KvCache a(&pool, kCapacity, "a");
    ASSERT_TRUE(EvalInto(forward, &a, tokens, 0, tokens.size(), &logits).ok());
  }
  for (const std::string& other : {std::string("a\0", 2), std::string(""), std::string("A"), std::string("a ")}) {
    KvCache c(&pool, kCapacity, other);
    EXPECT_EQ(c.Reuse(tokens, static_cast<int>(tokens.size()) - 1), 0) << other.size();
  }
  KvCache again(&pool, kCapacity, "a");
  EXPECT_EQ(again.Reuse(tokens, static_cast<int>(tokens.size()) - 1), static_cast<int>(tokens.size()) - 1);
}

// Two caches of one tenant computing the same prefix at once: the second's full block
// is not published (the key is taken), stays private, and the accounting still comes
// back to zero in use; then a different continuation of the first.
TEST_F(KvCacheAttackTest, TwoWritersOfOnePrefixKeepTheAccountingExact) {
  Forward forward(Model(), Forward::Options());
  const int blocks = 12;
  KvPool pool(Model().config(), blocks);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 2 * B + 7; ++i) tokens.push_back(500 + i * 3);
  std::vector<float> la, lb;
  {
    KvCache a(&pool, kCapacity, "t"), b(&pool, kCapacity, "t");
    std::vector<Forward::Item> items(2);
    items[0] = {&a, tokens.data(), static_cast<int>(tokens.size()), &la, absl::OkStatus()};
    items[1] = {&b, tokens.data(), static_cast<int>(tokens.size()), &lb, absl::OkStatus()};
    forward.Eval(&items);
    ASSERT_TRUE(items[0].status.ok());
    ASSERT_TRUE(items[1].status.ok());
    EXPECT_EQ(la, lb);
    EXPECT_EQ(pool.in_use(), 6);
    EXPECT_EQ(pool.tokens_held(), 2 * static_cast<int64_t>(tokens.size()));
  }
  EXPECT_EQ(pool.in_use(), 0);
  // Published: a's two full blocks and both partial tails; b's full blocks are freed.
  EXPECT_EQ(pool.cached(), 4);
  EXPECT_EQ(pool.tokens_held(), 2 * B + 2 * 7);
  KvCache c(&pool, kCapacity, "t");
  EXPECT_EQ(c.Reuse(tokens, static_cast<int>(tokens.size())), static_cast<int>(tokens.size()));
}

// API misuse: Reuse() on a cache that already took blocks (Grow) but holds no token
// yet. It only checks tokens_, so the shared blocks land after the grown one: position
// 0 then maps to the empty grown block, not the shared block 0 -> wrong keys/values.
TEST_F(KvCacheAttackTest, ReuseAfterGrowMustNotMisalignTheBlockTable) {
  Forward forward(Model(), Forward::Options());
  KvPool pool(Model().config(), 12);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 2 * B + 3; ++i) tokens.push_back(700 + i);
  std::vector<float> logits;
  {
    KvCache a(&pool, kCapacity, "t");
    ASSERT_TRUE(EvalInto(forward, &a, tokens, 0, tokens.size(), &logits).ok());
  }
  KvCache c(&pool, kCapacity, "t");
  ASSERT_EQ(c.Grow(5), 5);
  const int reused = c.Reuse(tokens, static_cast<int>(tokens.size()) - 1);
  if (reused > 0) {
    ASSERT_TRUE(EvalInto(forward, &c, tokens, reused, tokens.size(), &logits).ok());
    EXPECT_EQ(logits, Alone(tokens)) << "reused " << reused << " with " << c.blocks() << " blocks";
  }
}

// --kv-memory beyond what an int counts of blocks: KvBlocks casts to int and wraps,
// e.g. to the minimum pool (one context) instead of the memory asked for or an error.
TEST_F(KvCacheAttackTest, KvBlocksDoesNotWrapForHugeKvMemory) {
  const auto& config = Model().config();
  const size_t block = KvPool::BlockBytes(config, KvType::kF16);
  const size_t bytes = block * ((size_t{1} << 32) + 16);  // 2^32 + 16 blocks
  const int blocks = Engine::KvBlocks(config, 256, 1, bytes, KvType::kF16);
  EXPECT_TRUE(blocks == std::numeric_limits<int>::max() || blocks > (1 << 30))
      << "KvBlocks(" << bytes << " bytes) = " << blocks << " (block " << block << " bytes)";
}

}  // namespace
}  // namespace gantry::server
