#include "delta/passes/copies/later_state_swaps.hpp"

#include "common/plan_edits.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
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

// A swap, whole or in part, over the ops before block `info`'s first use.
bool state_swap_or_part(const plan::Interval& x, const BlockInfo& info) {
  return x.action == plan::Action::swap && x.needed_by == info.uses.front();
}

}  // namespace

plan::Plan reorder_state_swaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged) {
  if (!judged.feasible || judged.stall_ns == 0) return plan;
  const TraceIndex& index = *request.index;
  // By size, the blocks whose one interval is a swap over the ops before their first use.
  std::map<std::uint64_t, std::vector<std::uint64_t>> swapped;  // size -> block ids
  std::set<std::uint64_t> decided;
  for (const plan::BlockDecision& d : plan.decisions) {
    decided.insert(d.block);
    const BlockInfo& info = index.block(index.block_index(d.block));
    if (state(info) && d.intervals.size() == 1 && state_swap_or_part(d.intervals[0], info)) swapped[info.size].push_back(d.block);
  }
  // Largest first: the biggest copies back wait longest.
  for (auto it = swapped.rbegin(); it != swapped.rend(); ++it) {
    const auto& [size, ids] = *it;
    const std::set<std::uint64_t> own(ids.begin(), ids.end());
    // The blocks that may take these swaps: the same size, state, undecided or one of them;
    // those read last first.
    std::vector<std::uint32_t> takers;
    for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
      const BlockInfo& info = index.block(b);
      if (info.size == size && state(info) && may_move(request, info) && (!decided.count(info.id) || own.count(info.id)))
        takers.push_back(b);
    }
    std::sort(takers.begin(), takers.end(), [&](std::uint32_t x, std::uint32_t y) {
      return index.block(x).uses.front() > index.block(y).uses.front();
    });
    if (takers.size() < ids.size()) continue;  // a swapped block the request would not move now
    takers.resize(ids.size());
    // The swaps, the one fetched back last first.
    std::vector<plan::Interval> swaps;
    for (std::uint64_t id : ids) swaps.push_back(find_decision(plan, id)->intervals.front());
    std::sort(swaps.begin(), swaps.end(), [](const plan::Interval& x, const plan::Interval& y) {
      return std::tie(x.prefetch_at, x.needed_by) > std::tie(y.prefetch_at, y.needed_by);
    });
    plan::Plan trial = plan;
    std::erase_if(trial.decisions, [&](const plan::BlockDecision& d) { return own.count(d.block) > 0; });
    bool same = true, valid = true;
    for (std::size_t k = 0; k < swaps.size(); ++k) {
      const BlockInfo& taker = index.block(takers[k]);
      plan::Interval swap = swaps[k];
      same = same && swap.needed_by == taker.uses.front();
      swap.needed_by = taker.uses.front();
      swap.prefetch_at = std::min(swap.prefetch_at, swap.needed_by);
      swap.copy_after.reset();  // nothing writes it before: its data is final from the start
      valid = valid && swap.release_after < swap.needed_by;
      add_interval(trial, index, takers[k], swap);
    }
    if (same || !valid) continue;
    SimulationResult result = judge(request, trial);
    if (!result.feasible || result.step_time_ns >= judged.step_time_ns) continue;
    plan = std::move(trial);
    judged = result;
  }
  return plan;
}

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
