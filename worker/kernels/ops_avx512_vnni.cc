// The AVX512-VNNI kernel set: the AVX2 set (ops_avx2.cc) with AVX512-VNNI products
// for Q8_0 / Q4_0 and the K-quants (on 256-bit vectors with AVX512VL), weights packed
// 16 rows at a time for them, and 512-bit float tiles. Compiled with -mavx2 -mfma
// -mf16c; the AVX512 functions carry their instruction sets as target attributes and
// are reached only through Avx512VnniKernelSetUnchecked() after kernels.cc's CPU
// check. The rules at the top of ops_avx2.cc hold here too.
#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "formats/gguf/quant.h"
#include "worker/kernels/ops_avx2.h"

namespace gantry::kernels::internal {
namespace {

#include "worker/kernels/ops_avx2_common.inc"

// ---- Quantized weights, AVX512-VNNI on 256-bit vectors ---------------------------
//
// The same products with vpdpbusd (unsigned x signed bytes, four products summed into
// each int32 lane, no saturation), in functions compiled for AVX512VL + VNNI by
// attribute and reached only through Avx512VnniKernelSetUnchecked() after kernels.cc's
// CPU check. vpdpbusd needs one unsigned operand; instead of the sign trick:
//   Q8_0: x + 128 is unsigned; the accumulator starts at -128 * sum(w) per lane;
//   Q4_0: the nibbles are unsigned; the accumulator starts at -8 * sum(x) per lane.
// Both give the exact integer dot per block, as the reference.
#define GANTRY_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

template <class B, int RM, int RN>
GANTRY_VNNI void VnniTile(const TileArgs& a) {
  constexpr bool kQ4 = B::kBytes == BlockQ4_0::kBytes;
  const Matrix& w = *a.w;
  const uint8_t* rows[RM];
  const Q8Block* xs[RN];
  __m256 acc[RM][RN];
  TileOperands(a, rows, xs, acc);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i offset = _mm256_set1_epi8(kQ4 ? 8 : static_cast<char>(0x80));
  const int blocks = w.cols / 32;
  for (int b = 0; b < blocks; ++b) {
    __m256i xq[RN], x_start[RN];
    __m256 xd[RN];
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[j][b].q));
      xd[j] = _mm256_set1_ps(xs[j][b].d);
      if constexpr (kQ4) {
        xq[j] = q;
        x_start[j] = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, offset, q));  // -8 sum(x)
      } else {
        xq[j] = _mm256_xor_si256(q, offset);  // x + 128
      }
    }
    GANTRY_UNROLL
    for (int i = 0; i < RM; ++i) {
      const uint8_t* block = rows[i] + b * B::kBytes;
      if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(block + RM * w.row_bytes), _MM_HINT_T0);
      const __m256 wd = _mm256_set1_ps(HalfToFloat(block));
      if constexpr (kQ4) {
        const __m256i wu = B::LoadUnsigned(block);
        GANTRY_UNROLL
        for (int j = 0; j < RN; ++j) {
          const __m256 p = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(x_start[j], wu, xq[j]));
          acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(p, xd[j]), wd, acc[i][j]);
        }
      } else {
        const __m256i wq = B::Load(block);
        const __m256i w_start = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, offset, wq));  // -128 sum(w)
        GANTRY_UNROLL
        for (int j = 0; j < RN; ++j) {
          const __m256 p = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(w_start, xq[j], wq));
          acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(p, xd[j]), wd, acc[i][j]);
        }
      }
    }
  }
  StoreTile(a, acc);
}

// ---- Packed weights (kernels.h "Q8_0x16", "Q4_0x16", "Q4_Kx16" and the rest) ------
//
// One tile: a group of 16 weight rows (one zmm of sums per token) x RN tokens; the 16
// results of a token are adjacent outputs, stored with one masked store.
//   Q8_0x16, per 32-block: the group's 16 scales converted once; for each 4-value step
//     k one load of the 16 rows' bytes (w + 128), used by RN vpdpbusd with the token's
//     4 bytes broadcast; each token's int32 sums start at -128 * sum(x of the block),
//     so they end as the exact signed dots; one convert, one multiply by d_x and one
//     FMA by the rows' d_w then serve all 16 rows. Q4_0x16 the same with the codes
//     (0..15) as nibble pairs, two 4-value steps per load, sums from -8 * sum(x).
//   Q4_Kx16, per 256-value super-block: per group of 32 values, 4 loads of 64 bytes
//     (two 4-value steps each, as low and high nibbles: codes 0..15, unsigned, so no
//     correction) and 8 vpdpbusd per token give the 16 rows' exact integer dots, which
//     are converted and scaled by the group scales (6-bit integers, exact in float);
//     the mins meet the activations' group sums in integers (4 vpdpwssd of int16
//     pairs); then d_x * (d_w * scaled - dmin_w * mins).
//   Q5_Kx16: Q4_Kx16 with the codes' fifth bits or-ed in from a bit plane (0..31).
//   Q6_Kx16: as Q4_Kx16 with codes q + 32 (0..63: nibble pairs plus 2-bit planes),
//     groups of 16 (each pair of groups one 32-value step set, two int32 dots per
//     token), sums starting at -32 * sum(x of the group); no mins.
#define GANTRY_VNNI512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

