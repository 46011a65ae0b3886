// The engine on a real bundle (make-test-model weights, the real Qwen3 tokenizer and
// chat template), with the scripted sampler (a test double) where exact text matters.
#include "worker/server/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "common/status.h"
#include "worker/server/serving.h"
#include "worker/server/test_bundle.h"

namespace gantry::server {
namespace {

std::string WriteScript() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/script.yaml";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("- match: \"capital of France\"\n  emit: \"Paris is the capital of France.\"\n"
             "- match: \"count\"\n  emit: \"one two three four five\"\n"
             "- match: \"weather in Paris\"\n"
             "  emit: \"Let me check.\\n<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", "
             "\\\"arguments\\\": {\\\"city\\\": \\\"Paris\\\"}}\\n</tool_call>\"\n"
             "- match: \"weather with bad arguments\"\n"
             "  emit: \"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", "
             "\\\"arguments\\\": {\\\"city\\\": 5}}\\n</tool_call>\"\n"
             "- match: \"think first\"\n"
             "  emit: \"<think>\\nLet me weigh this carefully.\\n</think>\\n\\nYes, and more.\"\n",
             f);
  std::fclose(f);
  return path;
}

struct Result {
  std::string text;
  v1::Terminal terminal;
  int terminals = 0;
  std::vector<uint64_t> seqs;
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TestBundleDirForTest(true);
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto scripted = LoadedBundle::Load(*dir, WriteScript());
    ASSERT_TRUE(scripted.ok()) << scripted.status();
    scripted_ = scripted->release();
    auto sampled = LoadedBundle::Load(*dir);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    sampled_ = sampled->release();
    auto plain_dir = TestBundleDirForTest(false);
    ASSERT_TRUE(plain_dir.ok());
    auto plain = LoadedBundle::Load(*plain_dir, WriteScript());
    ASSERT_TRUE(plain.ok()) << plain.status();
    no_tools_ = plain->release();
  }

  static v1::InferenceRequest Request(const std::string& user, uint32_t max_tokens = 32) {
    v1::InferenceRequest r;
    r.set_request_id("req_test");
    r.set_principal("alice");
    r.set_max_tokens(max_tokens);
    auto* m = r.add_messages();
    m->set_role("user");
    m->set_content(user);
    return r;
  }

  static Result Run(Engine& engine, const v1::InferenceRequest& request, bool cancel = false) {
    Result result;
    std::atomic<bool> flag{cancel};
    engine.Run(request, flag, [&](v1::StreamEvent e, uint32_t) {
      result.seqs.push_back(e.seq());
      if (e.has_text()) result.text += e.text().text();
      if (e.has_terminal()) {
        result.terminal = e.terminal();
        ++result.terminals;
      }
    });
    return result;
  }

  // Eight greedy requests of different lengths and two principals; `padding` makes
  // each prompt longer.
  static std::vector<v1::InferenceRequest> StoryRequests(const std::string& padding) {
    std::vector<v1::InferenceRequest> requests;
    for (int i = 0; i < 8; ++i) {
      v1::InferenceRequest r = Request(padding + "Story number " + std::to_string(i) + std::string(i, '!') +
                                           " about a " + (i % 2 ? "cat" : "lighthouse keeper"),
                                       10 + i);
      r.set_request_id("req_" + std::to_string(i));
      r.set_principal(i % 3 ? "alice" : "bob");
      r.mutable_sampling()->set_temperature(0.0f);
      requests.push_back(r);
    }
    return requests;
  }

  // Adds the first `first` requests, takes two steps, adds the rest, steps until all
  // ended.
  static std::vector<Result> RunTogether(Engine& engine, const std::vector<v1::InferenceRequest>& requests,
                                         size_t first) {
    std::vector<Result> together(requests.size());
    static std::atomic<bool> no{false};
    auto add = [&](size_t i) {
      engine.Add(requests[i], &no, [&together, i](v1::StreamEvent e, uint32_t) {
        together[i].seqs.push_back(e.seq());
        if (e.has_text()) together[i].text += e.text().text();
        if (e.has_terminal()) {
          together[i].terminal = e.terminal();
          ++together[i].terminals;
        }
      });
    };
    for (size_t i = 0; i < first; ++i) add(i);
    engine.Step();
    engine.Step();
    for (size_t i = first; i < requests.size(); ++i) add(i);
    int steps = 0;
    while (engine.active() > 0 && steps++ < 5000) engine.Step();
    return together;
  }

  // Each stream ran together as it ran alone: one terminal, the same output and usage,
  // its events numbered without a gap.
  static void ExpectSame(const std::vector<Result>& together, const std::vector<Result>& alone) {
    ASSERT_EQ(together.size(), alone.size());
    for (size_t i = 0; i < together.size(); ++i) {
      EXPECT_EQ(together[i].terminals, 1) << i;
      EXPECT_EQ(together[i].text, alone[i].text) << i;
      EXPECT_EQ(together[i].terminal.usage().completion_tokens(), alone[i].terminal.usage().completion_tokens())
          << i;
      EXPECT_EQ(together[i].terminal.usage().prompt_tokens(), alone[i].terminal.usage().prompt_tokens()) << i;
      EXPECT_EQ(together[i].terminal.usage().prompt_ids_sha256(), alone[i].terminal.usage().prompt_ids_sha256());
      EXPECT_EQ(together[i].terminal.finish_reason(), alone[i].terminal.finish_reason()) << i;
      for (size_t k = 0; k < together[i].seqs.size(); ++k) EXPECT_EQ(together[i].seqs[k], k);
    }
  }

  static LoadedBundle* scripted_;
  static LoadedBundle* sampled_;
  static LoadedBundle* no_tools_;
};

