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
};

class ConstrainedOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TestBundleDirForTest(false);
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto loaded = LoadedBundle::Load(*dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    bundle_ = loaded->release();
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
  static std::vector<Answer> RunAll(const std::vector<v1::InferenceRequest>& requests) {
    Engine engine(bundle_->serving(), 512, /*slots=*/16);
    std::vector<Answer> answers(requests.size());
    static std::atomic<bool> no{false};
    for (size_t i = 0; i < requests.size(); ++i) {
      engine.Add(requests[i], &no, [&answers, i](v1::StreamEvent e, uint32_t) {
        if (e.has_text()) answers[i].text += e.text().text();
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
};

LoadedBundle* ConstrainedOutputTest::bundle_ = nullptr;

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