// Offsets inside one Q4_Kx16 super-block of a group (kernels.h).
constexpr int kQ4KxDmin = 2 * kPackedQ8Rows, kQ4KxScales = 4 * kPackedQ8Rows;
constexpr int kQ4KxMins = kQ4KxScales + 8 * kPackedQ8Rows, kQ4KxCodes = kQ4KxMins + 8 * kPackedQ8Rows;
static_assert(kQ4KxCodes + 128 * kPackedQ8Rows == kPackedQ4KBlockBytes, "Q4_Kx16 layout");
constexpr int kQ5KxFifth = kPackedQ4KBlockBytes;  // Q5_Kx16: the fifth bits after Q4_Kx16's bytes
static_assert(kQ5KxFifth + 32 * kPackedQ8Rows == kPackedQ5KBlockBytes, "Q5_Kx16 layout");
// And inside one Q6_Kx16 super-block.
constexpr int kQ6KxScales = 2 * kPackedQ8Rows, kQ6KxLow = kQ6KxScales + 16 * kPackedQ8Rows;
constexpr int kQ6KxHigh = kQ6KxLow + 128 * kPackedQ8Rows;
static_assert(kQ6KxHigh + 64 * kPackedQ8Rows == kPackedQ6KBlockBytes, "Q6_Kx16 layout");

size_t PackedBytesVnni(const Matrix& w) {
  const size_t groups = (static_cast<size_t>(w.rows) + kPackedQ8Rows - 1) / kPackedQ8Rows;
  if (w.rows <= 0) return 0;
  if (w.type == TensorType::kQ8_0 && w.cols % 32 == 0) {
    return groups * static_cast<size_t>(w.cols / 32) * kPackedQ8BlockBytes;
  }
  if (w.type == TensorType::kQ4_0 && w.cols % 32 == 0) {
    return groups * static_cast<size_t>(w.cols / 32) * kPackedQ4_0BlockBytes;
  }
  if (w.type == TensorType::kQ4_K && w.cols % 256 == 0) {
    return groups * static_cast<size_t>(w.cols / 256) * kPackedQ4KBlockBytes;
  }
  if (w.type == TensorType::kQ5_K && w.cols % 256 == 0) {
    return groups * static_cast<size_t>(w.cols / 256) * kPackedQ5KBlockBytes;
  }
  if (w.type == TensorType::kQ6_K && w.cols % 256 == 0) {
    return groups * static_cast<size_t>(w.cols / 256) * kPackedQ6KBlockBytes;
  }
  return 0;
}

// Plain loops (no vector code of their own): the layouts as kernels.h describes them.
// Calls pack(o, block, i) for row i of each 16-row group and each of its blocks: o the
// packed block (zeroed first), block the row's original one. Padding rows stay zero
// bytes (their lanes are computed but never stored).
template <class F>
void PackBlocks(const Matrix& w, int block_values, int block_bytes, int packed_bytes, uint8_t* out, const F& pack) {
  const int blocks = w.cols / block_values;
  const int groups = (w.rows + kPackedQ8Rows - 1) / kPackedQ8Rows;
  for (int g = 0; g < groups; ++g) {
    for (int b = 0; b < blocks; ++b) {
      uint8_t* o = out + (static_cast<size_t>(g) * blocks + b) * packed_bytes;
      std::memset(o, 0, packed_bytes);
      for (int i = 0; i < kPackedQ8Rows && g * kPackedQ8Rows + i < w.rows; ++i) {
        pack(o, w.data + static_cast<size_t>(g * kPackedQ8Rows + i) * w.row_bytes + b * block_bytes, i);
      }
    }
  }
}

void PackQ8_0(const Matrix& w, uint8_t* out) {
  PackBlocks(w, 32, 34, kPackedQ8BlockBytes, out, [](uint8_t* o, const uint8_t* block, int i) {
    std::memcpy(o + 2 * i, block, 2);
    for (int j = 0; j < 32; ++j) {
      o[2 * kPackedQ8Rows + 64 * (j / 4) + 4 * i + j % 4] = static_cast<uint8_t>(static_cast<int8_t>(block[2 + j]) + 128);
    }
  });
}

