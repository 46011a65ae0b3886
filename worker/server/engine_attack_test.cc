// Attacks on the engine's paged-cache scheduling (engine.h): short pools, many
// principals sharing prompt text, preemption, cancellation of preempted sequences.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/server/engine.h"
#include "worker/server/serving.h"
#include "worker/server/test_bundle.h"

namespace gantry::server {
namespace {

struct Result {
  std::string text;
  v1::Terminal terminal;
  int terminals = 0;
  int events_after_terminal = 0;
  std::vector<uint64_t> seqs;
};

class EngineAttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TestBundleDirForTest(false);
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto sampled = LoadedBundle::Load(*dir);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    sampled_ = sampled->release();
  }

  static v1::InferenceRequest Request(const std::string& principal, const std::string& system,
                                      const std::string& user, uint32_t max_tokens) {
    v1::InferenceRequest r;
    r.set_request_id("req_" + principal + "_" + user);
    r.set_principal(principal);
    r.set_max_tokens(max_tokens);
    r.mutable_sampling()->set_temperature(0.0f);
    if (!system.empty()) {
      auto* s = r.add_messages();
      s->set_role("system");
      s->set_content(system);
    }
    auto* m = r.add_messages();
    m->set_role("user");
    m->set_content(user);
    return r;
  }

  static Engine::Emit Collect(Result* r) {
    return [r](v1::StreamEvent e, uint32_t) {
      if (r->terminals > 0) ++r->events_after_terminal;
      r->seqs.push_back(e.seq());
      if (e.has_text()) r->text += e.text().text();
      if (e.has_terminal()) {
        r->terminal = e.terminal();
        ++r->terminals;
      }
    };
  }

  static Result Alone(const v1::InferenceRequest& r, int capacity) {
    Engine engine(sampled_->serving(), capacity);
    Result result;
    std::atomic<bool> no{false};
    engine.Run(r, no, Collect(&result));
    return result;
  }

  static size_t OneContextBytes(int capacity, int extra_blocks = 0) {
    return model::KvPool::BlockBytes(sampled_->serving().model->config(), model::KvType::kF16) *
           (model::KvPool::BlocksFor(capacity) + 1 + extra_blocks);
  }

  static LoadedBundle* sampled_;
};
LoadedBundle* EngineAttackTest::sampled_ = nullptr;

std::string Padding(int words, const std::string& salt) {
  std::string s;
  for (int i = 0; i < words; ++i) s += salt + std::to_string(i) + " ";
  return s;
}

