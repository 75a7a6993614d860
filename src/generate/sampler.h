// Next-token choice from a logits vector, shared by `dinoml generate`, `dinoml chat` and servers.
//
// The chain is llama.cpp's default order: penalties over the last `repeat_last_n` tokens (per
// distinct token: a positive logit is divided by repeat_penalty, a negative one multiplied; then
// count x frequency_penalty + presence_penalty is subtracted, the OpenAI API's two) -> top-k -> top-p (smallest prefix of the sorted distribution whose mass reaches p) ->
// min-p (drop tokens whose probability is below min_p x the largest) -> temperature -> draw.
// top-p and min-p see the distribution at temperature 1; temperature <= 0 means greedy (argmax,
// lowest id on ties) after the penalty. Draws use a std::mt19937_64 seeded with `seed`, and
// 53-bit uniforms, so a seed gives the same tokens on every machine.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dinoml::generate {

struct SamplingParams {
  float temperature = 0.8f;   // <= 0: greedy
  int32_t top_k = 40;         // <= 0: off
  float top_p = 0.95f;        // >= 1: off
  float min_p = 0.05f;        // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;   // tokens of history the penalty looks at
  uint64_t seed = 0;
  float frequency_penalty = 0.0f;  // 0: off
  float presence_penalty = 0.0f;   // 0: off
  // Throws std::invalid_argument naming the parameter when a value is out of range.
  void validate() const;
};

// A candidate after filtering: token id and its probability (the final distribution).
struct Candidate {
  int32_t id;
  float p;
};

class Sampler {
 public:
  explicit Sampler(SamplingParams params);
  const SamplingParams& params() const { return params_; }
  // The final distribution that `sample` draws from (greedy: the argmax with p = 1), sorted by
  // probability, highest first (ties: lower id first).
  std::vector<Candidate> distribution(const float* logits, size_t n) const;
  // Chooses a token and records it in the penalty history.
  int32_t sample(const float* logits, size_t n);
  // Records tokens the model saw (the prompt) without sampling.
  void accept(int32_t id);
  void reset(uint64_t seed);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
  std::vector<float> penalized(const float* logits, size_t n) const;
};

}  // namespace dinoml::generate