// Q4_0's bytes already pair value j (low nibble) with value 16 + j (high nibble).
void PackQ4_0(const Matrix& w, uint8_t* out) {
  PackBlocks(w, 32, 18, kPackedQ4_0BlockBytes, out, [](uint8_t* o, const uint8_t* block, int i) {
    std::memcpy(o + 2 * i, block, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(o + 2 * kPackedQ8Rows + 64 * k + 4 * i, block + 2 + 4 * k, 4);
  });
}

// Q4_K, and Q5_K (kFifth) with the fifth bits of each 32 values in a 64-byte plane.
template <bool kFifth>
void PackQ45_K(const Matrix& w, uint8_t* out) {
  gguf::KQuantBlock kb;
  constexpr TensorType kType = kFifth ? TensorType::kQ5_K : TensorType::kQ4_K;
  constexpr int kBytes = kFifth ? kPackedQ5KBlockBytes : kPackedQ4KBlockBytes;
  PackBlocks(w, 256, kFifth ? 176 : 144, kBytes, out, [&kb](uint8_t* o, const uint8_t* block, int i) {
    gguf::UnpackKQuantBlock(block, kType, &kb);
    std::memcpy(o + 2 * i, block, 2);                 // d
    std::memcpy(o + kQ4KxDmin + 2 * i, block + 2, 2);  // dmin
    for (int grp = 0; grp < 8; ++grp) {
      o[kQ4KxScales + kPackedQ8Rows * grp + i] = static_cast<uint8_t>(kb.scale[grp]);
      o[kQ4KxMins + 2 * kPackedQ8Rows * (grp / 2) + 2 * i + grp % 2] = static_cast<uint8_t>(kb.min[grp]);
      for (int k = 0; k < 4; ++k) {
        for (int v = 0; v < 4; ++v) {
          const int lo = kb.q[32 * grp + 4 * k + v], hi = kb.q[32 * grp + 16 + 4 * k + v];
          o[kQ4KxCodes + 256 * grp + 64 * k + 4 * i + v] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
          if (kFifth) o[kQ5KxFifth + 64 * grp + 4 * i + v] |= static_cast<uint8_t>((lo >> 4) << k | (hi >> 4) << (4 + k));
        }
      }
    }
  });
}

void PackQ6_K(const Matrix& w, uint8_t* out) {
  gguf::KQuantBlock kb;
  PackBlocks(w, 256, 210, kPackedQ6KBlockBytes, out, [&kb](uint8_t* o, const uint8_t* block, int i) {
    gguf::UnpackKQuantBlock(block, TensorType::kQ6_K, &kb);
    std::memcpy(o + 2 * i, block + 208, 2);  // d
    for (int g = 0; g < 16; ++g) o[kQ6KxScales + kPackedQ8Rows * g + i] = static_cast<uint8_t>(kb.scale[g]);
    for (int pair = 0; pair < 8; ++pair) {
      for (int k = 0; k < 4; ++k) {
        for (int v = 0; v < 4; ++v) {
          const int lo = kb.q[32 * pair + 4 * k + v] + 32, hi = kb.q[32 * pair + 16 + 4 * k + v] + 32;  // 0..63
          o[kQ6KxLow + 256 * pair + 64 * k + 4 * i + v] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
          o[kQ6KxHigh + 128 * pair + 4 * i + v] |= static_cast<uint8_t>((lo >> 4) << (2 * k));
          o[kQ6KxHigh + 128 * pair + 64 + 4 * i + v] |= static_cast<uint8_t>((hi >> 4) << (2 * k));
        }
      }
    }
  });
}

void PackVnni(const Matrix& w, uint8_t* out) {
  if (w.type == TensorType::kQ8_0) PackQ8_0(w, out);
  else if (w.type == TensorType::kQ4_0) PackQ4_0(w, out);
  else if (w.type == TensorType::kQ6_K) PackQ6_K(w, out);
  else if (w.type == TensorType::kQ5_K) PackQ45_K<true>(w, out);
  else PackQ45_K<false>(w, out);
}

struct PackedTileArgs {
  const uint8_t* group;     // the group's packed bytes
  int blocks;               // blocks (Q8_0) or super-blocks (Q4_K) per row
  const uint8_t* x;         // prepared row of the tile's first token
  size_t x_stride;
  const int32_t* extra;     // per token and block: Q8_0 -128 * sum(x); Q4_K 4 pairs of group sums
  int extra_stride;
  float* y;                 // output of the group's first row, first token
  size_t ldy;
  __mmask16 rows;           // which of the 16 rows to store
};

inline int32_t Load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A packed tile's RN prepared activation rows (as X) and its accumulators, zeroed.
template <class X, int RN>
GANTRY_VNNI512 __attribute__((always_inline)) inline void PackedTileStart(const PackedTileArgs& a, const X* (&xs)[RN],
                                                                          __m512 (&acc)[RN]) {
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) {
    xs[j] = reinterpret_cast<const X*>(a.x + j * a.x_stride);
    acc[j] = _mm512_setzero_ps();
  }
}

