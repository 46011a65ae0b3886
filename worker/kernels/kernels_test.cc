// Each kernel set against the scalar reference (ops.h MatVecRowsReference).
// Stated tolerance: |y - reference| <= 1e-5 * sum_i |w_i x_i| + 1e-30, every type (F32,
// F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) and set (the same products summed in another
// order); the portable set is bit-identical to the reference, and every set prepares
// activations bit for bit as the reference. A set that packs a type (avx512vnni: all
// quantized types) is checked on its packed layout.
#include "worker/kernels/kernels.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf/quant.h"
#include "gtest/gtest.h"
#include "worker/kernels/ops.h"

namespace gantry::kernels {
namespace {

using gguf::TensorType;

struct EncodedMatrix {
  std::string bytes;
  Matrix m;
};

EncodedMatrix Encode(const std::vector<float>& values, TensorType type, int rows, int cols) {
  EncodedMatrix e;
  EXPECT_TRUE(gguf::EncodeTensor(values.data(), values.size(), type, &e.bytes).ok());
  e.m.data = reinterpret_cast<const uint8_t*>(e.bytes.data());
  e.m.type = type;
  e.m.rows = rows;
  e.m.cols = cols;
  e.m.row_bytes = e.bytes.size() / rows;
  return e;
}

std::vector<float> Random(size_t n, std::mt19937* rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

std::vector<const KernelSet*> Sets() {
  std::vector<const KernelSet*> sets = {&PortableKernels()};
  if (Avx2Kernels()) sets.push_back(Avx2Kernels());
  if (Avx512VnniKernels()) sets.push_back(Avx512VnniKernels());
  return sets;
}

// Checks set `k` on a rows x cols matrix of `type` against n_tok activation rows.
void CheckMatMul(const KernelSet& k, TensorType type, int rows, int cols, int n_tok, uint32_t seed) {
  SCOPED_TRACE(std::string(k.name) + " " + gguf::TensorTypeName(type) + " " + std::to_string(rows) + "x" +
               std::to_string(cols) + " tokens " + std::to_string(n_tok));
  std::mt19937 rng(seed);
  EncodedMatrix w = Encode(Random(static_cast<size_t>(rows) * cols, &rng, 0.05f), type, rows, cols);
  std::vector<uint8_t> packed(k.packed_bytes ? k.packed_bytes(w.m) : 0);
  if (!packed.empty()) {
    k.pack(w.m, packed.data());
    w.m.packed = packed.data();
  }
  std::vector<float> x = Random(static_cast<size_t>(n_tok) * cols, &rng);
  const size_t prepared_bytes = PreparedRowBytes(type, cols);
  std::vector<uint8_t> prepared(prepared_bytes * n_tok), portable(prepared_bytes * n_tok);
  k.prepare(type, x.data(), cols, n_tok, cols, prepared.data());
  PortableKernels().prepare(type, x.data(), cols, n_tok, cols, portable.data());
  EXPECT_EQ(0, std::memcmp(prepared.data(), portable.data(), prepared.size())) << "prepared activations differ";

  std::vector<float> y(static_cast<size_t>(n_tok) * rows, NAN);
  // Rows [1, rows - 1) only: the range must be honoured exactly.
  k.matmul(w.m, prepared.data(), prepared_bytes, n_tok, y.data(), rows, 1, rows - 1);
  if (!packed.empty()) {
    // Packed groups of 16 rows: a range that starts and ends inside groups, in two calls.
    std::vector<float> split(y.size(), NAN);
    const int mid = rows / 2;
    k.matmul(w.m, prepared.data(), prepared_bytes, n_tok, split.data(), rows, 1, mid);
    k.matmul(w.m, prepared.data(), prepared_bytes, n_tok, split.data(), rows, mid, rows - 1);
    for (size_t i = 0; i < y.size(); ++i) {
      if (std::isnan(y[i])) ASSERT_TRUE(std::isnan(split[i])) << i;
      else ASSERT_EQ(split[i], y[i]) << i;
    }
  }
  std::vector<float> ref(rows), decoded(cols);
  const bool exact = std::string(k.name) == "portable";
  for (int t = 0; t < n_tok; ++t) {
    MatVecRowsReference(w.m, x.data() + static_cast<size_t>(t) * cols, ref.data(), 0, rows);
    EXPECT_TRUE(std::isnan(y[t * rows])) << "row outside the range written";
    EXPECT_TRUE(std::isnan(y[t * rows + rows - 1])) << "row outside the range written";
    for (int r = 1; r < rows - 1; ++r) {
      DecodeMatrixRow(w.m, r, decoded.data());
      double bound = 1e-30;
      for (int c = 0; c < cols; ++c) bound += std::fabs(decoded[c] * x[static_cast<size_t>(t) * cols + c]);
      bound *= 1e-5;
      const float got = y[static_cast<size_t>(t) * rows + r];
      if (exact) {
        ASSERT_EQ(got, ref[r]) << "token " << t << " row " << r;
      } else {
        ASSERT_NEAR(got, ref[r], bound) << "token " << t << " row " << r;
      }
    }
  }
}

TEST(KernelsTest, EverySetMatchesTheReference) {
  const TensorType types[] = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16, TensorType::kQ8_0,
                              TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K};
  uint32_t seed = 1;
  for (const KernelSet* k : Sets()) {
    for (TensorType type : types) {
      for (int n_tok : {1, 2, 3, 5, 8}) {
        CheckMatMul(*k, type, 11, 256, n_tok, seed++);
        CheckMatMul(*k, type, 6, 2048, n_tok, seed++);
      }
    }
    // Packed Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K: several 16-row groups and a short last one, more tokens than a
    // tile.
    for (int n_tok : {1, 9, 19}) {
      CheckMatMul(*k, TensorType::kQ8_0, 37, 96, n_tok, seed++);
      CheckMatMul(*k, TensorType::kQ4_0, 37, 96, n_tok, seed++);
      CheckMatMul(*k, TensorType::kQ4_K, 37, 512, n_tok, seed++);
      CheckMatMul(*k, TensorType::kQ6_K, 37, 512, n_tok, seed++);
      CheckMatMul(*k, TensorType::kQ5_K, 37, 512, n_tok, seed++);
    }
    // Float tails: columns not a multiple of the vector width.
    for (int cols : {1, 7, 13, 100}) CheckMatMul(*k, TensorType::kF32, 9, cols, 4, seed++);
  }
}

TEST(KernelsTest, QuantizationRoundsHalfAwayFromZeroAsTheReference) {
  // amax 127 gives d = 1, so these values meet roundf's ties exactly.
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[j] = (j % 2 ? -1.0f : 1.0f) * (0.5f + (j % 20));
  x[0] = 127.0f;
  x[32] = -127.0f;
  x[40] = 0.0f;
  std::vector<uint8_t> want(PreparedRowBytes(TensorType::kQ8_0, 64));
  PortableKernels().prepare(TensorType::kQ8_0, x.data(), 64, 1, 64, want.data());
  const Q8Block* b = reinterpret_cast<const Q8Block*>(want.data());
  EXPECT_EQ(b[0].d, 1.0f);
  EXPECT_EQ(b[0].q[1], -2);  // -1.5 -> -2
  EXPECT_EQ(b[0].q[2], 3);   // 2.5 -> 3 (not 2)
  for (const KernelSet* k : Sets()) {
    std::vector<uint8_t> got(want.size());
    k->prepare(TensorType::kQ8_0, x.data(), 64, 1, 64, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << k->name;
  }
  // An all-zero block: d = 0 and q = 0, no division by zero.
  std::vector<float> zeros(32, 0.0f);
  for (const KernelSet* k : Sets()) {
    Q8Block z;
    k->prepare(TensorType::kQ4_0, zeros.data(), 32, 1, 32, reinterpret_cast<uint8_t*>(&z));
    EXPECT_EQ(z.d, 0.0f);
    for (int8_t q : z.q) EXPECT_EQ(q, 0);
  }
}

TEST(KernelsTest, Q8KRoundsHalfToEvenAsGgml) {
  // The value of largest magnitude is -127: the scale is -127 / -127 = 1, so the
  // values meet the rounding's ties exactly (ggml's nearest_int: ties to even).
  std::vector<float> x(256, 0.0f);
  x[0] = -127.0f;
  x[1] = 2.5f;
  x[2] = -1.5f;
  x[3] = 3.5f;
  x[17] = 100.0f;
  std::vector<uint8_t> want(PreparedRowBytes(TensorType::kQ4_K, 256));
  ASSERT_EQ(want.size(), sizeof(Q8KBlock));
  PortableKernels().prepare(TensorType::kQ6_K, x.data(), 256, 1, 256, want.data());
  const Q8KBlock* b = reinterpret_cast<const Q8KBlock*>(want.data());
  EXPECT_EQ(b->d, 1.0f);
  EXPECT_EQ(b->q[0], -127);
  EXPECT_EQ(b->q[1], 2);   // 2.5 -> 2
  EXPECT_EQ(b->q[2], -2);  // -1.5 -> -2
  EXPECT_EQ(b->q[3], 4);   // 3.5 -> 4
  EXPECT_EQ(b->bsums[0], -127 + 2 - 2 + 4);
  EXPECT_EQ(b->bsums[1], 100);
  // A positive largest value: negative scale, q = -x / d.
  x[0] = 127.0f;
  PortableKernels().prepare(TensorType::kQ4_K, x.data(), 256, 1, 256, want.data());
  EXPECT_EQ(b->d, -1.0f);
  EXPECT_EQ(b->q[0], -127);
  EXPECT_EQ(b->q[17], -100);
  for (const KernelSet* k : Sets()) {
    std::vector<uint8_t> got(want.size());
    k->prepare(TensorType::kQ4_K, x.data(), 256, 1, 256, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << k->name;
  }
  // An all-zero block: d = 0, q = 0, bsums = 0.
  std::vector<float> zeros(256, 0.0f);
  PortableKernels().prepare(TensorType::kQ5_K, zeros.data(), 256, 1, 256, want.data());
  EXPECT_EQ(b->d, 0.0f);
  for (int8_t q : b->q) EXPECT_EQ(q, 0);
  for (int16_t s : b->bsums) EXPECT_EQ(s, 0);
}

// NaN and infinite activations (a diverging model) quantize to defined values, the
// same in every set: a NaN to 0 without touching the scale, an infinity sets the
// scale to infinity and every value of its block to 0. (Before, both reached a
// float-to-int cast out of range: undefined behaviour.)
TEST(KernelsTest, NanAndInfinityQuantizeToDefinedValues) {
  std::vector<float> x(512);
  for (size_t j = 0; j < x.size(); ++j) x[j] = 0.25f * static_cast<float>(j % 9) - 1.0f;
  x[0] = 127.0f;     // Q8_0 block 0 and Q8K block 0: d = 1 resp. -1
  x[3] = NAN;          // in both block 0s
  x[288] = INFINITY;    // Q8_0 block 9, Q8K block 1
  x[300] = -INFINITY;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_K}) {
    std::vector<uint8_t> want(PreparedRowBytes(type, 512));
    PortableKernels().prepare(type, x.data(), 512, 1, 512, want.data());
    if (type == TensorType::kQ8_0) {
      const Q8Block* b = reinterpret_cast<const Q8Block*>(want.data());
      EXPECT_EQ(b[0].d, 1.0f);
      EXPECT_EQ(b[0].q[0], 127);
      EXPECT_EQ(b[0].q[3], 0);
      EXPECT_EQ(b[0].q[4], 0);   // 0.25 * 4 - 1
      EXPECT_EQ(b[0].q[8], 1);   // 0.25 * 8 - 1
      EXPECT_TRUE(std::isinf(b[9].d));
      for (int8_t q : b[9].q) EXPECT_EQ(q, 0);
      EXPECT_EQ(b[2].d, gguf::HalfToFloat(gguf::FloatToHalf(1.0f / 127.0f)));
    } else {
      const Q8KBlock* b = reinterpret_cast<const Q8KBlock*>(want.data());
      EXPECT_EQ(b[0].d, -1.0f);
      EXPECT_EQ(b[0].q[0], -127);
      EXPECT_EQ(b[0].q[3], 0);
      EXPECT_EQ(b[0].q[8], -1);
      EXPECT_TRUE(std::isinf(b[1].d));
      for (int8_t q : b[1].q) EXPECT_EQ(q, 0);
      for (int16_t s : b[1].bsums) EXPECT_EQ(s, 0);
    }
    for (const KernelSet* k : Sets()) {
      std::vector<uint8_t> got(want.size());
      k->prepare(type, x.data(), 512, 1, 512, got.data());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << k->name << " " << gguf::TensorTypeName(type);
    }
  }
}

// Softmax and SwiGLU: every set within 1e-6 relative (+1e-30) of the reference (the
// vectorised exp is within 4e-7, kernels.h), over the range attention scores and
// gates take and beyond, odd lengths for the scalar tails.
TEST(KernelsTest, SoftmaxAndSwiGluMatchTheReference) {
  std::mt19937 rng(5);
  for (const KernelSet* k : Sets()) {
    for (int n : {1, 7, 8, 33, 600}) {
      SCOPED_TRACE(std::string(k->name) + " n " + std::to_string(n));
      std::vector<float> x = Random(n, &rng, 8.0f), want = x, got = x;
      if (n > 3) x[3] = want[3] = got[3] = -200.0f;  // e^-200: 0 in the reference
      Softmax(want.data(), n);
      k->softmax(got.data(), n);
      for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-30) << i;
      std::vector<float> gate = Random(n, &rng, 6.0f), up = Random(n, &rng), silu_want(n), silu_got(n);
      if (n > 3) gate[2] = -100.0f;  // e^100 overflows: silu = -0 in the reference
      SwiGlu(silu_want.data(), gate.data(), up.data(), n);
      k->swiglu(silu_got.data(), gate.data(), up.data(), n);
      for (int i = 0; i < n; ++i) ASSERT_NEAR(silu_got[i], silu_want[i], 1e-6 * std::fabs(silu_want[i]) + 1e-30) << i;
    }
  }
}

// Q8_0 axpy (a Q8_0 cache's values weighted into attention's output): every set within
// 1e-6 relative of the portable one, for blocks of every int8 value and several scales.
TEST(KernelsTest, Q8AxpyMatchesThePortableSet) {
  std::mt19937 rng(9);
  const int n = 128;
  std::vector<float> x = Random(n, &rng, 3.0f);
  x[5] = 0;
  std::string blocks;
  ASSERT_TRUE(gguf::EncodeTensor(x.data(), n, gguf::TensorType::kQ8_0, &blocks).ok());
  blocks[2 + 7] = static_cast<char>(-128);  // the one int8 EncodeTensor never writes
  const uint8_t* data = reinterpret_cast<const uint8_t*>(blocks.data());
  for (const KernelSet* k : Sets()) {
    for (float a : {1.0f, -0.37f, 1e-3f}) {
      SCOPED_TRACE(std::string(k->name) + " a " + std::to_string(a));
      std::vector<float> want = Random(n, &rng), got = want;
      PortableKernels().q8_0_axpy(data, n, a, want.data());
      k->q8_0_axpy(data, n, a, got.data());
      for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-6) << i;
    }
  }
}

TEST(KernelsTest, KernelsChoosesTheBestSet) {
  if (getenv("GANTRY_KERNELS")) return;
  if (Avx512VnniKernels()) {
    EXPECT_STREQ(Kernels().name, "avx512vnni");
  } else if (Avx2Kernels()) {
    EXPECT_STREQ(Kernels().name, "avx2");
  } else {
    EXPECT_STREQ(Kernels().name, "portable");
  }
}

}  // namespace
}  // namespace gantry::kernels
