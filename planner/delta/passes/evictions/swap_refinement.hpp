// Turns regenerations of a plan into swaps where the copies can hide behind compute. The
// regeneration-only plans of the offline replay pay compute for every block they drop, even
// where the copy engines sit idle; each regeneration (most compute first) is tried as a swap
// evicted right after the block's last use and prefetched as late as its transfer allows,
// and kept when the simulator finds the plan still feasible and faster.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>

namespace delta::planner {

struct SwapRefinementOptions {
  std::size_t max_tries = 256;  // regenerations tried, most compute first (each one simulation)
  // A new swap's copy starts at the block's last write (copy_after), and the lane is booked
  // from there; else from its release.
  bool early_copies = true;
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the improved
// plan and its simulation.
plan::Plan refine_with_swaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                             const SwapRefinementOptions& options = {});

}  // namespace delta::planner
