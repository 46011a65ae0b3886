#include "worker/model/session.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "worker/kernels/kernels.h"

namespace gantry::model {

using kernels::ParallelFor;

namespace {

// Query rows per attention tile: their scores over all visible positions stay in L2.
constexpr int kAttentionBlock = 64;
// Weight rows per unit of work when a product is split across threads (a multiple of
// the kernels' row tile).
constexpr int kRowGrain = 16;

void AddBias(float* y, const std::vector<float>& b) {
  for (size_t i = 0; i < b.size(); ++i) y[i] += b[i];
}

kernels::Matrix FloatMatrix(const float* data, int rows, int cols, size_t row_floats) {
  kernels::Matrix m;
  m.data = reinterpret_cast<const uint8_t*>(data);
  m.type = gguf::TensorType::kF32;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = row_floats * sizeof(float);
  return m;
}

}  // namespace

// One output of Project(): y (rows of ldy floats) = x W^T.
struct Session::Projection {
  const kernels::Matrix* w;
  float* y;
  size_t ldy;
};

Session::Session(const Model& model, int capacity, const Options& options)
    : model_(model), c_(model.config()), capacity_(capacity), options_(options) {
  const size_t kv_dim = static_cast<size_t>(c_.n_head_kv) * c_.head_dim;
  k_cache_.resize(static_cast<size_t>(c_.n_layer) * capacity * kv_dim);
  vt_cache_.resize(k_cache_.size());
}

absl::Status Session::Eval(const std::vector<int32_t>& tokens, std::vector<float>* last_logits) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to evaluate");
  if (n_past() + static_cast<int64_t>(tokens.size()) > capacity_) {
    return ReasonError("context_length_exceeded",
                       absl::StrCat(n_past(), " + ", tokens.size(), " tokens exceed the capacity of ",
                                    capacity_));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= c_.n_vocab) {
      return ReasonError("invalid_request", absl::StrCat("token id ", t, " is outside the vocabulary"));
    }
  }
  last_logits->assign(c_.n_vocab, 0.0f);
  const int n = static_cast<int>(tokens.size());
  const int step = options_.reference ? 1 : kMaxChunk;
  for (int i = 0; i < n; i += step) {
    const int m = std::min(step, n - i);
    float* logits = i + m == n ? last_logits->data() : nullptr;
    if (options_.reference) {
      ForwardReference(tokens[i], n_past(), logits);
    } else {
      ForwardChunk(tokens.data() + i, m, n_past(), logits);
    }
    tokens_.insert(tokens_.end(), tokens.begin() + i, tokens.begin() + i + m);
  }
  return absl::OkStatus();
}

void Session::Truncate(int n) {
  if (n < n_past()) tokens_.resize(std::max(0, n));
}

void Session::ReserveChunk(int n) {
  if (n <= chunk_reserved_) return;
  chunk_reserved_ = n;
  const size_t q_dim = static_cast<size_t>(c_.n_head) * c_.head_dim;
  const size_t kv_dim = static_cast<size_t>(c_.n_head_kv) * c_.head_dim;
  x_.resize(n * static_cast<size_t>(c_.n_embd));
  xb_.resize(x_.size());
  q_.resize(n * q_dim);
  att_out_.resize(q_.size());
  k_.resize(n * kv_dim);
  v_.resize(k_.size());
  gate_.resize(n * static_cast<size_t>(c_.n_ff));
  up_.resize(gate_.size());
  rope_cs_.resize(n * static_cast<size_t>(c_.head_dim));
  const int widest = std::max({c_.n_embd, c_.n_ff, static_cast<int>(q_dim)});
  size_t prepared_row = 0;
  for (gguf::TensorType t : {gguf::TensorType::kF32, gguf::TensorType::kQ8_0, gguf::TensorType::kQ4_K}) {
    prepared_row = std::max(prepared_row, kernels::PreparedRowBytes(t, widest));
  }
  prepared_.resize(n * prepared_row);
  const int threads = options_.pool ? options_.pool->size() : 1;
  scores_.resize(static_cast<size_t>(threads) * kAttentionBlock * capacity_);
}