// Block b of a tile's packed group. Decoding (one token) streams the weights once:
// fetch kAhead blocks on.
template <int RN, int kBytes, int kAhead>
GANTRY_VNNI512 __attribute__((always_inline)) inline const uint8_t* PackedBlock(const PackedTileArgs& a, int b) {
  const uint8_t* p = a.group + static_cast<size_t>(b) * kBytes;
  GANTRY_UNROLL
  for (int o = 0; o < kBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kAhead * kBytes + o), _MM_HINT_T0);
  return p;
}

// kQ4: Q4_0x16 (nibble pairs, sums starting at -8 * sum(x)); else Q8_0x16.
template <bool kQ4, int RN>
GANTRY_VNNI512 void PackedQ8Tile(const PackedTileArgs& a) {
  constexpr int kBlockBytes = kQ4 ? kPackedQ4_0BlockBytes : kPackedQ8BlockBytes;
  const Q8Block* xs[RN];
  __m512 acc[RN];
  PackedTileStart(a, xs, acc);
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int b = 0; b < a.blocks; ++b) {
    const uint8_t* p = PackedBlock<RN, kBlockBytes, 6>(a, b);
    // (maskz forms: GCC 12's plain ones warn about their undefined passthrough.)
    const __m512 wd = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i sums[RN];
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) sums[j] = _mm512_set1_epi32(a.extra[j * a.extra_stride + b]);
    GANTRY_UNROLL
    for (int k = 0; k < (kQ4 ? 4 : 8); ++k) {
      const __m512i raw = _mm512_loadu_si512(p + 2 * kPackedQ8Rows + 64 * k);
      if constexpr (kQ4) {
        const __m512i w_lo = _mm512_and_si512(raw, low);                        // values 4k ..
        const __m512i w_hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);  // values 16 + 4k ..
        GANTRY_UNROLL
        for (int j = 0; j < RN; ++j) {
          sums[j] = _mm512_dpbusd_epi32(sums[j], w_lo, _mm512_set1_epi32(Load4(xs[j][b].q + 4 * k)));
          sums[j] = _mm512_dpbusd_epi32(sums[j], w_hi, _mm512_set1_epi32(Load4(xs[j][b].q + 16 + 4 * k)));
        }
      } else {
        GANTRY_UNROLL
        for (int j = 0; j < RN; ++j) sums[j] = _mm512_dpbusd_epi32(sums[j], raw, _mm512_set1_epi32(Load4(xs[j][b].q + 4 * k)));
      }
    }
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) {
      const __m512 p32 = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, sums[j]), _mm512_set1_ps(xs[j][b].d));
      acc[j] = _mm512_fmadd_ps(p32, wd, acc[j]);
    }
  }
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) _mm512_mask_storeu_ps(a.y + j * a.ldy, a.rows, acc[j]);
}

// For each token j: lo[j] += w_lo . its activations at q .. q + 3 (broadcast to every
// row) and hi[j] += w_hi . those at q + 16 .. q + 19, q = block b's values + offset
// (the two nibbles of a packed K-quant step). lo and hi may be the same sums.
template <int RN>
GANTRY_VNNI512 __attribute__((always_inline)) inline void DotNibblePair(const Q8KBlock* const (&xs)[RN], int b,
                                                                        int offset, __m512i w_lo, __m512i w_hi,
                                                                        __m512i (&lo)[RN], __m512i (&hi)[RN]) {
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) {
    const int8_t* q = xs[j][b].q + offset;
    lo[j] = _mm512_dpbusd_epi32(lo[j], w_lo, _mm512_set1_epi32(Load4(q)));
    hi[j] = _mm512_dpbusd_epi32(hi[j], w_hi, _mm512_set1_epi32(Load4(q + 16)));
  }
}

// 16 bytes (kSigned: int8, else uint8) as 16 floats.
template <bool kSigned>
GANTRY_VNNI512 __attribute__((always_inline)) inline __m512 BytesToFloat(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm512_maskz_cvtepi32_ps(0xFFFF, kSigned ? _mm512_maskz_cvtepi8_epi32(0xFFFF, v)
                                                  : _mm512_maskz_cvtepu8_epi32(0xFFFF, v));
}

