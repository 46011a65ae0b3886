#include "formats/gguf/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gantry::gguf {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

}  // namespace

// ---- K-quants ---------------------------------------------------------------------

namespace {

constexpr int kSuper = 256;

// The smallest fp16 value >= v (v >= 0 and finite): scales rounded up keep every
// value of a group inside the range its codes reach.
uint16_t HalfAtLeast(float v) {
  uint16_t h = FloatToHalf(v);
  if (HalfToFloat(h) < v && h < 0x7BFF) ++h;
  return h;
}

// ceil(need / unit) in 0..limit; 0 when unit is 0.
int StepsAtLeast(float need, float unit, int limit) {
  if (!(unit > 0)) return 0;
  return std::min(limit, std::max(0, static_cast<int>(std::ceil(need / unit))));
}

int Clamp(float v, int lo, int hi) { return std::min(hi, std::max(lo, static_cast<int>(std::roundf(v)))); }

// Q4_K (levels 15) or Q5_K (levels 31), one super-block of 256 values.
void EncodeQ45K(const float* x, int levels, std::string* out) {
  float hi[8], offset[8], max_offset = 0;
  for (int g = 0; g < 8; ++g) {
    float lo = x[32 * g];
    hi[g] = lo;
    for (int l = 1; l < 32; ++l) {
      lo = std::min(lo, x[32 * g + l]);
      hi[g] = std::max(hi[g], x[32 * g + l]);
    }
    offset[g] = std::max(0.0f, -lo);  // ggml's mins are >= 0: x = d*sc*q - dmin*m
    max_offset = std::max(max_offset, offset[g]);
  }
  const uint16_t dmin_h = HalfAtLeast(max_offset / 63);
  const float dmin = HalfToFloat(dmin_h);
  uint8_t m[8], sc[8];
  float need[8], max_need = 0;
  for (int g = 0; g < 8; ++g) {
    m[g] = static_cast<uint8_t>(StepsAtLeast(offset[g], dmin, 63));
    need[g] = std::max(0.0f, hi[g] + dmin * m[g]) / levels;  // the step that reaches hi
    max_need = std::max(max_need, need[g]);
  }
  const uint16_t d_h = HalfAtLeast(max_need / 63);
  const float d = HalfToFloat(d_h);
  for (int g = 0; g < 8; ++g) sc[g] = static_cast<uint8_t>(StepsAtLeast(need[g], d, 63));
  uint8_t q[kSuper];
  for (int i = 0; i < kSuper; ++i) {
    const int g = i / 32;
    const float step = d * sc[g];
    q[i] = step > 0 ? static_cast<uint8_t>(Clamp((x[i] + dmin * m[g]) / step, 0, levels)) : 0;
  }
  uint8_t scales[12];
  for (int g = 0; g < 4; ++g) {
    scales[g] = static_cast<uint8_t>(sc[g] | (sc[g + 4] >> 4) << 6);
    scales[g + 4] = static_cast<uint8_t>(m[g] | (m[g + 4] >> 4) << 6);
    scales[g + 8] = static_cast<uint8_t>((sc[g + 4] & 15) | (m[g + 4] & 15) << 4);
  }
  Append<uint16_t>(out, d_h);
  Append<uint16_t>(out, dmin_h);
  out->append(reinterpret_cast<const char*>(scales), 12);
  if (levels == 31) {
    uint8_t qh[32] = {};
    for (int i = 0; i < kSuper; ++i) qh[i % 32] |= static_cast<uint8_t>((q[i] >> 4) << (i / 32));
    out->append(reinterpret_cast<const char*>(qh), 32);
  }
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      Append<uint8_t>(out, static_cast<uint8_t>((q[64 * c + l] & 15) | (q[64 * c + 32 + l] & 15) << 4));
    }
  }
}

