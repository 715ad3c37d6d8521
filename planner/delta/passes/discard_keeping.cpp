#include "delta/passes/discard_keeping.hpp"

#include "common/plan_edits.hpp"
#include "common/request.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace delta::planner {
namespace {

struct Discard {
  std::uint64_t block;  // block id
  std::uint64_t release_after;
  std::uint64_t bytes;
};

// Removes the discards of `group` from the plan (the blocks stay resident until the program
// frees them).
void remove(plan::Plan& plan, std::span<const Discard> group) {
  for (const Discard& d : group) {
    auto decision = find_decision(plan, d.block);
    if (decision == plan.decisions.end()) continue;
    std::erase_if(decision->intervals, [&](const plan::Interval& x) {
      return x.action == plan::Action::discard && x.release_after == d.release_after;
    });
    if (decision->intervals.empty()) plan.decisions.erase(decision);
  }
}

}  // namespace

plan::Plan keep_discards_resident(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                  const DiscardKeepingOptions& options) {
  if (!request.discard_copies || !judged.feasible || judged.discards == 0) return plan;
  const TraceIndex& index = *request.index;
  std::vector<Discard> discards;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::discard)
        discards.push_back({decision.block, interval.release_after, index.block(index.block_index(decision.block)).size});
  // The largest copies first: they cost the lane most.
  std::stable_sort(discards.begin(), discards.end(), [](const Discard& a, const Discard& b) { return a.bytes > b.bytes; });
  std::deque<std::span<const Discard>> groups{std::span<const Discard>(discards)};
  for (std::size_t simulations = 0; !groups.empty() && simulations < options.max_simulations; ++simulations) {
    const std::span<const Discard> group = groups.front();
    groups.pop_front();
    plan::Plan trial = plan;
    remove(trial, group);
    // No slower: faster than one nanosecond more.
    if (std::optional<SimulationResult> result = judge_if_faster(request, trial, judged.step_time_ns + 1)) {
      plan = std::move(trial);
      judged = std::move(*result);
      continue;
    }
    if (group.size() > 1) {
      groups.push_back(group.first(group.size() / 2));
      groups.push_back(group.subspan(group.size() / 2));
    }
  }
  judged = judge(request, plan);  // judge() sorted the decisions: the verdict of the plan returned
  return plan;
}

plan::Plan keep_discards_with_room(const PlanRequest& request, plan::Plan plan) {
  const TraceIndex& index = *request.index;
  const SimulationResult traced = simulate_op_by_op(request, plan);
  if (!traced.feasible || traced.timeline.size() < index.op_count()) return plan;
  std::vector<std::int64_t> room(index.op_count());
  for (std::size_t op = 0; op < room.size(); ++op)
    room[op] = std::int64_t(request.budget_bytes) - std::int64_t(traced.timeline[op].peak_bytes);
  struct Kept {
    std::uint64_t block;  // block id
    std::uint32_t first, last;  // ops it now holds memory over
    std::uint64_t size, waste;
  };
  std::vector<Kept> kept;
  for (const plan::BlockDecision& decision : plan.decisions) {
    if (decision.intervals.size() != 1 || decision.intervals.front().action != plan::Action::discard) continue;
    const BlockInfo& info = index.block(index.block_index(decision.block));
    const std::uint64_t release = decision.intervals.front().release_after;
    if (release >= info.last) continue;
    const std::uint64_t pages = (info.size + plan::kSwapGranularity - 1) / plan::kSwapGranularity;
    kept.push_back({decision.block, static_cast<std::uint32_t>(release + 1), info.last, info.size,
                    pages * plan::kSwapGranularity - info.size});
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.waste > b.waste; });
  std::vector<std::uint64_t> taken;  // block ids kept resident
  for (const Kept& k : kept) {
    const auto size = static_cast<std::int64_t>(k.size);
    const auto first = room.begin() + k.first, end = room.begin() + std::min<std::size_t>(k.last + 1, room.size());
    if (std::any_of(first, end, [&](std::int64_t r) { return r < size; })) continue;
    std::for_each(first, end, [&](std::int64_t& r) { r -= size; });
    taken.push_back(k.block);
  }
  if (taken.empty()) return plan;
  std::sort(taken.begin(), taken.end());
  plan::Plan trial = plan;
  std::erase_if(trial.decisions, [&](const plan::BlockDecision& d) { return std::binary_search(taken.begin(), taken.end(), d.block); });
  const SimulationResult result = judge(request, trial);
  return result.feasible && result.step_time_ns <= traced.step_time_ns ? trial : plan;
}

}  // namespace delta::planner
