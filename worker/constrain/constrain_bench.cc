// What a constraint costs (docs/benchmarks.md, "Constrained decoding"): the vocabulary's
// trie built from a real tokenizer, grammar compile time for the largest client tool
// set, and the time to compute one token mask from a cold cache and a warm one in
// the states a generation passes through (object start, key, string, number).
//   bazel run //worker/constrain:constrain_bench -- TOKENIZER_DIR TOOL_SCHEMAS.json
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/json_schema.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"
#include "worker/constrain/json_grammar.h"
#include "worker/constrain/token_mask.h"

namespace {

using namespace gantry;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: constrain_bench TOKENIZER_DIR TOOL_SCHEMAS.json\n");
    return 2;
  }
  auto tok = tokenizer::Tokenizer::Load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  auto start = Clock::now();
  auto vocab = constrain::Vocabulary::FromTokenizer(**tok);
  std::printf("vocabulary: %d tokens, bytes and trie in %.0f ms\n", vocab->size(), MsSince(start));

  std::ifstream in(argv[2]);
  std::stringstream text;
  text << in.rdbuf();
  auto all = json::Parse(text.str());
  if (!all.ok()) return 1;
  // The largest tool set: every tool's parameters as one anyOf (what a tool-call grammar
  // over all advertised tools compiles).
  std::string largest;
  size_t most = 0;
  for (const auto& [client, tools] : all->members()) {
    if (tools.items().size() > most) most = tools.items().size(), largest = client;
  }
  json::Value any_of = json::Value::EmptyArray();
  for (const json::Value& tool : all->Find(largest)->items()) {
    const json::Value* params = tool.Find("parameters");
    if (params != nullptr && params->is_object()) any_of.Append(*params);
  }
  json::Value root = json::Value::EmptyObject();
  root.Set("anyOf", any_of);
  start = Clock::now();
  const int compiles = 100;
  std::shared_ptr<const constrain::JsonGrammar> tools;
  for (int i = 0; i < compiles; ++i) {
    auto schema = json_schema::Schema::Compile(root);
    auto grammar = constrain::JsonGrammar::Compile(*schema, constrain::Fidelity::kRelaxed);
    if (!grammar.ok()) return 1;
    tools = *grammar;
  }
  std::printf("compile %s's %zu tools: %.3f ms\n", largest.c_str(), any_of.items().size(),
              MsSince(start) / compiles);

  struct State {
    const char* name;
    const char* schema;
    const char* prefix;
  };
  const State states[] = {
      {"object start", R"({"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"]})", ""},
      {"key", R"({"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"]})", "{\"co"},
      {"string", R"({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]})", "{\"command\": \"ls -l"},
      {"number", R"({"type":"object","properties":{"timeout":{"type":"integer","minimum":1,"maximum":600000}}})", "{\"timeout\": 12"},
      {"json mode string", nullptr, "{\"a\": \"text"},
  };
  std::printf("%-18s %10s %10s %8s\n", "state", "cold ms", "warm us", "allowed");
  for (const State& s : states) {
    std::shared_ptr<const constrain::JsonGrammar> g =
        s.schema ? *constrain::JsonGrammar::Compile(*json_schema::Schema::CompileText(s.schema),
                                                    constrain::Fidelity::kExact)
                 : constrain::JsonGrammar::AnyObject();
    constrain::JsonMatcher m(g);
    if (!m.Feed(s.prefix)) return 1;
    constrain::MaskCache cache;
    start = Clock::now();
    const constrain::TokenBits& bits = cache.Get(*vocab, 1, m);
    const double cold = MsSince(start);
    int allowed = 0;
    for (int32_t id = 0; id < vocab->size(); ++id) allowed += constrain::Allows(bits, id);
    start = Clock::now();
    const int warm = 1000;
    for (int i = 0; i < warm; ++i) cache.Get(*vocab, 1, m);
    std::printf("%-18s %10.2f %10.2f %8d\n", s.name, cold, MsSince(start) * 1000 / warm, allowed);
  }
  return 0;
}
