#include "worker/server/sampler.h"

#include <algorithm>
#include <cmath>

namespace gantry::server {

Sampler::Sampler(const SamplingConfig& config, const std::vector<int32_t>& prompt)
    : config_(config),
      adjusts_(!config.logit_bias.empty() || config.repetition_penalty != 1.0f || config.presence_penalty != 0.0f ||
               config.frequency_penalty != 0.0f),
      rng_(config.seed) {
  if (config_.repetition_penalty != 1.0f) seen_.insert(prompt.begin(), prompt.end());
}

const std::vector<float>& Sampler::Adjust(const std::vector<float>& logits) {
  if (!adjusts_) return logits;
  adjusted_ = logits;
  const int n = static_cast<int>(adjusted_.size());
  for (const auto& [id, bias] : config_.logit_bias) {
    if (id >= 0 && id < n) adjusted_[id] += bias;
  }
  if (config_.repetition_penalty != 1.0f) {
    for (int32_t id : seen_) {
      if (id < 0 || id >= n) continue;
      float& v = adjusted_[id];
      v = v > 0 ? v / config_.repetition_penalty : v * config_.repetition_penalty;
    }
  }
  for (const auto& [id, count] : output_counts_) {
    if (id < 0 || id >= n) continue;
    adjusted_[id] -= config_.presence_penalty + config_.frequency_penalty * static_cast<float>(count);
  }
  return adjusted_;
}

int32_t Sampler::Sample(const std::vector<float>& raw, const std::vector<uint64_t>* allowed) {
  const int32_t token = Draw(Adjust(raw), allowed);
  if (token >= 0 && adjusts_) {
    if (config_.repetition_penalty != 1.0f) seen_.insert(token);
    ++output_counts_[token];
  }
  return token;
}

int32_t Sampler::Draw(const std::vector<float>& logits, const std::vector<uint64_t>* allowed) {
  const int n = static_cast<int>(logits.size());
  auto ok = [allowed](int i) {
    return allowed == nullptr || (static_cast<size_t>(i) / 64 < allowed->size() && ((*allowed)[i / 64] >> (i % 64)) & 1);
  };
  if (config_.temperature <= 0.0f) {
    int32_t best = -1;
    for (int i = 0; i < n; ++i) {
      if (ok(i) && (best < 0 || logits[i] > logits[best])) best = i;
    }
    return best;
  }
  candidates_.clear();
  candidates_.reserve(n);
  for (int i = 0; i < n; ++i) {
    if (ok(i)) candidates_.emplace_back(logits[i], i);
  }
  if (candidates_.empty()) return -1;
  auto by_logit = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < keep) keep = config_.top_k;
  // Only top-k and top-p need the candidates in order (best first); without them they
  // stay in id order and the draw is one pass (a sort of a 151k vocabulary per token
  // cost more than a small model's forward pass).
  const bool ordered = keep < candidates_.size() || config_.top_p < 1.0f;
  if (ordered) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
    candidates_.resize(keep);
  }
  // Softmax with temperature over the kept candidates.
  float max = candidates_[0].first;
  for (const auto& c : candidates_) max = std::max(max, c.first);
  double sum = 0;
  for (auto& c : candidates_) {
    c.first = static_cast<float>(std::exp((c.first - max) / config_.temperature));
    sum += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / sum);
  if (config_.top_p < 1.0f) {
    double cumulative = 0;
    size_t cut = candidates_.size();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cumulative += candidates_[i].first;
      if (cumulative >= config_.top_p) {
        cut = i + 1;
        break;
      }
    }
    candidates_.resize(cut);
  }
  if (config_.min_p > 0.0f) {
    // The best candidate's probability is exp(0) / sum.
    const float floor = static_cast<float>(config_.min_p / sum);
    candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                     [floor](const std::pair<float, int32_t>& c) { return c.first < floor; }),
                      candidates_.end());
  }
  double total = 0;
  for (const auto& c : candidates_) total += c.first;
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace gantry::server
