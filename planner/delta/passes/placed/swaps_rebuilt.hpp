// Swaps the link cannot carry, rebuilt instead. A plan's swaps share two copy lanes; where they
// carry more than the step leaves them time for, every copy back queues behind the ones before
// it and the ops that need the late ones wait (GPT2-XL in bfloat16 at 0.7 of its peak: the
// host-to-device lane busy from the backward pass's middle to past the optimizer's start with
// 1.66 GB, 30 ms of link, where the lower bound swaps half as much and rebuilds the rest). A
// swapped activation that its version chain rebuilds from blocks still resident costs compute
// instead of link time: each such swap, least replay compute per byte first, is tried as that
// regeneration, back by the first replay in its gap that reads it, and kept where the
// simulator finds the step faster (that cell 1.4688 to 1.4429, with the deferral beside it).
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>

namespace delta::planner {

struct SwapsRebuiltOptions {
  std::size_t max_tries = 128;  // swaps tried, least replay compute per byte first (one simulation each)
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the plan with
// the swaps that paid rebuilt, and `judged` becomes its simulation.
plan::Plan rebuild_swaps_the_link_cannot_carry(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                               const SwapsRebuiltOptions& options = {});

}  // namespace delta::planner