void Session::Project(const float* x, int cols, int n, std::initializer_list<Projection> outputs) {
  const kernels::KernelSet& k = kernels::Kernels();
  const Projection* first = outputs.begin();
  while (first != outputs.end()) {
    // Outputs of one weight type share one preparation of x.
    const gguf::TensorType type = first->w->type;
    const Projection* last = first;
    int rows = 0;
    while (last != outputs.end() && last->w->type == type) rows += (last++)->w->rows;
    const size_t stride = kernels::PreparedRowBytes(type, cols);
    ParallelFor(options_.pool, n, 1, [&](int begin, int end, int) {
      k.prepare(type, x + static_cast<size_t>(begin) * cols, cols, end - begin, cols,
                prepared_.data() + begin * stride);
    });
    // The rows of all outputs as one range, split evenly across threads.
    ParallelFor(options_.pool, rows, kRowGrain, [&](int begin, int end, int) {
      int offset = 0;
      for (const Projection* p = first; p != last; ++p) {
        const int lo = std::max(begin, offset) - offset;
        const int hi = std::min(end, offset + p->w->rows) - offset;
        if (lo < hi) k.matmul(*p->w, prepared_.data(), stride, n, p->y, p->ldy, lo, hi);
        offset += p->w->rows;
      }
    });
    first = last;
  }
}

void Session::ForwardChunk(const int32_t* tokens, int n, int pos0, float* logits) {
  ReserveChunk(n);
  const int E = c_.n_embd, hd = c_.head_dim, ff = c_.n_ff;
  const int q_dim = c_.n_head * hd, kv_dim = c_.n_head_kv * hd;
  float* x = x_.data();   // [n][E], the residual stream
  float* xb = xb_.data();  // [n][E]
  for (int t = 0; t < n; ++t) kernels::DecodeMatrixRow(model_.token_embedding(), tokens[t], x + t * E);
  for (int t = 0; t < n; ++t) kernels::RopeAngles(rope_cs_.data() + t * hd, hd, pos0 + t, c_.rope_base);

  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& w = model_.layers()[l];
    // Attention: q, k, v of every token; k and v into the cache; attention; output.
    ParallelFor(options_.pool, n, 1, [&](int begin, int end, int) {
      for (int t = begin; t < end; ++t) {
        kernels::RmsNorm(xb + t * E, x + t * E, w.attn_norm.data(), E, c_.rms_eps);
      }
    });
    Project(xb, E, n, {{&w.wq, q_.data(), size_t(q_dim)}, {&w.wk, k_.data(), size_t(kv_dim)},
                       {&w.wv, v_.data(), size_t(kv_dim)}});
    float* k_layer = k_cache_.data() + static_cast<size_t>(l) * capacity_ * kv_dim;
    float* vt_layer = vt_cache_.data() + static_cast<size_t>(l) * capacity_ * kv_dim;
    ParallelFor(options_.pool, n, 1, [&](int begin, int end, int) {
      for (int t = begin; t < end; ++t) {
        float* q = q_.data() + t * q_dim;
        float* k = k_.data() + t * kv_dim;
        float* v = v_.data() + t * kv_dim;
        const float* cs = rope_cs_.data() + t * hd;
        AddBias(q, w.bq);
        AddBias(k, w.bk);
        AddBias(v, w.bv);
        for (int h = 0; h < c_.n_head; ++h) {
          if (c_.qk_norm) kernels::RmsNorm(q + h * hd, q + h * hd, w.q_norm.data(), hd, c_.rms_eps);
          kernels::RopeApply(q + h * hd, hd, cs, c_.rope_mode);
        }
        for (int h = 0; h < c_.n_head_kv; ++h) {
          if (c_.qk_norm) kernels::RmsNorm(k + h * hd, k + h * hd, w.k_norm.data(), hd, c_.rms_eps);
          kernels::RopeApply(k + h * hd, hd, cs, c_.rope_mode);
        }
        const size_t pos = pos0 + t;
        std::copy(k, k + kv_dim, k_layer + pos * kv_dim);
        for (int i = 0; i < kv_dim; ++i) vt_layer[static_cast<size_t>(i) * capacity_ + pos] = v[i];
      }
    });
    Attention(l, n, pos0);
    Project(att_out_.data(), q_dim, n, {{&w.wo, xb, size_t(E)}});
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x[i] += xb[i];

    // Feed-forward (SwiGLU).
    ParallelFor(options_.pool, n, 1, [&](int begin, int end, int) {
      for (int t = begin; t < end; ++t) {
        kernels::RmsNorm(xb + t * E, x + t * E, w.ffn_norm.data(), E, c_.rms_eps);
      }
    });
    Project(xb, E, n, {{&w.w_gate, gate_.data(), size_t(ff)}, {&w.w_up, up_.data(), size_t(ff)}});
    ParallelFor(options_.pool, n * ff, 256, [&](int begin, int end, int) {
      kernels::Kernels().swiglu(gate_.data() + begin, gate_.data() + begin, up_.data() + begin, end - begin);
    });
    Project(gate_.data(), ff, n, {{&w.w_down, xb, size_t(E)}});
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x[i] += xb[i];
  }
  if (!logits) return;  // only the last prompt position needs the head
  const float* last = x + static_cast<size_t>(n - 1) * E;
  kernels::RmsNorm(xb, last, model_.output_norm().data(), E, c_.rms_eps);
  Project(xb, E, 1, {{&model_.output(), logits, size_t(c_.n_vocab)}});
}

