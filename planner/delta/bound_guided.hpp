// The lower bound's optimum as a starting point. The polish and the local search move a plan a
// few evictions at a time, so they keep the plan's broad choice of which blocks are away at
// the peak and by which means. The bound's linear optimum (bound/lower_bound.hpp) makes that choice
// for the whole step at once; it is no plan (it lets replays read inputs that are away, and
// packs the copy lanes without latency), but a plan that takes its choice at the op in most
// excess, repaired under the budget and then polished, can land where the plan's own search
// never goes. resnet32 at 0.2 of its peak: the optimum keeps or swaps stage-one convolution
// outputs (2.0 ms each to rebuild) that the plan rebuilds, and rebuilds stage-one batch-norm
// outputs and smaller blocks of the later stages that the plan keeps or swaps.
#pragma once

#include "bound/lower_bound.hpp"
#include "common/plan_edits.hpp"

#include <optional>

namespace delta::planner {

// `plan` must be feasible under `request`. Every block idle across `optimum.peak_op` is set to
// what the optimum does with it there, rounded (swapped or rebuilt where that share is at least
// one half, else kept over its gap): a swap copied out from its last write and fetched back in
// time for its next use, or a regeneration by its version chain. Rebuilds that read a block
// away at their point have that block back by then, and evictions of blocks idle across the
// ops left over the budget repair it (at most a tenth of the step in replays). nullopt when no
// block changes or the result cannot be repaired.
std::optional<plan::Plan> follow_bound(const PlanRequest& request, const plan::Plan& plan,
                                       const BoundExplanation& optimum);

}  // namespace delta::planner
