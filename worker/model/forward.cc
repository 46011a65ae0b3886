#include "worker/model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "formats/gguf/quant.h"
#include "worker/kernels/kernels.h"

namespace gantry::model {

using kernels::ParallelFor;

namespace {

// Query rows per attention tile: their scores over all visible positions stay in L2.
constexpr int kAttentionBlock = 64;
// Weight rows per unit of work when a product is split across threads (a multiple of
// the kernels' row tile).
constexpr int kRowGrain = 16;
// Query rows up to which attention over a Q8_0 cache weights each position's values
// into the output directly (q8_0_axpy); more rows decode a block's values once and
// take a product with them.
constexpr int kQ8AxpyRows = 8;

void AddBias(float* y, const std::vector<float>& b) {
  for (size_t i = 0; i < b.size(); ++i) y[i] += b[i];
}

kernels::Matrix CacheMatrix(const uint8_t* data, gguf::TensorType type, int rows, int cols, size_t row_bytes) {
  kernels::Matrix m;
  m.data = data;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = row_bytes;
  return m;
}

void StoreHalf(uint8_t* at, uint16_t h) { std::memcpy(at, &h, sizeof(h)); }
float LoadHalf(const uint8_t* at) {
  uint16_t h;
  std::memcpy(&h, at, sizeof(h));
  return gguf::HalfToFloat(h);
}

float RoundToHalf(float v) { return gguf::HalfToFloat(gguf::FloatToHalf(v)); }

// x (n a multiple of 32) as the kernels quantize activations for Q8_0 weights, decoded.
void RoundToQ8(const float* x, int n, float* out) {
  std::vector<kernels::Q8Block> blocks(n / 32);
  kernels::PortableKernels().prepare(gguf::TensorType::kQ8_0, x, n, 1, n, reinterpret_cast<uint8_t*>(blocks.data()));
  for (int i = 0; i < n; ++i) out[i] = blocks[i / 32].d * blocks[i / 32].q[i % 32];
}

}  // namespace

// One output of Project(): y (rows of ldy floats) = x W^T.
struct Forward::Projection {
  const kernels::Matrix* w;
  float* y;
  size_t ldy;
};

Forward::Forward(const Model& model, const Options& options)
    : model_(model), c_(model.config()), options_(options) {}

void Forward::Eval(std::vector<Item>* items) {
  std::vector<Item*> valid;
  int rows = 0, max_capacity = 0;
  for (Item& item : *items) {
    item.status = absl::OkStatus();
    if (item.n <= 0 || item.cache == nullptr) {
      item.status = absl::InvalidArgumentError("no tokens to evaluate");
      continue;
    }
    if (item.cache->n_past() + static_cast<int64_t>(item.n) > item.cache->capacity()) {
      item.status = ReasonError("context_length_exceeded",
                                absl::StrCat(item.cache->n_past(), " + ", item.n,
                                             " tokens exceed the capacity of ", item.cache->capacity()));
      continue;
    }
    for (int i = 0; i < item.n && item.status.ok(); ++i) {
      const int32_t t = item.tokens[i];
      if (t < 0 || t >= c_.n_vocab) {
        item.status = ReasonError("invalid_request", absl::StrCat("token id ", t, " is outside the vocabulary"));
      }
    }
    if (!item.status.ok()) continue;
    if (item.cache->Grow(item.n) < item.n) {
      item.status = ReasonError("server_busy", "no free KV cache blocks for this sequence's tokens");
      continue;
    }
    // One cache, one item: two items of a pass writing one cache would race.
    for (const Item* other : valid) {
      if (other->cache == item.cache) item.status = absl::InvalidArgumentError("a cache appears twice in one pass");
    }
    if (!item.status.ok()) continue;
    if (item.logits) item.logits->assign(c_.n_vocab, 0.0f);
    valid.push_back(&item);
    rows += item.n;
    max_capacity = std::max(max_capacity, item.cache->capacity());
  }
  if (valid.empty()) return;
  if (options_.reference) {
    Reserve(1, max_capacity);
    for (Item* item : valid) {
      for (int i = 0; i < item->n; ++i) {
        float* logits = i + 1 == item->n && item->logits ? item->logits->data() : nullptr;
        ForwardReference(item->cache, item->tokens[i], item->cache->n_past(), logits);
        item->cache->Commit(item->tokens + i, 1);
      }
    }
    return;
  }
  Reserve(rows, max_capacity);
  rows_.clear();
  for (Item* item : valid) {
    for (int i = 0; i < item->n; ++i) rows_.push_back({item->cache, item->cache->n_past() + i});
  }
  ForwardRows(valid);
  for (Item* item : valid) item->cache->Commit(item->tokens, item->n);
}

void Forward::Reserve(int n, int max_capacity) {
  const int threads = options_.pool ? options_.pool->size() : 1;
  if (max_capacity > capacity_reserved_) {
    capacity_reserved_ = max_capacity;
    scores_.resize(static_cast<size_t>(threads) * kAttentionBlock * capacity_reserved_);
    rounded_.resize(scores_.size() + static_cast<size_t>(threads) * kAttentionBlock * c_.head_dim);
    partial_.resize(static_cast<size_t>(threads) * kAttentionBlock * c_.head_dim);
    decoded_.resize(static_cast<size_t>(threads) * (KvPool::kBlockTokens + 1) * c_.head_dim);
  }
  if (n <= rows_reserved_) return;
  rows_reserved_ = n;
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
}

void Forward::Project(const float* x, int cols, int n, std::initializer_list<Projection> outputs) {
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

void Forward::ForwardRows(const std::vector<Item*>& items) {
  const int n = static_cast<int>(rows_.size());
  const int E = c_.n_embd, hd = c_.head_dim, ff = c_.n_ff;
  const int q_dim = c_.n_head * hd, kv_dim = c_.n_head_kv * hd;
  float* x = x_.data();   // [n][E], the residual stream
  float* xb = xb_.data();  // [n][E]
  {
    int r = 0;
    for (const Item* item : items) {
      for (int i = 0; i < item->n; ++i, ++r) kernels::DecodeMatrixRow(model_.token_embedding(), item->tokens[i], x + r * E);
    }
  }
  for (int r = 0; r < n; ++r) kernels::RopeAngles(rope_cs_.data() + r * hd, hd, rows_[r].pos, c_.rope_base);

  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& w = model_.layers()[l];
    // Attention: q, k, v of every row; k and v into the row's cache; attention; output.
    ParallelFor(options_.pool, n, 1, [&](int begin, int end, int) {
      for (int t = begin; t < end; ++t) {
        kernels::RmsNorm(xb + t * E, x + t * E, w.attn_norm.data(), E, c_.rms_eps);
      }
    });
    Project(xb, E, n, {{&w.wq, q_.data(), size_t(q_dim)}, {&w.wk, k_.data(), size_t(kv_dim)},
                       {&w.wv, v_.data(), size_t(kv_dim)}});
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
        StoreKv(rows_[t].cache, l, rows_[t].pos, k, v);
      }
    });
    Attention(l, items);
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
  // The head, for the last row of each item that wants logits, as one product.
  std::vector<const Item*> wanted;
  int r = 0;
  for (const Item* item : items) {
    r += item->n;
    if (!item->logits) continue;
    const int m = static_cast<int>(wanted.size());
    kernels::RmsNorm(xb + static_cast<size_t>(m) * E, x + static_cast<size_t>(r - 1) * E,
                     model_.output_norm().data(), E, c_.rms_eps);
    wanted.push_back(item);
  }
  if (wanted.empty()) return;
  const size_t V = c_.n_vocab;
  if (logits_.size() < wanted.size() * V) logits_.resize(wanted.size() * V);
  Project(xb, E, static_cast<int>(wanted.size()), {{&model_.output(), logits_.data(), V}});
  for (size_t m = 0; m < wanted.size(); ++m) {
    std::copy(logits_.begin() + m * V, logits_.begin() + (m + 1) * V, wanted[m]->logits->begin());
  }
}

