#include "router/refusal_sampler.h"

namespace gantry::router {

namespace {
constexpr int64_t kMinuteUs = 60'000'000;
}  // namespace

std::optional<RefusalSampler::Counted> RefusalSampler::Close(const std::string& principal,
                                                             const Window& window,
                                                             int64_t until_us) {
  if (window.counted.empty()) return std::nullopt;
  Counted out;
  out.principal = principal;
  out.since_us = window.since_us;
  out.until_us = until_us;
  out.reasons = window.counted;
  for (const auto& [reason, n] : window.counted) out.total += n;
  return out;
}

bool RefusalSampler::Take(const std::string& principal, const std::string& reason,
                          int64_t now_us, std::optional<Counted>* ended) {
  std::lock_guard<std::mutex> lock(mu_);
  Window& window = windows_[principal];
  if (window.since_us == 0 || now_us - window.since_us >= kMinuteUs) {
    *ended = Close(principal, window, now_us);
    window = Window();
    window.since_us = now_us;
  }
  if (window.recorded < per_minute_) {
    ++window.recorded;
    return true;
  }
  ++window.counted[reason];
  return false;
}

std::vector<RefusalSampler::Counted> RefusalSampler::TakeAll(int64_t now_us) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Counted> out;
  for (auto& [principal, window] : windows_) {
    if (auto counted = Close(principal, window, now_us)) out.push_back(std::move(*counted));
    window.counted.clear();
  }
  return out;
}

}  // namespace gantry::router
