// Token sampling: greedy, or temperature with top-k, top-p and min-p filtering, from a
// seeded generator so that a request with a seed is reproducible.
//
// Order of operations (as llama.cpp's default chain applies them): top-k, then
// temperature-scaled softmax, then top-p (smallest prefix with cumulative probability
// >= p), then min-p (drop tokens below min_p x the best probability), renormalise,
// draw. temperature <= 0 means greedy (argmax; ties to the lower id).
//
// Thread-safety: a Sampler is used by one request at a time.
#ifndef GANTRY_WORKER_SERVER_SAMPLER_H_
#define GANTRY_WORKER_SERVER_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

namespace gantry::server {

struct SamplingConfig {
  float temperature = 0.0f;
  int top_k = 0;        // 0: off
  float top_p = 1.0f;   // 1: off
  float min_p = 0.0f;   // 0: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingConfig& config);
  int32_t Sample(const std::vector<float>& logits);

 private:
  SamplingConfig config_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_SAMPLER_H_
