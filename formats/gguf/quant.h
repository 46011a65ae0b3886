// Number formats of GGUF tensors: half and bfloat16 conversion, and the block formats
// (quantize for our writer; dequantize one row for the reference kernels).
//
// Block layouts (ggml's, little-endian):
//   Q8_0: 32 values -> fp16 d, int8 q[32];                      x = d * q
//   Q4_0: 32 values -> fp16 d, uint8 qs[16] (low nibbles are values 0..15, high
//         nibbles 16..31);                                       x = d * (nibble - 8)
// K-quants: super-blocks of 256 values split in groups, each group with its own small
// integer scale (and min) under the super-block's fp16 scales:
//   Q4_K (144 bytes): fp16 d, fp16 dmin, uint8 scales[12], uint8 qs[128].
//     8 groups of 32; group g has a 6-bit scale sc and a 6-bit min m packed in scales[]:
//       g < 4:  sc = scales[g] & 63,                            m = scales[g + 4] & 63
//       g >= 4: sc = (scales[g + 4] & 15) | (scales[g - 4] >> 6) << 4,
//               m  = (scales[g + 4] >> 4) | (scales[g] >> 6) << 4
//     Value 64c + l (l < 32) is the low nibble of qs[32c + l], value 64c + 32 + l its
//     high nibble (c = 0..3).                                  x = d*sc * q - dmin*m
//   Q5_K (176 bytes): fp16 d, fp16 dmin, uint8 scales[12] (as Q4_K), uint8 qh[32],
//     uint8 qs[128] (as Q4_K); the fifth bit of value 32g + l is bit g of qh[l].
//                                                    q in 0..31, x = d*sc * q - dmin*m
//   Q6_K (210 bytes): uint8 ql[128], uint8 qh[64], int8 scales[16], fp16 d (last).
//     16 groups of 16, group g scaled by scales[g]. In half h (values 128h ..), with
//     L = ql + 64h, H = qh + 32h and l < 32, the 6-bit codes are
//       value 128h + l:      L[l] & 15      | (H[l] & 3) << 4
//       value 128h + 32 + l: L[l + 32] & 15 | (H[l] >> 2 & 3) << 4
//       value 128h + 64 + l: L[l] >> 4      | (H[l] >> 4 & 3) << 4
//       value 128h + 96 + l: L[l + 32] >> 4 | (H[l] >> 6 & 3) << 4
//     q = code - 32 (-32..31);                                       x = d*scales[g] * q
// Thread-safety: pure functions.
#ifndef GANTRY_FORMATS_GGUF_QUANT_H_
#define GANTRY_FORMATS_GGUF_QUANT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "formats/gguf/gguf.h"

namespace gantry::gguf {

float HalfToFloat(uint16_t h);
// Round to nearest, ties to even; overflow to infinity, NaN kept NaN.
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
// Round to nearest even (as ggml's fp32 -> bf16).
uint16_t FloatToBf16(float f);

// Encodes `n` floats as `type` and appends to `out`. Supported: F32, F16, BF16, Q8_0,
// Q4_0, Q4_K, Q5_K, Q6_K. Precondition (returned as INVALID_ARGUMENT): n a multiple of
// the block size. Our K-quant encoder is not ggml's (no search for the best scales): it
// picks each group's scale (rounded up) so that every value decodes within half a step
// of its group's step d*sc (Q4_K / Q5_K after subtracting the min, which is rounded up
// too; Q6_K symmetric, |x| <= 31.5 steps).
absl::Status EncodeTensor(const float* x, size_t n, TensorType type, std::string* out);

// Q8_0 without allocating: `n` floats (a multiple of 32) into n / 32 blocks of 34 bytes
// at `out`, as EncodeTensor writes them.
void EncodeQ8_0(const float* x, size_t n, uint8_t* out);

// Decodes n / 32 Q8_0 blocks at `data` into `n` floats (as DecodeRow).
void DecodeQ8_0(const uint8_t* data, size_t n, float* y);

// Decodes `n` values of `type` starting at `data` (a whole number of blocks) into `y`,
// with ggml's float operations (so the values equal llama.cpp's dequantization).
// Supported: the types EncodeTensor writes. Errors: UNIMPLEMENTED for other types.
absl::Status DecodeRow(const uint8_t* data, TensorType type, size_t n, float* y);

// One K-quant super-block as integers: value i is
//   d * scale[i / group] * q[i] - dmin * min[i / group].
struct KQuantBlock {
  float d = 0;
  float dmin = 0;     // 0 for Q6_K
  int group = 32;     // values per group: 32 (Q4_K, Q5_K) or 16 (Q6_K)
  int8_t q[256];      // Q4_K 0..15, Q5_K 0..31, Q6_K -32..31
  int16_t scale[16];  // Q4_K / Q5_K 0..63 (8 used), Q6_K -128..127
  int16_t min[16];    // Q4_K / Q5_K 0..63 (8 used), Q6_K 0
};

// True for Q4_K, Q5_K and Q6_K.
bool IsKQuant(TensorType type);

// Unpacks the super-block at `block`. Precondition: IsKQuant(type). Any bytes are valid.
void UnpackKQuantBlock(const uint8_t* block, TensorType type, KQuantBlock* out);

}  // namespace gantry::gguf

#endif  // GANTRY_FORMATS_GGUF_QUANT_H_
