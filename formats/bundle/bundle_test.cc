// Pack -> verify, tampering with each asset and with the manifest, hostile manifests,
// and pack's own refusals. The real-model case packs a make-test-model GGUF built from
// $GANTRY_REFERENCE_DIR/tokenizers/qwen3 (the test fails without it).
#include "formats/bundle/bundle.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/status.h"
#include "formats/bundle/bundle_manifest.h"
#include "formats/bundle/bundle_pack.h"
#include "formats/bundle/bundle_test_support.h"
#include "formats/testmodel/test_model.h"
#include "gtest/gtest.h"

namespace gantry::bundle {
namespace {

constexpr char kTemplate[] = "{% for m in messages %}{{ m.content }}{% endfor %}";

// A GGUF-only bundle from a tiny GGUF; returns its directory.
std::string PackTiny(const std::string& tool_protocol = "hermes_json") {
  std::string work = MakeTempDirForTest("tiny");
  WriteTinyGgufForTest(work + "/in.gguf", true, kTemplate);
  PackOptions o;
  o.gguf_path = work + "/in.gguf";
  o.model = "tiny-test";
  o.tool_protocol = tool_protocol;
  o.out_dir = work + "/bundle";
  auto m = PackBundle(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return o.out_dir;
}

json::Value ManifestJson(const std::string& dir) {
  auto v = json::Parse(ReadFileForTest(dir + "/bundle.json"));
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : json::Value::EmptyObject();
}

void ExpectInvalid(const std::string& dir, const std::string& needle) {
  auto b = LoadAndVerify(dir);
  ASSERT_FALSE(b.ok()) << "accepted; wanted an error mentioning " << needle;
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), needle)) << b.status();
}

TEST(Bundle, PackGgufOnlyThenVerify) {
  std::string dir = PackTiny();
  auto b = LoadAndVerify(dir);
  ASSERT_TRUE(b.ok()) << b.status();
  const Manifest& m = b->manifest();
  EXPECT_EQ(m.tokenizer_source, TokenizerSource::kGguf);
  EXPECT_EQ(m.chat_template_source, "gguf");
  EXPECT_EQ(m.chat_template_name, "default");
  EXPECT_EQ(ReadFileForTest(b->ChatTemplatePath()), kTemplate);
  EXPECT_EQ(m.context_length, 2048u);
  EXPECT_EQ(m.default_max_tokens, 2048u);
  gantry::v1::BundleIdentity id = b->Identity();
  EXPECT_EQ(id.model(), "tiny-test");
  EXPECT_EQ(id.architecture(), "qwen3");
  EXPECT_EQ(id.identity_sha256(), m.identity_sha256);
  EXPECT_EQ(id.identity_sha256(), ComputeIdentity(ManifestJson(dir)));
  EXPECT_EQ(id.weights_sha256(), *Sha256File(dir + "/model.gguf"));
  EXPECT_EQ(id.tokenizer_sha256(), id.weights_sha256());
  EXPECT_EQ(id.chat_template_sha256(), Sha256Hex(kTemplate));
  EXPECT_EQ(id.tool_protocol(), "hermes_json");
  EXPECT_EQ(id.context_length(), 2048u);
}

TEST(Bundle, ManifestRoundTripsAndCanonicalFormIsSortedCompact) {
  std::string dir = PackTiny("");
  std::string text = ReadFileForTest(dir + "/bundle.json");
  auto m = ParseManifest(text);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(SerializeManifest(*m), text);
  EXPECT_EQ(m->tool_protocol, "");
  std::string canonical = CanonicalForm(ManifestJson(dir));
  EXPECT_TRUE(absl::StartsWith(canonical, "{\"architecture\":\"qwen3\",\"chat_template\":{\"bytes\":"))
      << canonical;
  EXPECT_FALSE(absl::StrContains(canonical, "identity_sha256"));
  EXPECT_FALSE(absl::StrContains(canonical, " "));
  EXPECT_EQ(m->identity_sha256, Sha256Hex(canonical));
}

