#include "common/early_copies.hpp"

#include <algorithm>

namespace delta::planner {

std::uint32_t earliest_copy_out(const TraceIndex& index, std::uint32_t block, std::uint32_t release_after,
                                std::uint32_t resident_from) {
  const BlockInfo& info = index.block(block);
  std::uint32_t from = std::max(resident_from, info.first);
  auto write = std::upper_bound(info.writes.begin(), info.writes.end(), release_after);
  if (write != info.writes.begin()) from = std::max(from, *(write - 1));
  return std::min(from, release_after);
}

void start_copies_early(plan::Plan& plan, const TraceIndex& index) {
  for (plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t b = index.block_index(decision.block);
    std::uint32_t resident_from = 0;
    for (plan::Interval& interval : decision.intervals) {
      if (interval.action == plan::Action::swap) {
        const std::uint32_t from =
            earliest_copy_out(index, b, static_cast<std::uint32_t>(interval.release_after), resident_from);
        interval.copy_after.reset();
        if (from < interval.release_after) interval.copy_after = from;
      }
      resident_from = static_cast<std::uint32_t>(interval.needed_by);
    }
  }
}

void start_copies_early_if_faster(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged) {
  if (!judged.feasible || judged.swaps == 0) return;
  plan::Plan early = plan;
  start_copies_early(early, *request.index);
  SimulationResult result = judge(request, early);
  if (result.feasible && result.step_time_ns <= judged.step_time_ns) {
    plan = std::move(early);
    judged = result;
  } else {
    judge(request, plan);  // its own prediction again
  }
}

}  // namespace delta::planner
