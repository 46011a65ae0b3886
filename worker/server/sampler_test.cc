// The sampler's adjustments (sampler.h): logit_bias, the repetition penalty over the
// prompt and the output, presence and frequency penalties over the output; and that a
// sampler without them draws what it always drew.
#include "worker/server/sampler.h"

#include <vector>

#include "gtest/gtest.h"

namespace gantry::server {
namespace {

// Token 2 leads, then 1, then 3; 0 trails.
std::vector<float> Logits() { return {-1.0f, 2.0f, 3.0f, 1.6f}; }

TEST(SamplerTest, GreedyWithoutAdjustmentsIsTheArgmax) {
  Sampler s{SamplingConfig{}};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.Sample(Logits()), 2);
}

TEST(SamplerTest, LogitBiasMovesATokenUpOrOut) {
  SamplingConfig up;
  up.logit_bias = {{0, 10.0f}};
  EXPECT_EQ(Sampler(up).Sample(Logits()), 0);
  SamplingConfig out;
  out.logit_bias = {{2, -100.0f}};
  EXPECT_EQ(Sampler(out).Sample(Logits()), 1);
  // Sampled at temperature 1, a token biased by -100 is never drawn.
  out.temperature = 1.0f;
  out.seed = 7;
  Sampler sampled(out);
  for (int i = 0; i < 200; ++i) EXPECT_NE(sampled.Sample(Logits()), 2);
}

TEST(SamplerTest, RepetitionPenaltyCountsThePromptAndTheOutput) {
  SamplingConfig c;
  c.repetition_penalty = 2.0f;
  // Token 2 is in the prompt: 3 / 2 = 1.5 falls below token 1's 2.
  Sampler s(c, {2, 2, 0});
  EXPECT_EQ(s.Sample(Logits()), 1);
  // Now 1 is output too: 2 / 2 = 1, and 3 (1.6, never seen) leads 2's 1.5.
  EXPECT_EQ(s.Sample(Logits()), 3);
  // Negative logits are multiplied: token 0 (-1 -> -2, seen in the prompt) stays last.
  SamplingConfig bias = c;
  bias.logit_bias = {{1, -10.0f}, {2, -10.0f}, {3, -10.0f}};
  EXPECT_EQ(Sampler(bias, {0}).Sample(Logits()), 0);  // -2 still beats -8 and below
}

TEST(SamplerTest, PresenceAndFrequencyPenaliseWhatTheOutputRepeats) {
  SamplingConfig presence;
  presence.presence_penalty = 1.2f;
  Sampler p(presence, {2});  // the prompt does not count
  std::vector<int32_t> drawn;
  for (int i = 0; i < 4; ++i) drawn.push_back(p.Sample(Logits()));
  // 2 (3), then 1 (2 against 2's 1.8), then 2 again (1.8 against 1's 0.8 and 3's 1.6):
  // presence costs once, however often a token repeats.
  EXPECT_EQ(drawn, (std::vector<int32_t>{2, 1, 2, 2}));

  SamplingConfig frequency;
  frequency.frequency_penalty = 0.4f;
  Sampler f(frequency);
  // Each 2 drawn costs it 0.4 more: 3, 2.6, 2.2 lead token 1's 2; at 1.8 token 1 leads.
  drawn.clear();
  for (int i = 0; i < 4; ++i) drawn.push_back(f.Sample(Logits()));
  EXPECT_EQ(drawn, (std::vector<int32_t>{2, 2, 2, 1}));

  // A negative penalty favours repetition: with frequency 1.5 alone the second draw is 1
  // (3 - 1.5 < 2); with presence -2 as well it is 2 again (3 + 2 - 1.5).
  frequency.frequency_penalty = 1.5f;
  Sampler alone(frequency);
  EXPECT_EQ(alone.Sample(Logits()), 2);
  EXPECT_EQ(alone.Sample(Logits()), 1);
  frequency.presence_penalty = -2.0f;
  Sampler favoured(frequency);
  EXPECT_EQ(favoured.Sample(Logits()), 2);
  EXPECT_EQ(favoured.Sample(Logits()), 2);
}

TEST(SamplerTest, ASeedReproducesADrawWithPenalties) {
  SamplingConfig c;
  c.temperature = 1.0f;
  c.seed = 42;
  c.frequency_penalty = 0.7f;
  c.repetition_penalty = 1.3f;
  Sampler a(c, {1, 3}), b(c, {1, 3});
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = static_cast<float>((i * 37) % 11) * 0.3f;
  for (int i = 0; i < 50; ++i) ASSERT_EQ(a.Sample(logits), b.Sample(logits)) << i;
}

}  // namespace
}  // namespace gantry::server
