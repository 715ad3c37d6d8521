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

// Under executor placement a moved block sits on pages of its own, and a block only discarded
// is moved too: while it is resident, the rest of its last page is lost to every other block
// (GPT2-XL in float32, batch 2, sequence 512, at 0.8 of its peak: 0.33 GB at the step's
// fullest op, 1.2% of the budget, in 6.6 and 26 MB blocks each a page short). A discard frees
// its block only between its release and the program's own free, a few ops; where the plan's
// room under `request.budget_bytes` (in live bytes) holds the block over those ops anyway, it
// is kept resident, the largest page waste first, each taking the room it uses from the ops
// it spans. The result is judged: where it is slower or not feasible (an op's timing moved),
// the plan is returned as it was. `request` judges in live bytes (through_allocator false).
plan::Plan keep_discards_with_room(const PlanRequest& request, plan::Plan plan);

}  // namespace delta::planner
