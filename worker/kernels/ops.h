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

#include "worker/gguf/gguf.h"

namespace gantry::kernels {

// A weight matrix in the mapped model file.
struct Matrix {
  const uint8_t* data = nullptr;
  gguf::TensorType type = gguf::TensorType::kF32;
  int rows = 0;
  int cols = 0;
  size_t row_bytes = 0;
};

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]. out may alias x.
void RmsNorm(float* out, const float* x, const float* w, int n, float eps);

// y[r] = dot(W row r, x) for r in [row_begin, row_end), computed as ggml computes it so
// that results agree with llama.cpp: activations meet F16 / BF16 weights rounded to
// that type, and Q8_0 / Q4_0 weights quantized to Q8_0 blocks with an integer dot per
// block. Scalar reference: plain loops, float accumulation.
void MatVecRowsReference(const Matrix& w, const float* x, float* y, int row_begin, int row_end);

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
