#include "worker/model/session.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"

namespace gantry::model {

using kernels::MatVecRowsReference;

namespace {

void MatVec(const kernels::Matrix& w, const float* x, float* y) {
  MatVecRowsReference(w, x, y, 0, w.rows);
}

void AddBias(float* y, const std::vector<float>& b) {
  for (size_t i = 0; i < b.size(); ++i) y[i] += b[i];
}

}  // namespace

Session::Session(const Model& model, int capacity)
    : model_(model), c_(model.config()), capacity_(capacity) {
  const size_t kv_dim = static_cast<size_t>(c_.n_head_kv) * c_.head_dim;
  k_cache_.resize(static_cast<size_t>(c_.n_layer) * capacity * kv_dim);
  v_cache_.resize(k_cache_.size());
  x_.resize(c_.n_embd);
  xb_.resize(c_.n_embd);
  q_.resize(static_cast<size_t>(c_.n_head) * c_.head_dim);
  k_.resize(kv_dim);
  v_.resize(kv_dim);
  att_.resize(capacity);
  out_.resize(q_.size());
  gate_.resize(c_.n_ff);
  up_.resize(c_.n_ff);
  hidden_.resize(c_.n_ff);
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
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool last = i + 1 == tokens.size();
    Forward(tokens[i], n_past(), last ? last_logits->data() : nullptr);
    tokens_.push_back(tokens[i]);
  }
  return absl::OkStatus();
}

void Session::Truncate(int n) {
  if (n < n_past()) tokens_.resize(std::max(0, n));
}

void Session::Forward(int32_t token, int pos, float* logits) {
  const int hd = c_.head_dim;
  const int kv_dim = c_.n_head_kv * hd;
  const int group = c_.n_head / c_.n_head_kv;
  const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(hd));
  float* x = x_.data();
  kernels::DecodeMatrixRow(model_.token_embedding(), token, x);

  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& w = model_.layers()[l];
    // Attention.
    kernels::RmsNorm(xb_.data(), x, w.attn_norm.data(), c_.n_embd, c_.rms_eps);
    MatVec(w.wq, xb_.data(), q_.data());
    MatVec(w.wk, xb_.data(), k_.data());
    MatVec(w.wv, xb_.data(), v_.data());
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
    float* v_layer = v_cache_.data() + static_cast<size_t>(l) * capacity_ * kv_dim;
    std::copy(k_.begin(), k_.end(), k_layer + static_cast<size_t>(pos) * kv_dim);
    std::copy(v_.begin(), v_.end(), v_layer + static_cast<size_t>(pos) * kv_dim);
    for (int h = 0; h < c_.n_head; ++h) {
      const float* qh = q_.data() + h * hd;
      const int kvh = h / group;
      for (int t = 0; t <= pos; ++t) {
        const float* kt = k_layer + static_cast<size_t>(t) * kv_dim + kvh * hd;
        float s = 0;
        for (int i = 0; i < hd; ++i) s += qh[i] * kt[i];
        att_[t] = s * inv_sqrt_hd;
      }
      kernels::Softmax(att_.data(), pos + 1);
      float* oh = out_.data() + h * hd;
      std::fill(oh, oh + hd, 0.0f);
      for (int t = 0; t <= pos; ++t) {
        const float* vt = v_layer + static_cast<size_t>(t) * kv_dim + kvh * hd;
        const float a = att_[t];
        for (int i = 0; i < hd; ++i) oh[i] += a * vt[i];
      }
    }
    MatVec(w.wo, out_.data(), xb_.data());
    for (int i = 0; i < c_.n_embd; ++i) x[i] += xb_[i];
    // Feed-forward (SwiGLU).
    kernels::RmsNorm(xb_.data(), x, w.ffn_norm.data(), c_.n_embd, c_.rms_eps);
    MatVec(w.w_gate, xb_.data(), gate_.data());
    MatVec(w.w_up, xb_.data(), up_.data());
    kernels::SwiGlu(hidden_.data(), gate_.data(), up_.data(), c_.n_ff);
    MatVec(w.w_down, hidden_.data(), xb_.data());
    for (int i = 0; i < c_.n_embd; ++i) x[i] += xb_[i];
  }
  if (!logits) return;  // only the last prompt position needs the head
  kernels::RmsNorm(xb_.data(), x, model_.output_norm().data(), c_.n_embd, c_.rms_eps);
  MatVec(model_.output(), xb_.data(), logits);
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