// kFifth: Q5_Kx16 (codes 0..31: the fifth bit of step k's low / high nibble values is
// bit k / 4 + k of the group's plane byte); else Q4_Kx16.
template <bool kFifth, int RN>
GANTRY_VNNI512 void PackedQ4KTile(const PackedTileArgs& a) {
  const Q8KBlock* xs[RN];
  __m512 acc[RN];
  PackedTileStart(a, xs, acc);
  const __m512i low = _mm512_set1_epi8(0x0F), fifth = _mm512_set1_epi8(0x10);
  for (int b = 0; b < a.blocks; ++b) {
    const uint8_t* p = PackedBlock<RN, kFifth ? kPackedQ5KBlockBytes : kPackedQ4KBlockBytes, 2>(a, b);
    __m512 scaled[RN] = {};  // zeros
    for (int grp = 0; grp < 8; ++grp) {
      __m512i dots[RN];
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) dots[j] = _mm512_setzero_si512();
      GANTRY_UNROLL
      for (int k = 0; k < 4; ++k) {
        const __m512i raw = _mm512_loadu_si512(p + kQ4KxCodes + 256 * grp + 64 * k);
        __m512i w_lo = _mm512_and_si512(raw, low);                      // values 4k ..
        __m512i w_hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);  // values 16 + 4k ..
        if constexpr (kFifth) {
          const __m512i plane = _mm512_loadu_si512(p + kQ5KxFifth + 64 * grp);
          w_lo = _mm512_or_si512(w_lo, _mm512_and_si512(_mm512_slli_epi16(plane, 4 - k), fifth));
          w_hi = _mm512_or_si512(w_hi, _mm512_and_si512(_mm512_srli_epi16(plane, k), fifth));
        }
        DotNibblePair(xs, b, 32 * grp + 4 * k, w_lo, w_hi, dots, dots);
      }
      const __m512 sc = BytesToFloat<false>(p + kQ4KxScales + 16 * grp);
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) scaled[j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, dots[j]), sc, scaled[j]);
    }
    const __m512 d = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512 dmin = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kQ4KxDmin)));
    __m512i mins[4];
    GANTRY_UNROLL
    for (int k = 0; k < 4; ++k) {
      mins[k] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kQ4KxMins + 32 * k)));
    }
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) {
      const int32_t* gs = a.extra + j * a.extra_stride + 4 * b;
      __m512i m = _mm512_setzero_si512();
      GANTRY_UNROLL
      for (int k = 0; k < 4; ++k) m = _mm512_dpwssd_epi32(m, mins[k], _mm512_set1_epi32(gs[k]));
      const __m512 t = _mm512_fmsub_ps(d, scaled[j], _mm512_mul_ps(dmin, _mm512_maskz_cvtepi32_ps(0xFFFF, m)));
      acc[j] = _mm512_fmadd_ps(t, _mm512_set1_ps(xs[j][b].d), acc[j]);
    }
  }
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) _mm512_mask_storeu_ps(a.y + j * a.ldy, a.rows, acc[j]);
}

template <int RN>
GANTRY_VNNI512 void PackedQ6KTile(const PackedTileArgs& a) {
  const Q8KBlock* xs[RN];
  __m512 acc[RN];
  PackedTileStart(a, xs, acc);
  const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  for (int b = 0; b < a.blocks; ++b) {
    const uint8_t* p = PackedBlock<RN, kPackedQ6KBlockBytes, 2>(a, b);
    __m512 scaled[RN] = {};  // zeros
    for (int pair = 0; pair < 8; ++pair) {
      // Groups 2 pair (values 32 pair + 4k ..) and 2 pair + 1 (32 pair + 16 + 4k ..).
      const int32_t* corr = a.extra + 16 * b + 2 * pair;  // -32 * sum(x) per group
      __m512i dot_lo[RN], dot_hi[RN];
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) {
        dot_lo[j] = _mm512_set1_epi32(corr[j * a.extra_stride]);
        dot_hi[j] = _mm512_set1_epi32(corr[j * a.extra_stride + 1]);
      }
      const __m512i high_lo = _mm512_loadu_si512(p + kQ6KxHigh + 128 * pair);
      const __m512i high_hi = _mm512_loadu_si512(p + kQ6KxHigh + 128 * pair + 64);
      GANTRY_UNROLL
      for (int k = 0; k < 4; ++k) {
        const __m512i raw = _mm512_loadu_si512(p + kQ6KxLow + 256 * pair + 64 * k);
        // Bits 2k, 2k + 1 of the high bytes moved to bits 4, 5 (0x30), or-ed with the nibble.
        const __m512i h_lo = k == 0 ? _mm512_slli_epi16(high_lo, 4) : k == 1 ? _mm512_slli_epi16(high_lo, 2)
                             : k == 2 ? high_lo : _mm512_srli_epi16(high_lo, 2);
        const __m512i h_hi = k == 0 ? _mm512_slli_epi16(high_hi, 4) : k == 1 ? _mm512_slli_epi16(high_hi, 2)
                             : k == 2 ? high_hi : _mm512_srli_epi16(high_hi, 2);
        const __m512i w_lo = _mm512_or_si512(_mm512_and_si512(raw, low), _mm512_and_si512(h_lo, top));
        const __m512i w_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low), _mm512_and_si512(h_hi, top));
        DotNibblePair(xs, b, 32 * pair + 4 * k, w_lo, w_hi, dot_lo, dot_hi);
      }
      const __m512 sc_lo = BytesToFloat<true>(p + kQ6KxScales + 32 * pair);
      const __m512 sc_hi = BytesToFloat<true>(p + kQ6KxScales + 32 * pair + 16);
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) {
        scaled[j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, dot_lo[j]), sc_lo, scaled[j]);
        scaled[j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, dot_hi[j]), sc_hi, scaled[j]);
      }
    }
    const __m512 d = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, scaled[j]), _mm512_set1_ps(xs[j][b].d), acc[j]);
  }
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) _mm512_mask_storeu_ps(a.y + j * a.ldy, a.rows, acc[j]);
}

