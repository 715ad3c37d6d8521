// Trades a plan's regenerations for cheaper evictions of other blocks. The planners choose op
// by op, so the block regenerated to cover a stretch of ops is not always the cheapest that
// could: another block idle across the same ops may travel unseen over idle copy lanes, or be
// rebuilt with less compute. Each regeneration (most compute first) is taken out; while the
// simulator finds an op over the budget, a block idle across it and not yet evicted there is
// evicted over its gap instead: a swap whose copy out completes before that op and whose copy
// in starts after it on lanes booked with the plan's swaps (free), or a regeneration by its
// version chain costing less than the one taken out. The cheapest that covers the shortfall is
// tried first, a few per op, a few ops deep; the exchange is kept when the simulator finds
// the plan faster.
#pragma once

#include "methods.hpp"

#include <cstddef>

namespace delta::planner {

struct EvictionExchangeOptions {
  std::size_t max_tries = 64;        // regenerations taken out, most compute first
  std::size_t max_added = 3;         // evictions added in place of one regeneration
  std::size_t branching = 3;         // evictions tried at each op over the budget
  std::size_t max_simulations = 12;  // per regeneration taken out
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the improved
// plan, and `judged` becomes its simulation.
plan::Plan exchange_regenerations(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                  const EvictionExchangeOptions& options = {});

}  // namespace delta::planner
