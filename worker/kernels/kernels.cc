#include "worker/kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "formats/gguf/quant.h"
#include "worker/kernels/ops_avx2.h"

namespace gantry::kernels {

using gguf::TensorType;

namespace {

bool IsQuantized(TensorType t) { return t == TensorType::kQ8_0 || t == TensorType::kQ4_0; }

// As MatVecRowsReference's QuantizeQ8, one block.
void QuantizeBlock(const float* x, Q8Block* out) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  out->d = gguf::HalfToFloat(gguf::FloatToHalf(d));
  for (int j = 0; j < 32; ++j) out->q[j] = static_cast<int8_t>(std::roundf(ClampToQ8(x[j] * id)));
}

void PreparePortable(TensorType t, const float* x, size_t x_stride, int n_rows, int n, uint8_t* out) {
  const size_t out_stride = PreparedRowBytes(t, n);
  for (int i = 0; i < n_rows; ++i) {
    const float* xi = x + i * x_stride;
    uint8_t* oi = out + i * out_stride;
    if (IsQuantized(t)) {
      Q8Block* blocks = reinterpret_cast<Q8Block*>(oi);
      for (int b = 0; b < n / 32; ++b) QuantizeBlock(xi + 32 * b, &blocks[b]);
      continue;
    }
    if (gguf::IsKQuant(t)) {
      QuantizeQ8K(xi, n, reinterpret_cast<Q8KBlock*>(oi));
      continue;
    }
    float* o = reinterpret_cast<float*>(oi);
    for (int c = 0; c < n; ++c) {
      if (t == TensorType::kF16) o[c] = gguf::HalfToFloat(gguf::FloatToHalf(xi[c]));
      else if (t == TensorType::kBF16) o[c] = gguf::Bf16ToFloat(gguf::FloatToBf16(xi[c]));
      else o[c] = xi[c];
    }
  }
}

float Scale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return gguf::HalfToFloat(h);
}

// One weight row against one prepared row, in the reference's order.
float DotPortable(const Matrix& w, const uint8_t* row, const uint8_t* x, float* decoded) {
  if (gguf::IsKQuant(w.type)) return DotKQuantQ8K(w.type, row, reinterpret_cast<const Q8KBlock*>(x), w.cols);
  if (IsQuantized(w.type)) {
    const Q8Block* a = reinterpret_cast<const Q8Block*>(x);
    float sum = 0;
    for (int b = 0; b < w.cols / 32; ++b) {
      int isum = 0;
      if (w.type == TensorType::kQ8_0) {
        const uint8_t* block = row + b * 34;
        for (int j = 0; j < 32; ++j) isum += static_cast<int8_t>(block[2 + j]) * a[b].q[j];
        sum += Scale(block) * a[b].d * static_cast<float>(isum);
      } else {
        const uint8_t* block = row + b * 18;
        for (int j = 0; j < 16; ++j) {
          isum += ((block[2 + j] & 0x0F) - 8) * a[b].q[j];
          isum += ((block[2 + j] >> 4) - 8) * a[b].q[16 + j];
        }
        sum += Scale(block) * a[b].d * static_cast<float>(isum);
      }
    }
    return sum;
  }
  const float* xf = reinterpret_cast<const float*>(x);
  const float* wf = reinterpret_cast<const float*>(row);
  if (w.type != TensorType::kF32) {
    (void)gguf::DecodeRow(row, w.type, w.cols, decoded);
    wf = decoded;
  }
  float sum = 0;
  for (int c = 0; c < w.cols; ++c) sum += wf[c] * xf[c];
  return sum;
}

void MatMulPortable(const Matrix& w, const uint8_t* x, size_t x_stride, int n_tok, float* y, size_t ldy,
                    int row_begin, int row_end) {
  // Decoding scratch for F16 / BF16 rows; the stack keeps this allocation-free for the
  // widths we serve, the heap covers the rest.
  float stack[4096];
  float* decoded = stack;
  float* heap = nullptr;
  if ((w.type == TensorType::kF16 || w.type == TensorType::kBF16) && w.cols > 4096) {
    decoded = heap = static_cast<float*>(std::malloc(sizeof(float) * w.cols));
  }
  for (int r = row_begin; r < row_end; ++r) {
    const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
    for (int t = 0; t < n_tok; ++t) y[t * ldy + r] = DotPortable(w, row, x + t * x_stride, decoded);
  }
  std::free(heap);
}

void Q8AxpyPortable(const uint8_t* blocks, int n, float a, float* y) {
  for (int b = 0; b < n / 32; ++b, blocks += 34, y += 32) {
    uint16_t h;
    std::memcpy(&h, blocks, sizeof(h));
    const float ad = a * gguf::HalfToFloat(h);
    const int8_t* q = reinterpret_cast<const int8_t*>(blocks + 2);
    for (int j = 0; j < 32; ++j) y[j] += ad * q[j];
  }
}

const KernelSet kPortable = {"portable", &PreparePortable, &MatMulPortable, nullptr, nullptr,
                             &Softmax,   &SwiGlu,          &Q8AxpyPortable};

}  // namespace

size_t PreparedRowBytes(TensorType t, int n) {
  if (IsQuantized(t)) return sizeof(Q8Block) * static_cast<size_t>(n / 32);
  if (gguf::IsKQuant(t)) return sizeof(Q8KBlock) * static_cast<size_t>(n / 256);
  return sizeof(float) * static_cast<size_t>(n);
}

const KernelSet& PortableKernels() { return kPortable; }

const KernelSet* Avx2Kernels() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("f16c");
  if (supported) return &internal::Avx2KernelSetUnchecked();
#endif
  return nullptr;
}

const KernelSet* Avx512VnniKernels() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool supported = Avx2Kernels() && __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vnni");
  if (supported) return &internal::Avx512VnniKernelSetUnchecked();
#endif
  return nullptr;
}

const KernelSet& Kernels() {
  static const KernelSet* chosen = [] {
    const char* force = std::getenv("GANTRY_KERNELS");
    if (force && std::strcmp(force, "portable") == 0) return &kPortable;
    if (force && std::strcmp(force, "avx2") == 0 && Avx2Kernels()) return Avx2Kernels();
    if (const KernelSet* vnni = Avx512VnniKernels()) return vnni;
    const KernelSet* avx2 = Avx2Kernels();
    return avx2 ? avx2 : &kPortable;
  }();
  return *chosen;
}

}  // namespace gantry::kernels
