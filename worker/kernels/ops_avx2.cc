// AVX2 + FMA + F16C variants of kernels.h, compiled with -mavx2 -mfma -mf16c.
//
// Rules for this file: reached only through kernels.cc's CPU check; no standard-library
// templates that other files also instantiate (an inline function compiled here could
// be the copy the linker keeps for everyone, and then run on a CPU without AVX2).
//
// MatMul computes tiles of RM weight rows x RN activation rows in registers: each
// weight vector loaded is used RN times, each activation vector RM times. Activation
// rows are visited in blocks that stay in L2 while every weight row tile passes over
// them, so a batch streams the weights from memory once per block.
//   float types: w (F32 / F16 via F16C / BF16 by shifting) times prepared floats, FMA
//     into 8 lanes, summed at the end;
//   Q8_0 / Q4_0: each 32-block of weights as 32 signed bytes (Q4_0: nibble - 8), an
//     exact integer dot per block (|w| * sign(x, w) with maddubs, then pairs summed to 8
//     int32 lanes), scaled by d_w * d_x and accumulated in float.
// The sums are the reference's products in a different order (lanes, then a tree).
#include "worker/kernels/ops_avx2.h"

#include <immintrin.h>

#include <cstring>

#include "worker/gguf/quant.h"

namespace gantry::kernels::internal {
namespace {

// Tile loops over RM / RN must unroll fully, or the accumulators live in memory.
#define GANTRY_UNROLL _Pragma("GCC unroll 16")

using gguf::TensorType;

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HalfToFloat(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// ---- Preparing activations -------------------------------------------------------

// roundf (half away from zero) of values already integral-range, exactly.
inline __m256 RoundHalfAway(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(sign, _mm256_set1_ps(1.0f))));
}

void QuantizeBlock(const float* x, Q8Block* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
  }
  const float d = HorizontalMax(amax) / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  out->d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    q[i] = _mm256_cvttps_epi32(RoundHalfAway(_mm256_mul_ps(v[i], _mm256_set1_ps(id))));
  }
  // packs work per 128-bit lane; the permute puts the 4-byte groups back in order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

void Prepare(TensorType t, const float* x, size_t x_stride, int n_rows, int n, uint8_t* out) {
  const bool quantized = t == TensorType::kQ8_0 || t == TensorType::kQ4_0;
  // As PreparedRowBytes (kernels.cc, which this library must not call back into).
  const size_t out_stride = quantized ? sizeof(Q8Block) * (n / 32) : sizeof(float) * n;
  for (int i = 0; i < n_rows; ++i) {
    const float* xi = x + i * x_stride;
    uint8_t* oi = out + i * out_stride;
    if (quantized) {
      Q8Block* blocks = reinterpret_cast<Q8Block*>(oi);
      for (int b = 0; b < n / 32; ++b) QuantizeBlock(xi + 32 * b, &blocks[b]);
      continue;
    }
    float* o = reinterpret_cast<float*>(oi);
    int c = 0;
    if (t == TensorType::kF16) {
      for (; c + 8 <= n; c += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(xi + c), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(o + c, _mm256_cvtph_ps(h));
      }
      for (; c < n; ++c) o[c] = _cvtsh_ss(_cvtss_sh(xi[c], _MM_FROUND_TO_NEAREST_INT));
    } else if (t == TensorType::kBF16) {
      for (; c < n; ++c) o[c] = gguf::Bf16ToFloat(gguf::FloatToBf16(xi[c]));
    } else {
      std::memcpy(o, xi, sizeof(float) * n);
    }
  }
}

// ---- Float weights ---------------------------------------------------------------

struct LoadF32 {
  static constexpr int kSize = 4;  // bytes per value
  static __m256 Load(const uint8_t* row, int c) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
  static float At(const uint8_t* row, int c) { return reinterpret_cast<const float*>(row)[c]; }
};

struct LoadF16 {
  static constexpr int kSize = 2;
  static __m256 Load(const uint8_t* row, int c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  }
  static float At(const uint8_t* row, int c) { return HalfToFloat(row + 2 * c); }
};

