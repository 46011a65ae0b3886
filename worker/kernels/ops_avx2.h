// The AVX2/FMA/F16C kernel set, for kernels.cc's dispatcher only: ops_avx2.cc is
// compiled with -mavx2 -mfma -mf16c, so nothing in it may run before the CPU check in
// Avx2Kernels(). Returning the set's address runs no AVX2 instruction.
#ifndef GANTRY_WORKER_KERNELS_OPS_AVX2_H_
#define GANTRY_WORKER_KERNELS_OPS_AVX2_H_

#include "worker/kernels/kernels.h"

namespace gantry::kernels::internal {

const KernelSet& Avx2KernelSetUnchecked();
// The AVX2 set with AVX512-VNNI (256-bit, AVX512VL) products for Q8_0 / Q4_0 and the
// K-quants.
const KernelSet& Avx512VnniKernelSetUnchecked();

}  // namespace gantry::kernels::internal

#endif  // GANTRY_WORKER_KERNELS_OPS_AVX2_H_
