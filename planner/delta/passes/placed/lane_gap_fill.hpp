// Copies back pulled into an idle stretch of the H2D lane, with room made for them by rebuilds.
// Where the lane idles and the copies after the idle stretch are what ops then wait for, those
// copies were issued late because the plan left no room for them earlier. The copies that the
// idle time would carry are issued, in lane order, at the op running when the lane went idle
// (or the first op after it where room can be made), each over ops where the plan has room
// for it: where it has none, blocks idle there that the plan keeps resident and that their
// version chain rebuilds in a few ops from resident inputs are rebuilt at their next use, the
// cheapest per byte and per op freed first. Kept where the simulator finds the step faster.
// The room at an op is what the plan held there or what the allocator mapped, whichever is
// more; the pass runs twice, once with the allocator's idle cached pages counted as room (it
// takes them for its next mapping, even at its cap), and the faster plan is kept.
// gpt2-large float32 at 0.6 of its peak: parameters swapped over the forward pass come back
// for the backward pass up to 2 ms earlier, into room made by rebuilding 12 attention-dropout
// outputs (10 MB each, one `native_dropout` replayed): 1.5722 to 1.5409. Blocks placed before
// their first write have no chain to replay (AdamW's square roots, placed as one list at the
// first launch): GPT2-XL float32 at 0.6 holds within 0.2 GB of its budget from there to
// `_foreach_addcdiv_`, and its lane still idles 9.5 ms before the first copy of `exp_avg`.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>
#include <cstdint>

namespace delta::planner {

struct LaneGapFillOptions {
  std::size_t max_gaps = 16;           // idle stretches tried, longest first
  std::size_t max_trials = 32;        // plans judged in all (each gap: its copies, then half as many, ...)
  std::int64_t min_gap_ns = 500'000;   // shorter idle stretches are left alone
  std::size_t max_chain = 4;           // ops a rebuild that makes room replays at most
};

// `judged` is the plan's verdict under `request` and stays so.
plan::Plan fill_lane_gaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                          const LaneGapFillOptions& options = {});

}  // namespace delta::planner
