// The operations of a transformer forward pass, one plain function each.
//
// These are the scalar references: readable, obviously correct, and the yardstick the
// vectorised variants (ops_avx2.cc) are tested against with a stated tolerance.
// Conventions: row-major; a weight matrix holds `rows` rows of `cols` values in its
// GGUF encoding (ggml dims {cols, rows}); y = W x means y[r] = dot(row r, x).
//
// Thread-safety: pure functions of their arguments.
#ifndef GANTRY_WORKER_KERNELS_OPS_H_
#define GANTRY_WORKER_KERNELS_OPS_H_

#include <cstddef>
#include <cstdint>

#include "formats/gguf/gguf.h"

namespace gantry::kernels {

// A weight matrix in the mapped model file.
struct Matrix {
  const uint8_t* data = nullptr;
  gguf::TensorType type = gguf::TensorType::kF32;
  int rows = 0;
  int cols = 0;
  size_t row_bytes = 0;
  // The same weights in the chosen kernel set's own layout (KernelSet::pack, done once
  // at load), or null. Only that set's matmul reads it; everything else reads `data`.
  const uint8_t* packed = nullptr;
};

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]. out may alias x.
void RmsNorm(float* out, const float* x, const float* w, int n, float eps);

// y[r] = dot(W row r, x) for r in [row_begin, row_end), computed as ggml computes it so
// that results agree with llama.cpp: activations meet F16 / BF16 weights rounded to
// that type, Q8_0 / Q4_0 weights quantized to Q8_0 blocks with an integer dot per
// block, and K-quant weights quantized to Q8K blocks (DotKQuantQ8K). Scalar
// reference: plain loops, float accumulation.
void MatVecRowsReference(const Matrix& w, const float* x, float* y, int row_begin, int row_end);

// One super-block of 256 activations quantized for K-quant weights (Q4_K, Q5_K, Q6_K),
// as ggml's Q8_K: with m the value of largest magnitude, q = round-half-even(x * -127/m)
// (so |q| <= 127), d = 1 / (-127/m), bsums[k] = q[16k] + ... + q[16k + 15].
struct Q8KBlock {
  float d;
  int8_t q[256];
  int16_t bsums[16];
};

// A scaled activation made safe to round and cast to int8: NaN becomes 0, the rest is
// clamped to [-127, 127] (finite inputs scaled by amax never leave that range, so
// only NaN and infinity change). Every quantizer of activations uses it.
inline float ClampToQ8(float v) { return v != v ? 0.0f : v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v; }

// Quantizes x[0..n) (n a multiple of 256) into n / 256 blocks; an all-zero block gets
// d = 0 and q = 0. NaNs never set the scale and quantize to 0; an infinite value sets
// it (d = +-inf, every q = 0).
void QuantizeQ8K(const float* x, int n, Q8KBlock* out);

// dot(one K-quant weight row of n values, x as Q8K blocks): per super-block the exact
// integer sum of scale * (q_w . q_x) over its groups and of min * (sum of q_x) over
// its groups, then d_w * d_x * sums - dmin_w * d_x * mins, accumulated in float.
// Precondition: gguf::IsKQuant(type), n a multiple of 256.
float DotKQuantQ8K(gguf::TensorType type, const uint8_t* row, const Q8KBlock* x, int n);

// Decodes row `r` of W into out[0..cols).
void DecodeMatrixRow(const Matrix& w, int r, float* out);

enum class RopeMode { kNorm, kNeox };

// Rotates one head vector `v` of `head_dim` values for position `pos`:
// theta_i = pos * base^(-2i / head_dim), i in [0, head_dim/2). kNorm rotates the pairs
// (v[2i], v[2i+1]) (llama); kNeox rotates (v[i], v[i + head_dim/2]) (qwen2/3).
void Rope(float* v, int head_dim, int pos, float base, RopeMode mode);

// Rope in two steps, for applying one position's angles to many heads:
// RopeApply(v, head_dim, cs, mode) after RopeAngles(cs, head_dim, pos, base) gives
// exactly Rope(v, head_dim, pos, base, mode). cs holds cos, sin of theta_i at
// cs[2i], cs[2i + 1] (head_dim values).
void RopeAngles(float* cs, int head_dim, int pos, float base);
void RopeApply(float* v, int head_dim, const float* cs, RopeMode mode);

// In place: x = softmax(x).
void Softmax(float* x, int n);

// out[i] = silu(gate[i]) * up[i].
void SwiGlu(float* out, const float* gate, const float* up, int n);

}  // namespace gantry::kernels

#endif  // GANTRY_WORKER_KERNELS_OPS_H_