// Q6_K: -32 * the sum of each group of 16 activations (bsums), for codes q + 32.
GANTRY_VNNI512 void Q6KCorrections(const uint8_t* x, size_t x_stride, int n_tok, int blocks, int32_t* out) {
  for (int t = 0; t < n_tok; ++t) {
    const Q8KBlock* xb = reinterpret_cast<const Q8KBlock*>(x + t * x_stride);
    for (int b = 0; b < blocks; ++b) {
      for (int g = 0; g < 16; ++g) out[16 * (t * blocks + b) + g] = -32 * xb[b].bsums[g];
    }
  }
}

// -kOffset * sum(x) of each 32-block (Q8_0: 128, the bias of its packed values; Q4_0:
// 8): sad against zero of x + 128 sums the 32 biased bytes, less 32 * 128.
template <int kOffset>
GANTRY_VNNI512 void Q8Corrections(const uint8_t* x, size_t x_stride, int n_tok, int blocks, int32_t* out) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int t = 0; t < n_tok; ++t) {
    const Q8Block* xb = reinterpret_cast<const Q8Block*>(x + t * x_stride);
    for (int b = 0; b < blocks; ++b) {
      const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].q)), bias);
      const __m256i s = _mm256_sad_epu8(q, _mm256_setzero_si256());
      const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      const int biased = _mm_cvtsi128_si32(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2)));
      out[t * blocks + b] = -kOffset * (biased - 32 * 128);
    }
  }
}

// Q4_K: the 8 group sums of each super-block (bsums in pairs), as 4 int32 words of two
// int16 each (groups 2k, 2k + 1), the operand vpdpwssd pairs with the mins.
GANTRY_VNNI512 void Q4KGroupSums(const uint8_t* x, size_t x_stride, int n_tok, int blocks, int32_t* out) {
  for (int t = 0; t < n_tok; ++t) {
    const Q8KBlock* xb = reinterpret_cast<const Q8KBlock*>(x + t * x_stride);
    for (int b = 0; b < blocks; ++b) {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb[b].bsums));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb[b].bsums + 8));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * (t * blocks + b)), _mm_hadd_epi16(lo, hi));
    }
  }
}

constexpr int kPackedRN = 8;    // Q8_0: 8 int32 sums + 8 float accumulators
constexpr int kPackedQ4KRN = 6;  // Q4_K: 6 x (dots, scaled, accumulator)
constexpr int kPackedQ6KRN = 4;  // Q6_K: 4 x (two dots, scaled, accumulator)
using PackedTileFn = void (*)(const PackedTileArgs&);
template <template <int> class Runner, int RN>
struct PackedTileTable {
  PackedTileFn fn[RN];
  constexpr PackedTileTable() : fn() { Fill<RN>(); }
  template <int N>
  constexpr void Fill() {
    fn[N - 1] = &Runner<N>::Run;
    if constexpr (N > 1) Fill<N - 1>();
  }
};
template <int RN>
struct PackedQ8Runner {
  GANTRY_VNNI512 static void Run(const PackedTileArgs& a) { PackedQ8Tile<false, RN>(a); }
};
template <int RN>
struct PackedQ4_0Runner {
  GANTRY_VNNI512 static void Run(const PackedTileArgs& a) { PackedQ8Tile<true, RN>(a); }
};
template <int RN>
struct PackedQ6KRunner {
  GANTRY_VNNI512 static void Run(const PackedTileArgs& a) { PackedQ6KTile<RN>(a); }
};
template <int RN>
struct PackedQ4KRunner {
  GANTRY_VNNI512 static void Run(const PackedTileArgs& a) { PackedQ4KTile<false, RN>(a); }
};
template <int RN>
struct PackedQ5KRunner {
  GANTRY_VNNI512 static void Run(const PackedTileArgs& a) { PackedQ4KTile<true, RN>(a); }
};
constexpr PackedTileTable<PackedQ8Runner, kPackedRN> kPackedQ8Tiles;
constexpr PackedTileTable<PackedQ4_0Runner, kPackedRN> kPackedQ4_0Tiles;
constexpr PackedTileTable<PackedQ4KRunner, kPackedQ4KRN> kPackedQ4KTiles;
constexpr PackedTileTable<PackedQ5KRunner, kPackedQ4KRN> kPackedQ5KTiles;
constexpr PackedTileTable<PackedQ6KRunner, kPackedQ6KRN> kPackedQ6KTiles;

