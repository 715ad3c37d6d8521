// Keeps freed blocks for replays instead of reviving them. A revival rebuilds a block the
// program has freed, because a later regeneration's replay reads it (densenet121's feature
// maps: freed when their dense block ends, read by every concatenation the backward pass
// rebuilds). Rebuilding them costs their producers' compute, often dearer per byte than
// anything else the plan pays for; holding them from the program's free until their last
// reader costs memory instead. Each group of revivals due at one op (most compute first) is
// tried as retentions; where the plan then goes over the budget, other blocks are evicted as
// the eviction exchange does, replaying less than the revivals did. Kept when the simulator
// finds the plan faster.
#pragma once

#include "common/plan_edits.hpp"
#include "delta/passes/evictions/eviction_exchange.hpp"

namespace delta::planner {

struct RevivalRetentionOptions {
  std::size_t max_tries = 32;          // groups of revivals tried, then single revivals
  EvictionExchangeOptions repair;      // depth and simulations of each repair
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the improved
// plan, and `judged` becomes its simulation.
plan::Plan retain_revived_blocks(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                 const RevivalRetentionOptions& options = {});

}  // namespace delta::planner