// Per item, head and block of its query rows: scores = q K^T over the positions the
// block's last row sees, scaled and softmaxed per row up to its own position (the
// causal mask: later positions get weight 0), then out = scores V, as a product with
// V's transposed rows. The tasks of all items are one parallel region.
//
// As ggml meets each cache type: F16 keys and values meet queries and scores rounded to
// F16; Q8_0 keys meet queries quantized to Q8_0 blocks (an integer dot per 32), Q8_0
// values meet the scores as they are: weighted into the output position by position
// for a few rows, else decoded to F32 one KV block at a time (transposed into the
// thread's scratch) for a product.
void Forward::Attention(int layer, const std::vector<Item*>& items) {
  constexpr int B = KvPool::kBlockTokens;
  const kernels::KernelSet& k = kernels::Kernels();
  const int hd = c_.head_dim;
  const int q_dim = c_.n_head * hd;
  const int group = c_.n_head / c_.n_head_kv;
  const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(hd));
  // first_task[i]: the first task of item i; first_row[i]: its first row in the pass.
  std::vector<int> first_task(items.size() + 1, 0), first_row(items.size(), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    const int blocks = (items[i]->n + kAttentionBlock - 1) / kAttentionBlock;
    first_task[i + 1] = first_task[i] + c_.n_head * blocks;
    if (i > 0) first_row[i] = first_row[i - 1] + items[i - 1]->n;
  }
  const size_t ld = capacity_reserved_;  // row stride of a thread's scores
  const size_t rounded_stride = static_cast<size_t>(kAttentionBlock) * (ld + hd);
  ParallelFor(options_.pool, first_task.back(), 1, [&](int begin, int end, int thread) {
    float* scores = scores_.data() + static_cast<size_t>(thread) * kAttentionBlock * ld;
    float* rounded_q = rounded_.data() + static_cast<size_t>(thread) * rounded_stride;
    float* rounded_scores = rounded_q + static_cast<size_t>(kAttentionBlock) * hd;
    float* partial = partial_.data() + static_cast<size_t>(thread) * kAttentionBlock * hd;
    float* decoded = decoded_.data() + static_cast<size_t>(thread) * (B + 1) * hd;
    size_t i = 0;
    for (int task = begin; task < end; ++task) {
      while (task >= first_task[i + 1]) ++i;
      const Item& item = *items[i];
      const KvCache& cache = *item.cache;
      const bool f16 = cache.pool().type() == KvType::kF16;
      const size_t row_bytes = cache.pool().row_bytes();
      const int pos0 = cache.n_past();
      const int blocks = (item.n + kAttentionBlock - 1) / kAttentionBlock;
      const int local = task - first_task[i];
      const int h = local / blocks, kvh = h / group;
      const size_t head_at = kvh * KvPool::HeadBytes(hd, cache.pool().type());
      const int t0 = (local % blocks) * kAttentionBlock, t1 = std::min(item.n, t0 + kAttentionBlock);
      const int rows = t1 - t0;
      const int visible = pos0 + t1;
      const size_t row0 = static_cast<size_t>(first_row[i] + t0);
      const float* q = q_.data() + row0 * q_dim + h * hd;
      // Scores, one KV block of keys at a time.
      const gguf::TensorType key_type = f16 ? gguf::TensorType::kF16 : gguf::TensorType::kQ8_0;
      k.prepare(key_type, q, q_dim, rows, hd, reinterpret_cast<uint8_t*>(rounded_q));
      for (int p0 = 0; p0 < visible; p0 += B) {
        const int span = std::min(B, visible - p0);
        const kernels::Matrix keys = CacheMatrix(cache.keys_at(layer, p0) + head_at, key_type, span, hd, row_bytes);
        k.matmul(keys, reinterpret_cast<const uint8_t*>(rounded_q), kernels::PreparedRowBytes(key_type, hd), rows,
                 scores + p0, ld, 0, span);
      }
      for (int t = t0; t < t1; ++t) {
        float* row = scores + static_cast<size_t>(t - t0) * ld;
        const int seen = pos0 + t + 1;
        for (int p = 0; p < seen; ++p) row[p] *= inv_sqrt_hd;
        k.softmax(row, seen);
        std::fill(row + seen, row + visible, 0.0f);
      }
      // Output: the first block's product, then each next block's added.
      const float* weights = scores;
      size_t weights_ld = ld;
      if (f16) {
        k.prepare(gguf::TensorType::kF16, scores, ld, rows, visible, reinterpret_cast<uint8_t*>(rounded_scores));
        weights = rounded_scores;
        weights_ld = visible;
      }
      float* out = att_out_.data() + row0 * q_dim + h * hd;
      if (!f16 && rows <= kQ8AxpyRows) {
        // Few rows (decoding): each position's values weighted straight into the output.
        for (int r = 0; r < rows; ++r) {
          float* o = out + static_cast<size_t>(r) * q_dim;
          const float* w = scores + static_cast<size_t>(r) * ld;
          std::fill(o, o + hd, 0.0f);
          for (int p = 0; p < pos0 + t0 + r + 1; ++p) k.q8_0_axpy(cache.values_at(layer, p) + head_at, hd, w[p], o);
        }
        continue;
      }
      for (int p0 = 0; p0 < visible; p0 += B) {
        const int span = std::min(B, visible - p0);
        kernels::Matrix values;
        if (f16) {
          values = CacheMatrix(cache.values_at(layer, p0) + static_cast<size_t>(kvh) * hd * B * sizeof(uint16_t),
                               gguf::TensorType::kF16, hd, span, B * sizeof(uint16_t));
        } else {
          // Decoded position by position, transposed: row d holds dimension d of each.
          float* row = decoded + static_cast<size_t>(B) * hd;
          for (int p = 0; p < span; ++p) {
            gguf::DecodeQ8_0(cache.values_at(layer, p0 + p) + head_at, hd, row);
            for (int d = 0; d < hd; ++d) decoded[static_cast<size_t>(d) * B + p] = row[d];
          }
          values = CacheMatrix(reinterpret_cast<const uint8_t*>(decoded), gguf::TensorType::kF32, hd, span,
                               B * sizeof(float));
        }
        const uint8_t* x = reinterpret_cast<const uint8_t*>(weights + p0);
        if (p0 == 0) {
          k.matmul(values, x, weights_ld * sizeof(float), rows, out, q_dim, 0, hd);
          continue;
        }
        k.matmul(values, x, weights_ld * sizeof(float), rows, partial, hd, 0, hd);
        for (int r = 0; r < rows; ++r) {
          float* o = out + static_cast<size_t>(r) * q_dim;
          const float* add = partial + static_cast<size_t>(r) * hd;
          for (int d = 0; d < hd; ++d) o[d] += add[d];
        }
      }
    }
  });
}

