// A rebuild's replays read their inputs where the rebuild runs: before the op it is due by.
// Plans assembled from independent choices per block (the MILP baseline's, the bound's
// optimum followed at its peak) can have such an input away there, by a swap or by a rebuild
// of its own due later, and the simulator then refuses the plan at that op. This brings each
// such input back by the rebuild's point instead.
#pragma once

#include "common/plan_edits.hpp"

#include <cstdint>
#include <vector>

namespace delta::planner {

// What a rebuild's replays read that they do not write first (trace::Block ids), from the
// trace: a plan's `inputs` may leave out what was resident when it was made.
std::vector<std::uint64_t> replay_reads(const TraceIndex& index, const plan::Interval& rebuild);

// Every input of a rebuild that `plan` has away at the rebuild's point is due back by then (a
// swap fetched back earlier, a rebuild run earlier). Repeated, since an input's own rebuild
// may read blocks away at its new point too.
void inputs_back_in_time(const PlanRequest& request, plan::Plan& plan);

}  // namespace delta::planner
