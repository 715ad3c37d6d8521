#include "delta/passes/copies/trimmed_swaps.hpp"

#include "common/plan_edits.hpp"

#include <algorithm>

namespace delta::planner {
namespace {

struct Stalled {
  std::int64_t wait_ns = 0;  // the stall before the op that needs the block back
  std::uint64_t block = 0, release_after = 0;
};

}  // namespace

plan::Plan trim_stalled_swaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                              const TrimmedSwapOptions& options) {
  if (!judged.feasible || judged.stall_ns == 0 || options.max_tries == 0) return plan;
  const TraceIndex& index = *request.index;
  SimulationOptions timed = simulation_options(request);
  timed.steps_before = kJudgedAfterSteps;
  timed.record_timeline = true;
  const SimulationResult seen = simulate(index, plan, timed);
  if (!seen.feasible) return plan;
  // The wait for the step's last copies back, after its last op.
  const std::int64_t end_wait = seen.timeline.empty() ? 0 : seen.step_time_ns - seen.timeline.back().end_ns;
  // judge() sorts the decisions by block: sorted already, the positions taken below stay
  // valid in every trial.
  std::sort(plan.decisions.begin(), plan.decisions.end(),
            [](const plan::BlockDecision& a, const plan::BlockDecision& b) { return a.block < b.block; });
  std::vector<Stalled> stalled;
  for (const plan::BlockDecision& decision : plan.decisions) {
    const std::uint64_t size = index.block(index.block_index(decision.block)).size;
    if (size < 2 * plan::kSwapGranularity) continue;  // a part must leave a page behind
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::swap || interval.bytes) continue;
      // The wait before the need: at an op of the step, or at its end (the step's last copies back).
      const std::int64_t wait = interval.needed_by < seen.timeline.size() ? seen.timeline[interval.needed_by].stall_ns : end_wait;
      if (wait > 0) stalled.push_back({wait, decision.block, interval.release_after});
    }
  }
  std::stable_sort(stalled.begin(), stalled.end(), [](const Stalled& a, const Stalled& b) { return a.wait_ns > b.wait_ns; });
  if (stalled.size() > options.max_tries) stalled.resize(options.max_tries);

  for (const Stalled& s : stalled) {
    auto decision = find_decision(plan, s.block);
    if (decision == plan.decisions.end()) continue;
    auto at = std::find_if(decision->intervals.begin(), decision->intervals.end(), [&](const plan::Interval& x) {
      return x.action == plan::Action::swap && !x.bytes && x.release_after == s.release_after;
    });
    if (at == decision->intervals.end()) continue;
    const std::size_t d = static_cast<std::size_t>(decision - plan.decisions.begin());
    const std::size_t slot = static_cast<std::size_t>(at - decision->intervals.begin());
    const std::uint64_t size = index.block(index.block_index(s.block)).size;
    const std::uint64_t most_pages = (size - 1) / plan::kSwapGranularity;
    plan::Plan trial = plan;
    auto try_pages = [&](std::uint64_t pages) {
      trial.decisions[d].intervals[slot].bytes = pages * plan::kSwapGranularity;
      return judge(request, trial);
    };
    // Fewer pages leave more of the block on the device: the fewest that still fit, found by
    // halving (what fits with fewer pages away fits with more).
    SimulationResult at_high = try_pages(most_pages);
    if (!at_high.feasible) continue;
    std::uint64_t low = 1, high = most_pages;
    while (low < high) {
      const std::uint64_t mid = low + (high - low) / 2;
      SimulationResult verdict = try_pages(mid);
      if (verdict.feasible) {
        high = mid;
        at_high = std::move(verdict);
      } else {
        low = mid + 1;
      }
    }
    if (at_high.step_time_ns >= judged.step_time_ns) continue;
    plan.decisions[d].intervals[slot].bytes = high * plan::kSwapGranularity;
    judged = std::move(at_high);
  }
  judge(request, plan);
  return plan;
}

}  // namespace delta::planner
