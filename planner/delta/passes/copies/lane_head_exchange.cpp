#include "delta/passes/copies/lane_head_exchange.hpp"

#include "common/early_copies.hpp"
#include "common/swap_over_gap.hpp"

#include <algorithm>
#include <optional>

namespace delta::planner {
namespace {

// A stretch of at least this long with the D2H lane idle before a swap's copy is worth filling.
constexpr std::int64_t kShortestGapNs = 100'000;

struct Gap {
  std::int64_t to_ns = 0;     // when the lane starts copying again
  std::uint64_t swapped = 0;  // block id whose copy ends the gap
};

plan::Interval* interval_of(plan::Plan& plan, std::uint64_t id, plan::Action action, std::uint64_t release_after) {
  auto decision = find_decision(plan, id);
  if (decision == plan.decisions.end()) return nullptr;
  for (plan::Interval& x : decision->intervals)
    if (x.action == action && x.release_after == release_after) return &x;
  return nullptr;
}

}  // namespace

plan::Plan exchange_at_lane_head(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const LaneHeadOptions& options) {
  if (!judged.feasible) return plan;
  const TraceIndex& index = *request.index;
  SimulationOptions timeline = simulation_options(request);
  timeline.record_timeline = true;
  const SimulationResult seen = simulate(index, plan, timeline);
  if (!seen.feasible) return plan;

  std::vector<Gap> gaps;
  std::int64_t lane_free = 0;
  for (const CopyMoment& copy : seen.copies) {
    if (!copy.to_host) continue;
    if (copy.start_ns - lane_free >= kShortestGapNs && gaps.size() < options.max_gaps) gaps.push_back({copy.start_ns, copy.block});
    lane_free = std::max(lane_free, copy.end_ns);
  }

  std::optional<plan::Plan> best;
  SimulationResult best_verdict = judged;
  for (const Gap& gap : gaps) {
    const std::uint32_t later = index.block_index(gap.swapped);
    // The swap whose copy ends the gap: of the block's swaps in order, the last whose copy may
    // start by then.
    const auto later_decision = find_decision(plan, gap.swapped);
    if (later_decision == plan.decisions.end()) continue;
    const plan::Interval* later_swap = nullptr;
    for (const plan::Interval& x : later_decision->intervals)
      if (x.action == plan::Action::swap && seen.timeline[plan::copy_out_after(x)].end_ns <= gap.to_ns) later_swap = &x;
    if (!later_swap || later_swap->needed_by >= index.op_count() ||
        !index.regenerable(later, static_cast<std::uint32_t>(later_swap->needed_by)))
      continue;
    // Rebuilt blocks whose data is final before the lane falls idle there, latest first.
    struct Earlier {
      std::int64_t final_ns;
      std::uint64_t id, release_after, needed_by;
    };
    std::vector<Earlier> earlier;
    for (const plan::BlockDecision& decision : plan.decisions) {
      const std::uint32_t b = index.block_index(decision.block);
      for (const plan::Interval& x : decision.intervals) {
        if (x.action != plan::Action::regenerate) continue;
        const std::int64_t final_ns = seen.timeline[earliest_copy_out(index, b, static_cast<std::uint32_t>(x.release_after))].end_ns;
        if (final_ns < gap.to_ns) earlier.push_back({final_ns, decision.block, x.release_after, x.needed_by});
      }
    }
    std::stable_sort(earlier.begin(), earlier.end(), [](const Earlier& a, const Earlier& b) { return a.final_ns > b.final_ns; });
    if (earlier.size() > options.max_earlier) earlier.resize(options.max_earlier);
    for (const Earlier& e : earlier) {
      plan::Plan trial = plan;
      plan::Interval* rebuilt = interval_of(trial, e.id, plan::Action::regenerate, e.release_after);
      plan::Interval* swapped = interval_of(trial, gap.swapped, plan::Action::swap, later_swap->release_after);
      if (!rebuilt || !swapped) continue;
      *rebuilt = swap_over_gap(request, trial, e.id, e.release_after, e.needed_by);
      *swapped = regeneration_interval(index, later, static_cast<std::uint32_t>(swapped->release_after),
                                       static_cast<std::uint32_t>(swapped->needed_by));
      SimulationResult verdict = judge(request, trial);
      if (!verdict.feasible) continue;
      trial = swap_parts(request, std::move(trial), verdict, options.parts);
      if (verdict.feasible && verdict.step_time_ns < best_verdict.step_time_ns) {
        best = std::move(trial);
        best_verdict = verdict;
      }
    }
  }
  if (!best) return plan;
  judged = best_verdict;
  return std::move(*best);
}

}  // namespace delta::planner