void Forward::StoreKv(KvCache* cache, int layer, int pos, const float* k, const float* v) {
  constexpr int B = KvPool::kBlockTokens;
  const size_t kv_dim = cache->pool().kv_dim();
  uint8_t* keys = cache->keys_at(layer, pos);
  uint8_t* values = cache->values_at(layer, pos);
  if (cache->pool().type() == KvType::kQ8_0) {
    gguf::EncodeQ8_0(k, kv_dim, keys);
    gguf::EncodeQ8_0(v, kv_dim, values);
    return;
  }
  for (size_t i = 0; i < kv_dim; ++i) StoreHalf(keys + i * sizeof(uint16_t), gguf::FloatToHalf(k[i]));
  for (size_t i = 0; i < kv_dim; ++i) StoreHalf(values + i * B * sizeof(uint16_t), gguf::FloatToHalf(v[i]));
}

void Forward::ForwardReference(KvCache* cache, int32_t token, int pos, float* logits) {
  using kernels::MatVecRowsReference;
  auto matvec = [](const kernels::Matrix& w, const float* x, float* y) { MatVecRowsReference(w, x, y, 0, w.rows); };
  const int hd = c_.head_dim;
  const int group = c_.n_head / c_.n_head_kv;
  constexpr int B = KvPool::kBlockTokens;
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
    StoreKv(cache, l, pos, k_.data(), v_.data());
    // Each cache type meets queries and scores as the fast path does (and ggml): F16
    // keys and values queries and scores rounded to F16; Q8_0 keys queries quantized to
    // Q8_0, Q8_0 values scores as they are.
    const bool f16 = cache->pool().type() == KvType::kF16;
    const size_t head_bytes = KvPool::HeadBytes(hd, cache->pool().type());
    std::vector<float> qr(hd), kv(hd);
    for (int h = 0; h < c_.n_head; ++h) {
      const float* qh = q_.data() + h * hd;
      const int kvh = h / group;
      if (f16) {
        for (int i = 0; i < hd; ++i) qr[i] = RoundToHalf(qh[i]);
      } else {
        RoundToQ8(qh, hd, qr.data());
      }
      for (int t = 0; t <= pos; ++t) {
        const uint8_t* kt = cache->keys_at(l, t) + kvh * head_bytes;
        if (f16) {
          for (int i = 0; i < hd; ++i) kv[i] = LoadHalf(kt + i * sizeof(uint16_t));
        } else {
          gguf::DecodeQ8_0(kt, hd, kv.data());
        }
        float s = 0;
        for (int i = 0; i < hd; ++i) s += qr[i] * kv[i];
        att[t] = s * inv_sqrt_hd;
      }
      kernels::Softmax(att.data(), pos + 1);
      float* oh = att_out_.data() + h * hd;
      std::fill(oh, oh + hd, 0.0f);
      for (int t = 0; t <= pos; ++t) {
        if (f16) {
          const float a = RoundToHalf(att[t]);
          const uint8_t* vt = cache->values_at(l, t) + static_cast<size_t>(kvh) * hd * B * sizeof(uint16_t);
          for (int i = 0; i < hd; ++i) oh[i] += a * LoadHalf(vt + static_cast<size_t>(i) * B * sizeof(uint16_t));
          continue;
        }
        gguf::DecodeQ8_0(cache->values_at(l, t) + kvh * head_bytes, hd, kv.data());
        for (int i = 0; i < hd; ++i) oh[i] += att[t] * kv[i];
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

}  // namespace gantry::model
