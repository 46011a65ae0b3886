#include "worker/gguf/gguf.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "common/status.h"
#include "worker/gguf/quant.h"

namespace gantry::gguf {
namespace {

std::string SmallFile() {
  GgufWriter w;
  w.AddString("general.architecture", "qwen3");
  w.AddUint32("qwen3.block_count", 2);
  w.AddFloat32("qwen3.rope.freq_base", 1e6f);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "\xC3\xA9"});
  w.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 3});
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(i * 0.3f);
  std::string f32, q8;
  EXPECT_TRUE(EncodeTensor(x.data(), 64, TensorType::kF32, &f32).ok());
  EXPECT_TRUE(EncodeTensor(x.data(), 64, TensorType::kQ8_0, &q8).ok());
  EXPECT_TRUE(w.AddTensor("a.weight", {32, 2}, TensorType::kF32, f32).ok());
  EXPECT_TRUE(w.AddTensor("b.weight", {64}, TensorType::kQ8_0, q8).ok());
  return w.Serialize();
}

TEST(GgufTest, WriterOutputReadsBack) {
  std::string bytes = SmallFile();
  auto file = GgufFile::FromBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("general.architecture"), "qwen3");
  EXPECT_EQ(*(*file)->GetUint("qwen3.block_count"), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(*(*file)->GetFloat("qwen3.rope.freq_base")), 1e6f);
  EXPECT_EQ((*file)->Find("tokenizer.ggml.tokens")->array[2].s, "\xC3\xA9");
  EXPECT_EQ((*file)->Find("tokenizer.ggml.token_type")->array[2].i, 3);
  const TensorInfo* a = (*file)->FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->elements, 64u);
  EXPECT_EQ(a->bytes, 256u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % 4, 0u);
  float first;
  std::memcpy(&first, a->data + 4, 4);
  EXPECT_FLOAT_EQ(first, std::sin(0.3f));
  const TensorInfo* b = (*file)->FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes, 68u);
  EXPECT_EQ((b->data - a->data) % 32, 0);
  EXPECT_EQ((*file)->GetUint("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReasonOf((*file)->GetUint("general.architecture").status()), "invalid_gguf");
}

TEST(GgufTest, OpenKeepsTheReasonAndNamesThePath) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/bad.gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fputs("GGUF but not really", f);
  std::fclose(f);
  auto file = GgufFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(ReasonOf(file.status()), "invalid_gguf");
  EXPECT_NE(file.status().message().find(path), absl::string_view::npos);
  EXPECT_EQ(GgufFile::Open(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(GgufTest, EveryTruncationIsACleanError) {
  std::string bytes = SmallFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    // Only the trailing padding of the last tensor may be cut without harm.
    auto file = GgufFile::FromBytes(absl::string_view(bytes.data(), n));
    if (n < bytes.size() - 28) {
      ASSERT_FALSE(file.ok()) << "accepted a file cut at " << n;
      EXPECT_EQ(ReasonOf(file.status()), "invalid_gguf");
    }
  }
}

TEST(GgufTest, CorruptionsAreCleanErrors) {
  const std::string good = SmallFile();
  auto expect_error = [](std::string bytes, absl::string_view needle) {
    auto file = GgufFile::FromBytes(bytes);
    ASSERT_FALSE(file.ok());
    EXPECT_NE(file.status().message().find(needle), absl::string_view::npos) << file.status();
  };
  std::string bad = good;
  bad[0] = 'X';
  expect_error(bad, "bad magic");
  bad = good;
  bad[4] = 2;
  expect_error(bad, "version 2");
  bad = good;
  uint64_t huge = ~0ull;
  std::memcpy(&bad[8], &huge, 8);
  expect_error(bad, "tensor count");
  // The first key's length claims more bytes than the file has.
  bad = good;
  std::memcpy(&bad[24], &huge, 8);
  expect_error(bad, "runs past the end");
  // An unknown tensor type in the last tensor info: find "b.weight" and patch its type.
  bad = good;
  size_t at = bad.find("b.weight") + 8 + 4 + 8;
  uint32_t type = 77;
  std::memcpy(&bad[at], &type, 4);
  expect_error(bad, "unsupported type 77");
}

TEST(GgufTest, HalfConversionMatchesTheHardware) {
  std::mt19937 rng(3);
  std::vector<float> values = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f,
                               5.96e-8f, 2.98e-8f, 6.1e-5f, 3.0e-5f, INFINITY, -INFINITY};
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) values.push_back(f);
  }
  for (float f : values) {
    const uint16_t hw = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
    ASSERT_EQ(FloatToHalf(f), hw) << f;
    ASSERT_EQ(HalfToFloat(hw), _cvtsh_ss(hw)) << hw;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    float ours = HalfToFloat(static_cast<uint16_t>(h));
    float hw = _cvtsh_ss(static_cast<uint16_t>(h));
    if (std::isnan(hw)) {
      ASSERT_TRUE(std::isnan(ours));
    } else {
      ASSERT_EQ(ours, hw) << h;
    }
  }
}

TEST(GgufTest, QuantizedRoundTripsWithinTheirStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(4096);
  for (float& v : x) v = normal(rng);
  for (TensorType type : {TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
    std::string bytes;
    ASSERT_TRUE(EncodeTensor(x.data(), x.size(), type, &bytes).ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE(DecodeRow(reinterpret_cast<const uint8_t*>(bytes.data()), type, x.size(), y.data()).ok());
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      ref += x[i] * x[i];
    }
    const double rel = std::sqrt(err / ref);
    // Stated tolerances: the relative RMS error of each format on N(0,1) data.
    const double limit = type == TensorType::kF16 ? 1e-3 : type == TensorType::kBF16 ? 5e-3
                         : type == TensorType::kQ8_0 ? 1e-2 : 0.12;
    EXPECT_LT(rel, limit) << TensorTypeName(type);
    EXPECT_GT(rel, 0.0) << TensorTypeName(type);
  }
}

}  // namespace
}  // namespace gantry::gguf
