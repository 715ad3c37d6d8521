// Copies back that hold the lane ahead of more urgent ones, issued later. A copy lane runs its
// copies in the order they are issued, and a swap's copy back is issued at its prefetch op,
// however late its block is needed: where a plan fetches a block needed after an op that
// waits, before that op's own copies, the op waits for both (GPT2-XL in bfloat16 at 0.6 of its
// peak: AdamW's `_foreach_addcdiv_` launches each wait for the parameters they update, fetched
// behind the parameters of the launch after them; 42 such copies issued one op later, 3.2335
// to 3.2244). At the ops that wait longest, the copies back that ran while the op waited and
// whose blocks are read only after it (by the program or by a replay) are issued one op after
// the last copy the op waited for, behind it, and the change kept where the simulator finds
// the step faster.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>

namespace delta::planner {

struct PrefetchDeferralOptions {
  std::size_t max_ops = 64;  // the longest waits tried: one simulation each, and one more where a move is kept
};

// `judged` is the plan's verdict under `request` and stays so.
plan::Plan defer_blocking_prefetches(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                     const PrefetchDeferralOptions& options = {});

}  // namespace delta::planner
