#include "delta/passes/placed/swaps_rebuilt.hpp"

#include "common/plan_edits.hpp"
#include "common/request.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

namespace delta::planner {
namespace {

struct Candidate {
  double ns_per_byte;  // the replay's compute over the block's size
  std::uint64_t block;
  std::uint64_t needed_by;
};

}  // namespace

plan::Plan rebuild_swaps_the_link_cannot_carry(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                               const SwapsRebuiltOptions& options) {
  const TraceIndex& index = *request.index;
  if (!judged.feasible || judged.stall_ns == 0) return plan;
  std::vector<Candidate> candidates;
  for (const plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t b = index.block_index(decision.block);
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::swap || interval.needed_by >= index.op_count()) continue;
      const auto needed_by = static_cast<std::uint32_t>(interval.needed_by);
      if (!index.regenerable(b, needed_by)) continue;
      const plan::Interval rebuilt =
          regeneration_interval(index, b, static_cast<std::uint32_t>(interval.release_after), needed_by);
      if (rebuilt.replay.empty()) continue;
      candidates.push_back({replay_compute_ns(index, rebuilt) / double(std::max<std::uint64_t>(1, index.size(b))),
                            decision.block, interval.needed_by});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.ns_per_byte, a.block, a.needed_by) < std::tie(b.ns_per_byte, b.block, b.needed_by);
  });
  if (candidates.size() > options.max_tries) candidates.resize(options.max_tries);
  for (const Candidate& c : candidates) {
    if (past_deadline(request)) break;
    plan::Plan trial = plan;
    plan::Interval* swap = find_interval(trial, c.block, plan::Action::swap, c.needed_by);
    if (!swap) continue;
    // Back by the first rebuild in its gap that reads it, as the swap's copy back was.
    const std::uint64_t needed_by = first_read_back(trial, c.block, *swap);
    *swap = regeneration_interval(index, index.block_index(c.block), static_cast<std::uint32_t>(swap->release_after),
                                  static_cast<std::uint32_t>(needed_by));
    std::optional<SimulationResult> result = judge_if_faster(request, trial, judged.step_time_ns);
    if (!result) continue;
    plan = std::move(trial);
    judged = std::move(*result);
    if (judged.stall_ns == 0) break;
  }
  return plan;
}

}  // namespace delta::planner

