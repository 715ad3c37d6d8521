// Iterated local search over a finished plan. Each pass of the polish stops where none of its
// own moves helps, and the passes agree on where that is, so a plan can sit a fraction of a
// millisecond from a much better one that no single move reaches. A perturbation changes one
// to three of the plan's evictions at random (a block kept over the gap instead, a regeneration
// turned into a swap copied from the block's last write, or a swap into a regeneration); the
// repair then evicts what the budget needs and a short polish (pruning near the change,
// swaps, the exchange, stall relief, shared replays) settles the plan. The result replaces the
// plan when it runs faster.
//
// resnet32 at 0.2 of its peak shows what this finds: a swap of an early block fills the copy
// lane's idle head, the last stage-one convolution output is kept instead of swapped and the
// lane carries smaller blocks of the later stages, and the plan goes from 1.1741 to 1.1676.
//
// Deterministic: every round tries `width` perturbations, each from its own seed (the
// search's seed, the round and its rank), on as many threads as the request allows, and the
// fastest (the first among equals) is kept, so the plan does not depend on the thread count.
#pragma once

#include "common/plan_edits.hpp"
#include "delta/passes/evictions/eviction_exchange.hpp"

#include <cstdint>

namespace delta::planner {

struct LocalSearchOptions {
  std::size_t rounds = 0;          // most rounds of perturbations (0: no search)
  std::size_t patience = 0;        // stop after this many rounds without a faster plan (0: never)
  std::size_t width = 2;           // perturbations tried per round, side by side
  std::size_t max_changes = 3;     // evictions changed by one perturbation (at least one)
  std::uint64_t seed = 1;
  // The repair and the exchange of each try: narrower than the polish's, since each try is
  // small and there are many.
  EvictionExchangeOptions exchange{16, 16, 3, 12, true};
  std::size_t swap_tries = 32;     // regenerations each try's swap refinement tries
  // When set, tries are judged by the search's request (cheap: live bytes) and a round's
  // fastest must also pass this one's judgement (the caching allocator's) and be faster
  // there than the plan it would replace.
  const PlanRequest* confirm_with = nullptr;
  bool from_bound = false;  // reported with the progress: the search starts from the bound's optimum
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the fastest
// plan found and `judged` becomes its simulation.
plan::Plan search_locally(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                          const LocalSearchOptions& options);

}  // namespace delta::planner
