// Token sampling: greedy, or temperature with top-k, top-p and min-p filtering, from a
// seeded generator so that a request with a seed is reproducible.
//
// Order of operations (as llama.cpp's default chain applies them): the logits
// adjusted (below), top-k, then temperature-scaled softmax, then top-p (smallest
// prefix with cumulative probability >= p), then min-p (drop tokens below min_p x the
// best probability), renormalise, draw (over the kept tokens best first when top-k or
// top-p ordered them, else in id order: no sort). temperature <= 0 means greedy (argmax
// of the adjusted logits; ties to the lower id).
//
// Adjustments, with vLLM's meanings: logit_bias added to its tokens' logits; the
// repetition penalty r for every token of the prompt or of the output so far (a
// positive logit divided by r, a negative one multiplied); the presence penalty
// subtracted once and the frequency penalty times the count for every token of the
// output so far (OpenAI's). Sample() counts the token it returns as output.
//
// Thread-safety: a Sampler is used by one request at a time.
#ifndef GANTRY_WORKER_SERVER_SAMPLER_H_
#define GANTRY_WORKER_SERVER_SAMPLER_H_

#include <cstdint>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gantry::server {

struct SamplingConfig {
  float temperature = 0.0f;
  int top_k = 0;        // 0: off
  float top_p = 1.0f;   // 1: off
  float min_p = 0.0f;   // 0: off
  uint64_t seed = 0;
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;    // 0: off
  float frequency_penalty = 0.0f;   // 0: off
  // (token id, bias); ids within the vocabulary (the engine checks).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

class Sampler {
 public:
  // `prompt`: the tokens the repetition penalty counts before any output.
  explicit Sampler(const SamplingConfig& config, const std::vector<int32_t>& prompt = {});
  // `allowed` (one bit per token id, worker/constrain's TokenBits), when set, is the
  // constraint's mask: applied after the adjustments and before everything else, as if
  // every other token's logit were -infinity. -1 when it allows no token.
  int32_t Sample(const std::vector<float>& logits, const std::vector<uint64_t>* allowed = nullptr);

 private:
  // The logits with the adjustments applied (into adjusted_), or `logits` itself.
  const std::vector<float>& Adjust(const std::vector<float>& logits);
  // A token from `logits` (greedy, or filtered and drawn) among the allowed.
  int32_t Draw(const std::vector<float>& logits, const std::vector<uint64_t>* allowed);

  SamplingConfig config_;
  bool adjusts_ = false;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<float> adjusted_;
  std::unordered_set<int32_t> seen_;              // prompt and output (repetition)
  std::unordered_map<int32_t, int> output_counts_;  // output (presence, frequency)
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_SAMPLER_H_