TEST(Bundle, RealModelEveryAssetTamperedIsNamed) {
  const char* ref = std::getenv("GANTRY_REFERENCE_DIR");
  ASSERT_TRUE(ref != nullptr && *ref != '\0')
      << "GANTRY_REFERENCE_DIR must name the shared reference folder (tokenizers/qwen3); "
         "with bazel test pass --test_env=GANTRY_REFERENCE_DIR=...";
  std::string work = MakeTempDirForTest("real");
  testmodel::TestModelOptions t;
  t.tokenizer_dir = std::string(ref) + "/tokenizers/qwen3";
  t.n_layer = 1;
  t.n_embd = 64;
  auto made = testmodel::MakeTestModel(t, work + "/qwen3.gguf");
  ASSERT_TRUE(made.ok()) << made.status();

  PackOptions o;
  o.gguf_path = work + "/qwen3.gguf";
  o.model = "qwen3-test";
  o.tokenizer_dir = t.tokenizer_dir;
  o.tool_protocol = "hermes_json";
  o.context_length = 1024;
  o.max_output = 256;
  o.copy = true;  // the test flips bytes: never through a link into the reference files
  o.out_dir = work + "/bundle";
  std::vector<std::string> hashed;
  auto packed = PackBundle(o, [&](const std::string& name, uint64_t, uint64_t) {
    if (hashed.empty() || hashed.back() != name) hashed.push_back(name);
  });
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(hashed, (std::vector<std::string>{"model.gguf", "tokenizer.json", "tokenizer_config.json",
                                              "chat_template.jinja"}));
  auto b = LoadAndVerify(o.out_dir);
  ASSERT_TRUE(b.ok()) << b.status();
  const Manifest& m = b->manifest();
  EXPECT_EQ(m.tokenizer_source, TokenizerSource::kTokenizerJson);
  ASSERT_TRUE(m.tokenizer_config.has_value());
  EXPECT_EQ(m.chat_template_source, "tokenizer_config.json");
  EXPECT_EQ(m.context_length, 1024u);
  EXPECT_EQ(m.default_max_tokens, 256u);
  EXPECT_EQ(b->Identity().identity_sha256(), packed->identity_sha256);
  EXPECT_NE(ReadFileForTest(b->ChatTemplatePath()).find("im_start"), std::string::npos);

  for (const Asset* asset : {&m.weights, &m.tokenizer, &*m.tokenizer_config, &m.chat_template}) {
    std::string path = o.out_dir + "/" + asset->path;
    FlipByteForTest(path, asset->bytes / 2);
    std::string actual = *Sha256File(path);
    auto bad = LoadAndVerify(o.out_dir);
    ASSERT_FALSE(bad.ok()) << asset->path;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(ReasonOf(bad.status()), "bundle_mismatch");
    EXPECT_TRUE(absl::StrContains(bad.status().message(), asset->path)) << bad.status();
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "expected " + asset->sha256)) << bad.status();
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "actual " + actual)) << bad.status();
    FlipByteForTest(path, asset->bytes / 2);
    EXPECT_TRUE(LoadAndVerify(o.out_dir).ok()) << asset->path << " restored";
  }
}

TEST(Bundle, EditedManifestIsAnIdentityMismatch) {
  std::string dir = PackTiny();
  std::string text = ReadFileForTest(dir + "/bundle.json");
  std::string recorded = ManifestJson(dir).Find("identity_sha256")->as_string();
  size_t at = text.find("\"context_length\": 2048");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 22, "\"context_length\": 4096");
  WriteFileForTest(dir + "/bundle.json", text);
  auto b = LoadAndVerify(dir);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(ReasonOf(b.status()), "bundle_mismatch");
  EXPECT_TRUE(absl::StrContains(b.status().message(), "bundle.json: identity_sha256")) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), "expected " + recorded)) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), "actual " + ComputeIdentity(*json::Parse(text))))
      << b.status();
}

