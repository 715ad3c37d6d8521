#include "delta/passes/copies/prefetch_advance.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

struct Due {
  plan::Interval* swap;
  std::uint64_t bytes;
};

// Moves the copies back due at `op` to earlier ops: each no earlier than the first op that
// starts `lead_ns` before `op`'s predecessor ends (on the plan's own timeline), nor than its
// release, and only over ops where the budget still has room for it beside those moved before
// it (smallest first). Returns whether any moved.
bool advance_at(const PlanRequest& request, plan::Plan& plan, const SimulationResult& seen, std::uint32_t op,
                std::int64_t lead_ns) {
  const TraceIndex& index = *request.index;
  std::vector<Due> due;
  for (plan::BlockDecision& decision : plan.decisions)
    for (plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::swap && interval.needed_by == op && interval.prefetch_at > interval.release_after + 1) {
        due.push_back({&interval, plan::swapped_bytes(interval, index.block(index.block_index(decision.block)).size)});
      }
  if (due.empty()) return false;
  std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.bytes < b.bytes; });
  const std::vector<OpMoment>& timeline = seen.timeline;
  const std::int64_t ready = op > 0 ? timeline[op - 1].end_ns : 0;  // when op would start without its wait
  std::uint32_t earliest = op;
  while (earliest > 0 && timeline[earliest - 1].start_ns >= ready - lead_ns) --earliest;
  std::vector<std::uint64_t> added(op + 1, 0);  // by the moves before, at each op
  bool moved = false;
  for (const Due& d : due) {
    const std::uint32_t from = static_cast<std::uint32_t>(d.swap->prefetch_at);
    const std::uint32_t floor = std::max<std::uint32_t>(earliest, static_cast<std::uint32_t>(d.swap->release_after + 1));
    std::uint32_t to = from;
    while (to > floor && timeline[to - 1].peak_bytes + added[to - 1] + d.bytes <= request.budget_bytes) --to;
    if (to == from) continue;
    for (std::uint32_t k = to; k < from; ++k) added[k] += d.bytes;
    d.swap->prefetch_at = to;
    moved = true;
  }
  return moved;
}

}  // namespace

plan::Plan advance_prefetches(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                              const PrefetchAdvanceOptions& options) {
  return keep_faster_at_longest_stalls(
      request, std::move(plan), judged, options.max_ops,
      [&](plan::Plan& trial, const SimulationResult& seen, std::uint32_t op, int attempt) {
        // Far enough back for the copies to hide the stall, then twice that (the lane is shared).
        const std::int64_t stall = seen.timeline[op].stall_ns;
        return attempt < 2 && advance_at(request, trial, seen, op, attempt == 0 ? 2 * stall : stall);
      });
}

}  // namespace delta::planner
