#include "delta/passes/discard_keeping.hpp"

#include "common/plan_edits.hpp"

#include <algorithm>
#include <deque>
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
    SimulationResult result = judge(request, trial);
    if (result.feasible && result.step_time_ns <= judged.step_time_ns) {
      plan = std::move(trial);
      judged = std::move(result);
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

}  // namespace delta::planner