TEST(Bundle, HostileManifests) {
  std::string dir = PackTiny();
  const json::Value good = ManifestJson(dir);
  auto with = [&](const std::string& key, const std::string& member, json::Value v) {
    json::Value m = good;
    if (member.empty()) {
      m.Set(key, std::move(v));
    } else {
      m.Find(key)->Set(member, std::move(v));
    }
    WriteManifestWithFreshIdentityForTest(dir, m);
  };

  WriteFileForTest(dir + "/bundle.json", "{\"format\": ");
  ExpectInvalid(dir, "bundle.json: top level");
  WriteFileForTest(dir + "/bundle.json", "[]");
  ExpectInvalid(dir, "expected an object");
  WriteFileForTest(dir + "/bundle.json", std::string(kMaxManifestBytes + 10, ' '));
  ExpectInvalid(dir, "larger than");

  with("weights", "path", json::Value::String("../in.gguf"));
  ExpectInvalid(dir, "weights.path");
  with("chat_template", "path", json::Value::String("/etc/passwd"));
  ExpectInvalid(dir, "chat_template.path");
  with("weights", "path", json::Value::String("a//b"));
  ExpectInvalid(dir, "weights.path");
  with("weights", "sha256", json::Value::String("ABC"));
  ExpectInvalid(dir, "weights.sha256");
  with("tool_protocol", "", json::Value::String("xml_magic"));
  ExpectInvalid(dir, "unknown protocol \"xml_magic\"");
  with("format", "", json::Value::String("gantry.bundle/2"));
  ExpectInvalid(dir, "format");
  with("context_length", "", json::Value::Int(0));
  ExpectInvalid(dir, "context_length");
  with("default_max_tokens", "", json::Value::Int(4096));
  ExpectInvalid(dir, "larger than context_length");
  with("surprise", "", json::Value::Bool(true));
  ExpectInvalid(dir, "unknown member \"surprise\"");
  with("tokenizer", "source", json::Value::String("sentencepiece"));
  ExpectInvalid(dir, "tokenizer");
  with("architecture", "", json::Value::String("llama"));
  ExpectInvalid(dir, "says \"qwen3\"");

  for (const auto& member : good.members()) {
    json::Value m = good;
    auto& members = m.members();
    for (auto it = members.begin(); it != members.end(); ++it) {
      if (it->first == member.first) {
        members.erase(it);
        break;
      }
    }
    if (member.first == "identity_sha256") {
      WriteFileForTest(dir + "/bundle.json", json::Dump(m));
    } else {
      WriteManifestWithFreshIdentityForTest(dir, m);
    }
    ExpectInvalid(dir, member.first);
  }

  // Back to the good manifest: the files themselves turn hostile.
  WriteManifestWithFreshIdentityForTest(dir, good);
  ASSERT_TRUE(LoadAndVerify(dir).ok());
  const std::string outside = dir + "/../outside.jinja";
  WriteFileForTest(outside, kTemplate);  // same bytes: only the location is wrong
  std::remove((dir + "/chat_template.jinja").c_str());
  ASSERT_EQ(symlink("../outside.jinja", (dir + "/chat_template.jinja").c_str()), 0);
  ExpectInvalid(dir, "resolves outside the bundle directory");
  std::remove((dir + "/chat_template.jinja").c_str());
  ASSERT_EQ(mkfifo((dir + "/chat_template.jinja").c_str(), 0600), 0);
  ExpectInvalid(dir, "not a regular file");  // and does not hang opening a FIFO
  std::remove((dir + "/chat_template.jinja").c_str());
  ASSERT_EQ(mkdir((dir + "/chat_template.jinja").c_str(), 0700), 0);
  ExpectInvalid(dir, "not a regular file");
  rmdir((dir + "/chat_template.jinja").c_str());
  auto missing = LoadAndVerify(dir);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "chat_template.jinja")) << missing.status();
  // A symlink that stays inside is followed.
  WriteFileForTest(dir + "/real.jinja", kTemplate);
  ASSERT_EQ(symlink("real.jinja", (dir + "/chat_template.jinja").c_str()), 0);
  EXPECT_TRUE(LoadAndVerify(dir).ok());
  // The manifest itself may not be a symlink.
  std::rename((dir + "/bundle.json").c_str(), (dir + "/manifest.real").c_str());
  ASSERT_EQ(symlink("manifest.real", (dir + "/bundle.json").c_str()), 0);
  ExpectInvalid(dir, "symlink");

  EXPECT_EQ(LoadAndVerify(dir + "/nope").status().code(), absl::StatusCode::kNotFound);
  std::string empty = MakeTempDirForTest("empty");
  EXPECT_EQ(LoadAndVerify(empty).status().code(), absl::StatusCode::kNotFound);
}