LoadedBundle* EngineTest::scripted_ = nullptr;
LoadedBundle* EngineTest::sampled_ = nullptr;
LoadedBundle* EngineTest::no_tools_ = nullptr;

TEST_F(EngineTest, ScriptedTextComesOutExactlyWithOneTerminal) {
  Engine engine(scripted_->serving(), 512);
  Result r = Run(engine, Request("What is the capital of France?"));
  EXPECT_EQ(r.text, "Paris is the capital of France.");
  EXPECT_EQ(r.terminals, 1);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_STOP);
  EXPECT_EQ(r.terminal.status().code(), "OK");
  EXPECT_GT(r.terminal.usage().prompt_tokens(), 5u);
  EXPECT_GT(r.terminal.usage().completion_tokens(), 3u);
  EXPECT_EQ(r.terminal.bundle().model(), "test-qwen3");
  EXPECT_EQ(r.terminal.bundle().identity_sha256().size(), 64u);
  EXPECT_EQ(r.terminal.usage().prompt_ids_sha256().size(), 64u);
  for (size_t i = 0; i < r.seqs.size(); ++i) EXPECT_EQ(r.seqs[i], i);
}

TEST_F(EngineTest, NoMatchingRuleEmitsTheDefault) {
  Engine engine(scripted_->serving(), 512);
  EXPECT_EQ(Run(engine, Request("hello")).text, kDefaultScriptText);
}

TEST_F(EngineTest, StopStringEndsAndIsNotEmitted) {
  Engine engine(scripted_->serving(), 512);
  v1::InferenceRequest r = Request("count please");
  r.add_stop("three");
  Result result = Run(engine, r);
  EXPECT_EQ(result.text, "one two ");
  EXPECT_EQ(result.terminal.finish_reason(), v1::FINISH_STOP);
  // A stop string that never completes holds nothing back at the end.
  r.clear_stop();
  r.add_stop("five!");
  EXPECT_EQ(Run(engine, r).text, "one two three four five");
}

TEST_F(EngineTest, MaxTokensEndsWithLength) {
  Engine engine(scripted_->serving(), 512);
  Result r = Run(engine, Request("count", 2));
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_LENGTH);
  EXPECT_EQ(r.terminal.usage().completion_tokens(), 2u);
  EXPECT_EQ(r.text, "one two");
}