// Rows in 16-row groups, tokens in passes whose prepared rows stay in L2 (about
// 192 KiB) while each group passes over them and whose per-block extras fit the stack.
template <int RN>
GANTRY_VNNI512 void MatMulPacked(const PackedTileFn (&tiles)[RN], int block_values, int block_bytes, int extra_per_block,
                                 void (*extras)(const uint8_t*, size_t, int, int, int32_t*), const Matrix& w,
                                 const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy, int row_begin,
                                 int row_end) {
  const int blocks = w.cols / block_values;
  const size_t group_bytes = static_cast<size_t>(blocks) * block_bytes;
  const int extra_stride = blocks * extra_per_block;
  constexpr int kStack = 8192;
  int32_t stack[kStack];
  int32_t* extra = stack;
  int32_t* heap = nullptr;
  const size_t row_bytes = x_stride > 0 ? x_stride : 1;
  int pass = static_cast<int>((192u << 10) / row_bytes);
  pass = pass < RN ? RN : pass - pass % RN;
  if (pass > n_tok) pass = n_tok;
  if (static_cast<size_t>(pass) * extra_stride > kStack) {
    pass = kStack / extra_stride >= 1 ? kStack / extra_stride : 1;
    if (static_cast<size_t>(pass) * extra_stride > kStack) {
      extra = heap = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * extra_stride));
    }
  }
  PackedTileArgs a;
  a.blocks = blocks;
  a.x_stride = x_stride;
  a.extra_stride = extra_stride;
  a.ldy = ldy;
  const int g0 = row_begin / kPackedQ8Rows, g1 = (row_end + kPackedQ8Rows - 1) / kPackedQ8Rows;
  for (int t0 = 0; t0 < n_tok; t0 += pass) {
    const int t1 = t0 + pass < n_tok ? t0 + pass : n_tok;
    extras(x + t0 * x_stride, x_stride, t1 - t0, blocks, extra);
    for (int g = g0; g < g1; ++g) {
      const int r0 = g * kPackedQ8Rows;
      const int lo = row_begin > r0 ? row_begin - r0 : 0;
      const int hi = row_end < r0 + kPackedQ8Rows ? row_end - r0 : kPackedQ8Rows;
      a.rows = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
      a.group = w.packed + g * group_bytes;
      for (int t = t0; t < t1; t += RN) {
        const int rn = t1 - t < RN ? t1 - t : RN;
        a.x = x + t * x_stride;
        a.extra = extra + (t - t0) * extra_stride;
        a.y = y + t * ldy + r0;
        tiles[rn - 1](a);
      }
    }
  }
  std::free(heap);
}

// The K-quant tile with vpdpwssd, compiled for AVX512VL + VNNI (ops_avx2_kquant.inc).
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
namespace vnni_kquant {
#define GANTRY_KQUANT_ACCUMULATE(sums, pairs, scales) _mm256_dpwssd_epi32(sums, pairs, scales)
#include "worker/kernels/ops_avx2_kquant.inc"
#undef GANTRY_KQUANT_ACCUMULATE
}  // namespace vnni_kquant
#pragma GCC pop_options

// ---- Float weights, 512-bit (AVX512F) -------------------------------------------
//
// FloatTile on 16 lanes, for the avx512vnni set's F32 (attention over the KV cache),
// F16 and BF16 products; the columns past the last 16 go through masked loads (zeros
// in the unused lanes), so there is no scalar tail.

struct LoadF32x16 {
  static constexpr int kSize = 4;
  GANTRY_VNNI512 static __m512 Load(const uint8_t* row, int c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  }
};

struct LoadF16x16 {
  static constexpr int kSize = 2;
  GANTRY_VNNI512 static __m512 Load(const uint8_t* row, int c, __mmask16 m) {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(m, row + 2 * c));
  }
};

struct LoadBF16x16 {
  static constexpr int kSize = 2;
  GANTRY_VNNI512 static __m512 Load(const uint8_t* row, int c, __mmask16 m) {
    const __m512i u = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(m, row + 2 * c));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, u, 16));  // (maskz: GCC 12 warns on the plain form)
  }
};

// (Not _mm512_reduce_add_ps nor casts: GCC 12's warn about their undefined upper parts.)
GANTRY_VNNI512 inline float HorizontalSum512(__m512 v) {
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1));
  return HorizontalSum(_mm256_add_ps(lo, hi));
}

