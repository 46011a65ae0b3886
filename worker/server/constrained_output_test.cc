// response_format through the real Engine on a real random-weight bundle (make-test-model
// GGUF with the Qwen3 vocabulary, the sampler at temperature 1, seeded): with the
// constraint every answer that ends parses and validates; without it, the same seeds'
// answers almost never do (so the check could fail).
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/json_schema.h"
#include "gtest/gtest.h"
#include "worker/constrain/json_grammar.h"
#include "worker/server/engine.h"
#include "worker/server/serving.h"
#include "worker/server/test_bundle.h"

namespace gantry::server {
namespace {

struct Answer {
  std::string text;
  v1::Terminal terminal;
  std::vector<v1::ToolCallRef> calls;
};

class ConstrainedOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TestBundleDirForTest(false);
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto loaded = LoadedBundle::Load(*dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    bundle_ = loaded->release();
    auto tools_dir = TestBundleDirForTest(true);
    ASSERT_TRUE(tools_dir.ok()) << tools_dir.status();
    auto with_tools = LoadedBundle::Load(*tools_dir);
    ASSERT_TRUE(with_tools.ok()) << with_tools.status();
    tools_bundle_ = with_tools->release();
  }

  static v1::InferenceRequest Request(uint64_t seed, const v1::ResponseFormat& format, uint32_t max_tokens) {
    v1::InferenceRequest r;
    r.set_request_id("req_" + std::to_string(seed));
    r.set_principal("alice");
    r.set_max_tokens(max_tokens);
    auto* m = r.add_messages();
    m->set_role("user");
    m->set_content("Describe a person as JSON.");
    r.mutable_sampling()->set_temperature(1.0f);
    r.mutable_sampling()->set_seed(seed);
    *r.mutable_response_format() = format;
    return r;
  }

  // Every request at once through one engine (continuous batching), to their ends.
  static std::vector<Answer> RunAll(const std::vector<v1::InferenceRequest>& requests,
                                    const ServingBundle* serving = nullptr) {
    Engine engine(serving ? *serving : bundle_->serving(), 512, /*slots=*/16);
    std::vector<Answer> answers(requests.size());
    static std::atomic<bool> no{false};
    for (size_t i = 0; i < requests.size(); ++i) {
      engine.Add(requests[i], &no, [&answers, i](v1::StreamEvent e, uint32_t) {
        if (e.has_text()) answers[i].text += e.text().text();
        if (e.has_tool_call()) answers[i].calls.push_back(e.tool_call().call());
        if (e.has_terminal()) answers[i].terminal = e.terminal();
      });
    }
    while (engine.active() > 0) engine.Step();
    return answers;
  }

  static v1::ResponseFormat Schema(const std::string& schema) {
    v1::ResponseFormat f;
    f.set_type(v1::OUTPUT_JSON_SCHEMA);
    f.set_name("answer");
    f.set_schema_json(schema);
    return f;
  }

  static LoadedBundle* bundle_;
  static LoadedBundle* tools_bundle_;  // declares hermes_json
};

LoadedBundle* ConstrainedOutputTest::bundle_ = nullptr;
LoadedBundle* ConstrainedOutputTest::tools_bundle_ = nullptr;

bool ParsesAndValidates(const std::string& text, const json_schema::Schema& schema) {
  auto value = json::Parse(text);
  return value.ok() && schema.IsValid(*value);
}

TEST_F(ConstrainedOutputTest, SampledAnswersUnderASchemaAllParseAndValidate) {
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
          "age":{"type":"integer","minimum":0,"maximum":120},"pet":{"enum":["cat","dog",null]}},
          "required":["name","age"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"number","exclusiveMinimum":-1,"maximum":1},"minItems":1,"maxItems":4})",
      R"({"anyOf":[{"type":"boolean"},{"type":"object","properties":{"ok":{"type":"boolean"},
          "why":{"type":"string","minLength":1,"maxLength":3}},"required":["ok"],"additionalProperties":false}]})",
  };
  // CI runs 100 seeds per schema; GANTRY_CONSTRAINED_SEEDS=1000 runs the issue's count.
  const char* seeds = std::getenv("GANTRY_CONSTRAINED_SEEDS");
  const int per_schema = seeds != nullptr && std::atoi(seeds) > 0 ? std::atoi(seeds) : 100;
  const int free_runs = 20;
  for (const std::string& text : schemas) {
    auto schema = json_schema::Schema::CompileText(text);
    ASSERT_TRUE(schema.ok());
    std::vector<v1::InferenceRequest> constrained, free;
    for (int seed = 1; seed <= per_schema; ++seed) constrained.push_back(Request(seed, Schema(text), 120));
    for (int seed = 1; seed <= free_runs; ++seed) free.push_back(Request(seed, v1::ResponseFormat(), 120));
    int stopped = 0;
    for (const Answer& a : RunAll(constrained)) {
      if (a.terminal.finish_reason() == v1::FINISH_LENGTH) continue;
      ASSERT_EQ(a.terminal.finish_reason(), v1::FINISH_STOP) << a.terminal.status().message();
      ++stopped;
      EXPECT_TRUE(ParsesAndValidates(a.text, *schema)) << text << "\n" << a.text;
    }
    EXPECT_GE(stopped, per_schema * 3 / 4) << text;
    int valid_free = 0;
    for (const Answer& a : RunAll(free)) valid_free += ParsesAndValidates(a.text, *schema);
    EXPECT_LE(valid_free, free_runs / 10) << text;
  }
}

