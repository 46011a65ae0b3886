// The router's request metrics for /metrics (Prometheus text exposition format 0.0.4):
// request duration and time-to-first-output histograms, prompt and completion token
// counters, and errors by their stable code. Counters of the HTTP server and the broker
// are rendered by the gateway next to these.
//
// Thread-safety: every method may be called from any thread.
#ifndef GANTRY_ROUTER_METRICS_H_
#define GANTRY_ROUTER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"

namespace gantry::router {

// A cumulative histogram with fixed upper bounds in seconds.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,  5,     10,   30,  60,  300};
  void Observe(double seconds);
  // "# HELP", "# TYPE" and the _bucket / _sum / _count lines of `name`.
  void AppendText(absl::string_view name, absl::string_view help, std::string* out) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // last: +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

class RouterMetrics {
 public:
  // A request that reached a worker ended (any outcome).
  void RequestFinished(double seconds, uint32_t prompt_tokens, uint32_t completion_tokens);
  // The first text, reasoning or tool call of a request reached the router.
  void FirstOutput(double seconds);
  // An error reached a client, by its stable code ("queue_full", "worker_lost", ...).
  void Error(const std::string& code);
  // How many errors of `code` reached clients so far.
  uint64_t Errors(const std::string& code) const;

  std::string Text() const;

 private:
  Histogram duration_;
  Histogram first_output_;
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> completion_tokens_{0};
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> errors_;  // guarded by mu_
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_METRICS_H_