struct LoadBF16 {
  static constexpr int kSize = 2;
  static __m256 Load(const uint8_t* row, int c) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
  static float At(const uint8_t* row, int c) {
    uint16_t b;
    std::memcpy(&b, row + 2 * c, 2);
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// Arguments of one tile: weight rows r .. r+RM, activation rows t .. t+RN.
struct TileArgs {
  const Matrix* w;
  const uint8_t* x;
  size_t x_stride;
  float* y;
  size_t ldy;
  int r;
  int t;
};

template <class L, int RM, int RN>
void FloatTile(const TileArgs& a) {
  const Matrix& w = *a.w;
  const uint8_t* rows[RM];
  const float* xs[RN];
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i) rows[i] = w.data + static_cast<size_t>(a.r + i) * w.row_bytes;
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) xs[j] = reinterpret_cast<const float*>(a.x + (a.t + j) * a.x_stride);
  __m256 acc[RM][RN];
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i)
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_ps();
  int c = 0;
  for (; c + 8 <= w.cols; c += 8) {
    __m256 xv[RN];
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) xv[j] = _mm256_loadu_ps(xs[j] + c);
    GANTRY_UNROLL
    for (int i = 0; i < RM; ++i) {
      // Decoding (one activation row) is bound by memory: the hardware prefetchers
      // lose time on each tile's short row streams, so fetch the next tile's rows
      // (RM rows on) while this one computes. Prefetches past the end do not fault.
      if (RN == 1 && (c * L::kSize) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[i] + RM * w.row_bytes + c * L::kSize), _MM_HINT_T0);
      }
      const __m256 wv = L::Load(rows[i], c);
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i) {
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) {
      float s = HorizontalSum(acc[i][j]);
      for (int k = c; k < w.cols; ++k) s += L::At(rows[i], k) * xs[j][k];
      a.y[(a.t + j) * a.ldy + a.r + i] = s;
    }
  }
}

// ---- Quantized weights -----------------------------------------------------------

struct BlockQ8_0 {
  static constexpr int kBytes = 34;
  static __m256i Load(const uint8_t* block) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  }
};

struct BlockQ4_0 {
  static constexpr int kBytes = 18;
  static __m256i Load(const uint8_t* block) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m128i low = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(raw, low);                     // values 0..15
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low);  // values 16..31
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
  }
  // The nibbles themselves, 0..15 (the VNNI tile subtracts 8 * sum(x) instead).
  static __m256i LoadUnsigned(const uint8_t* block) {
    return _mm256_add_epi8(Load(block), _mm256_set1_epi8(8));
  }
};

template <class B, int RM, int RN>
void QuantTile(const TileArgs& a) {
  const Matrix& w = *a.w;
  const uint8_t* rows[RM];
  const Q8Block* xs[RN];
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i) rows[i] = w.data + static_cast<size_t>(a.r + i) * w.row_bytes;
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) xs[j] = reinterpret_cast<const Q8Block*>(a.x + (a.t + j) * a.x_stride);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[RM][RN];
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i)
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_ps();
  const int blocks = w.cols / 32;
  for (int b = 0; b < blocks; ++b) {
    __m256i xq[RN];
    float xd[RN];
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) {
      xq[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[j][b].q));
      xd[j] = xs[j][b].d;
    }
    GANTRY_UNROLL
    for (int i = 0; i < RM; ++i) {
      const uint8_t* block = rows[i] + b * B::kBytes;
      if (RN == 1 && b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(block + RM * w.row_bytes), _MM_HINT_T0);
      const __m256i wq = B::Load(block);
      const __m256i wabs = _mm256_sign_epi8(wq, wq);
      const float wd = HalfToFloat(block);
      GANTRY_UNROLL
      for (int j = 0; j < RN; ++j) {
        // |w| * (x with w's sign): unsigned x signed bytes, pairs summed to int16
        // (at most 2 * 128 * 127, no saturation), then to int32.
        const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq[j], wq));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xd[j]), p, acc[i][j]);
      }
    }
  }
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i)
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) a.y[(a.t + j) * a.ldy + a.r + i] = HorizontalSum(acc[i][j]);
}


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
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i) rows[i] = w.data + static_cast<size_t>(a.r + i) * w.row_bytes;
  GANTRY_UNROLL
  for (int j = 0; j < RN; ++j) xs[j] = reinterpret_cast<const Q8Block*>(a.x + (a.t + j) * a.x_stride);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i offset = _mm256_set1_epi8(kQ4 ? 8 : static_cast<char>(0x80));
  __m256 acc[RM][RN];
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i)
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_ps();
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
      if (RN == 1 && b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(block + RM * w.row_bytes), _MM_HINT_T0);
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
  GANTRY_UNROLL
  for (int i = 0; i < RM; ++i)
    GANTRY_UNROLL
    for (int j = 0; j < RN; ++j) a.y[(a.t + j) * a.ldy + a.r + i] = HorizontalSum(acc[i][j]);
}

// ---- Tiling ----------------------------------------------------------------------

using TileFn = void (*)(const TileArgs&);