// Random mixes of principals (alice and bob share a system prompt, eve sends alice's
// exact request once), short pools and random cancels: every stream not cancelled
// gets what it gets alone; every stream ends exactly once, its events numbered without
// a gap; a cancelled stream's text is a prefix of its alone text; a principal with one
// request reuses nothing; the pool ends with nothing in use.
TEST_F(EngineAttackTest, RandomShortPoolsWithCancelsAndPreemptions) {
  const int capacity = 256;
  const std::string system = Padding(45, "rule");
  std::vector<v1::InferenceRequest> requests;
  const char* users[] = {"tell a story about a cat", "tell a story about a dog", "count to ten slowly",
                         "tell a story about a cat and a dog", "describe the sea"};
  for (int i = 0; i < 7; ++i) {
    const std::string principal = i % 3 == 0 ? "alice" : (i % 3 == 1 ? "bob" : "alice");
    v1::InferenceRequest r = Request(principal, system, users[i % 5], 12 + 3 * (i % 4));
    r.set_request_id("req_" + std::to_string(i));
    requests.push_back(r);
  }
  v1::InferenceRequest eve = requests[0];
  eve.set_principal("eve");
  eve.set_request_id("req_eve");
  requests.push_back(eve);
  std::vector<Result> alone;
  for (const auto& r : requests) alone.push_back(Alone(r, capacity));

  std::mt19937 rng(99);
  int64_t total_preemptions = 0;
  for (int round = 0; round < 6; ++round) {
    const int slots = 2 + static_cast<int>(rng() % 6);
    const int extra = static_cast<int>(rng() % 4);
    Engine engine(sampled_->serving(), capacity, slots, 2, OneContextBytes(capacity, extra));
    std::vector<Result> got(requests.size());
    std::deque<std::atomic<bool>> cancel(requests.size());
    std::vector<int> cancel_at(requests.size(), -1);
    for (size_t i = 0; i < requests.size(); ++i) {
      if (rng() % 4 == 0) cancel_at[i] = static_cast<int>(rng() % 60);
    }
    size_t added = 0;
    int steps = 0;
    while ((added < requests.size() || engine.active() > 0) && steps < 20000) {
      if (added < requests.size() && rng() % 3 == 0) {
        engine.Add(requests[added], &cancel[added], Collect(&got[added]));
        ++added;
      }
      for (size_t i = 0; i < added; ++i) {
        if (cancel_at[i] == steps) cancel[i] = true;
      }
      engine.Step();
      ++steps;
    }
    ASSERT_LT(steps, 20000) << "round " << round << ": livelock? active " << engine.active();
    total_preemptions += engine.preemptions();
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + " request " + std::to_string(i) + " slots " +
                   std::to_string(slots));
      EXPECT_EQ(got[i].terminals, 1);
      EXPECT_EQ(got[i].events_after_terminal, 0);
      for (size_t k = 0; k < got[i].seqs.size(); ++k) EXPECT_EQ(got[i].seqs[k], k);
      const bool cancelled = got[i].terminal.finish_reason() == v1::FINISH_CANCELLED;
      if (!cancelled) {
        EXPECT_EQ(got[i].text, alone[i].text);
        EXPECT_EQ(got[i].terminal.finish_reason(), alone[i].terminal.finish_reason());
        EXPECT_EQ(got[i].terminal.usage().completion_tokens(), alone[i].terminal.usage().completion_tokens());
        EXPECT_EQ(got[i].terminal.usage().prompt_tokens(), alone[i].terminal.usage().prompt_tokens());
        EXPECT_LT(got[i].terminal.usage().cached_prompt_tokens(), got[i].terminal.usage().prompt_tokens());
      } else {
        EXPECT_EQ(alone[i].text.compare(0, got[i].text.size(), got[i].text), 0) << got[i].text;
        EXPECT_LE(got[i].terminal.usage().completion_tokens(), alone[i].terminal.usage().completion_tokens());
        EXPECT_LE(got[i].terminal.usage().prompt_tokens(), alone[i].terminal.usage().prompt_tokens());
      }
    }
    // eve never sent anything before: nothing of hers (or anyone's) is reused.
    EXPECT_EQ(got.back().terminal.usage().cached_prompt_tokens(), 0u) << "round " << round;
    EXPECT_EQ(engine.kv_status().in_use, 0);
    EXPECT_EQ(engine.active(), 0);
  }
  EXPECT_GT(total_preemptions, 0);
}

