#include "router/metrics.h"

#include "absl/strings/str_cat.h"

namespace gantry::router {

constexpr std::array<double, 14> Histogram::kBounds;

void Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(seconds > 0 ? seconds * 1e6 : 0),
                        std::memory_order_relaxed);
}

void Histogram::AppendText(absl::string_view name, absl::string_view help, std::string* out) const {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= kBounds.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    absl::StrAppend(out, name, "_bucket{le=\"",
                    i < kBounds.size() ? absl::StrCat(kBounds[i]) : std::string("+Inf"), "\"} ",
                    cumulative, "\n");
  }
  absl::StrAppend(out, name, "_sum ", sum_micros_.load(std::memory_order_relaxed) / 1e6, "\n",
                  name, "_count ", count_.load(std::memory_order_relaxed), "\n");
}

void RouterMetrics::RequestFinished(double seconds, uint32_t prompt_tokens,
                                    uint32_t completion_tokens) {
  duration_.Observe(seconds);
  prompt_tokens_.fetch_add(prompt_tokens, std::memory_order_relaxed);
  completion_tokens_.fetch_add(completion_tokens, std::memory_order_relaxed);
}

void RouterMetrics::FirstOutput(double seconds) { first_output_.Observe(seconds); }

void RouterMetrics::Error(const std::string& code) {
  std::lock_guard<std::mutex> lock(mu_);
  ++errors_[code];
}

uint64_t RouterMetrics::Errors(const std::string& code) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = errors_.find(code);
  return it == errors_.end() ? 0 : it->second;
}

std::string RouterMetrics::Text() const {
  std::string out;
  duration_.AppendText("gantry_router_request_duration_seconds",
                       "From arrival to the terminal event, requests that reached a worker.", &out);
  first_output_.AppendText("gantry_router_first_output_seconds",
                           "From arrival to the first text, reasoning or tool call.", &out);
  absl::StrAppend(&out,
                  "# HELP gantry_router_prompt_tokens_total Prompt tokens of finished requests.\n"
                  "# TYPE gantry_router_prompt_tokens_total counter\n"
                  "gantry_router_prompt_tokens_total ", prompt_tokens_.load(), "\n",
                  "# HELP gantry_router_completion_tokens_total Completion tokens of finished requests.\n"
                  "# TYPE gantry_router_completion_tokens_total counter\n"
                  "gantry_router_completion_tokens_total ", completion_tokens_.load(), "\n",
                  "# HELP gantry_router_errors_total Errors sent to clients, by stable code.\n"
                  "# TYPE gantry_router_errors_total counter\n");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [code, n] : errors_) {
    absl::StrAppend(&out, "gantry_router_errors_total{code=\"", code, "\"} ", n, "\n");
  }
  return out;
}

}  // namespace gantry::router
