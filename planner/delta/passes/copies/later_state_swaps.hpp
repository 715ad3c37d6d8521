// A state swapped in place of one needed sooner. The sweep frees the last ops before an
// optimizer by swapping blocks of its state from the step's start, and ranks them by cost per
// byte, not by when the optimizer first reads them: BERT-Large at 0.7 of its peak swapped the
// word embeddings' `exp_avg` (125 MB, first read by `_foreach_lerp_`) where the budget is short
// only at the op before the optimizer, and the copy back, issued there, stalled the step 2 ms.
// The same bytes of `exp_avg_sq`, first read one update later, leave the copy two more ops to
// hide behind. For the ops that stall longest, each state swap due there is tried as a swap of
// a state block first read later (the smallest at least as large), over the same ops, and kept
// where the simulator finds the step faster.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>

namespace delta::planner {

struct LaterStateOptions {
  std::size_t max_ops = 4;    // the longest stalls tried
  std::size_t max_tries = 8;  // simulations in all
};

// All the state swaps of one size at once: the blocks they move become the state blocks of
// that size read last (resident or among them), the swap fetched back last on the block read
// last, each over the same ops. A block at a time (swap_later_state) moves a copy back one
// update later; on BERT-Large at 0.7 the ten copies back after the embedding's gradient sum
// were due at the third sweep's eighth to twelfth launches, and on its last five they wait
// 0.71 ms instead of 0.80. Kept where the simulator finds the step faster, size by size.
plan::Plan reorder_state_swaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged);

// `judged` is the plan's verdict under `request` and stays so.
plan::Plan swap_later_state(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                            const LaterStateOptions& options);

}  // namespace delta::planner
