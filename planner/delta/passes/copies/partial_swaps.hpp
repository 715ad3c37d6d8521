// Partial swaps: a regeneration turned into a swap of only part of its block. Blocks are
// coarse (a resnet's activations are 45 to 180 MB) and a plan often leaves some of the budget
// unused at its tightest ops, less than any block; a block rebuilt over such a stretch can
// instead keep as much of itself as fits and send the rest to the host, whole pages at a
// time (plan::kSwapGranularity), which costs the copy lanes a fraction of a whole swap and
// no replays. The runtime maps such a block as two ranges with a handle each (cuMemUnmap
// unmaps whole mappings): the part that stays and the part that goes.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace delta::planner {

struct PartialSwapOptions {
  std::size_t max_tries = 64;  // regenerations tried, those with the least to move first
};

// The fewest whole pages (plan::kSwapGranularity) the swap at trial.decisions[d].intervals[slot]
// can send, from 1 to `most_pages`, and keep `trial` feasible under `request`, with the verdict
// there; found by halving (what fits with fewer pages away fits with more). Leaves the interval's
// bytes at the last count tried; nullopt when even `most_pages` does not fit.
struct FewestPages {
  std::uint64_t pages = 0;
  SimulationResult verdict;
};
std::optional<FewestPages> fewest_pages_that_fit(const PlanRequest& request, plan::Plan& trial, std::size_t d,
                                                 std::size_t slot, std::uint64_t most_pages);

// For each regeneration tried, in turn: the smallest part (in pages) that keeps the plan
// feasible, for each of a few prefetch points; the fastest replaces the regeneration when the
// plan runs faster. `judged` is the plan's simulation under `request` and stays so.
plan::Plan swap_parts(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const PartialSwapOptions& options);

}  // namespace delta::planner
