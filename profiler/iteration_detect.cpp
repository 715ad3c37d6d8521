#include "profiler/iteration_detect.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace delta::profiler {
namespace {

// z[i]: length of the longest common prefix of s and s[i..] (z[0] = n).
std::vector<std::size_t> z_function(const std::vector<std::uint32_t>& s) {
  const std::size_t n = s.size();
  std::vector<std::size_t> z(n, 0);
  if (n == 0) return z;
  z[0] = n;
  std::size_t left = 0, right = 0;  // [left, right): rightmost segment known to match a prefix
  for (std::size_t i = 1; i < n; ++i) {
    if (i < right) z[i] = std::min(right - i, z[i - left]);
    while (i + z[i] < n && s[z[i]] == s[i + z[i]]) ++z[i];
    if (i + z[i] > right) {
      left = i;
      right = i + z[i];
    }
  }
  return z;
}

// The rotation of the cycle whose cut points have the fewest live bytes on average.
std::size_t best_rotation(std::size_t region_start, std::size_t period, std::size_t n,
                          std::span<const std::uint64_t> live_bytes) {
  if (live_bytes.empty()) return 0;
  std::size_t best = 0;
  long double best_mean = std::numeric_limits<long double>::max();
  for (std::size_t offset = 0; offset < period; ++offset) {
    long double sum = 0;
    std::size_t count = 0;
    // Only cut points that begin a complete period count, so each rotation is judged on
    // the same number of samples (give or take one).
    for (std::size_t at = region_start + offset; at + period <= n; at += period) {
      sum += live_bytes[at];
      ++count;
    }
    if (count == 0) continue;
    const long double mean = sum / count;
    if (mean < best_mean) {
      best_mean = mean;
      best = offset;
    }
  }
  return best;
}

}  // namespace

std::optional<DetectedIterations> detect_iterations(std::span<const std::uint32_t> names,
                                                    std::span<const std::uint64_t> live_bytes,
                                                    const DetectionOptions& options, std::string* refused) {
  if (!live_bytes.empty() && live_bytes.size() != names.size()) {
    throw std::invalid_argument("detect_iterations: live_bytes must be empty or as long as names");
  }
  const std::size_t n = names.size();
  const std::size_t repeats_needed = std::max<std::size_t>(options.min_repeats, 1);
  if (n < 2 * repeats_needed) return std::nullopt;

  std::vector<std::uint32_t> reversed(names.rbegin(), names.rend());
  const std::vector<std::size_t> z = z_function(reversed);

  // The longest periodic tail wins; among equal tails the shortest period (multiples of the
  // true period cover the same tail).
  std::size_t best_period = 0, best_length = 0;
  for (std::size_t p = 1; p * repeats_needed <= n; ++p) {
    const std::size_t length = std::min(n, p + z[p]);
    if (length / p < repeats_needed) continue;
    if (length > best_length) {
      best_length = length;
      best_period = p;
    }
  }
  if (best_period == 0) return std::nullopt;
  if (static_cast<double>(best_length) < options.min_coverage * static_cast<double>(n)) return std::nullopt;

  const std::size_t region_start = n - best_length;
  const std::size_t offset = best_rotation(region_start, best_period, n, live_bytes);
  DetectedIterations out;
  out.period = best_period;
  out.first_boundary = region_start + offset;
  out.complete = (n - out.first_boundary) / best_period;
  if (out.complete < repeats_needed) {
    // The chosen rotation lost a period at the edges; the unrotated cut keeps them all.
    out.first_boundary = region_start;
    out.complete = best_length / best_period;
  }
  // The first step may leave state behind (optimizer moments, gradients), so the cuts are
  // compared from the second on.
  if (!live_bytes.empty() && out.complete >= 2) {
    const std::size_t second = out.first_boundary + out.period;
    std::uint64_t low = live_bytes[second], high = low;
    for (std::size_t k = 2; k <= out.complete && out.first_boundary + k * out.period < n; ++k) {
      const std::uint64_t at = live_bytes[out.first_boundary + k * out.period];
      low = std::min(low, at);
      high = std::max(high, at);
    }
    const auto allowed = std::max<std::uint64_t>(
        options.boundary_slack_bytes, static_cast<std::uint64_t>(options.boundary_tolerance * static_cast<double>(low)));
    if (high - low > allowed) {
      if (refused)
        *refused = "the launches repeat every " + std::to_string(out.period) + " kernels (" +
                   std::to_string(out.complete) + " times), but the live bytes at the cut points range from " +
                   std::to_string(low) + " to " + std::to_string(high) + " bytes (more than " +
                   std::to_string(allowed) + " apart): memory grows from step to step, which a training step does not";
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace delta::profiler
