#include "tune/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dinoml::tune {

Measurement summarize(std::vector<double> samples) {
  Measurement m;
  if (samples.empty()) return m;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  m.reps = static_cast<int>(n);
  m.median_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  const double half = 0.98 * std::sqrt(static_cast<double>(n));  // 1.96 · √n / 2
  const double lo = std::floor(n / 2.0 - half), hi = std::ceil(1.0 + n / 2.0 + half);  // 1-based ranks
  m.ci_low_s = samples[static_cast<size_t>(std::clamp(lo, 1.0, static_cast<double>(n))) - 1];
  m.ci_high_s = samples[static_cast<size_t>(std::clamp(hi, 1.0, static_cast<double>(n))) - 1];
  return m;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  else if (s < 1.0) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

Decision choose(const std::vector<std::string>& names, const std::vector<Measurement>& m, size_t default_index) {
  if (default_index >= m.size()) default_index = 0;
  Decision d;
  if (m.empty()) return d;
  size_t best = 0;
  for (size_t i = 1; i < m.size(); ++i)
    if (m[i].median_s < m[best].median_s) best = i;
  size_t win = best;
  for (size_t i = 0; i < best; ++i)
    if (m[i].median_s <= m[best].ci_high_s) {
      win = i;
      break;
    }
  d.winner = win;
  const auto& w = m[win];
  if (win == best) {
    d.reason = "fastest: median " + format_seconds(w.median_s) + " (95% CI " + format_seconds(w.ci_low_s) + " .. " +
               format_seconds(w.ci_high_s) + ")";
    if (win != default_index && w.median_s > 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "; %.2fx faster than the default %s", m[default_index].median_s / w.median_s,
                    names[default_index].c_str());
      d.reason += buf;
    }
  } else {
    d.reason = "within noise of the fastest " + names[best] + " (median " + format_seconds(m[best].median_s) +
               ", 95% CI up to " + format_seconds(m[best].ci_high_s) + "): median " + format_seconds(w.median_s) +
               ", lower candidate index preferred";
  }
  return d;
}

}  // namespace dinoml::tune