void EncodeQ6K(const float* x, std::string* out) {
  float need[16], max_need = 0;
  for (int g = 0; g < 16; ++g) {
    float amax = 0;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
    need[g] = amax / 31.5f;  // |x| <= 31.5 steps rounds into -32..31
    max_need = std::max(max_need, need[g]);
  }
  const uint16_t d_h = HalfAtLeast(max_need / 127);
  const float d = HalfToFloat(d_h);
  int8_t sc[16];
  for (int g = 0; g < 16; ++g) sc[g] = static_cast<int8_t>(StepsAtLeast(need[g], d, 127));
  uint8_t code[kSuper];
  for (int i = 0; i < kSuper; ++i) {
    const float step = d * sc[i / 16];
    code[i] = static_cast<uint8_t>((step > 0 ? Clamp(x[i] / step, -32, 31) : 0) + 32);
  }
  uint8_t ql[128], qh[64];
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* c = code + 128 * h + l;
      ql[64 * h + l] = static_cast<uint8_t>((c[0] & 15) | (c[64] & 15) << 4);
      ql[64 * h + 32 + l] = static_cast<uint8_t>((c[32] & 15) | (c[96] & 15) << 4);
      qh[32 * h + l] = static_cast<uint8_t>(c[0] >> 4 | (c[32] >> 4) << 2 | (c[64] >> 4) << 4 | (c[96] >> 4) << 6);
    }
  }
  out->append(reinterpret_cast<const char*>(ql), 128);
  out->append(reinterpret_cast<const char*>(qh), 64);
  out->append(reinterpret_cast<const char*>(sc), 16);
  Append<uint16_t>(out, d_h);
}

}  // namespace

bool IsKQuant(TensorType type) {
  return type == TensorType::kQ4_K || type == TensorType::kQ5_K || type == TensorType::kQ6_K;
}

void UnpackKQuantBlock(const uint8_t* b, TensorType type, KQuantBlock* o) {
  if (type == TensorType::kQ6_K) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    o->d = LoadHalf(b + 208);
    o->dmin = 0;
    o->group = 16;
    for (int g = 0; g < 16; ++g) {
      o->scale[g] = static_cast<int8_t>(b[192 + g]);
      o->min[g] = 0;
    }
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = ql[64 * h + l], hi = ql[64 * h + 32 + l], bits = qh[32 * h + l];
        int8_t* q = o->q + 128 * h + l;
        q[0] = static_cast<int8_t>(((lo & 15) | (bits & 3) << 4) - 32);
        q[32] = static_cast<int8_t>(((hi & 15) | (bits >> 2 & 3) << 4) - 32);
        q[64] = static_cast<int8_t>(((lo >> 4) | (bits >> 4 & 3) << 4) - 32);
        q[96] = static_cast<int8_t>(((hi >> 4) | (bits >> 6 & 3) << 4) - 32);
      }
    }
    return;
  }
  o->d = LoadHalf(b);
  o->dmin = LoadHalf(b + 2);
  o->group = 32;
  const uint8_t* s = b + 4;
  for (int g = 0; g < 4; ++g) {
    o->scale[g] = s[g] & 63;
    o->min[g] = s[g + 4] & 63;
    o->scale[g + 4] = static_cast<int16_t>((s[g + 8] & 15) | (s[g] >> 6) << 4);
    o->min[g + 4] = static_cast<int16_t>((s[g + 8] >> 4) | (s[g + 4] >> 6) << 4);
  }
  for (int g = 8; g < 16; ++g) o->scale[g] = o->min[g] = 0;
  const bool q5 = type == TensorType::kQ5_K;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (q5 ? 48 : 16);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
      if (q5) {
        lo |= (qh[l] >> (2 * c) & 1) << 4;
        hi |= (qh[l] >> (2 * c + 1) & 1) << 4;
      }
      o->q[64 * c + l] = static_cast<int8_t>(lo);
      o->q[64 * c + 32 + l] = static_cast<int8_t>(hi);
    }
  }
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    if (mant == 0) return FromBits(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    mant &= 0x3FF;
    return FromBits(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 31) return FromBits(sign | 0x7F800000 | mant << 13);
  return FromBits(sign | (exp + 127 - 15) << 23 | mant << 13);
}

uint16_t FloatToHalf(float f) {
  const uint32_t u = Bits(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t abs = u & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);  // NaN
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to inf
  if (abs < 0x38800000) {
    // Subnormal half (or zero): value = abs_float / 2^-24, rounded to nearest even.
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exp;  // 113 - exp + 13
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias the exponent and round the mantissa to 10 bits, ties to even.
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rest = abs & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float Bf16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBf16(float f) {
  uint32_t u = Bits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

void EncodeQ8_0(const float* x, size_t n, uint8_t* out) {
  for (size_t b = 0; b < n; b += 32, out += 34) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t h = FloatToHalf(d);
    std::memcpy(out, &h, 2);
    for (int j = 0; j < 32; ++j) out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[b + j] * id)));
  }
}

