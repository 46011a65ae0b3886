// Fuzz-style: thousands of seeded mutations of a valid bundle manifest, raw (bytes) and
// structural (one member's value replaced, identity recomputed). Properties:
//   - nothing crashes, hangs or throws;
//   - a raw mutation is accepted only when its canonical form is unchanged (whitespace,
//     member order, escapes), so the identity still holds;
//   - a structural mutation is accepted only when the parsed manifest serializes back
//     to exactly the mutated content (nothing ignored, nothing invented), and every
//     accepted asset path is a safe relative path.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/json.h"
#include "formats/bundle/bundle.h"
#include "formats/bundle/bundle_manifest.h"
#include "formats/bundle/bundle_pack.h"
#include "formats/bundle/bundle_test_support.h"
#include "gtest/gtest.h"

namespace gantry::bundle {
namespace {

std::string PackTiny() {
  std::string work = MakeTempDirForTest("fuzz");
  WriteTinyGgufForTest(work + "/in.gguf", true, "{{ messages[0].content }}");
  PackOptions o;
  o.gguf_path = work + "/in.gguf";
  o.model = "fuzz";
  o.out_dir = work + "/bundle";
  auto m = PackBundle(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return o.out_dir;
}

const char* const kTokens[] = {"..", "/", "../", "\"", "\\", "{", "}", "[", "]", ",", ":", "null",
                               "-1", "1e9", "0", "\"\"", "true", "\\u0000", "\xff", "/etc/passwd",
                               "18446744073709551616", "\"identity_sha256\":\"\","};

std::string MutateBytes(std::string s, std::mt19937_64* rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>((*rng)() % n); };
  int edits = 1 + static_cast<int>(pick(3));
  for (int e = 0; e < edits; ++e) {
    size_t at = pick(s.size() + 1);
    switch (pick(5)) {
      case 0:
        if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1 << pick(8)));
        break;
      case 1:
        s.erase(at, 1 + pick(8));
        break;
      case 2:
        s.insert(at, kTokens[pick(sizeof(kTokens) / sizeof(kTokens[0]))]);
        break;
      case 3:
        if (at < s.size()) s.insert(at, s.substr(at, 1 + pick(16)));
        break;
      default:
        s.resize(at);
        break;
    }
  }
  return s;
}

std::vector<json::Value> Replacements() {
  std::vector<json::Value> out = {
      json::Value(), json::Value::Bool(true), json::Value::Int(-1), json::Value::Int(0),
      json::Value::Int(1), json::Value::Int(4294967296LL), json::Value::Double(1.5),
      json::Value::String(""), json::Value::String("../model.gguf"), json::Value::String("/etc/passwd"),
      json::Value::String("model.gguf"), json::Value::String("chat_template.jinja"),
      json::Value::String("gguf"), json::Value::String("hermes_json"), json::Value::String("x y"),
      json::Value::String(std::string(300, 'a')), json::Value::EmptyArray(), json::Value::EmptyObject()};
  return out;
}

TEST(BundleManifestFuzz, RawMutations) {
  const std::string dir = PackTiny();
  const std::string original = ReadFileForTest(dir + "/bundle.json");
  const std::string canonical = CanonicalForm(*json::Parse(original));
  std::mt19937_64 rng(20240611);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = MutateBytes(original, &rng);
    WriteFileForTest(dir + "/bundle.json", mutated);
    auto b = LoadAndVerify(dir);
    if (b.ok()) {
      ++accepted;
      auto parsed = json::Parse(mutated);
      ASSERT_TRUE(parsed.ok());
      EXPECT_EQ(CanonicalForm(*parsed), canonical) << "accepted a changed manifest:\n" << mutated;
    } else {
      EXPECT_NE(b.status().code(), absl::StatusCode::kInternal) << b.status();
      EXPECT_NE(b.status().code(), absl::StatusCode::kOk);
    }
  }
  std::printf("raw mutations: %d of 3000 accepted (canonically unchanged)\n", accepted);
}

TEST(BundleManifestFuzz, StructuralMutations) {
  const std::string dir = PackTiny();
  const json::Value good = *json::Parse(ReadFileForTest(dir + "/bundle.json"));
  int tried = 0, accepted = 0;
  std::vector<std::pair<std::string, std::string>> slots;  // (member, sub-member or "")
  for (const auto& m : good.members()) {
    if (m.first == "identity_sha256") continue;
    slots.push_back({m.first, ""});
    if (m.second.is_object()) {
      for (const auto& sub : m.second.members()) slots.push_back({m.first, sub.first});
    }
  }
  for (const auto& [key, sub] : slots) {
    for (const json::Value& replacement : Replacements()) {
      json::Value m = good;
      if (sub.empty()) {
        m.Set(key, replacement);
      } else {
        m.Find(key)->Set(sub, replacement);
      }
      WriteManifestWithFreshIdentityForTest(dir, m);
      ++tried;
      auto b = LoadAndVerify(dir);
      if (!b.ok()) {
        EXPECT_NE(b.status().code(), absl::StatusCode::kInternal) << b.status();
        continue;
      }
      ++accepted;
      json::Value back = ManifestToJson(b->manifest());
      EXPECT_EQ(CanonicalForm(back), CanonicalForm(m)) << key << "." << sub;
      for (const Asset* a : {&b->manifest().weights, &b->manifest().tokenizer, &b->manifest().chat_template}) {
        EXPECT_TRUE(IsSafeAssetPath(a->path)) << a->path;
      }
    }
  }
  // Some replacements are legitimate (another model name, another tool protocol).
  std::printf("structural mutations: %d of %d accepted\n", accepted, tried);
  EXPECT_LT(accepted, tried / 4);
}

TEST(BundleManifestFuzz, SafePathRules) {
  for (const char* good : {"model.gguf", "a/b.json", "x_1-2.jinja"}) EXPECT_TRUE(IsSafeAssetPath(good)) << good;
  for (const char* bad : {"", "/abs", "..", "a/../b", "./a", "a/", "a//b", "a\\b", "a b", "ü.gguf",
                          "a/b/c/d/e/f/g/h/i"}) {
    EXPECT_FALSE(IsSafeAssetPath(bad)) << bad;
  }
}

}  // namespace
}  // namespace gantry::bundle
