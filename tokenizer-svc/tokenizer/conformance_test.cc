// Conformance with Hugging Face: for every corpus case and each of the four reference
// tokenizers, our ids equal the expected ids in all three variants (specials parsed,
// add_special, specials as text) and our decoding equals the expected text.
//
// The tokenizer.json files live outside the repository, in
// $GANTRY_REFERENCE_DIR/tokenizers/<name>/; the test fails (does not skip) without it.
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::tokenizer {
namespace {

constexpr char kData[] = "tests/data/tokenizer";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::vector<std::string> CaseNames(const std::string& tokenizer) {
  std::vector<std::string> names;
  std::string dir = std::string(kData) + "/expected/" + tokenizer;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
        names.push_back(name.substr(0, name.size() - 5));
      }
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Loads each reference tokenizer once per test binary; nullptr (after a test failure
// that says why) when it cannot.
const Tokenizer* GetTokenizer(const std::string& name) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  auto it = cache->find(name);
  if (it != cache->end()) return it->second.get();
  const char* root = std::getenv("GANTRY_REFERENCE_DIR");
  if (root == nullptr || *root == '\0') {
    ADD_FAILURE() << "GANTRY_REFERENCE_DIR is not set: it must name the shared reference "
                     "folder holding tokenizers/<name>/tokenizer.json (tests/run sets it; "
                     "with bazel test pass --test_env=GANTRY_REFERENCE_DIR=...)";
    return nullptr;
  }
  auto loaded = Tokenizer::Load(std::string(root) + "/tokenizers/" + name);
  if (!loaded.ok()) {
    ADD_FAILURE() << "loading " << name << ": " << loaded.status();
    return nullptr;
  }
  return (*cache)[name] = std::move(loaded).value(), (*cache)[name].get();
}

std::vector<int32_t> Ids(const json::Value& v) {
  std::vector<int32_t> ids;
  for (const json::Value& item : v.items()) ids.push_back(static_cast<int32_t>(*item.as_int64()));
  return ids;
}

enum class Variant { kIds, kAddSpecial, kSplitSpecial, kDecoded };

void RunConformance(const std::string& name, Variant variant) {
  const Tokenizer* tokenizer = GetTokenizer(name);
  if (tokenizer == nullptr) return;
  std::vector<std::string> cases = CaseNames(name);
  ASSERT_FALSE(cases.empty()) << "no expected data under " << kData << "/expected/" << name;
  const char* key = variant == Variant::kIds          ? "ids"
                    : variant == Variant::kAddSpecial ? "ids_add_special"
                    : variant == Variant::kSplitSpecial ? "ids_split_special"
                                                        : "decoded";
  int passed = 0;
  for (const std::string& c : cases) {
    auto expected = json::Parse(ReadAll(std::string(kData) + "/expected/" + name + "/" + c + ".json"));
    ASSERT_TRUE(expected.ok()) << c << ": " << expected.status();
    const json::Value* want = expected->Find(key);
    ASSERT_NE(want, nullptr) << c << " has no " << key;
    std::string text = ReadAll(std::string(kData) + "/corpus/" + c + ".txt");
    bool ok = false;
    if (variant == Variant::kDecoded) {
      const json::Value* ids = expected->Find("ids");
      auto got = tokenizer->Decode(Ids(*ids));
      EXPECT_TRUE(got.ok()) << name << " " << c << ": " << got.status();
      ok = got.ok() && *got == want->as_string();
      EXPECT_TRUE(ok) << name << " " << c << ": decoded text differs";
    } else {
      EncodeOptions options;
      options.add_special = variant == Variant::kAddSpecial;
      options.split_special = variant == Variant::kSplitSpecial;
      auto got = tokenizer->Encode(text, options);
      EXPECT_TRUE(got.ok()) << name << " " << c << ": " << got.status();
      std::vector<int32_t> want_ids = Ids(*want);
      ok = got.ok() && *got == want_ids;
      if (got.ok() && !ok) {
        size_t i = 0;
        while (i < got->size() && i < want_ids.size() && (*got)[i] == want_ids[i]) ++i;
        ADD_FAILURE() << name << " " << key << " " << c << ": " << got->size() << " ids, want "
                      << want_ids.size() << "; first difference at index " << i << ": got "
                      << (i < got->size() ? std::to_string((*got)[i]) : "end") << ", want "
                      << (i < want_ids.size() ? std::to_string(want_ids[i]) : "end");
      }
    }
    if (ok) ++passed;
  }
  std::printf("conformance %s %s: %d/%zu cases pass\n", name.c_str(), key, passed, cases.size());
}

#define GANTRY_CONFORMANCE_TESTS(Name, name)                                              \
  TEST(Conformance, Name##Ids) { RunConformance(name, Variant::kIds); }                   \
  TEST(Conformance, Name##AddSpecial) { RunConformance(name, Variant::kAddSpecial); }     \
  TEST(Conformance, Name##SplitSpecial) { RunConformance(name, Variant::kSplitSpecial); } \
  TEST(Conformance, Name##Decoded) { RunConformance(name, Variant::kDecoded); }

// EncodeOptions::max_ids refuses exactly the texts over it: a corpus case of n ids is
// encoded whole at a limit of n (the bound on bytes per token never refuses a text that
// fits) and refused at n - 1, with its sections cached or not; one letter repeated 4 MiB
// times (a single piece) is refused at a limit far below it.
void RunLimit(const std::string& name) {
  const Tokenizer* tokenizer = GetTokenizer(name);
  if (tokenizer == nullptr) return;
  int checked = 0;
  for (const std::string& c : CaseNames(name)) {
    auto expected = json::Parse(ReadAll(std::string(kData) + "/expected/" + name + "/" + c + ".json"));
    ASSERT_TRUE(expected.ok()) << c;
    const std::vector<int32_t> want = Ids(*expected->Find("ids"));
    const std::string text = ReadAll(std::string(kData) + "/corpus/" + c + ".txt");
    if (want.size() < 2) continue;
    for (bool cached : {false, true, true}) {  // the second pass hits the section cache
      EncodeOptions options;
      options.use_section_cache = cached;
      options.max_ids = want.size();
      auto whole = tokenizer->Encode(text, options);
      ASSERT_TRUE(whole.ok()) << name << " " << c << ": " << whole.status();
      EXPECT_EQ(*whole, want) << name << " " << c;
      options.max_ids = want.size() - 1;
      auto over = tokenizer->Encode(text, options);
      EXPECT_TRUE(absl::IsOutOfRange(over.status())) << name << " " << c << ": " << over.status();
    }
    ++checked;
  }
  EXPECT_GT(checked, 10) << name;
  EncodeOptions options;
  auto short_run = tokenizer->Encode(std::string(1000, 'a'), options);
  ASSERT_TRUE(short_run.ok());
  options.max_ids = short_run->size();
  EXPECT_TRUE(tokenizer->Encode(std::string(1000, 'a'), options).ok()) << name;
  options.max_ids = 1000;
  auto long_run = tokenizer->Encode(std::string(4u << 20, 'a'), options);
  EXPECT_TRUE(absl::IsOutOfRange(long_run.status())) << name << ": " << long_run.status();
}

TEST(Conformance, ALimitRefusesExactlyTheTextsOverIt) {
  for (const char* name : {"qwen3", "llama3", "llama2", "gemma3"}) RunLimit(name);
}

GANTRY_CONFORMANCE_TESTS(Qwen3, "qwen3")
GANTRY_CONFORMANCE_TESTS(Llama3, "llama3")
GANTRY_CONFORMANCE_TESTS(Llama2, "llama2")
GANTRY_CONFORMANCE_TESTS(Gemma3, "gemma3")

}  // namespace
}  // namespace gantry::tokenizer