// Per (head, block of query rows): scores = q K^T over the positions the block's last
// row sees, scaled and softmaxed per row up to its own position (the causal mask:
// later positions get weight 0), then out = scores V, as a product with V's transposed
// rows.
void Session::Attention(int layer, int n, int pos0) {
  const kernels::KernelSet& k = kernels::Kernels();
  const int hd = c_.head_dim;
  const int q_dim = c_.n_head * hd, kv_dim = c_.n_head_kv * hd;
  const int group = c_.n_head / c_.n_head_kv;
  const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* k_layer = k_cache_.data() + static_cast<size_t>(layer) * capacity_ * kv_dim;
  const float* vt_layer = vt_cache_.data() + static_cast<size_t>(layer) * capacity_ * kv_dim;
  const int blocks = (n + kAttentionBlock - 1) / kAttentionBlock;
  ParallelFor(options_.pool, c_.n_head * blocks, 1, [&](int begin, int end, int thread) {
    float* scores = scores_.data() + static_cast<size_t>(thread) * kAttentionBlock * capacity_;
    for (int task = begin; task < end; ++task) {
      const int h = task / blocks, kvh = h / group;
      const int t0 = (task % blocks) * kAttentionBlock, t1 = std::min(n, t0 + kAttentionBlock);
      const int visible = pos0 + t1;
      const kernels::Matrix keys = FloatMatrix(k_layer + kvh * hd, visible, hd, kv_dim);
      const float* q = q_.data() + static_cast<size_t>(t0) * q_dim + h * hd;
      k.matmul(keys, reinterpret_cast<const uint8_t*>(q), q_dim * sizeof(float), t1 - t0, scores, capacity_, 0,
               visible);
      for (int t = t0; t < t1; ++t) {
        float* row = scores + static_cast<size_t>(t - t0) * capacity_;
        const int seen = pos0 + t + 1;
        for (int p = 0; p < seen; ++p) row[p] *= inv_sqrt_hd;
        k.softmax(row, seen);
        std::fill(row + seen, row + visible, 0.0f);
      }
      const kernels::Matrix values =
          FloatMatrix(vt_layer + static_cast<size_t>(kvh) * hd * capacity_, hd, visible, capacity_);
      k.matmul(values, reinterpret_cast<const uint8_t*>(scores), capacity_ * sizeof(float), t1 - t0,
               att_out_.data() + static_cast<size_t>(t0) * q_dim + h * hd, q_dim, 0, hd);
    }
  });
}