// A sequence preempted while decoding, then cancelled while it waits: one terminal,
// CANCELLED, with the usage of the work done (the whole prompt, the tokens sampled);
// the pool ends empty.
TEST_F(EngineAttackTest, CancellingAPreemptedDecodingSequenceEndsItOnceWithItsUsage) {
  const int capacity = 256;
  Engine engine(sampled_->serving(), capacity, 2, 1, OneContextBytes(capacity));
  v1::InferenceRequest a = Request("alice", Padding(25, "x"), "first long story", 120);
  v1::InferenceRequest b = Request("bob", Padding(25, "y"), "second long story", 120);
  a.set_request_id("a");
  b.set_request_id("b");
  Result ra, rb;
  std::atomic<bool> ca{false}, cb{false};
  engine.Add(a, &ca, Collect(&ra));
  engine.Add(b, &cb, Collect(&rb));
  int steps = 0;
  while (engine.preemptions() == 0 && engine.active() > 0 && steps++ < 2000) engine.Step();
  ASSERT_GT(engine.preemptions(), 0) << "no preemption happened; a " << ra.terminals << " b " << rb.terminals
                                      << " " << rb.terminal.status().message();
  ASSERT_EQ(rb.terminals, 0);
  const Result b_alone = Alone(b, capacity);
  cb = true;
  while (engine.active() > 0 && steps++ < 4000) engine.Step();
  EXPECT_EQ(ra.terminals, 1);
  EXPECT_EQ(rb.terminals, 1);
  EXPECT_EQ(rb.events_after_terminal, 0);
  EXPECT_EQ(rb.terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(rb.terminal.usage().prompt_tokens(), b_alone.terminal.usage().prompt_tokens());
  EXPECT_GT(rb.terminal.usage().completion_tokens(), 0u);
  EXPECT_EQ(b_alone.text.compare(0, rb.text.size(), rb.text), 0);
  EXPECT_EQ(engine.kv_status().in_use, 0);
}

// Slots beyond what the pool holds, every request long: no livelock, every stream
// gets what it gets alone.
TEST_F(EngineAttackTest, ManySlotsOnAOneContextPoolFinishEverything) {
  const int capacity = 128;
  std::vector<v1::InferenceRequest> requests;
  for (int i = 0; i < 6; ++i) {
    v1::InferenceRequest r =
        Request(i % 2 ? "alice" : "bob", Padding(20 + i, "p" + std::to_string(i)), "go " + std::to_string(i),
                20);
    r.set_request_id("r" + std::to_string(i));
    requests.push_back(r);
  }
  std::vector<Result> alone;
  for (const auto& r : requests) alone.push_back(Alone(r, capacity));
  Engine engine(sampled_->serving(), capacity, 6, 1, OneContextBytes(capacity));
  std::vector<Result> got(requests.size());
  static std::atomic<bool> no{false};
  for (size_t i = 0; i < requests.size(); ++i) engine.Add(requests[i], &no, Collect(&got[i]));
  int steps = 0;
  while (engine.active() > 0 && steps++ < 20000) engine.Step();
  ASSERT_EQ(engine.active(), 0) << "livelock";
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].terminals, 1) << i;
    EXPECT_EQ(got[i].text, alone[i].text) << i;
    EXPECT_EQ(got[i].terminal.usage().completion_tokens(), alone[i].terminal.usage().completion_tokens()) << i;
    EXPECT_EQ(got[i].terminal.finish_reason(), alone[i].terminal.finish_reason()) << i;
  }
  EXPECT_EQ(engine.kv_status().in_use, 0);
}

// Requests that fill their context exactly (prompt + max_tokens == capacity), several
// slots on a one-context pool: the decode room check must never mistake a full context
// for a short pool (which would preempt forever), and every stream ends as alone.
TEST_F(EngineAttackTest, RequestsThatFillTheirContextExactlyOnAShortPool) {
  const int capacity = 96;
  std::vector<v1::InferenceRequest> requests;
  for (int i = 0; i < 5; ++i) {
    v1::InferenceRequest r = Request(i % 2 ? "alice" : "bob", Padding(3 + 4 * i, "q"), "word " + std::to_string(i), 1);
    r.set_request_id("f" + std::to_string(i));
    const Result probe = Alone(r, capacity);
    ASSERT_EQ(probe.terminals, 1);
    const uint32_t prompt = probe.terminal.usage().prompt_tokens();
    ASSERT_LT(prompt, static_cast<uint32_t>(capacity)) << probe.terminal.status().message();
    r.set_max_tokens(capacity - prompt);
    requests.push_back(r);
  }
  std::vector<Result> alone;
  for (const auto& r : requests) alone.push_back(Alone(r, capacity));
  for (int slots : {2, 3, 5}) {
    Engine engine(sampled_->serving(), capacity, slots, 1, OneContextBytes(capacity));
    std::vector<Result> got(requests.size());
    static std::atomic<bool> no{false};
    for (size_t i = 0; i < requests.size(); ++i) engine.Add(requests[i], &no, Collect(&got[i]));
    int steps = 0;
    while (engine.active() > 0 && steps++ < 20000) engine.Step();
    ASSERT_EQ(engine.active(), 0) << "livelock, slots " << slots;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(got[i].terminals, 1) << i;
      EXPECT_EQ(got[i].text, alone[i].text) << i;
      EXPECT_EQ(got[i].terminal.finish_reason(), alone[i].terminal.finish_reason()) << i;
      EXPECT_EQ(got[i].terminal.usage().completion_tokens(), alone[i].terminal.usage().completion_tokens()) << i;
    }
    EXPECT_EQ(engine.kv_status().in_use, 0);
  }
}

}  // namespace
}  // namespace gantry::server
