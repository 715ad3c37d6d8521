// Replays shared between rebuilds. Two rebuilds (regenerations or revivals) that replay the
// same op at different points run it twice. Brought forward to the earlier point, the later
// one is rebuilt by the same replay (the simulator runs each op once per point) and held in
// between, which costs memory where the plan may have room to spare. densenet121's max
// pooling writes the first dense block's input and its indices: one is needed by the
// concatenations rebuilt late in the backward pass, the other by the pooling's gradient.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>

namespace delta::planner {

struct ReplaySharingOptions {
  std::size_t max_tries = 256;  // moves tried (each one simulation)
};

// `plan` must be feasible under `request` (its simulation is `judged`). Each later rebuild
// that shares a replayed op with an earlier one (the most shared compute first) is tried at
// the earlier one's point; the move is kept when the simulator finds the plan feasible and
// faster. Returns the plan; `judged` becomes its simulation.
plan::Plan share_replays(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                         const ReplaySharingOptions& options = {});

}  // namespace delta::planner
