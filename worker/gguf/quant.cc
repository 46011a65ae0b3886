#include "worker/gguf/quant.h"

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

}  // namespace

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
      for (size_t b = 0; b < n; b += 32) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        Append<uint16_t>(out, FloatToHalf(d));
        for (int j = 0; j < 32; ++j) Append<int8_t>(out, static_cast<int8_t>(std::roundf(x[b + j] * id)));
      }
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
    default:
      return absl::UnimplementedError(
          absl::StrCat("encoding ", TensorTypeName(type) ? TensorTypeName(type) : "?", " is not built yet"));
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
      for (size_t b = 0; b < n / 32; ++b) {
        const uint8_t* block = data + b * 34;
        uint16_t h;
        std::memcpy(&h, block, 2);
        const float d = HalfToFloat(h);
        for (int j = 0; j < 32; ++j) y[b * 32 + j] = d * static_cast<int8_t>(block[2 + j]);
      }
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
    default:
      return absl::UnimplementedError(
          absl::StrCat("decoding ", TensorTypeName(type) ? TensorTypeName(type) : "?", " is not built yet"));
  }
}

}  // namespace gantry::gguf
