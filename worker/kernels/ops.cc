#include "worker/kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "formats/gguf/quant.h"

namespace gantry::kernels {

void RmsNorm(float* out, const float* x, const float* w, int n, float eps) {
  float ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void DecodeMatrixRow(const Matrix& w, int r, float* out) {
  // The type was validated when the model was loaded; DecodeRow cannot fail here.
  (void)gguf::DecodeRow(w.data + static_cast<size_t>(r) * w.row_bytes, w.type, w.cols, out);
}

namespace {

// Activations in a weight type's "dot type", as ggml computes them: F16 and BF16
// weights meet activations rounded to the same type; Q8_0 and Q4_0 weights meet
// activations quantized to Q8_0 blocks (d = amax / 127, q = round(x / d)) and an
// integer dot product per block.
struct Q8Activations {
  std::vector<float> d;
  std::vector<int8_t> q;
};

Q8Activations QuantizeQ8(const float* x, int n) {
  Q8Activations a;
  a.d.resize(n / 32);
  a.q.resize(n);
  for (int b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    a.d[b] = gguf::HalfToFloat(gguf::FloatToHalf(d));
    for (int j = 0; j < 32; ++j) a.q[b * 32 + j] = static_cast<int8_t>(std::roundf(ClampToQ8(x[b * 32 + j] * id)));
  }
  return a;
}

}  // namespace

void QuantizeQ8K(const float* x, int n, Q8KBlock* out) {
  for (int b = 0; b < n / 256; ++b, x += 256) {
    Q8KBlock& o = out[b];
    float amax = 0, max = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0) {
      std::memset(&o, 0, sizeof(o));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      o.q[j] = static_cast<int8_t>(std::nearbyint(ClampToQ8(iscale * x[j])));
    }
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += o.q[16 * k + j];
      o.bsums[k] = static_cast<int16_t>(sum);
    }
    o.d = 1.0f / iscale;
  }
}

float DotKQuantQ8K(gguf::TensorType type, const uint8_t* row, const Q8KBlock* x, int n) {
  uint64_t block_values = 0, block_bytes = 0;
  gguf::TensorTypeLayout(type, &block_values, &block_bytes);
  gguf::KQuantBlock w;
  float sum = 0;
  for (int b = 0; b < n / 256; ++b) {
    gguf::UnpackKQuantBlock(row + b * block_bytes, type, &w);
    int32_t dots = 0, mins = 0;  // at most 16 * 128 * 16 * 32 * 127: no overflow
    for (int g = 0; g < 256 / w.group; ++g) {
      int32_t dot = 0, xsum = 0;
      for (int j = g * w.group; j < (g + 1) * w.group; ++j) {
        dot += w.q[j] * x[b].q[j];
        xsum += x[b].q[j];
      }
      dots += w.scale[g] * dot;
      mins += w.min[g] * xsum;
    }
    sum += w.d * x[b].d * static_cast<float>(dots) - w.dmin * x[b].d * static_cast<float>(mins);
  }
  return sum;
}

void MatVecRowsReference(const Matrix& w, const float* x, float* y, int row_begin, int row_end) {
  using gguf::TensorType;
  if (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) {
    const Q8Activations a = QuantizeQ8(x, w.cols);
    const int blocks = w.cols / 32;
    for (int r = row_begin; r < row_end; ++r) {
      const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
      float sum = 0;
      for (int b = 0; b < blocks; ++b) {
        int isum = 0;
        uint16_t h;
        if (w.type == TensorType::kQ8_0) {
          const uint8_t* block = row + b * 34;
          std::memcpy(&h, block, 2);
          for (int j = 0; j < 32; ++j) isum += static_cast<int8_t>(block[2 + j]) * a.q[b * 32 + j];
        } else {
          const uint8_t* block = row + b * 18;
          std::memcpy(&h, block, 2);
          for (int j = 0; j < 16; ++j) {
            isum += ((block[2 + j] & 0x0F) - 8) * a.q[b * 32 + j];
            isum += ((block[2 + j] >> 4) - 8) * a.q[b * 32 + 16 + j];
          }
        }
        sum += gguf::HalfToFloat(h) * a.d[b] * static_cast<float>(isum);
      }
      y[r] = sum;
    }
    return;
  }
  if (gguf::IsKQuant(w.type)) {
    std::vector<Q8KBlock> a(w.cols / 256);
    QuantizeQ8K(x, w.cols, a.data());
    for (int r = row_begin; r < row_end; ++r) {
      y[r] = DotKQuantQ8K(w.type, w.data + static_cast<size_t>(r) * w.row_bytes, a.data(), w.cols);
    }
    return;
  }
  std::vector<float> xt(x, x + w.cols);
  if (w.type == TensorType::kF16) {
    for (float& v : xt) v = gguf::HalfToFloat(gguf::FloatToHalf(v));
  } else if (w.type == TensorType::kBF16) {
    for (float& v : xt) v = gguf::Bf16ToFloat(gguf::FloatToBf16(v));
  }
  std::vector<float> row(w.cols);
  for (int r = row_begin; r < row_end; ++r) {
    DecodeMatrixRow(w, r, row.data());
    float sum = 0;
    for (int c = 0; c < w.cols; ++c) sum += row[c] * xt[c];
    y[r] = sum;
  }
}

void Rope(float* v, int head_dim, int pos, float base, RopeMode mode) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float theta = pos * std::pow(base, -2.0f * i / head_dim);
    const float c = std::cos(theta), s = std::sin(theta);
    const int a = mode == RopeMode::kNorm ? 2 * i : i;
    const int b = mode == RopeMode::kNorm ? 2 * i + 1 : i + half;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

void RopeAngles(float* cs, int head_dim, int pos, float base) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float theta = pos * std::pow(base, -2.0f * i / head_dim);  // as in Rope
    cs[2 * i] = std::cos(theta);
    cs[2 * i + 1] = std::sin(theta);
  }
}

void RopeApply(float* v, int head_dim, const float* cs, RopeMode mode) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const int a = mode == RopeMode::kNorm ? 2 * i : i;
    const int b = mode == RopeMode::kNorm ? 2 * i + 1 : i + half;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

void Softmax(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = std::max(max, x[i]);
  float sum = 0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

void SwiGlu(float* out, const float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace gantry::kernels
