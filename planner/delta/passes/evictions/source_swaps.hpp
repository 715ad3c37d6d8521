// A swapped block rebuilt from its source instead, the source swapped in its place. A block
// made by one op from a larger-or-equal input that stays resident across the block's gap (an
// attention dropout's output, made from the softmax output the backward pass keeps) crosses
// the link as often as the input would; swapping the input over the gap and replaying the op
// from it where the block is needed moves the same bytes but frees both blocks (and the op's
// other outputs, a dropout's mask, stay as they were). The room it makes pays only once other
// evictions over the same ops become redundant, so each try is judged after the pruning of
// the evictions within its gaps: all such blocks at once, then halves of what the simulator
// refuses, the most bytes freed per replayed ns first. GPT2-XL (float32, batch 2, sequence
// 512) at 0.8 of its peak: the plan swapped 48 dropout outputs and regenerated 81 layer-norm
// outputs with 0.5 ms of compute for lack of link time; the lower bound's optimum swaps the
// softmax outputs and rebuilds the dropouts.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>

namespace delta::planner {

struct SourceSwapOptions {
  std::size_t max_groups = 8;    // groups judged (each one simulation and a pruning)
  std::size_t prune_tries = 256;  // evictions the pruning after each group tries
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the plan, and
// `judged` becomes its simulation.
plan::Plan swap_sources(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                        const SourceSwapOptions& options = {});

}  // namespace delta::planner
