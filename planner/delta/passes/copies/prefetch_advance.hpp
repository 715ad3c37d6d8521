// Copies back issued earlier where an op waits for them. Every plan maker places a swap's copy
// back on the native timeline: as late as the H2D lane allows then (the sweep, the refinement),
// or at the need where the lane has no room left (the sweep's late state swaps). As the plan
// runs, the step is later than native and the lane busier, so copies due together at one op
// queue there: GPT2-XL in bfloat16 at 0.7 of its peak fetched twelve 20 MB blocks of AdamW's
// `exp_avg_sq` at the very op that updates them, and waited 4.9 ms for them. This pass moves
// the copies due at the ops that stall longest to earlier ops, each block as far as the room
// the plan leaves there allows (smallest first), and keeps the move where the simulator finds
// the step faster.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>

namespace delta::planner {

struct PrefetchAdvanceOptions {
  // The longest stalls tried, two simulations at most each. Many: an optimizer split into
  // launches waits a little at each of a hundred ops or more (GPT2-XL float32 at 0.7 of its
  // peak, live bytes: 1.3236 with the 8 longest, 1.2962 with 128).
  std::size_t max_ops = 128;
};

// `judged` is the plan's verdict under `request` and stays so.
plan::Plan advance_prefetches(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                              const PrefetchAdvanceOptions& options);

}  // namespace delta::planner