void Session::ForwardReference(int32_t token, int pos, float* logits) {
  using kernels::MatVecRowsReference;
  ReserveChunk(1);
  auto matvec = [](const kernels::Matrix& w, const float* x, float* y) { MatVecRowsReference(w, x, y, 0, w.rows); };
  const int hd = c_.head_dim;
  const int kv_dim = c_.n_head_kv * hd;
  const int group = c_.n_head / c_.n_head_kv;
  const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(hd));
  float* x = x_.data();
  float* xb = xb_.data();
  std::vector<float> att(pos + 1);
  kernels::DecodeMatrixRow(model_.token_embedding(), token, x);

  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& w = model_.layers()[l];
    // Attention.
    kernels::RmsNorm(xb, x, w.attn_norm.data(), c_.n_embd, c_.rms_eps);
    matvec(w.wq, xb, q_.data());
    matvec(w.wk, xb, k_.data());
    matvec(w.wv, xb, v_.data());
    AddBias(q_.data(), w.bq);
    AddBias(k_.data(), w.bk);
    AddBias(v_.data(), w.bv);
    for (int h = 0; h < c_.n_head; ++h) {
      float* qh = q_.data() + h * hd;
      if (c_.qk_norm) kernels::RmsNorm(qh, qh, w.q_norm.data(), hd, c_.rms_eps);
      kernels::Rope(qh, hd, pos, c_.rope_base, c_.rope_mode);
    }
    for (int h = 0; h < c_.n_head_kv; ++h) {
      float* kh = k_.data() + h * hd;
      if (c_.qk_norm) kernels::RmsNorm(kh, kh, w.k_norm.data(), hd, c_.rms_eps);
      kernels::Rope(kh, hd, pos, c_.rope_base, c_.rope_mode);
    }
    float* k_layer = k_cache_.data() + static_cast<size_t>(l) * capacity_ * kv_dim;
    float* vt_layer = vt_cache_.data() + static_cast<size_t>(l) * capacity_ * kv_dim;
    std::copy(k_.begin(), k_.begin() + kv_dim, k_layer + static_cast<size_t>(pos) * kv_dim);
    for (int i = 0; i < kv_dim; ++i) vt_layer[static_cast<size_t>(i) * capacity_ + pos] = v_[i];
    for (int h = 0; h < c_.n_head; ++h) {
      const float* qh = q_.data() + h * hd;
      const int kvh = h / group;
      for (int t = 0; t <= pos; ++t) {
        const float* kt = k_layer + static_cast<size_t>(t) * kv_dim + kvh * hd;
        float s = 0;
        for (int i = 0; i < hd; ++i) s += qh[i] * kt[i];
        att[t] = s * inv_sqrt_hd;
      }
      kernels::Softmax(att.data(), pos + 1);
      float* oh = att_out_.data() + h * hd;
      std::fill(oh, oh + hd, 0.0f);
      for (int t = 0; t <= pos; ++t) {
        const float a = att[t];
        for (int i = 0; i < hd; ++i) oh[i] += a * vt_layer[static_cast<size_t>(kvh * hd + i) * capacity_ + t];
      }
    }
    matvec(w.wo, att_out_.data(), xb);
    for (int i = 0; i < c_.n_embd; ++i) x[i] += xb[i];
    // Feed-forward (SwiGLU).
    kernels::RmsNorm(xb, x, w.ffn_norm.data(), c_.n_embd, c_.rms_eps);
    matvec(w.w_gate, xb, gate_.data());
    matvec(w.w_up, xb, up_.data());
    kernels::SwiGlu(gate_.data(), gate_.data(), up_.data(), c_.n_ff);
    matvec(w.w_down, gate_.data(), xb);
    for (int i = 0; i < c_.n_embd; ++i) x[i] += xb[i];
  }
  if (!logits) return;  // only the last prompt position needs the head
  kernels::RmsNorm(xb, x, model_.output_norm().data(), c_.n_embd, c_.rms_eps);
  matvec(model_.output(), xb, logits);
}

std::vector<std::pair<int32_t, float>> TopLogprobs(const std::vector<float>& logits, int k) {
  double max = logits[0];
  for (float v : logits) max = std::max<double>(max, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(v - max);
  const double lse = max + std::log(sum);
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::min<int>(k, static_cast<int>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<std::pair<int32_t, float>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - lse));
  return out;
}

}  // namespace gantry::model
