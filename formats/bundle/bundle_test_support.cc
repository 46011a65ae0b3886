#include "formats/bundle/bundle_test_support.h"

#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "formats/bundle/bundle_manifest.h"
#include "formats/gguf/gguf.h"
#include "gtest/gtest.h"

namespace gantry::bundle {

std::string MakeTempDirForTest(const std::string& prefix) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(root != nullptr && *root != '\0' ? root : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buffer(templ.begin(), templ.end());
  buffer.push_back('\0');
  char* made = mkdtemp(buffer.data());
  EXPECT_NE(made, nullptr) << "mkdtemp " << templ;
  return made == nullptr ? templ : std::string(made);
}

void WriteTinyGgufForTest(const std::string& path, bool with_tokenizer, const std::string& chat_template) {
  gguf::GgufWriter w;
  w.AddString("general.architecture", "qwen3");
  w.AddUint32("qwen3.context_length", 2048);
  if (with_tokenizer) {
    w.AddString("tokenizer.ggml.model", "gpt2");
    w.AddString("tokenizer.ggml.pre", "qwen2");
  }
  if (!chat_template.empty()) w.AddString("tokenizer.chat_template", chat_template);
  std::string data(32 * 4, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  EXPECT_TRUE(w.AddTensor("a.weight", {32}, gguf::TensorType::kF32, data).ok());
  ASSERT_TRUE(w.WriteFile(path).ok()) << path;
}

std::string ReadFileForTest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFileForTest(const std::string& path, const std::string& data) {
  std::remove(path.c_str());  // never write through a hard link into a source file
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  ASSERT_TRUE(out.good()) << path;
}

void FlipByteForTest(const std::string& path, size_t offset) {
  std::string data = ReadFileForTest(path);
  ASSERT_LT(offset, data.size()) << path;
  data[offset] ^= 0x01;
  WriteFileForTest(path, data);
}

void WriteManifestWithFreshIdentityForTest(const std::string& dir, json::Value manifest) {
  if (manifest.is_object()) manifest.Set("identity_sha256", json::Value::String(ComputeIdentity(manifest)));
  json::DumpOptions options;
  options.indent = 2;
  WriteFileForTest(dir + "/" + kManifestName, json::Dump(manifest, options));
}

}  // namespace gantry::bundle
