#include "formats/gguf/gguf.h"

#include <gtest/gtest.h>
#include <immintrin.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/gguf/quant.h"

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

// Resident pages of this process (statm's second field).
long ResidentPages() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f) {
    EXPECT_EQ(std::fscanf(f, "%ld %ld", &size, &resident), 2);
    std::fclose(f);
  }
  return resident;
}

TEST(GgufTest, ReleasedPagesLeaveResidentMemoryButKeepTheirBytes) {
  // A 4 MiB tensor, read through the mapping (resident), then released.
  const size_t n = 1 << 20;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.5f;
  std::string f32;
  ASSERT_TRUE(EncodeTensor(x.data(), n, TensorType::kF32, &f32).ok());
  GgufWriter w;
  w.AddString("general.architecture", "qwen3");
  ASSERT_TRUE(w.AddTensor("big.weight", {n}, TensorType::kF32, f32).ok());
  const std::string bytes = w.Serialize();
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/big.gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo* t = (*file)->FindTensor("big.weight");
  ASSERT_NE(t, nullptr);
  auto sum = [&] {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += reinterpret_cast<const float*>(t->data)[i];
    return s;
  };
  const double want = sum();
  const long before = ResidentPages();
  (*file)->ReleasePages(t->data, t->bytes);
  const long after = ResidentPages();
  const long pages = static_cast<long>(t->bytes / ::sysconf(_SC_PAGESIZE));
  EXPECT_LT(after, before - pages / 2) << "resident pages " << before << " -> " << after;
  EXPECT_EQ(sum(), want);  // read back from the file
  // Memory that is not a mapping (FromBytes) is left alone: released, it would read 0.
  auto in_memory = GgufFile::FromBytes(bytes);
  ASSERT_TRUE(in_memory.ok());
  const TensorInfo* m = (*in_memory)->FindTensor("big.weight");
  (*in_memory)->ReleasePages(m->data, m->bytes);
  EXPECT_EQ(std::memcmp(m->data, f32.data(), f32.size()), 0);
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
  for (TensorType type : {TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0,
                          TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
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
    // Stated tolerances: the relative RMS error of each format on N(0,1) data (measured
    // 2026-11-30: Q4_0 0.085, Q4_K 0.079, Q5_K 0.039, Q6_K 0.020).
    const double limit = type == TensorType::kF16 ? 1e-3 : type == TensorType::kBF16 ? 5e-3
                         : type == TensorType::kQ8_0 ? 1e-2 : type == TensorType::kQ4_0 ? 0.12
                         : type == TensorType::kQ4_K ? 0.10 : type == TensorType::kQ5_K ? 0.05 : 0.025;
    EXPECT_LT(rel, limit) << TensorTypeName(type);
    EXPECT_GT(rel, 0.0) << TensorTypeName(type);
  }
}

// Every value decodes within half its group's step (d * scale), whatever the data's
// offset and spread: an all-positive row, a negative one, zeros, mixed magnitudes.
TEST(GgufTest, KQuantsDecodeWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(4 * 256);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t block = i / 256;
    const float v = normal(rng) * (1 + (i % 48 == 0 ? 20.0f : 0.0f));
    x[i] = block == 0 ? std::fabs(v) + 3 : block == 1 ? -std::fabs(v) - 0.5f : block == 2 ? 0.0f : v;
  }
  for (TensorType type : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    SCOPED_TRACE(TensorTypeName(type));
    uint64_t elements, block_bytes;
    ASSERT_TRUE(TensorTypeLayout(type, &elements, &block_bytes));
    std::string bytes;
    ASSERT_TRUE(EncodeTensor(x.data(), x.size(), type, &bytes).ok());
    ASSERT_EQ(bytes.size(), x.size() / 256 * block_bytes);
    std::vector<float> y(x.size());
    ASSERT_TRUE(DecodeRow(reinterpret_cast<const uint8_t*>(bytes.data()), type, x.size(), y.data()).ok());
    for (size_t b = 0; b < x.size() / 256; ++b) {
      KQuantBlock k;
      UnpackKQuantBlock(reinterpret_cast<const uint8_t*>(bytes.data()) + b * block_bytes, type, &k);
      for (int i = 0; i < 256; ++i) {
        const size_t at = b * 256 + i;
        const float step = k.d * k.scale[i / k.group];
        ASSERT_LE(std::fabs(x[at] - y[at]), 0.5f * std::fabs(step) * (1 + 1e-5f) + 1e-6f) << "value " << at;
      }
    }
    // Block sizes are enforced.
    std::string ignored;
    EXPECT_EQ(EncodeTensor(x.data(), 128, type, &ignored).code(), absl::StatusCode::kInvalidArgument);
  }
}

