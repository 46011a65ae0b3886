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
//   Q4_K / Q5_K / Q6_K against Q8K activations: each 32-value chunk of a super-block
//     as 32 unsigned codes (Q6_K: q + 32), maddubs with the activations, then madd with
//     the chunk's group scales (int16), so the scales are applied in integers and a
//     whole super-block sums exactly in 8 int32 lanes; the mins (Q4_K / Q5_K) and the
//     Q6_K offset of 32 come from the activations' bsums. One float scale per
//     super-block: d_w * d_x (and dmin_w * d_x for the mins).
// The sums are the reference's products in a different order (lanes, then a tree).
#include "worker/kernels/ops_avx2.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "formats/gguf/quant.h"

namespace gantry::kernels::internal {
namespace {

#include "worker/kernels/ops_avx2_common.inc"

// ---- Preparing activations -------------------------------------------------------

// roundf (half away from zero) of values already integral-range, exactly.
inline __m256 RoundHalfAway(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(sign, _mm256_set1_ps(1.0f))));
}

// As ops.h ClampToQ8: NaN -> 0, then clamped to [-127, 127].
inline __m256 ClampToQ8(__m256 v) {
  v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
  return _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
}

void QuantizeBlock(const float* x, Q8Block* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), amax);  // a NaN never wins
  }
  const float d = HorizontalMax(amax) / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  out->d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    q[i] = _mm256_cvttps_epi32(RoundHalfAway(ClampToQ8(_mm256_mul_ps(v[i], _mm256_set1_ps(id)))));
  }
  // packs work per 128-bit lane; the permute puts the 4-byte groups back in order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// As ops.cc QuantizeQ8K, one block, bit for bit: the first value of largest magnitude
// sets the scale; products rounded half to even (as nearbyint); NaNs never win the max.
void QuantizeQ8KBlock(const float* x, Q8KBlock* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 amax_v = _mm256_setzero_ps();
  for (int i = 0; i < 32; ++i) amax_v = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask), amax_v);
  const float amax = HorizontalMax(amax_v);
  if (amax == 0) {
    std::memset(out, 0, sizeof(*out));
    return;
  }
  float max = amax;
  for (int i = 0; i < 32; ++i) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask);
    const int hits = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
    if (hits) {
      max = x[8 * i + __builtin_ctz(hits)];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 scale = _mm256_set1_ps(iscale);
  for (int k = 0; k < 8; ++k) {
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 v = ClampToQ8(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * i), scale));
      q[i] = _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const __m256i p = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q + 32 * k), p);
    // Sums of 4 bytes per int32 lane, then of lanes 0-3 and 4-7: bsums 2k and 2k + 1.
    const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
    const __m256i s16 = _mm256_hadd_epi32(_mm256_hadd_epi32(s4, s4), _mm256_hadd_epi32(s4, s4));
    out->bsums[2 * k] = static_cast<int16_t>(_mm256_extract_epi32(s16, 0));
    out->bsums[2 * k + 1] = static_cast<int16_t>(_mm256_extract_epi32(s16, 4));
  }
  out->d = 1.0f / iscale;
}

void Prepare(TensorType t, const float* x, size_t x_stride, int n_rows, int n, uint8_t* out) {
  const bool quantized = t == TensorType::kQ8_0 || t == TensorType::kQ4_0;
  const bool k_quant = gguf::IsKQuant(t);
  // As PreparedRowBytes (kernels.cc, which this library must not call back into).
  const size_t out_stride = quantized ? sizeof(Q8Block) * (n / 32)
                            : k_quant ? sizeof(Q8KBlock) * (n / 256) : sizeof(float) * n;
  for (int i = 0; i < n_rows; ++i) {
    const float* xi = x + i * x_stride;
    uint8_t* oi = out + i * out_stride;
    if (k_quant) {
      Q8KBlock* blocks = reinterpret_cast<Q8KBlock*>(oi);
      for (int b = 0; b < n / 256; ++b) QuantizeQ8KBlock(xi + 256 * b, &blocks[b]);
      continue;
    }
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

template <class L, int RM, int RN>
void FloatTile(const TileArgs& a) {
  const Matrix& w = *a.w;
  const uint8_t* rows[RM];
  const float* xs[RN];
  __m256 acc[RM][RN];
  TileOperands(a, rows, xs, acc);
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

template <class B, int RM, int RN>
void QuantTile(const TileArgs& a) {
  const Matrix& w = *a.w;
  const uint8_t* rows[RM];
  const Q8Block* xs[RN];
  __m256 acc[RM][RN];
  TileOperands(a, rows, xs, acc);
  const __m256i ones = _mm256_set1_epi16(1);
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
      if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(block + RM * w.row_bytes), _MM_HINT_T0);
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
  StoreTile(a, acc);
}

// The tile itself (ops_avx2_kquant.inc), once for AVX2 here and once for VNNI below.
namespace avx2_kquant {
#define GANTRY_KQUANT_ACCUMULATE(sums, pairs, scales) _mm256_add_epi32(sums, _mm256_madd_epi16(pairs, scales))
#include "worker/kernels/ops_avx2_kquant.inc"
#undef GANTRY_KQUANT_ACCUMULATE
}  // namespace avx2_kquant

// ---- Softmax and SwiGLU ------------------------------------------------------------

// e^x, 8 lanes: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 in two
// parts, so r is exact enough), e^r by its Taylor polynomial to r^6 (the first term
// left out is below 1.3e-7 relative), 2^n built in the exponent bits. x is clamped to
// [-87.3, 88.3] so that 2^n stays a normal float; NaN stays NaN.
inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.3f), _mm256_min_ps(_mm256_set1_ps(88.3f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);  // ln2's leading bits
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);       // and the rest
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_n));
}

