// Fast matrix kernels, chosen once at run time by CPU features.
//
// The scalar references live in ops.h (MatVecRowsReference). Here the same products
// are computed in two steps, so that a batch of activation rows (a prompt chunk) is
// rounded or quantized once and every weight row is streamed once per batch:
//   1. PrepareActivations: each activation row in the weight type's "dot type", as
//      ggml computes it: F32 stays F32, F16 / BF16 weights meet activations rounded to
//      that type (kept as float: the rounded values), Q8_0 / Q4_0 weights meet Q8
//      blocks (d = amax / 127 rounded through fp16, q = round(x / d)), Q4_K / Q5_K /
//      Q6_K weights meet Q8K blocks of 256 (ops.h QuantizeQ8K, ggml's Q8_K).
//   2. MatMul: y[t][r] = dot(W row r, prepared row t) for a range of weight rows and
//      all prepared rows; an integer dot per 32-block for Q8_0 / Q4_0, per 256-value
//      super-block (scales applied in integers) for the K-quants.
// Variants: "portable" (kernels.cc, plain loops, any CPU; for the K-quants the
// reference's own DotKQuantQ8K), "avx2" (ops_avx2.cc, AVX2 + FMA + F16C) and
// "avx512vnni" (the same, with vpdpbusd products for Q8_0 and Q4_0 and vpdpwssd
// for the K-quants' scaled sums, where the CPU has AVX512-VNNI). kernels_test.cc holds
// each against the reference: every output within 1e-5 of sum_i |w_i x_i| (the products
// as the reference forms them), and the prepared activations bit for bit.
//
// Thread-safety: pure functions; Kernels() is initialised once, thread-safely.
#ifndef GANTRY_WORKER_KERNELS_KERNELS_H_
#define GANTRY_WORKER_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "worker/gguf/gguf.h"
#include "worker/kernels/ops.h"

namespace gantry::kernels {

// One block of 32 activations quantized for Q8_0 / Q4_0 weights.
struct Q8Block {
  float d;         // scale, already rounded through fp16 (as ggml stores it)
  int8_t q[32];    // x[j] ~ d * q[j]
};

// Bytes of one prepared row of `n` activations for weights of type `t`
// (precondition: n a multiple of 32 for Q8_0 / Q4_0, of 256 for the K-quants).
size_t PreparedRowBytes(gguf::TensorType t, int n);

// Prepares `n_rows` rows of `n` activations (row i at x + i * x_stride floats) for
// weights of type `t`; row i goes to out + i * PreparedRowBytes(t, n).
using PrepareFn = void (*)(gguf::TensorType t, const float* x, size_t x_stride, int n_rows, int n,
                           uint8_t* out);

// y[t * ldy + r] = dot(W row r, prepared row t) for r in [row_begin, row_end) and t in
// [0, n_tok); prepared row t is at x + t * x_stride bytes (F32: plain floats, so any
// float matrix with a row stride can be passed directly). F32 weights may have any
// number of columns; the other types a multiple of their block size.
using MatMulFn = void (*)(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y,
                          size_t ldy, int row_begin, int row_end);

struct KernelSet {
  const char* name;
  PrepareFn prepare;
  MatMulFn matmul;
};

// Plain loops; bit-identical prepared activations, and the reference's summation order.
const KernelSet& PortableKernels();
// AVX2/FMA/F16C; nullptr when the CPU lacks any of them.
const KernelSet* Avx2Kernels();
// The AVX2 set with AVX512-VNNI products for Q8_0 / Q4_0 and the K-quants (256-bit
// vectors, AVX512VL and BW); nullptr when the CPU lacks any of them.
const KernelSet* Avx512VnniKernels();
// The best set this CPU runs, chosen on first use. GANTRY_KERNELS=portable or =avx2
// forces that set (for comparisons) where the CPU runs it.
const KernelSet& Kernels();

}  // namespace gantry::kernels

#endif  // GANTRY_WORKER_KERNELS_KERNELS_H_