TEST_F(EngineTest, ToolsWithoutDeclaredProtocolFailThenPlainRequestWorks) {
  Engine engine(no_tools_->serving(), 512);
  v1::InferenceRequest r = Request("What is the capital of France?");
  r.add_tools()->set_name("read_file");
  Result failed = Run(engine, r);
  EXPECT_EQ(failed.terminal.finish_reason(), v1::FINISH_ERROR);
  EXPECT_EQ(failed.terminal.status().reason(), "tool_protocol_undeclared");
  EXPECT_EQ(failed.terminal.usage().prompt_tokens(), 0u);  // nothing was rendered
  EXPECT_EQ(failed.terminal.usage().prompt_ids_sha256(), "");
  EXPECT_EQ(failed.text, "");
  Result ok = Run(engine, Request("What is the capital of France?"));
  EXPECT_EQ(ok.text, "Paris is the capital of France.");
}

TEST_F(EngineTest, ContextOverflowIsRejectedBeforeWorkAndLeavesNoState) {
  Engine engine(scripted_->serving(), 512);
  Result r = Run(engine, Request("What is the capital of France?", 600));
  EXPECT_EQ(r.terminal.status().reason(), "context_length_exceeded");
  EXPECT_EQ(engine.cached_tokens(), 0);
  EXPECT_EQ(Run(engine, Request("What is the capital of France?")).text,
            "Paris is the capital of France.");
}

TEST_F(EngineTest, CancelledRequestEndsCancelledAndTheNextOneIsServed) {
  Engine engine(scripted_->serving(), 512);
  Result r = Run(engine, Request("count"), /*cancel=*/true);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(r.terminal.status().reason(), "cancelled");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(Run(engine, Request("count")).text, "one two three four five");
}

TEST_F(EngineTest, PrefixIsReusedWithinAPrincipalOnly) {
  Engine engine(scripted_->serving(), 512);
  Result first = Run(engine, Request("What is the capital of France?"));
  EXPECT_EQ(first.terminal.usage().cached_prompt_tokens(), 0u);
  Result second = Run(engine, Request("What is the capital of France?"));
  EXPECT_EQ(second.terminal.usage().cached_prompt_tokens(), second.terminal.usage().prompt_tokens() - 1);
  // The same prompt ran twice: the same token ids, whatever the cache reused.
  EXPECT_EQ(first.terminal.usage().prompt_ids_sha256().size(), 64u);
  EXPECT_EQ(second.terminal.usage().prompt_ids_sha256(), first.terminal.usage().prompt_ids_sha256());
  EXPECT_EQ(second.text, first.text);
  v1::InferenceRequest other = Request("What is the capital of France?");
  other.set_principal("mallory");
  Result third = Run(engine, other);
  EXPECT_EQ(third.terminal.usage().cached_prompt_tokens(), 0u);
  EXPECT_EQ(third.text, first.text);
}

TEST_F(EngineTest, SeededSamplingIsReproducibleAndGreedyIsStable) {
  Engine engine(sampled_->serving(), 512);
  v1::InferenceRequest r = Request("Tell me a story.", 12);
  r.mutable_sampling()->set_temperature(0.9f);
  r.mutable_sampling()->set_top_p(0.95f);
  r.mutable_sampling()->set_seed(42);
  Result a = Run(engine, r);
  Result b = Run(engine, r);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.terminal.usage().completion_tokens(), b.terminal.usage().completion_tokens());
  r.mutable_sampling()->set_temperature(0.0f);
  Engine fresh(sampled_->serving(), 512);
  EXPECT_EQ(Run(engine, r).text, Run(fresh, r).text);  // cache reuse changes nothing
}

