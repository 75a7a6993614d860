#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace dinoml::generate {

void SamplingParams::validate() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (!std::isfinite(temperature)) bad("temperature must be a finite number (<= 0 for greedy)");
  if (!(top_p > 0.0f) || !std::isfinite(top_p)) bad("top_p must be in (0, 1] (1 = off)");
  if (!(min_p >= 0.0f) || min_p > 1.0f) bad("min_p must be in [0, 1] (0 = off)");
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty)) bad("repeat_penalty must be > 0 (1 = off)");
  if (repeat_last_n < 0) bad("repeat_last_n must be >= 0");
  if (!std::isfinite(frequency_penalty) || !std::isfinite(presence_penalty))
    bad("frequency_penalty and presence_penalty must be finite numbers (0 = off)");
}

Sampler::Sampler(SamplingParams params) : params_(params), rng_(params.seed) { params_.validate(); }

void Sampler::reset(uint64_t seed) {
  params_.seed = seed;
  rng_.seed(seed);
  history_.clear();
}

void Sampler::accept(int32_t id) {
  if (params_.repeat_last_n == 0) return;
  history_.push_back(id);
  while (history_.size() > static_cast<size_t>(params_.repeat_last_n)) history_.pop_front();
}

std::vector<float> Sampler::penalized(const float* logits, size_t n) const {
  std::vector<float> l(logits, logits + n);
  if (params_.repeat_penalty == 1.0f && params_.frequency_penalty == 0.0f && params_.presence_penalty == 0.0f) return l;
  std::map<int32_t, int> counts;
  for (int32_t id : history_) ++counts[id];
  for (const auto& [id, count] : counts) {
    if (id < 0 || static_cast<size_t>(id) >= n) continue;
    float& x = l[id];
    x = x > 0 ? x / params_.repeat_penalty : x * params_.repeat_penalty;
    x -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
  return l;
}

std::vector<Candidate> Sampler::distribution(const float* logits, size_t n) const {
  if (n == 0) throw std::invalid_argument("sampling needs a non-empty logits vector");
  const std::vector<float> l = penalized(logits, n);
  for (float x : l)
    if (std::isnan(x)) throw std::invalid_argument("the logits hold NaN: the model output is broken");
  if (params_.temperature <= 0.0f) {
    const int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    return {{best, 1.0f}};
  }
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i);
  auto by_logit = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  size_t keep = n;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), by_logit);
    ids.resize(keep);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  // Probabilities at temperature 1 over what is left, for top-p and min-p.
  auto softmax = [&](double inv_t) {
    std::vector<double> p(ids.size());
    const double mx = l[ids[0]];
    double sum = 0;
    // Shifted before scaling: 0 for the best, <= 0 (or -inf) for the rest, whatever the temperature.
    for (size_t i = 0; i < ids.size(); ++i) {
      const double d = static_cast<double>(l[ids[i]]) - mx;
      sum += p[i] = d == 0 ? 1.0 : std::exp(d * inv_t);
    }
    for (double& x : p) x /= sum;
    return p;
  };
  if (params_.top_p < 1.0f) {
    const auto p = softmax(1.0);
    double cum = 0;
    size_t k = 0;
    while (k < ids.size()) {
      cum += p[k++];
      if (cum >= params_.top_p) break;
    }
    ids.resize(std::max<size_t>(k, 1));
  }
  if (params_.min_p > 0.0f && ids.size() > 1) {
    const auto p = softmax(1.0);
    const double floor = p[0] * params_.min_p;
    size_t k = 1;
    while (k < ids.size() && p[k] >= floor) ++k;
    ids.resize(k);
  }
  const auto p = softmax(1.0 / static_cast<double>(params_.temperature));
  std::vector<Candidate> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out[i] = {ids[i], static_cast<float>(p[i])};
  return out;
}

int32_t Sampler::sample(const float* logits, size_t n) {
  const auto cands = distribution(logits, n);
  int32_t id = cands[0].id;
  if (cands.size() > 1) {
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    double cum = 0;
    id = cands.back().id;  // rounding leaves the total a hair below 1
    for (const Candidate& c : cands) {
      cum += c.p;
      if (u < cum) {
        id = c.id;
        break;
      }
    }
  }
  accept(id);
  return id;
}

}  // namespace dinoml::generate
