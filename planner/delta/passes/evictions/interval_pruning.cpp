#include "delta/passes/evictions/interval_pruning.hpp"

#include <algorithm>
#include <tuple>

namespace delta::planner {
namespace {

struct Tried {
  int rank;             // regenerations first, then swaps
  double weight;        // replayed compute (ns) or bytes moved
  std::uint64_t block;  // block id
  std::uint64_t release_after;
};

}  // namespace

plan::Plan prune_intervals(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                           const IntervalPruningOptions& options) {
  const TraceIndex& index = *request.index;
  if (!judged.feasible) return plan;
  std::vector<Tried> tries;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals) {
      if (options.within && (interval.needed_by <= options.within->first || interval.release_after >= options.within->second))
        continue;
      if (std::binary_search(options.kept.begin(), options.kept.end(), decision.block)) continue;
      if (interval.action == plan::Action::regenerate) {
        tries.push_back({0, replay_compute_ns(index, interval), decision.block, interval.release_after});
      } else if (interval.action == plan::Action::swap) {
        tries.push_back({1, double(index.block(index.block_index(decision.block)).size), decision.block, interval.release_after});
      }
    }
  std::sort(tries.begin(), tries.end(),
            [](const Tried& a, const Tried& b) { return std::tie(a.rank, b.weight) < std::tie(b.rank, a.weight); });
  if (tries.size() > options.max_tries) tries.resize(options.max_tries);
  // Searched again each time: judge() sorts the decisions.
  for (const Tried& t : tries) {
    if (past_deadline(request)) break;
    auto decision = find_decision(plan, t.block);
    if (decision == plan.decisions.end()) continue;
    auto interval = std::find_if(decision->intervals.begin(), decision->intervals.end(),
                                 [&](const plan::Interval& x) { return x.release_after == t.release_after; });
    if (interval == decision->intervals.end()) continue;
    const plan::BlockDecision saved = *decision;
    decision->intervals.erase(interval);
    if (decision->intervals.empty()) plan.decisions.erase(decision);
    SimulationResult result = judge(request, plan);
    if (result.feasible && result.step_time_ns <= judged.step_time_ns) {
      judged = result;
      continue;
    }
    auto again = find_decision(plan, t.block);
    if (again != plan.decisions.end())
      *again = saved;
    else
      plan.decisions.push_back(saved);
  }
  judged = judge(request, plan);
  return plan;
}

}  // namespace delta::planner
