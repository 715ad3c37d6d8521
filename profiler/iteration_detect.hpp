// Finding training iterations in a launch sequence when the program marks none.
//
// A training loop issues the same kernels in the same order every step, after a first step
// or two that differ (library initialisation, autotuning, lazily built state). So the tail of
// the sequence of launch names is periodic, and its period is the iteration length. The
// period is found with the Z-function of the reversed sequence (linear time): for a shift p,
// the tail of length p + Z[p] repeats with period p.
//
// Where inside the cycle an iteration starts is not given by the names alone (any rotation
// repeats as well). Between two training steps the activations and gradients of the previous
// step are gone, so the iteration boundary is where the fewest bytes are live; the rotation
// with the lowest live bytes at its cut points is chosen (the first one on ties, or the start
// of the periodic region when no memory figures are given).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace delta::profiler {

struct DetectedIterations {
  std::size_t period = 0;          // ops per iteration
  std::size_t first_boundary = 0;  // index of the first op of the first iteration; ops before it are warm-up
  std::size_t complete = 0;        // complete iterations from first_boundary on
};

struct DetectionOptions {
  std::size_t min_repeats = 2;     // complete periods the tail must hold
  double min_coverage = 0.5;       // fraction of all ops the periodic tail must cover
  // A training step ends where it began: from the second cut on (the first step may leave
  // optimizer state behind), the live bytes at the cut points stay within
  // max(boundary_slack_bytes, boundary_tolerance x the lowest of them) of each other. Loops
  // that only look periodic by name (a model's parameters uploaded layer by layer) grow. The
  // cut at the very end has no reading, so two periods with nothing after them leave one cut
  // to compare, and the check passes them: growth shows from the third cut on.
  double boundary_tolerance = 0.01;
  std::uint64_t boundary_slack_bytes = 1 << 20;
};

// `names`: one id per op (equal ids = same kernel). `live_bytes`: bytes live just before each op,
// the same length as `names`, or empty. nullopt when no period satisfies the options; then, when
// the names repeat but the live bytes grow, `refused` (if given) says so in a sentence, since a
// job that leaks memory every step would otherwise never be seen to iterate.
std::optional<DetectedIterations> detect_iterations(std::span<const std::uint32_t> names,
                                                    std::span<const std::uint64_t> live_bytes,
                                                    const DetectionOptions& options = {},
                                                    std::string* refused = nullptr);

}  // namespace delta::profiler