inline float ExpScalar(float x) {
  return _mm256_cvtss_f32(Exp(_mm256_set1_ps(x)));
}

void SoftmaxAvx2(float* x, int n) {
  __m256 max8 = _mm256_set1_ps(x[0]);
  int i = 0;
  for (; i + 8 <= n; i += 8) max8 = _mm256_max_ps(_mm256_loadu_ps(x + i), max8);
  float max = HorizontalMax(max8);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 m = _mm256_set1_ps(max);
  __m256 sum8 = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    sum8 = _mm256_add_ps(sum8, e);
  }
  float sum = HorizontalSum(sum8);
  for (; i < n; ++i) sum += x[i] = ExpScalar(x[i] - max);
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] /= sum;
}

void SwiGluAvx2(float* out, const float* gate, const float* up, int n) {
  int i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + ExpScalar(-gate[i])) * up[i];
}

void Q8AxpyAvx2(const uint8_t* blocks, int n, float a, float* y) {
  for (int b = 0; b < n / 32; ++b, blocks += 34, y += 32) {
    uint16_t h;
    std::memcpy(&h, blocks, sizeof(h));
    const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(h));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks + 2));
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]));
      _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(ad, v, _mm256_loadu_ps(y + 8 * k)));
    }
  }
}

// ---- Tile tables and the set -------------------------------------------------------

template <class L, int RM, int RN>
struct FloatTileRunner {
  static void Run(const TileArgs& a) { FloatTile<L, RM, RN>(a); }
};
template <class B, int RM, int RN>
struct QuantTileRunner {
  static void Run(const TileArgs& a) { QuantTile<B, RM, RN>(a); }
};
template <class K, int RM, int RN>
struct KQuantTileRunner {
  static void Run(const TileArgs& a) { avx2_kquant::KQuantTile<K, RM, RN>(a); }
};

constexpr TileTable<FloatTileRunner, LoadF32, kFloatRM, kFloatRN> kF32Tiles;
constexpr TileTable<FloatTileRunner, LoadF16, kFloatRM, kFloatRN> kF16Tiles;
constexpr TileTable<FloatTileRunner, LoadBF16, kFloatRM, kFloatRN> kBF16Tiles;
constexpr TileTable<QuantTileRunner, BlockQ8_0, kQuantRM, kQuantRN> kQ8_0Tiles;
constexpr TileTable<QuantTileRunner, BlockQ4_0, kQuantRM, kQuantRN> kQ4_0Tiles;
constexpr TileTable<KQuantTileRunner, BlockQ4_K, kKQuantRM, kKQuantRN> kQ4_KTiles;
constexpr TileTable<KQuantTileRunner, BlockQ5_K, kKQuantRM, kKQuantRN> kQ5_KTiles;
constexpr TileTable<KQuantTileRunner, BlockQ6_K, kKQuantRM, kKQuantRN> kQ6_KTiles;

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
    case TensorType::kQ4_K:
      return RunTiles(kQ4_KTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    case TensorType::kQ5_K:
      return RunTiles(kQ5_KTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    case TensorType::kQ6_K:
      return RunTiles(kQ6_KTiles.fn, w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
    default:
      // Unreachable: Model::Load admits only the types above. NaN makes a misuse loud.
      for (int t = 0; t < n_tok; ++t)
        for (int r = row_begin; r < row_end; ++r) y[t * ldy + r] = __builtin_nanf("");
      return;
  }
}

const KernelSet kAvx2 = {"avx2", &Prepare, &MatMul, nullptr, nullptr, &SoftmaxAvx2, &SwiGluAvx2, &Q8AxpyAvx2};

}  // namespace

void PrepareAvx2(gguf::TensorType t, const float* x, size_t x_stride, int n_rows, int n,
                 uint8_t* out) {
  Prepare(t, x, x_stride, n_rows, n, out);
}
void MatMulAvx2(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy,
                int row_begin, int row_end) {
  MatMul(w, x, x_stride, n_tok, y, ldy, row_begin, row_end);
}
void SoftmaxAvx2Kernel(float* x, int n) { SoftmaxAvx2(x, n); }
void SwiGluAvx2Kernel(float* out, const float* gate, const float* up, int n) {
  SwiGluAvx2(out, gate, up, n);
}
void Q8AxpyAvx2Kernel(const uint8_t* blocks, int n, float a, float* y) { Q8AxpyAvx2(blocks, n, a, y); }

const KernelSet& Avx2KernelSetUnchecked() { return kAvx2; }

}  // namespace gantry::kernels::internal
