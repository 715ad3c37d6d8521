// Takes back discards whose copies cost more than the memory they free. The sweep and the
// offline replay discard every block the program still holds after its last read: free while
// a discard only releases bytes (DELTA_DISCARD=drop), but under the executor's default
// (PlanRequest::discard_copies) each one first copies its block to host on the D2H lane,
// where it delays the swaps behind it, and a block the program frees soon after waits for
// its copy. Keeping such a block resident costs only memory, which the budget may have.
// Discards are tried back in groups, largest first (group testing: all of them, then halves
// of what was refused), each group kept resident when the simulator finds the plan still
// feasible and not slower, within a fixed number of simulations.
#pragma once

#include "common/request.hpp"

#include <cstddef>

namespace delta::planner {

struct DiscardKeepingOptions {
  std::size_t max_simulations = 48;
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the plan with
// the discards kept resident that do not pay, and `judged` becomes its simulation. Does
// nothing unless request.discard_copies.
plan::Plan keep_discards_resident(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                  const DiscardKeepingOptions& options = {});

}  // namespace delta::planner
