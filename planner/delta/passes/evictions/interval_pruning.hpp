// Takes back evictions a plan does not need. The sweep and the offline replay choose greedily,
// op by op, so a block freed early to cover one op can later turn out redundant once other
// blocks were freed over the same stretch; keeping it resident saves its replay or its
// transfers. Each regeneration and swap (most compute, then most bytes, first) is tried
// without its interval, and the removal is kept when the simulator finds the plan still
// feasible and not slower.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace delta::planner {

struct IntervalPruningOptions {
  std::size_t max_tries = 256;  // intervals tried (each one simulation)
  // Only intervals whose block is away somewhere in ops (first, second): where a change freed
  // memory, only evictions there can have become redundant. Absent: all.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> within;
  // Blocks (ids, sorted) whose intervals are left as they are: the change being judged.
  std::vector<std::uint64_t> kept;
};

// `plan` must be feasible under `request` (its simulation is `judged`); returns the pruned
// plan, and `judged` becomes its simulation.
plan::Plan prune_intervals(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                           const IntervalPruningOptions& options = {});

}  // namespace delta::planner
