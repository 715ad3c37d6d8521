#include "delta/bound_guided.hpp"

#include "common/rebuild_inputs.hpp"
#include "common/swap_over_gap.hpp"
#include "delta/passes/evictions/eviction_exchange.hpp"
#include "sim/simulator.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace delta::planner {
namespace {

enum class Choice { keep, swap, regenerate };

// Whether an interval keeps its block away over some op of (after, before).
bool overlaps(const plan::Interval& x, std::uint64_t after, std::uint64_t before) {
  if (x.action == plan::Action::discard) return x.release_after < before;
  return x.release_after < before && x.needed_by > after;
}

}  // namespace

std::optional<plan::Plan> follow_bound(const PlanRequest& request, const plan::Plan& start,
                                       const BoundExplanation& optimum) {
  const TraceIndex& index = *request.index;
  const std::uint32_t peak = optimum.peak_op;
  std::map<std::uint64_t, Choice> wanted;  // block id -> the optimum's choice at the peak, rounded
  for (const BoundExplanation::PeakBlock& b : optimum.peak_blocks) {
    if (b.swapped >= 0.5 && b.swapped >= b.regenerated) wanted[b.block] = Choice::swap;
    else if (b.regenerated >= 0.5) wanted[b.block] = Choice::regenerate;
  }
  plan::Plan plan = start;
  bool changed = false;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    // The block's idle gap over the peak, between two uses, or from op 0 to the first use of a
    // block live before the step.
    const auto next = std::upper_bound(info.uses.begin(), info.uses.end(), peak);
    if (info.size == 0 || next == info.uses.end()) continue;
    const bool before_first_use = next == info.uses.begin();
    if (before_first_use && (!info.from_start || peak == 0)) continue;  // not allocated yet, or no op before
    if (!before_first_use && *(next - 1) == peak) continue;             // used at the peak
    const std::uint32_t after = before_first_use ? 0 : *(next - 1), before = *next;
    const auto found = wanted.find(info.id);
    const Choice choice = found == wanted.end() ? Choice::keep : found->second;
    auto decision = find_decision(plan, info.id);
    std::vector<plan::Interval>* intervals = decision == plan.decisions.end() ? nullptr : &decision->intervals;
    Choice now = Choice::keep;
    if (intervals)
      for (const plan::Interval& x : *intervals)
        if (overlaps(x, peak, peak)) {
          if (x.action == plan::Action::discard) now = choice;  // dead there: nothing to follow
          else now = x.action == plan::Action::swap ? Choice::swap : Choice::regenerate;
        }
    if (now == choice) continue;
    if (choice == Choice::regenerate && !index.regenerable(b, before)) continue;
    if (intervals) {
      std::erase_if(*intervals, [&](const plan::Interval& x) { return overlaps(x, after, before); });
      if (intervals->empty()) plan.decisions.erase(decision);
    }
    if (choice == Choice::swap) add_interval(plan, index, b, swap_over_gap(request, plan, info.id, after, before));
    if (choice == Choice::regenerate) add_interval(plan, index, b, regeneration_interval(index, b, after, before));
    changed = true;
  }
  if (!changed) return std::nullopt;
  inputs_back_in_time(request, plan);
  SimulationResult verdict = judge(request, plan);
  if (!verdict.feasible) {
    if (verdict.shortfall_bytes == 0) return std::nullopt;
    const double allowance = 0.1 * double(index.native_step_ns());
    if (!repair_with_evictions(request, plan, verdict, allowance, std::numeric_limits<std::int64_t>::max(), {}))
      return std::nullopt;
  }
  return plan;
}

}  // namespace delta::planner
