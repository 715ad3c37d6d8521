// The copy lane's idle time before a swap. A swap's copy out can start only once its block is
// final, so the D2H lane often idles early in the forward pass, waiting for the first large
// block worth moving, while blocks written before then are rebuilt instead. Exchanging the
// two (the earlier block swapped, the later one rebuilt) starts the lane's queue earlier and
// ends every copy behind it sooner, for a small difference in replays; what the lane gains
// is then spent by partial swaps (delta/passes/copies/partial_swaps.hpp), which need a little lane time each.
// Neither change alone need help: the exchange is judged with the partial swaps it allows.
//
// resnet32 at 0.2 of its peak (Titan V profile): the lane idles 1.9 ms before the copy of
// the first swapped 180 MB convolution output; the batch-norm output written before it is
// swapped instead, and 14 MiB of a 45 MB stage-three convolution output then go to the host
// in place of its rebuild, from 1.16628 to 1.16543.
#pragma once

#include "delta/passes/copies/partial_swaps.hpp"

namespace delta::planner {

struct LaneHeadOptions {
  std::size_t max_gaps = 4;         // idle stretches of the D2H lane tried, earliest first
  std::size_t max_earlier = 4;      // rebuilt blocks tried for each, latest written first
  PartialSwapOptions parts{16};     // the partial swaps judged with each exchange
};

// Tries each exchange with its partial swaps and keeps the fastest plan when it beats
// `judged` (the plan's simulation under `request`, updated with it).
plan::Plan exchange_at_lane_head(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const LaneHeadOptions& options);

}  // namespace delta::planner
