// Trades a plan's regenerations for cheaper evictions of other blocks. The planners choose op
// by op, so the block regenerated to cover a stretch of ops is not always the cheapest that
// could: another block idle across the same ops may travel unseen over idle copy lanes, or be
// rebuilt with less compute. Each regeneration (most compute first) is taken out; while the
// simulator finds an op over the budget, a block idle across it and not yet evicted there is
// evicted over its gap instead (which ends at its next use, or at the first of the plan's
// replays that reads it): a swap whose copy out completes before that op and whose copy
// in starts after it on lanes booked with the plan's swaps (free), or a regeneration by its
// version chain costing less than the one taken out. The cheapest that covers the shortfall is
// tried first, a few per op, a few ops deep; the exchange is kept when the simulator finds
// the plan faster.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>

namespace delta::planner {

struct EvictionExchangeOptions {
  std::size_t max_tries = 64;        // regenerations taken out, most compute first
  std::size_t max_added = 3;         // evictions added in place of one regeneration
  std::size_t branching = 3;         // evictions tried at each op over the budget
  std::size_t max_simulations = 12;  // per regeneration taken out
  // Swaps' copies are booked from their blocks' last writes, and new swaps start there
  // (copy_after); else from their releases.
  bool early_copies = true;
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the improved
// plan, and `judged` becomes its simulation.
// The repair behind the exchange, for any change that leaves `plan` over the budget (its
// simulation is `result`): evicts blocks idle across the ops over it, depth first, together
// replaying less than `allowance` ns. True, with `plan` and `result` repaired, when the plan
// becomes feasible and faster than `to_beat_ns`; else they are left in some repair's state.
bool repair_with_evictions(const PlanRequest& request, plan::Plan& plan, SimulationResult& result, double allowance,
                           std::int64_t to_beat_ns, const EvictionExchangeOptions& options);

plan::Plan exchange_regenerations(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                  const EvictionExchangeOptions& options = {});

// Where the plan stalls (waiting for a copy out to free memory, or for a copy in), evictions
// of blocks idle across the op that cost less than the stall: a swap hidden in idle lane time
// (a parameter not read again until the optimizer step, copied out at the start) or a cheap
// regeneration. The ops that stall longest first, at most `max_ops`, `options.branching`
// evictions tried at each; a move is kept when the plan gets faster. `plan` must be feasible
// under `request` (its simulation is `judged`).
plan::Plan relieve_stalls(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                          const EvictionExchangeOptions& options = {}, std::size_t max_ops = 8);

// Memory for nothing: a block the plan keeps idle across the ops with the least room under the
// budget, whose copies fit in idle lane time without delaying a booked one, travels unseen.
// On its own that gains no time, but the room it leaves can make other evictions redundant:
// each such swap (the largest few at each of `max_ops` tight ops) is tried with a pruning of
// the evictions within its gap (at most `max_pruned`, most compute first), and kept when the
// plan gets faster (densenet121 at 0.2 of its peak: 1.2531 to 1.2497). `plan` must be
// feasible under `request` (its simulation is `judged`).
plan::Plan swap_hidden_and_prune(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                 const EvictionExchangeOptions& options = {}, std::size_t max_ops = 4,
                                 std::size_t max_pruned = 16);

}  // namespace delta::planner
