// Number formats of GGUF tensors: half and bfloat16 conversion, and the block formats
// (quantize for our writer; dequantize one row for the reference kernels).
//
// Block layouts (ggml's, little-endian):
//   Q8_0: 32 values -> fp16 d, int8 q[32];                      x = d * q
//   Q4_0: 32 values -> fp16 d, uint8 qs[16] (low nibbles are values 0..15, high
//         nibbles 16..31);                                       x = d * (nibble - 8)
// Thread-safety: pure functions.
#ifndef GANTRY_WORKER_GGUF_QUANT_H_
#define GANTRY_WORKER_GGUF_QUANT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "worker/gguf/gguf.h"

namespace gantry::gguf {

float HalfToFloat(uint16_t h);
// Round to nearest, ties to even; overflow to infinity, NaN kept NaN.
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
// Round to nearest even (as ggml's fp32 -> bf16).
uint16_t FloatToBf16(float f);

// Encodes `n` floats as `type` and appends to `out`. Supported: F32, F16, BF16, Q8_0,
// Q4_0. Precondition (returned as INVALID_ARGUMENT): n a multiple of the block size.
absl::Status EncodeTensor(const float* x, size_t n, TensorType type, std::string* out);

// Decodes `n` values of `type` starting at `data` (a whole number of blocks) into `y`.
// Supported: F32, F16, BF16, Q8_0, Q4_0. Errors: UNIMPLEMENTED for other types.
absl::Status DecodeRow(const uint8_t* data, TensorType type, size_t n, float* y);

}  // namespace gantry::gguf

#endif  // GANTRY_WORKER_GGUF_QUANT_H_