TEST(Bundle, PackRefusals) {
  std::string work = MakeTempDirForTest("refuse");
  WriteTinyGgufForTest(work + "/plain.gguf", true, kTemplate);
  WriteTinyGgufForTest(work + "/notok.gguf", false, kTemplate);
  WriteTinyGgufForTest(work + "/notpl.gguf", true, "");
  WriteFileForTest(work + "/junk.gguf", std::string("GGUF\x03\0\0\0 this is not a model", 28));
  PackOptions base;
  base.gguf_path = work + "/plain.gguf";
  base.model = "m";
  auto refuse = [&](PackOptions o, absl::StatusCode code, const std::string& needle) {
    static int n = 0;
    o.out_dir = work + "/out" + std::to_string(n++);
    auto r = PackBundle(o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), needle)) << r.status();
    struct stat st;
    EXPECT_NE(stat(o.out_dir.c_str(), &st), 0) << "left " << o.out_dir << " behind";
  };
  PackOptions o = base;
  o.tool_protocol = "json_please";
  refuse(o, absl::StatusCode::kInvalidArgument, "unknown tool protocol");
  o = base;
  o.model = "bad name";
  refuse(o, absl::StatusCode::kInvalidArgument, "model name");
  o = base;
  o.gguf_path = work + "/notok.gguf";
  refuse(o, absl::StatusCode::kInvalidArgument, "carries no tokenizer");
  o = base;
  o.gguf_path = work + "/notpl.gguf";
  refuse(o, absl::StatusCode::kInvalidArgument, "no chat template");
  o = base;
  o.gguf_path = work + "/junk.gguf";
  refuse(o, absl::StatusCode::kInvalidArgument, "junk.gguf");
  o.out_dir = work + "/junk-out";
  EXPECT_EQ(ReasonOf(PackBundle(o).status()), "invalid_gguf");
  o = base;
  o.gguf_path = work + "/missing.gguf";
  refuse(o, absl::StatusCode::kNotFound, "missing.gguf");
  o = base;
  o.context_length = 4096;
  refuse(o, absl::StatusCode::kInvalidArgument, "larger than the 2048");
  o = base;
  o.max_output = 4096;
  refuse(o, absl::StatusCode::kInvalidArgument, "output cap");
  o = base;
  o.chat_template_name = "tool_use";
  refuse(o, absl::StatusCode::kInvalidArgument, "no chat template \"tool_use\"");
  o = base;
  o.tokenizer_dir = work + "/no-such-dir";
  refuse(o, absl::StatusCode::kNotFound, "tokenizer.json");

  // A non-empty output directory is refused and left as it was.
  o = base;
  o.out_dir = work + "/full";
  ASSERT_EQ(mkdir(o.out_dir.c_str(), 0755), 0);
  WriteFileForTest(o.out_dir + "/keep", "x");
  auto r = PackBundle(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(ReadFileForTest(o.out_dir + "/keep"), "x");
}

TEST(Bundle, NamedTemplateFromTokenizerConfig) {
  std::string work = MakeTempDirForTest("named");
  WriteTinyGgufForTest(work + "/m.gguf", true, kTemplate);
  ASSERT_EQ(mkdir((work + "/tok").c_str(), 0755), 0);
  WriteFileForTest(work + "/tok/tokenizer.json", "{}");
  WriteFileForTest(work + "/tok/tokenizer_config.json",
                   R"({"chat_template": [{"name": "default", "template": "D"},
                                         {"name": "tool_use", "template": "T"}]})");
  PackOptions o;
  o.gguf_path = work + "/m.gguf";
  o.model = "named";
  o.tokenizer_dir = work + "/tok";
  o.chat_template_name = "tool_use";
  o.out_dir = work + "/b";
  auto m = PackBundle(o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->chat_template_name, "tool_use");
  EXPECT_EQ(m->chat_template_source, "tokenizer_config.json");
  EXPECT_EQ(ReadFileForTest(o.out_dir + "/chat_template.jinja"), "T");
  EXPECT_TRUE(LoadAndVerify(o.out_dir).ok());
  o.chat_template_name = "nope";
  o.out_dir = work + "/c";
  auto bad = PackBundle(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "default, tool_use")) << bad.status();
}

}  // namespace
}  // namespace gantry::bundle
