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
// for the K-quants' scaled sums, where the CPU has AVX512-VNNI; Q8_0, Q4_0, Q4_K, Q5_K
// and Q6_K weights repacked at load into 16-row interleaved groups for 512-bit tiles,
// layouts below; F32, F16 and BF16 products on 512-bit vectors). kernels_test.cc
// holds each against the reference: every output within 1e-5 of sum_i |w_i x_i| (the
// products as the reference forms them), and the prepared activations bit for bit.
//
// Thread-safety: pure functions; Kernels() is initialised once, thread-safely.
#ifndef GANTRY_WORKER_KERNELS_KERNELS_H_
#define GANTRY_WORKER_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "formats/gguf/gguf.h"
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

// Optional: the bytes of `w` repacked into the set's own layout (0: the set reads `w` as
// it is), and the packing itself into `out` (that many bytes), for Matrix::packed.
using PackedBytesFn = size_t (*)(const Matrix& w);
using PackFn = void (*)(const Matrix& w, uint8_t* out);

// As ops.h Softmax and SwiGlu. The vectorised sets compute exp as 2^n * a degree-6
// polynomial on [-ln2/2, ln2/2] (within 4e-7 relative of expf) with the argument
// clamped to [-87.3, 88.3] (below, e^-87.3 ~ 1e-38 stands in for smaller values), and
// sum in lanes: kernels_test.cc holds every output within 1e-6 relative (+1e-30) of
// the reference.
using SoftmaxFn = void (*)(float* x, int n);
using SwiGluFn = void (*)(float* out, const float* gate, const float* up, int n);
// y[i] += (a * d) * q[i] for the n / 32 Q8_0 blocks (fp16 d, int8 q[32], 34 bytes) at
// `blocks` (n a multiple of 32): one position's values weighted into attention's
// output, read from a Q8_0 KV cache (worker/model/kv_cache.h). The vectorised sets
// fuse the multiply-add (one rounding): within 1e-6 relative of the portable set's.
using Q8AxpyFn = void (*)(const uint8_t* blocks, int n, float a, float* y);

struct KernelSet {
  const char* name;
  PrepareFn prepare;
  MatMulFn matmul;
  PackedBytesFn packed_bytes;  // null: the set packs nothing
  PackFn pack;
  SoftmaxFn softmax;
  SwiGluFn swiglu;
  Q8AxpyFn q8_0_axpy;
};

// Layout of the avx512vnni set's packed Q8_0 ("Q8_0x16"), the same bytes per row as
// Q8_0: rows in groups of 16 (the last padded with zero bytes); group g, for each
// 32-block b in order, holds 544 bytes: the 16 rows' fp16 scales (row 16g + i at 2i),
// then for k = 0..7 and i = 0..15 the 4 values 4k .. 4k+3 of row 16g + i's block, each
// plus 128 as an unsigned byte. One 512-bit vpdpbusd with 4 activation bytes broadcast
// then adds those values' products to all 16 rows' sums at once; -128 * sum(x) per
// block restores the signed dot. MatVecRowsReference is its scalar reference.
constexpr int kPackedQ8Rows = 16;
constexpr int kPackedQ8BlockBytes = 2 * kPackedQ8Rows + 32 * kPackedQ8Rows;

// Its packed Q4_0 ("Q4_0x16"), 18 bytes per row and block as Q4_0: 16-row groups as
// above; per 32-block 288 bytes: the 16 fp16 scales, then for k = 0..3 and row i the
// block's bytes 4k .. 4k + 3 (low nibbles: values 4k .., high: 16 + 4k ..; codes
// 0..15, value = code - 8) at 64k + 4i.
constexpr int kPackedQ4_0BlockBytes = 2 * kPackedQ8Rows + 16 * kPackedQ8Rows;

// Layout of its packed Q4_K ("Q4_Kx16"), 148 bytes per row and super-block against
// Q4_K's 144: rows in groups of 16 as above; group g, for each
// 256-value super-block in order, holds 2368 bytes: the 16 rows' fp16 d (row i at 2i),
// their fp16 dmin, the 6-bit group scales (group G of row i at 16G + i, 128 bytes),
// the 6-bit mins in pairs (groups 2P, 2P + 1 of row i at 32P + 2i, 2i + 1, 128 bytes),
// then the codes 0..15: for group G, step k = 0..3 and row i, 4 bytes at
// 256G + 64k + 4i whose low nibbles are values 32G + 4k .. 32G + 4k + 3 and high
// nibbles values 32G + 16 + 4k .. 32G + 16 + 4k + 3 of that row.
constexpr int kPackedQ4KBlockBytes = 4 * kPackedQ8Rows + 16 * kPackedQ8Rows + 128 * kPackedQ8Rows;

// Its packed Q5_K ("Q5_Kx16"), 180 bytes per row and super-block against Q5_K's 176:
// Q4_Kx16's 2368 bytes (nibbles = the codes' low 4 bits) then 512 bytes of fifth bits:
// at 2368 + 64G + 4i + v, bit k is that of value 32G + 4k + v and bit 4 + k that of
// value 32G + 16 + 4k + v of row i (k = 0..3).
constexpr int kPackedQ5KBlockBytes = kPackedQ4KBlockBytes + 32 * kPackedQ8Rows;

// Its packed Q6_K ("Q6_Kx16"), 210 bytes per row and super-block as Q6_K: 16-row groups
// as above; per super-block 3360 bytes: the 16 rows' fp16 d, the int8 scales of the 16
// groups of 16 values (group G of row i at 32 + 16G + i), then the codes c = q + 32
// (0..63) of 32-value pair P (values 32P ..) in two parts: at 288 + 256P + 64k + 4i + v
// the low 4 bits of value 32P + 4k + v (low nibble) and of 32P + 16 + 4k + v (high
// nibble), and at 2336 + 128P + 64h + 4i + v the top 2 bits of value
// 32P + 16h + 4k + v in bits 2k, 2k + 1 (k = 0..3).
constexpr int kPackedQ6KBlockBytes = 2 * kPackedQ8Rows + 16 * kPackedQ8Rows + 192 * kPackedQ8Rows;

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