// Tile shapes: RM x RN accumulators plus the RN activation vectors and a few
// temporaries fit the 16 ymm registers.
constexpr int kFloatRM = 4, kFloatRN = 3;
constexpr int kQuantRM = 4, kQuantRN = 2;
constexpr int kVnniRM = 4, kVnniRN = 4;  // AVX512VL has 32 vector registers

template <template <class, int, int> class Tile, class T, int RM, int RN>
struct TileTable {
  TileFn fn[RM][RN];
  constexpr TileTable() : fn() { Fill<RM, RN>(); }
  template <int M, int N>
  constexpr void Fill() {
    fn[M - 1][N - 1] = &Tile<T, M, N>::Run;
    if constexpr (N > 1) Fill<M, N - 1>();
    else if constexpr (M > 1) Fill<M - 1, RN>();
  }
};

template <class L, int RM, int RN>
struct FloatTileRunner {
  static void Run(const TileArgs& a) { FloatTile<L, RM, RN>(a); }
};
template <class B, int RM, int RN>
struct QuantTileRunner {
  static void Run(const TileArgs& a) { QuantTile<B, RM, RN>(a); }
};
template <class B, int RM, int RN>
struct VnniTileRunner {
  GANTRY_VNNI static void Run(const TileArgs& a) { VnniTile<B, RM, RN>(a); }
};

constexpr TileTable<FloatTileRunner, LoadF32, kFloatRM, kFloatRN> kF32Tiles;
constexpr TileTable<FloatTileRunner, LoadF16, kFloatRM, kFloatRN> kF16Tiles;
constexpr TileTable<FloatTileRunner, LoadBF16, kFloatRM, kFloatRN> kBF16Tiles;
constexpr TileTable<QuantTileRunner, BlockQ8_0, kQuantRM, kQuantRN> kQ8_0Tiles;
constexpr TileTable<QuantTileRunner, BlockQ4_0, kQuantRM, kQuantRN> kQ4_0Tiles;
constexpr TileTable<VnniTileRunner, BlockQ8_0, kVnniRM, kVnniRN> kQ8_0VnniTiles;
constexpr TileTable<VnniTileRunner, BlockQ4_0, kVnniRM, kVnniRN> kQ4_0VnniTiles;

template <int RM, int RN>
void RunTiles(const TileFn (&fn)[RM][RN], const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok,
              float* y, size_t ldy, int row_begin, int row_end) {
  // Activation rows per block: about 192 KiB of them, so they stay in L2 while the
  // weight tiles pass; a multiple of RN.
  const size_t row_bytes = x_stride > 0 ? x_stride : 1;
  int block = static_cast<int>((192u << 10) / row_bytes);
  block = block < RN ? RN : block - block % RN;
  TileArgs a{&w, x, x_stride, y, ldy, 0, 0};
  for (int t0 = 0; t0 < n_tok; t0 += block) {
    const int t1 = t0 + block < n_tok ? t0 + block : n_tok;
    for (a.r = row_begin; a.r < row_end; a.r += RM) {
      const int rm = row_end - a.r < RM ? row_end - a.r : RM;
      for (a.t = t0; a.t < t1; a.t += RN) {
        const int rn = t1 - a.t < RN ? t1 - a.t : RN;
        fn[rm - 1][rn - 1](a);
      }
    }
  }
}

void MatMul(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy, int row_begin,
            int row_end) {
  switch (w.type) {
    case TensorType::kF32:
      return RunTiles(kF32Tiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    case TensorType::kF16:
      return RunTiles(kF16Tiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    case TensorType::kBF16:
      return RunTiles(kBF16Tiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    case TensorType::kQ8_0:
      return RunTiles(kQ8_0Tiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    case TensorType::kQ4_0:
      return RunTiles(kQ4_0Tiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    default:
      // Unreachable: Model::Load admits only the types above. NaN makes a misuse loud.
      for (int t = 0; t < n_tok; ++t)
        for (int r = row_begin; r < row_end; ++r) y[t * ldy + r] = __builtin_nanf("");
      return;
  }
}

void MatMulVnni(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy, int row_begin,
                int row_end) {
  if (w.type == TensorType::kQ8_0) {
    return RunTiles(kQ8_0VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  if (w.type == TensorType::kQ4_0) {
    return RunTiles(kQ4_0VnniTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
  }
  return MatMul(w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
}

const KernelSet kAvx2 = {"avx2", &Prepare, &MatMul};
const KernelSet kAvx512Vnni = {"avx512vnni", &Prepare, &MatMulVnni};

}  // namespace

const KernelSet& Avx2KernelSetUnchecked() { return kAvx2; }
const KernelSet& Avx512VnniKernelSetUnchecked() { return kAvx512Vnni; }

}  // namespace gantry::kernels::internal
