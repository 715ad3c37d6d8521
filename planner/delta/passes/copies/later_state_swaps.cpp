#include "delta/passes/copies/later_state_swaps.hpp"

#include "common/plan_edits.hpp"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

// A block live before the step and first used late: an optimizer's state.
bool state(const BlockInfo& info) { return info.from_start && !info.uses.empty() && info.uses.front() > 1; }

// The state swap over the ops before block `id`'s first use, if the plan has one.
const plan::Interval* state_swap(const plan::BlockDecision& decision, const BlockInfo& info) {
  for (const plan::Interval& x : decision.intervals)
    if (x.action == plan::Action::swap && x.needed_by == info.uses.front() && !x.bytes) return &x;
  return nullptr;
}

}  // namespace

plan::Plan swap_later_state(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                            const LaterStateOptions& options) {
  if (!judged.feasible || judged.stall_ns == 0) return plan;
  const TraceIndex& index = *request.index;
  const SimulationResult seen = simulate_op_by_op(request, plan);
  if (!seen.feasible || seen.timeline.size() != index.op_count()) return plan;
  const std::vector<std::uint32_t> stalls = longest_stalls(seen, options.max_ops);
  // The state blocks the plan leaves resident, by size: the blocks that may go instead.
  std::set<std::uint64_t> moved;
  for (const plan::BlockDecision& d : plan.decisions) moved.insert(d.block);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> resident;  // (size, block)
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    if (state(info) && info.size > 0 && !moved.count(info.id) && may_move(request, info)) resident.emplace_back(info.size, b);
  }
  std::sort(resident.begin(), resident.end());
  std::size_t tries = 0;
  for (const std::uint32_t op : stalls) {
    // The state swaps due at the op, largest first.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> due;  // (size, block id)
    for (const plan::BlockDecision& d : plan.decisions) {
      const BlockInfo& info = index.block(index.block_index(d.block));
      const plan::Interval* swap = state(info) ? state_swap(d, info) : nullptr;
      if (swap && swap->needed_by == op) due.emplace_back(info.size, d.block);
    }
    std::sort(due.rbegin(), due.rend());
    for (const auto& [size, id] : due) {
      if (tries == options.max_tries) return plan;
      // The smallest resident state block at least as large, first read after `op`.
      auto other = std::find_if(std::lower_bound(resident.begin(), resident.end(), std::make_pair(size, 0u)), resident.end(),
                                [&](const auto& r) { return index.block(r.second).uses.front() > op; });
      if (other == resident.end()) continue;
      plan::Plan trial = plan;
      auto decision = find_decision(trial, id);
      const BlockInfo& info = index.block(index.block_index(id));
      plan::Interval swap = *state_swap(*decision, info);
      std::erase_if(decision->intervals, [&](const plan::Interval& x) { return x.action == plan::Action::swap && x.needed_by == op && !x.bytes; });
      if (decision->intervals.empty()) trial.decisions.erase(decision);
      const BlockInfo& later = index.block(other->second);
      swap.needed_by = later.uses.front();
      swap.copy_after.reset();
      add_interval(trial, index, other->second, swap);
      ++tries;
      SimulationResult result = judge(request, trial);
      if (!result.feasible || result.step_time_ns >= judged.step_time_ns) continue;
      plan = std::move(trial);
      judged = result;
      moved.insert(later.id);
      resident.erase(other);
    }
  }
  return plan;
}

}  // namespace delta::planner
