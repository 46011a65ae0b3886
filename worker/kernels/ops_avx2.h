// The AVX2/FMA/F16C and AVX512-VNNI kernel sets, for kernels.cc's dispatcher only:
// ops_avx2.cc and ops_avx512_vnni.cc are compiled with -mavx2 -mfma -mf16c, so nothing
// in them may run before the CPU check in Avx2Kernels(). Returning a set's address runs
// no AVX2 instruction.
#ifndef GANTRY_WORKER_KERNELS_OPS_AVX2_H_
#define GANTRY_WORKER_KERNELS_OPS_AVX2_H_

#include "worker/kernels/kernels.h"

namespace gantry::kernels::internal {

const KernelSet& Avx2KernelSetUnchecked();
// The AVX2 set with AVX512-VNNI (256-bit, AVX512VL) products for Q8_0 / Q4_0 and the
// K-quants (ops_avx512_vnni.cc).
const KernelSet& Avx512VnniKernelSetUnchecked();

// The AVX2 kernels the AVX512-VNNI set shares (ops_avx2.cc), as KernelSet members.
void PrepareAvx2(gguf::TensorType t, const float* x, size_t x_stride, int n_rows, int n,
                 uint8_t* out);
void MatMulAvx2(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy,
                int row_begin, int row_end);
void SoftmaxAvx2Kernel(float* x, int n);
void SwiGluAvx2Kernel(float* out, const float* gate, const float* up, int n);
void Q8AxpyAvx2Kernel(const uint8_t* blocks, int n, float a, float* y);

}  // namespace gantry::kernels::internal

#endif  // GANTRY_WORKER_KERNELS_OPS_AVX2_H_