template <class L, int RM, int RN>
GANTRY_VNNI512 void FloatTile512(const TileArgs& a) {
  const Matrix& w = *a.w;
  const uint8_t* rows[RM];
  const float* xs[RN];
  __m512 acc[RM][RN];
  TileOperands(a, rows, xs, acc);
  for (int c = 0; c < w.cols; c += 16) {
    const __mmask16 m = w.cols - c >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (w.cols - c)) - 1);
    __m512 xv[RN];
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) xv[j] = _mm512_maskz_loadu_ps(m, xs[j] + c);
    GANTRY_UNROLL
    for (int i = 0; i < RM; ++i) {
      // As FloatTile: decoding prefetches the next row tile.
      if (RN == 1 && (c * L::kSize) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[i] + RM * w.row_bytes + c * L::kSize), _MM_HINT_T0);
      }
      const __m512 wv = L::Load(rows[i], c, m);
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i)
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) a.y[(a.t + j) * a.ldy + a.r + i] = HorizontalSum512(acc[i][j]);
}

// ---- Tile tables and the set -------------------------------------------------------

template <class K, int RM, int RN>
struct VnniKQuantTileRunner {
  GANTRY_VNNI static void Run(const TileArgs& a) { vnni_kquant::KQuantTile<K, RM, RN>(a); }
};
template <class L, int RM, int RN>
struct FloatTile512Runner {
  GANTRY_VNNI512 static void Run(const TileArgs& a) { FloatTile512<L, RM, RN>(a); }
};
template <class B, int RM, int RN>
struct VnniTileRunner {
  GANTRY_VNNI static void Run(const TileArgs& a) { VnniTile<B, RM, RN>(a); }
};

constexpr TileTable<VnniKQuantTileRunner, BlockQ4_K, kVnniKQuantRM, kVnniKQuantRN> kQ4_KVnniTiles;
constexpr TileTable<VnniKQuantTileRunner, BlockQ5_K, kVnniKQuantRM, kVnniKQuantRN> kQ5_KVnniTiles;
constexpr TileTable<VnniKQuantTileRunner, BlockQ6_K, kVnniKQuantRM, kVnniKQuantRN> kQ6_KVnniTiles;
constexpr TileTable<FloatTile512Runner, LoadF32x16, kVnniRM, kVnniRN> kF32VnniTiles;
constexpr TileTable<FloatTile512Runner, LoadF16x16, kVnniRM, kVnniRN> kF16VnniTiles;
constexpr TileTable<FloatTile512Runner, LoadBF16x16, kVnniRM, kVnniRN> kBF16VnniTiles;
constexpr TileTable<VnniTileRunner, BlockQ8_0, kVnniRM, kVnniRN> kQ8_0VnniTiles;
constexpr TileTable<VnniTileRunner, BlockQ4_0, kVnniRM, kVnniRN> kQ4_0VnniTiles;

void MatMulVnni(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy, int row_begin,
                int row_end) {
  // Float products of one activation row (decoding) stay on the 256-bit tiles: there
  // the 512-bit ones measured 15% slower for F16 weights (memory-bound streams).
  if (w.type == TensorType::kF32 && n_tok > 1) {
    return RunTiles(kF32VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kF16 && n_tok > 1) {
    return RunTiles(kF16VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kBF16 && n_tok > 1) {
    return RunTiles(kBF16VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ8_0 && w.packed) {
    return MatMulPacked(kPackedQ8Tiles.fn, 32, kPackedQ8BlockBytes, 1, &Q8Corrections<128>, w, x, x_stride, n_tok,
                        y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ4_0 && w.packed) {
    return MatMulPacked(kPackedQ4_0Tiles.fn, 32, kPackedQ4_0BlockBytes, 1, &Q8Corrections<8>, w, x, x_stride, n_tok,
                        y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ6_K && w.packed) {
    return MatMulPacked(kPackedQ6KTiles.fn, 256, kPackedQ6KBlockBytes, 16, &Q6KCorrections, w, x, x_stride, n_tok, y,
                        ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ4_K && w.packed) {
    return MatMulPacked(kPackedQ4KTiles.fn, 256, kPackedQ4KBlockBytes, 4, &Q4KGroupSums, w, x, x_stride, n_tok, y,
                        ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ5_K && w.packed) {
    return MatMulPacked(kPackedQ5KTiles.fn, 256, kPackedQ5KBlockBytes, 4, &Q4KGroupSums, w, x, x_stride, n_tok, y,
                        ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ8_0) {
    return RunTiles(kQ8_0VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ4_0) {
    return RunTiles(kQ4_0VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ4_K) {
    return RunTiles(kQ4_KVnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ5_K) {
    return RunTiles(kQ5_KVnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ6_K) {
    return RunTiles(kQ6_KVnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  return MatMulAvx2(w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
}

const KernelSet kAvx512Vnni = {"avx512vnni", &PrepareAvx2,       &MatMulVnni,       &PackedBytesVnni,
                               &PackVnni,    &SoftmaxAvx2Kernel, &SwiGluAvx2Kernel, &Q8AxpyAvx2Kernel};

}  // namespace

const KernelSet& Avx512VnniKernelSetUnchecked() { return kAvx512Vnni; }

}  // namespace gantry::kernels::internal
