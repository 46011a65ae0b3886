// Every conversation fixture rendered with every reference chat template must equal the
// reference rendering byte for byte, or fail where the reference raised, with the
// reference's message. Data: tests/data/render (see its README). strftime_now() reads a
// clock pinned to 2024-07-26 12:00 UTC, the clock the expected renderings were made with
// (Llama 3.2 prints today's date).
#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/jinja/chat_template.h"

namespace gantry::jinja {
namespace {

const char kData[] = "tests/data/render";
const int64_t kReferenceNow = 1721995200;  // 2024-07-26T12:00:00Z

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

std::vector<std::string> Cases() {
  std::vector<std::string> names;
  std::string dir = std::string(kData) + "/conversations";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") names.push_back(n.substr(0, n.size() - 5));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceTest, MatchesReferenceForEveryConversation) {
  const std::string tpl = GetParam();
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Load(std::string(kData) + "/templates/" + tpl);
  ASSERT_TRUE(chat.ok()) << chat.status();
  std::vector<std::string> cases = Cases();
  ASSERT_EQ(cases.size(), 11u);
  int passed = 0;
  for (const std::string& c : cases) {
    std::string conv_text, expected, expected_error;
    ASSERT_TRUE(ReadFile(std::string(kData) + "/conversations/" + c + ".json", &conv_text));
    absl::StatusOr<json::Value> conv = json::Parse(conv_text);
    ASSERT_TRUE(conv.ok()) << conv.status();
    std::string base = std::string(kData) + "/expected-render/" + tpl + "/" + c;
    bool has_text = ReadFile(base + ".txt", &expected);
    bool has_error = ReadFile(base + ".error.txt", &expected_error);
    ASSERT_TRUE(has_text != has_error) << base;
    while (!expected_error.empty() && expected_error.back() == '\n') expected_error.pop_back();
    RenderOptions options;
    options.now_for_test = kReferenceNow;
    absl::StatusOr<std::string> got = chat->Render(*conv, options);
    if (has_text) {
      EXPECT_TRUE(got.ok()) << tpl << "/" << c << ": " << got.status();
      if (got.ok()) {
        EXPECT_EQ(*got, expected) << tpl << "/" << c;
        passed += *got == expected;
      }
    } else {
      EXPECT_FALSE(got.ok()) << tpl << "/" << c << " rendered but the reference raised";
      if (!got.ok()) {
        EXPECT_NE(std::string(got.status().message()).find(expected_error), std::string::npos)
            << tpl << "/" << c << ": " << got.status();
        EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
        passed += std::string(got.status().message()).find(expected_error) != std::string::npos;
      }
    }
  }
  std::printf("%s: %d/%zu conform\n", tpl.c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Templates, ConformanceTest,
                         ::testing::Values("qwen3", "llama3", "gemma3", "deepseek_r1_distill", "qwen25",
                                           "llama31", "llama32", "mistral_v03", "phi4", "smollm2"));

// The reference fails on an assistant message with content null (real clients send it);
// so must we, with the template line (Python's traceback names line 34 too).
TEST(ConformanceTest, Qwen3RejectsNullAssistantContentLikeTheReference) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Load(std::string(kData) + "/templates/qwen3");
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<json::Value> conv = json::Parse(R"({"messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"x": 1.0}}}]}]})");
  ASSERT_TRUE(conv.ok());
  absl::StatusOr<std::string> got = chat->Render(*conv);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(std::string(got.status().message()).find("line 34: argument of type 'NoneType' is not iterable"),
            std::string::npos)
      << got.status();
}

}  // namespace
}  // namespace gantry::jinja