absl::Status EncodeTensor(const float* x, size_t n, TensorType type, std::string* out) {
  switch (type) {
    case TensorType::kF32:
      out->append(reinterpret_cast<const char*>(x), n * 4);
      return absl::OkStatus();
    case TensorType::kF16:
      for (size_t i = 0; i < n; ++i) Append<uint16_t>(out, FloatToHalf(x[i]));
      return absl::OkStatus();
    case TensorType::kBF16:
      for (size_t i = 0; i < n; ++i) Append<uint16_t>(out, FloatToBf16(x[i]));
      return absl::OkStatus();
    case TensorType::kQ8_0: {
      if (n % 32) return absl::InvalidArgumentError("Q8_0 needs a multiple of 32 values");
      const size_t at = out->size();
      out->resize(at + n / 32 * 34);
      EncodeQ8_0(x, n, reinterpret_cast<uint8_t*>(out->data() + at));
      return absl::OkStatus();
    }
    case TensorType::kQ4_0: {
      if (n % 32) return absl::InvalidArgumentError("Q4_0 needs a multiple of 32 values");
      for (size_t b = 0; b < n; b += 32) {
        // ggml: the value of largest magnitude maps to -8.
        float amax = 0, max = 0;
        for (int j = 0; j < 32; ++j) {
          if (std::fabs(x[b + j]) > amax) {
            amax = std::fabs(x[b + j]);
            max = x[b + j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        Append<uint16_t>(out, FloatToHalf(d));
        for (int j = 0; j < 16; ++j) {
          auto q = [&](float v) {
            int i = static_cast<int>(v * id + 8.5f);
            return static_cast<uint8_t>(std::min(15, std::max(0, i)));
          };
          Append<uint8_t>(out, static_cast<uint8_t>(q(x[b + j]) | q(x[b + 16 + j]) << 4));
        }
      }
      return absl::OkStatus();
    }
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K: {
      if (n % kSuper) {
        return absl::InvalidArgumentError(
            absl::StrCat(TensorTypeName(type), " needs a multiple of 256 values, got ", n));
      }
      for (size_t b = 0; b < n; b += kSuper) {
        if (type == TensorType::kQ6_K) EncodeQ6K(x + b, out);
        else EncodeQ45K(x + b, type == TensorType::kQ4_K ? 15 : 31, out);
      }
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("encoding ", TensorTypeName(type) ? TensorTypeName(type) : "?", " is not built yet"));
  }
}

void DecodeQ8_0(const uint8_t* data, size_t n, float* y) {
  for (size_t b = 0; b < n / 32; ++b) {
    const uint8_t* block = data + b * 34;
    uint16_t h;
    std::memcpy(&h, block, 2);
    const float d = HalfToFloat(h);
    for (int j = 0; j < 32; ++j) y[b * 32 + j] = d * static_cast<int8_t>(block[2 + j]);
  }
}

absl::Status DecodeRow(const uint8_t* data, TensorType type, size_t n, float* y) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(y, data, n * 4);
      return absl::OkStatus();
    case TensorType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        y[i] = HalfToFloat(h);
      }
      return absl::OkStatus();
    case TensorType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, data + 2 * i, 2);
        y[i] = Bf16ToFloat(b);
      }
      return absl::OkStatus();
    case TensorType::kQ8_0:
      DecodeQ8_0(data, n, y);
      return absl::OkStatus();
    case TensorType::kQ4_0:
      for (size_t b = 0; b < n / 32; ++b) {
        const uint8_t* block = data + b * 18;
        uint16_t h;
        std::memcpy(&h, block, 2);
        const float d = HalfToFloat(h);
        for (int j = 0; j < 16; ++j) {
          y[b * 32 + j] = d * ((block[2 + j] & 0x0F) - 8);
          y[b * 32 + 16 + j] = d * ((block[2 + j] >> 4) - 8);
        }
      }
      return absl::OkStatus();
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K: {
      uint64_t elements = 0, block_bytes = 0;
      TensorTypeLayout(type, &elements, &block_bytes);
      KQuantBlock k;
      for (size_t b = 0; b < n / kSuper; ++b) {
        UnpackKQuantBlock(data + b * block_bytes, type, &k);
        for (int i = 0; i < kSuper; ++i) {
          // ggml's order: (d * scale) * q - (dmin * min).
          const int g = i / k.group;
          y[b * kSuper + i] = k.d * k.scale[g] * k.q[i] - k.dmin * k.min[g];
        }
      }
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("decoding ", TensorTypeName(type) ? TensorTypeName(type) : "?", " is not built yet"));
  }
}

}  // namespace gantry::gguf
