// Stalled swaps trimmed: a whole swap whose copy back the step waits for moves only the pages
// the budget cannot hold. Where a block swapped across a tight stretch is needed right after
// it, the op that needs it waits for the whole copy back (BERT-Large at 0.7 of its peak: the
// word embedding's 125 MB of AdamW state comes back behind the optimizer's first two ops, 0.85
// ms of compute for 2.3 ms of link); only what the fullest op in its gap cannot hold had to
// leave. The part that stays is whole pages at the block's start (a partial swap, as
// plan::Interval::bytes says), so the copy back, and the wait, are shorter.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>

namespace delta::planner {

struct TrimmedSwapOptions {
  std::size_t max_tries = 8;  // swaps tried, the longest waits first (about log2(pages) simulations each)
};

// For each whole swap whose need waits for it, the fewest pages that keep the plan feasible;
// kept where the step is faster. `judged` is the plan's verdict under `request` and stays so.
plan::Plan trim_stalled_swaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                              const TrimmedSwapOptions& options = {});

}  // namespace delta::planner