v1::InferenceRequest WeatherRequest(const std::string& text) {
  v1::InferenceRequest r;
  r.set_request_id("req_tools");
  r.set_principal("alice");
  r.set_max_tokens(64);
  auto* m = r.add_messages();
  m->set_role("user");
  m->set_content(text);
  auto* tool = r.add_tools();
  tool->set_name("get_weather");
  tool->set_description("Current weather of a city");
  tool->set_parameters_json(
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})");
  return r;
}

TEST_F(EngineTest, DeclaredProtocolToolCallIsParsedValidatedAndIdentified) {
  Engine engine(scripted_->serving(), 512);
  std::vector<v1::StreamEvent> events;
  std::atomic<bool> cancel{false};
  engine.Run(WeatherRequest("What is the weather in Paris?"), cancel,
             [&](v1::StreamEvent e, uint32_t) { events.push_back(std::move(e)); });
  ASSERT_FALSE(events.empty());
  std::string text;
  int calls = 0;
  for (const auto& e : events) {
    if (e.has_text()) text += e.text().text();
    if (e.has_tool_call()) {
      ++calls;
      EXPECT_EQ(e.tool_call().index(), 0u);
      EXPECT_EQ(e.tool_call().call().name(), "get_weather");
      EXPECT_EQ(e.tool_call().call().arguments_json(), "{\"city\":\"Paris\"}");
      EXPECT_EQ(e.tool_call().call().id().rfind("call_", 0), 0u);
      EXPECT_EQ(e.request_id(), "req_tools");
    }
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(text, "Let me check.\n");
  ASSERT_TRUE(events.back().has_terminal());
  EXPECT_EQ(events.back().terminal().finish_reason(), v1::FINISH_TOOL_CALLS);
  EXPECT_EQ(events.back().terminal().status().code(), "OK");
}

TEST_F(EngineTest, ToolCallViolatingTheSchemaIsAnErrorNeverAPartialCall) {
  Engine engine(scripted_->serving(), 512);
  std::vector<v1::StreamEvent> events;
  std::atomic<bool> cancel{false};
  engine.Run(WeatherRequest("weather with bad arguments"), cancel,
             [&](v1::StreamEvent e, uint32_t) { events.push_back(std::move(e)); });
  for (const auto& e : events) EXPECT_FALSE(e.has_tool_call());
  ASSERT_TRUE(events.back().has_terminal());
  EXPECT_EQ(events.back().terminal().finish_reason(), v1::FINISH_ERROR);
  EXPECT_EQ(events.back().terminal().status().reason(), "invalid_tool_call");
  // The next request on the same slot is served correctly.
  EXPECT_EQ(Run(engine, Request("What is the capital of France?")).text,
            "Paris is the capital of France.");
}

// What a cancelled run reports is the work it did: the whole prompt once the prefill is
// done and every token sampled, the tool call's syntax and the reasoning included (one
// event may stand for many tokens); before the prefill, only the prefix it reuses.
TEST_F(EngineTest, CancelledRunsTerminalCarriesTheUsageItEvaluated) {
  struct Cut {
    v1::Terminal terminal;
    uint32_t generated_at_cancel = 0;  // the running count emitted with the cut event
    int output_events = 0;
    int reasoning_events = 0;
  };
  // Runs `request` on `engine` and cancels at the first event `cut_at` accepts.
  auto run_cut = [](Engine& engine, const v1::InferenceRequest& request,
                    const std::function<bool(const v1::StreamEvent&)>& cut_at) {
    Cut cut;
    std::atomic<bool> cancel{false};
    engine.Run(request, cancel, [&](v1::StreamEvent e, uint32_t completion_tokens) {
      if (e.has_terminal()) {
        cut.terminal = e.terminal();
        return;
      }
      ++cut.output_events;
      if (e.has_reasoning()) ++cut.reasoning_events;
      if (!cancel && cut_at(e)) {
        cut.generated_at_cancel = completion_tokens;
        cancel = true;
      }
    });
    return cut;
  };
  auto never = [](const v1::StreamEvent&) { return false; };

  // A tool call: the whole answer, then cancelled as soon as the call is out.
  Engine whole_engine(scripted_->serving(), 512);
  const Cut whole = run_cut(whole_engine, WeatherRequest("What is the weather in Paris?"), never);
  ASSERT_EQ(whole.terminal.finish_reason(), v1::FINISH_TOOL_CALLS);
  Engine engine(scripted_->serving(), 512);
  const Cut call = run_cut(engine, WeatherRequest("What is the weather in Paris?"),
                           [](const v1::StreamEvent& e) { return e.has_tool_call(); });
  EXPECT_EQ(call.terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(call.terminal.status().reason(), "cancelled");
  EXPECT_EQ(call.terminal.usage().prompt_tokens(), whole.terminal.usage().prompt_tokens());
  EXPECT_EQ(call.terminal.usage().prompt_ids_sha256(), whole.terminal.usage().prompt_ids_sha256());
  EXPECT_EQ(call.terminal.usage().completion_tokens(), call.generated_at_cancel);
  EXPECT_LE(call.terminal.usage().completion_tokens(), whole.terminal.usage().completion_tokens());
  // The call's syntax cost many tokens and came out as one event.
  EXPECT_GT(call.terminal.usage().completion_tokens(), static_cast<uint32_t>(call.output_events) + 10);

  // Reasoning: cancelled at the first visible text, everything thought before it counts.
  Engine thinker(scripted_->serving(), 512);
  const Cut thought = run_cut(thinker, Request("think first, then answer", 64),
                              [](const v1::StreamEvent& e) { return e.has_text(); });
  EXPECT_EQ(thought.terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_GT(thought.reasoning_events, 0);
  EXPECT_EQ(thought.terminal.usage().completion_tokens(), thought.generated_at_cancel);
  EXPECT_GE(thought.terminal.usage().completion_tokens(),
            static_cast<uint32_t>(thought.output_events));

  // Cancelled before the prefill: nothing was evaluated, nothing stays cached.
  Engine idle(scripted_->serving(), 512);
  Result early = Run(idle, Request("What is the capital of France?"), /*cancel=*/true);
  EXPECT_EQ(early.terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(early.terminal.usage().prompt_tokens(), 0u);
  EXPECT_EQ(early.terminal.usage().completion_tokens(), 0u);
  EXPECT_EQ(idle.cached_tokens(), 0);
  // ... or, after the principal's previous request, only the prefix reused from it.
  Result served = Run(idle, Request("What is the capital of France?"));
  Result again = Run(idle, Request("What is the capital of France?"), /*cancel=*/true);
  EXPECT_EQ(again.terminal.usage().prompt_tokens(), served.terminal.usage().prompt_tokens() - 1);
  EXPECT_EQ(again.terminal.usage().prompt_tokens(), again.terminal.usage().cached_prompt_tokens());
  EXPECT_EQ(again.terminal.usage().completion_tokens(), 0u);
}

TEST_F(EngineTest, NoMessagesIsInvalidRequestBeforeRendering) {
  Engine engine(scripted_->serving(), 512);
  v1::InferenceRequest r = Request("hi");
  r.clear_messages();
  Result result = Run(engine, r);
  EXPECT_EQ(result.terminal.finish_reason(), v1::FINISH_ERROR);
  EXPECT_EQ(result.terminal.status().reason(), "invalid_request");
  EXPECT_EQ(result.terminals, 1);
}

// Eight requests at once on an engine of eight slots (one forward pass per step for
// all of them, four joining while the first four decode) produce, with greedy
// sampling, exactly the text and token counts each produces alone; each still ends
// with one terminal, its own events in order.
TEST_F(EngineTest, BatchedRequestsProduceWhatEachProducesAlone) {
  std::vector<v1::InferenceRequest> requests = StoryRequests("");
  std::vector<Result> alone;
  for (const auto& r : requests) {
    Engine engine(sampled_->serving(), 256);
    alone.push_back(Run(engine, r));
  }
  Engine batched(sampled_->serving(), 256, static_cast<int>(requests.size()), 2);
  std::vector<Result> together = RunTogether(batched, requests, 4);
  ExpectSame(together, alone);
  EXPECT_GT(alone[7].terminal.usage().completion_tokens(), 0u);
  EXPECT_EQ(batched.preemptions(), 0);
}

// A pool that holds about one context for eight streams: the newest running sequence
// is preempted when a decoding one finds no block, goes back to waiting, and resumes
// from what stayed cached; every stream still gets what it gets alone, once.
// The same with the pool kept as Q8_0: the same number of blocks in 34/64 of the bytes.
TEST_F(EngineTest, AShortPoolPreemptsTheNewestAndEveryStreamGetsWhatItGetsAlone) {
  std::string padding;
  for (int i = 0; i < 40; ++i) padding += "w" + std::to_string(i) + " ";
  std::vector<v1::InferenceRequest> requests = StoryRequests(padding);
  for (model::KvType type : {model::KvType::kF16, model::KvType::kQ8_0}) {
    SCOPED_TRACE(model::KvTypeName(type));
    std::vector<Result> alone;
    for (const auto& r : requests) {
      Engine engine(sampled_->serving(), 256, 1, 1, 0, type);
      alone.push_back(Run(engine, r));
    }
    const size_t one_context = model::KvPool::BlockBytes(sampled_->serving().model->config(), type) *
                               (model::KvPool::BlocksFor(256) + 1);
    Engine batched(sampled_->serving(), 256, static_cast<int>(requests.size()), 2, one_context, type);
    EXPECT_EQ(batched.kv_status().blocks, model::KvPool::BlocksFor(256) + 1);
    EXPECT_EQ(batched.kv_status().bytes, one_context);
    EXPECT_EQ(batched.kv_status().type, type);
    std::vector<Result> together = RunTogether(batched, requests, 4);
    ExpectSame(together, alone);
    EXPECT_GT(batched.preemptions(), 0) << "prompt tokens " << alone[0].terminal.usage().prompt_tokens();
    EXPECT_EQ(batched.kv_status().in_use, 0);
  }
}

// Requests of one principal running at once share the blocks of their common prefix
// (a long system prompt); another principal's identical prompt shares nothing.
TEST_F(EngineTest, RunningRequestsOfOnePrincipalShareAPrefixAndNoOtherDoes) {
  std::string system;
  for (int i = 0; i < 60; ++i) system += "rule " + std::to_string(i) + ". ";
  auto make = [&](const std::string& principal, const std::string& user) {
    v1::InferenceRequest r = Request(user, 8);
    r.set_principal(principal);
    r.set_request_id("req_" + principal + "_" + user);
    r.mutable_sampling()->set_temperature(0.0f);
    v1::ChatMessage* sys = r.add_messages();
    sys->set_role("system");
    sys->set_content(system);
    std::swap(*r.mutable_messages(0), *r.mutable_messages(1));
    return r;
  };
  const std::vector<v1::InferenceRequest> requests = {make("alice", "first question"), make("alice", "second one"),
                                                      make("bob", "second one")};
  std::vector<Result> alone;
  for (const auto& r : requests) {
    Engine engine(sampled_->serving(), 512);
    alone.push_back(Run(engine, r));
  }
  Engine engine(sampled_->serving(), 512, 4, 2);
  std::vector<Result> together = RunTogether(engine, requests, 1);
  ExpectSame(together, alone);
  const uint32_t shared = together[1].terminal.usage().cached_prompt_tokens();
  EXPECT_GE(shared, 2u * model::KvPool::kBlockTokens);
  EXPECT_LT(shared, together[1].terminal.usage().prompt_tokens() - 2);
  EXPECT_EQ(together[2].terminal.usage().cached_prompt_tokens(), 0u);
}

// With several slots, a principal's next turn finds its own blocks in the pool even
// after other principals ran in between, and another principal never gets them.
TEST_F(EngineTest, APrincipalsNextTurnFindsItsCacheAmongTheSlots) {
  Engine engine(scripted_->serving(), 512, /*slots=*/2);
  v1::InferenceRequest alice = Request("What is the capital of France?");
  v1::InferenceRequest bob = Request("count");
  bob.set_principal("bob");
  Result first = Run(engine, alice);
  EXPECT_EQ(first.terminal.usage().cached_prompt_tokens(), 0u);
  EXPECT_EQ(Run(engine, bob).terminal.usage().cached_prompt_tokens(), 0u);
  v1::InferenceRequest mallory = alice;
  mallory.set_principal("mallory");
  EXPECT_EQ(Run(engine, mallory).terminal.usage().cached_prompt_tokens(), 0u);
  Result bob_again = Run(engine, bob);
  EXPECT_EQ(bob_again.terminal.usage().cached_prompt_tokens(), bob_again.terminal.usage().prompt_tokens() - 1);
  v1::InferenceRequest mallory_again = mallory;
  Result m = Run(engine, mallory_again);
  EXPECT_EQ(m.terminal.usage().cached_prompt_tokens(), m.terminal.usage().prompt_tokens() - 1);
  EXPECT_EQ(m.text, first.text);
}

// A cancel that lands while a step is under way (here: set by another request's
// terminal event, emitted during that step) ends the request once, at the next look
// (found by review: read twice per step, a sequence already in the pass could end
// before it and again after it).
TEST_F(EngineTest, ACancelDuringAStepEndsTheRequestOnce) {
  Engine engine(scripted_->serving(), 512, /*slots=*/2);
  std::atomic<bool> cancel_a{false}, cancel_x{false};
  int terminals_a = 0, terminals_x = 0;
  v1::InferenceRequest a = Request("count", 64), x = Request("What is the capital of France?", 64);
  a.set_request_id("req_a");
  x.set_request_id("req_x");
  engine.Add(a, &cancel_a, [&](v1::StreamEvent e, uint32_t) {
    if (e.has_terminal()) ++terminals_a;
  });
  engine.Add(x, &cancel_x, [&](v1::StreamEvent e, uint32_t) {
    if (!e.has_terminal()) return;
    ++terminals_x;
    cancel_a = true;  // while the step that ended x is under way
  });
  for (int i = 0; i < 3; ++i) engine.Step();  // both decoding
  cancel_x = true;
  int steps = 0;
  while (engine.active() > 0 && steps++ < 100) engine.Step();
  EXPECT_EQ(terminals_x, 1);
  EXPECT_EQ(terminals_a, 1);
}

// One case per row of NextSequenceState's table (engine.h).
TEST(SequenceStateTest, EveryRowOfTheTable) {
  using S = SequenceState;
  using E = SequenceEvent;
  struct Row {
    S from;
    E on;
    S to;
  };
  const Row rows[] = {
      {S::kWaiting, E::kSlotTaken, S::kPrefilling},     {S::kWaiting, E::kEnded, S::kFinished},
      {S::kWaiting, E::kPromptEvaluated, S::kWaiting},  {S::kPrefilling, E::kPromptEvaluated, S::kDecoding},
      {S::kPrefilling, E::kEnded, S::kFinished},        {S::kPrefilling, E::kSlotTaken, S::kPrefilling},
      {S::kDecoding, E::kEnded, S::kFinished},          {S::kDecoding, E::kSlotTaken, S::kDecoding},
      {S::kDecoding, E::kPromptEvaluated, S::kDecoding}, {S::kFinished, E::kSlotTaken, S::kFinished},
      {S::kFinished, E::kPromptEvaluated, S::kFinished}, {S::kFinished, E::kEnded, S::kFinished},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(NextSequenceState(r.from, r.on), r.to)
        << SequenceStateName(r.from) << " on " << SequenceEventName(r.on);
  }
}

}  // namespace
}  // namespace gantry::server