// JSON mode: every answer stays a prefix of a JSON object and, where it ends, is one; a
// sequence batched with others answers as it does alone. A random model rarely closes
// an open object, so a logit_bias toward '"', '":', '1' and '}' helps it end.
TEST_F(ConstrainedOutputTest, JsonModeAnswersAreObjectsAndBatchedEqualsAlone) {
  v1::ResponseFormat object;
  object.set_type(v1::OUTPUT_JSON_OBJECT);
  const tokenizer::Tokenizer& tok = *bundle_->serving().tokenizer;
  std::vector<v1::InferenceRequest> requests;
  for (int seed = 1; seed <= 24; ++seed) {
    v1::InferenceRequest r = Request(seed, object, 100);
    for (const char* text : {"\"", "\":", "1", "}"}) {
      auto id = tok.TokenId(text);
      ASSERT_TRUE(id.has_value()) << text;
      (*r.mutable_sampling()->mutable_logit_bias())[*id] = 6.0f;
    }
    requests.push_back(r);
  }
  const std::vector<Answer> together = RunAll(requests);
  int objects = 0;
  for (size_t i = 0; i < together.size(); ++i) {
    const Answer& a = together[i];
    constrain::JsonMatcher matcher(constrain::JsonGrammar::AnyObject());
    EXPECT_TRUE(matcher.Feed(a.text)) << a.text;
    if (i < 4) EXPECT_EQ(RunAll({requests[i]})[0].text, a.text) << i;
    if (a.terminal.finish_reason() != v1::FINISH_STOP) {
      EXPECT_EQ(a.terminal.finish_reason(), v1::FINISH_LENGTH) << a.terminal.status().message();
      continue;
    }
    auto value = json::Parse(a.text);
    ASSERT_TRUE(value.ok()) << a.text;
    EXPECT_TRUE(value->is_object());
    ++objects;
  }
  EXPECT_GE(objects, 3);  // 4 of these 24 seeds end today
}

// Tool calls (hermes_json) are constrained from "<tool_call>" on: a random model pushed
// to start calls (logit_bias on the token) writes calls that validate, where the same
// seeds without the grammar never finish one.
TEST_F(ConstrainedOutputTest, SampledToolCallsStayOnTheAdvertisedSchemas) {
  const tokenizer::Tokenizer& tok = *tools_bundle_->serving().tokenizer;
  auto open = tok.TokenId("<tool_call>");
  ASSERT_TRUE(open.has_value());
  std::vector<v1::InferenceRequest> requests;
  for (int seed = 1; seed <= 40; ++seed) {
    v1::InferenceRequest r = Request(seed, v1::ResponseFormat(), 150);
    v1::ToolDefinition* weather = r.add_tools();
    weather->set_name("get_weather");
    weather->set_parameters_json(R"({"type":"object","properties":{"city":{"type":"string","maxLength":10},
        "unit":{"enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":7}},
        "required":["city"],"additionalProperties":false})");
    v1::ToolDefinition* goal = r.add_tools();
    goal->set_name("get_goal");
    goal->set_parameters_json(R"({"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":99}},
        "additionalProperties":false})");
    (*r.mutable_sampling()->mutable_logit_bias())[*open] = 12.0f;
    requests.push_back(r);
  }
  // A call the output cap cuts is an error either way (never a partial call): only the
  // calls that end are the grammar's to keep valid.
  auto cut = [](const Answer& a) { return a.terminal.usage().completion_tokens() >= 150; };
  int with_calls = 0;
  for (const Answer& a : RunAll(requests, &tools_bundle_->serving())) {
    if (!cut(a)) {
      EXPECT_NE(a.terminal.finish_reason(), v1::FINISH_ERROR) << a.terminal.status().message() << "\n" << a.text;
    }
    with_calls += !a.calls.empty();
    for (const v1::ToolCallRef& call : a.calls) {
      EXPECT_TRUE(call.name() == "get_weather" || call.name() == "get_goal") << call.name();
      EXPECT_TRUE(json::Parse(call.arguments_json()).ok());
    }
  }
  EXPECT_GE(with_calls, 20);
  ServingBundle unconstrained = tools_bundle_->serving();
  unconstrained.constrain_tool_calls = false;
  int free_calls = 0;  // without the grammar a started call is noise: it never ends valid
  for (const Answer& a : RunAll(requests, &unconstrained)) free_calls += !a.calls.empty();
  EXPECT_LE(free_calls, 2);
}

TEST_F(ConstrainedOutputTest, ASchemaTheEngineCannotEnforceIsRefusedBeforeGeneration) {
  const Answer a = RunAll({Request(1, Schema(R"({"type":"string","pattern":"^[a-z]+$"})"), 20)})[0];
  EXPECT_EQ(a.terminal.finish_reason(), v1::FINISH_ERROR);
  EXPECT_EQ(a.terminal.usage().completion_tokens(), 0u);
  EXPECT_NE(a.terminal.status().message().find("does not enforce `pattern`"), std::string::npos)
      << a.terminal.status().message();
  const Answer bad = RunAll({Request(1, Schema("{\"type\":"), 20)})[0];
  EXPECT_EQ(bad.terminal.finish_reason(), v1::FINISH_ERROR);
  EXPECT_TRUE(bad.text.empty());
}

}  // namespace
}  // namespace gantry::server