// Hand-built super-blocks decoded by the layout in quant.h (values worked out by hand),
// so a packing mistake shared by our encoder and decoder cannot hide.
TEST(GgufTest, KQuantLayoutsDecodeAsSpecified) {
  // Q4_K: d = 1, dmin = 0.5; scales 1,2,3,4,5,6,7,40 and mins 0,1,2,3,4,5,6,33 packed.
  uint8_t q4k[144] = {};
  const uint8_t header[16] = {0x00, 0x3C, 0x00, 0x38, 1, 2, 3, 4 | 2 << 6, 0, 1, 2, 3 | 2 << 6,
                              5 | 4 << 4, 6 | 5 << 4, 7 | 6 << 4, 8 | 1 << 4};
  std::memcpy(q4k, header, 16);
  q4k[16 + 32 * 3 + 5] = 0xA7;  // value 197 (group 6): 7; value 229 (group 7): 10
  float y[256];
  ASSERT_TRUE(DecodeRow(q4k, TensorType::kQ4_K, 256, y).ok());
  EXPECT_EQ(y[0], 0.0f);              // 1*1*0 - 0.5*0
  EXPECT_EQ(y[40], -0.5f);            // group 1: -0.5*1
  EXPECT_EQ(y[197], 7 * 7 - 3.0f);    // group 6: 1*7*7 - 0.5*6
  EXPECT_EQ(y[229], 40 * 10 - 16.5f);  // group 7: 1*40*10 - 0.5*33
  EXPECT_EQ(y[228], -16.5f);

  // Q5_K: the same header and nibbles, plus fifth bits of values 5 (group 0) and 229.
  uint8_t q5k[176] = {};
  std::memcpy(q5k, header, 16);
  q5k[16 + 5] = 0x81;
  q5k[48 + 32 * 3 + 5] = 0xA7;
  ASSERT_TRUE(DecodeRow(q5k, TensorType::kQ5_K, 256, y).ok());
  EXPECT_EQ(y[5], 16.0f);              // 1*1*16
  EXPECT_EQ(y[197], 7 * 7 - 3.0f);     // no fifth bit
  EXPECT_EQ(y[229], 40 * 26 - 16.5f);  // 10 + 16

  // Q6_K: d = 0.5 (at the end), group scales g - 8.
  uint8_t q6k[210] = {};
  for (int g = 0; g < 16; ++g) q6k[192 + g] = static_cast<uint8_t>(g - 8);
  q6k[208] = 0x00;
  q6k[209] = 0x38;
  q6k[64 + 32 + 7] = 0x3C;       // low nibble: value 167; high nibble: value 231
  q6k[128 + 32 + 7] = 2 << 2 | 1 << 6;  // high bits of values 167 (2) and 231 (1)
  ASSERT_TRUE(DecodeRow(q6k, TensorType::kQ6_K, 256, y).ok());
  EXPECT_EQ(y[0], 128.0f);    // code 0 -> q = -32, group 0 scale -8: 0.5 * -8 * -32
  EXPECT_EQ(y[167], 12.0f);   // code 12 | 2 << 4 = 44 -> 12, group 10 scale 2
  EXPECT_EQ(y[231], -39.0f);  // code 3 | 1 << 4 = 19 -> -13, group 14 scale 6
  EXPECT_EQ(y[135], 0.0f);    // group 8 scale 0
}

}  // namespace
}  // namespace gantry::gguf
