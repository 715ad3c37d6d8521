#include "delta/passes/placed/prefetch_deferral.hpp"

#include "common/plan_edits.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

// The swap of `block` whose copy back is in flight at `op`, or nullptr.
plan::Interval* swap_in_flight(plan::Plan& plan, std::uint64_t block, std::uint32_t op) {
  for (plan::BlockDecision& decision : plan.decisions)
    if (decision.block == block)
      for (plan::Interval& interval : decision.intervals)
        if (interval.action == plan::Action::swap && interval.prefetch_at <= op && interval.needed_by >= op) return &interval;
  return nullptr;
}

// The copies back that ran on the H2D lane ahead of the last one `op` waited for, while it
// waited, and whose blocks are read only after `op`: issued one op after that last copy
// instead, behind it. Returns how many moved.
std::size_t defer_at(plan::Plan& plan, const SimulationResult& seen, std::uint32_t op) {
  const OpMoment& moment = seen.timeline[op];
  const std::int64_t waited_from = moment.start_ns - moment.stall_ns;
  const CopyMoment* awaited = nullptr;  // the copy back that ended last by the op's start
  for (const CopyMoment& copy : seen.copies)
    if (!copy.to_host && copy.end_ns <= moment.start_ns && copy.end_ns > waited_from &&
        (!awaited || copy.end_ns > awaited->end_ns))
      awaited = &copy;
  if (!awaited) return 0;
  const plan::Interval* awaited_swap = swap_in_flight(plan, awaited->block, op);
  if (!awaited_swap) return 0;
  const std::uint64_t behind = std::min<std::uint64_t>(awaited_swap->prefetch_at + 1, op);
  std::vector<std::uint64_t> ahead;  // blocks copied back ahead of it while the op waited
  for (const CopyMoment& copy : seen.copies)
    if (!copy.to_host && &copy != awaited && copy.start_ns < awaited->start_ns && copy.end_ns > waited_from)
      ahead.push_back(copy.block);
  std::size_t moved = 0;
  for (const std::uint64_t block : ahead) {
    plan::Interval* swap = swap_in_flight(plan, block, op);
    if (!swap || swap->prefetch_at >= behind || first_read_back(plan, block, *swap) <= op) continue;
    swap->prefetch_at = behind;
    ++moved;
  }
  return moved;
}

}  // namespace

plan::Plan defer_blocking_prefetches(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                     const PrefetchDeferralOptions& options) {
  return keep_faster_at_longest_stalls(
      request, std::move(plan), judged, options.max_ops,
      [](plan::Plan& trial, const SimulationResult& seen, std::uint32_t op, int attempt) {
        return attempt == 0 && defer_at(trial, seen, op) > 0;
      });
}

}  // namespace delta::planner

