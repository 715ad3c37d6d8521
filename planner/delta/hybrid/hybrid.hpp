// Activations rebuilt, state swapped. Where a step's state (parameters, an optimizer's
// averages) and its gradients do not fit the budget together, a plan of regenerations alone
// fails in the optimizer, and the sweep makes the room before it by swapping parameters out
// through the forward pass, where their copies share the link with everything else
// (docs/planner-results.md, GPT2-XL bfloat16 at 0.6). This family splits the work as the lower
// bound's optimum does: the offline rematerialisation rebuilds activations over the ops where
// regeneration can fit, given more room than the budget there (what the link can have copied
// out since the step began), and a sweep then swaps over that plan whatever still does not
// fit: that room's worth of state, and the state and gradients through the optimizer.
#pragma once

#include "common/plan_edits.hpp"
#include "delta/remat/remat.hpp"
#include "delta/sweep/sweep.hpp"

#include <cstdint>

namespace delta::planner {

struct HybridOptions {
  RematOptions remat;
  // The room the rematerialisation gets beyond the budget at an op: what the link can have
  // copied out by then from the step's start, after a head start of this many bytes (the step
  // waits for those).
  std::uint64_t head_start_bytes = 0;
  StateSwaps state_swaps = StateSwaps::any;
  double exposed_swap_factor = 1.0;
};

// The offline rematerialisation with the room HybridOptions gives, as far as it fits (from the
// first op it cannot fit on, unlimited), then the sweep's swaps over it at the budget.
plan::Plan plan_rebuilds_then_swaps(const PlanRequest& request, const HybridOptions& options);

}  // namespace delta::planner
