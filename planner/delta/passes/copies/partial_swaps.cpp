#include "delta/passes/copies/partial_swaps.hpp"

#include "common/swap_over_gap.hpp"
#include "sim/simulator.hpp"

#include <algorithm>
#include <optional>

namespace delta::planner {
namespace {

struct Candidate {
  std::uint64_t id = 0, release_after = 0;
  double replay_ns = 0;
  std::uint64_t to_move = 0;  // the least a part must move: what the budget cannot hold beside the rest
};

// Where a part's copy back may be issued: the usual point for its size, and points further
// back (the H2D lane is shared, and a small copy issued late can queue behind a large one).
std::vector<std::uint64_t> prefetch_points(const plan::Interval& swap) {
  std::vector<std::uint64_t> points{swap.prefetch_at};
  for (std::uint64_t back = 1; back <= 32; back *= 2)
    if (swap.needed_by > swap.release_after + back) points.push_back(swap.needed_by - back);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

}  // namespace

std::optional<FewestPages> fewest_pages_that_fit(const PlanRequest& request, plan::Plan& trial, std::size_t d,
                                                 std::size_t slot, std::uint64_t most_pages) {
  auto try_pages = [&](std::uint64_t pages) {
    trial.decisions[d].intervals[slot].bytes = pages * plan::kSwapGranularity;
    return judge(request, trial);
  };
  FewestPages fewest{most_pages, try_pages(most_pages)};
  if (!fewest.verdict.feasible) return std::nullopt;
  std::uint64_t low = 1;
  while (low < fewest.pages) {
    const std::uint64_t mid = low + (fewest.pages - low) / 2;
    SimulationResult verdict = try_pages(mid);
    if (verdict.feasible) {
      fewest = {mid, std::move(verdict)};
    } else {
      low = mid + 1;
    }
  }
  return fewest;
}

plan::Plan swap_parts(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const PartialSwapOptions& options) {
  if (!judged.feasible) return plan;
  const TraceIndex& index = *request.index;
  // judge() sorts the decisions by block: sorted already, the positions taken below stay
  // valid in every trial.
  std::sort(plan.decisions.begin(), plan.decisions.end(),
            [](const plan::BlockDecision& a, const plan::BlockDecision& b) { return a.block < b.block; });
  // The budget each op leaves unused bounds what a part may keep on the device: a block
  // rebuilt over ops where little is left needs nearly all of it moved, which costs the lanes
  // nearly a whole swap. Those with the least to move come first.
  SimulationOptions timeline = simulation_options(request);
  timeline.record_timeline = true;
  const SimulationResult seen = simulate(index, plan, timeline);
  if (!seen.feasible || request.budget_bytes == 0) return plan;
  std::vector<Candidate> candidates;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::regenerate) continue;
      const std::uint64_t size = index.block(index.block_index(decision.block)).size;
      std::uint64_t spare = request.budget_bytes;
      for (std::uint64_t op = interval.release_after + 1; op < interval.needed_by && op < seen.timeline.size(); ++op)
        spare = std::min(spare, request.budget_bytes - std::min(request.budget_bytes, seen.timeline[op].peak_bytes));
      if (size < 2 * plan::kSwapGranularity || spare == 0 || spare >= size) continue;  // nothing to gain, or no need to move any
      candidates.push_back({decision.block, interval.release_after, replay_compute_ns(index, interval), size - spare});
    }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.to_move != b.to_move ? a.to_move < b.to_move : a.replay_ns > b.replay_ns;
  });
  if (candidates.size() > options.max_tries) candidates.resize(options.max_tries);

  for (const Candidate& c : candidates) {
    auto decision = find_decision(plan, c.id);
    if (decision == plan.decisions.end()) continue;
    auto at = std::find_if(decision->intervals.begin(), decision->intervals.end(), [&](const plan::Interval& x) {
      return x.release_after == c.release_after && x.action == plan::Action::regenerate;
    });
    if (at == decision->intervals.end()) continue;
    const std::size_t d = static_cast<std::size_t>(decision - plan.decisions.begin());
    const std::size_t slot = static_cast<std::size_t>(at - decision->intervals.begin());
    const std::uint64_t size = index.block(index.block_index(c.id)).size;
    const std::uint64_t most_pages = (size - 1) / plan::kSwapGranularity;
    const plan::Interval whole = swap_over_gap(request, plan, c.id, at->release_after, at->needed_by);

    std::optional<plan::Interval> best;  // the fastest part found, and its verdict
    SimulationResult best_verdict;
    plan::Plan trial = plan;
    for (std::uint64_t prefetch : prefetch_points(whole)) {
      plan::Interval part = whole;
      part.prefetch_at = prefetch;
      trial.decisions[d].intervals[slot] = part;
      // Fewer pages cost the lanes less, and more free more memory: the fewest that fit.
      std::optional<FewestPages> fewest = fewest_pages_that_fit(request, trial, d, slot, most_pages);
      if (!fewest) continue;
      if (fewest->verdict.step_time_ns >= judged.step_time_ns || (best && fewest->verdict.step_time_ns >= best_verdict.step_time_ns))
        continue;
      part.bytes = fewest->pages * plan::kSwapGranularity;
      best = part;
      best_verdict = std::move(fewest->verdict);
    }
    if (!best) continue;
    plan.decisions[d].intervals[slot] = *best;
    judged = best_verdict;
  }
  judge(request, plan);
  return plan;
}

}  // namespace delta::planner
