#include "delta/passes/placed/trimmed_swaps.hpp"

#include "common/plan_edits.hpp"
#include "delta/passes/copies/partial_swaps.hpp"

#include <algorithm>
#include <optional>

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
  const SimulationResult seen = simulate_op_by_op(request, plan);
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
    // Fewer pages leave more of the block on the device: the fewest that still fit.
    std::optional<FewestPages> fewest = fewest_pages_that_fit(request, trial, d, slot, most_pages);
    if (!fewest || fewest->verdict.step_time_ns >= judged.step_time_ns) continue;
    plan.decisions[d].intervals[slot].bytes = fewest->pages * plan::kSwapGranularity;
    judged = std::move(fewest->verdict);
  }
  judge(request, plan);
  return plan;
}

}  // namespace delta::planner
