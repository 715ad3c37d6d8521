#include "delta/passes/evictions/source_swaps.hpp"

#include "common/swap_over_gap.hpp"
#include "delta/passes/evictions/interval_pruning.hpp"

#include <algorithm>
#include <span>
#include <vector>

namespace delta::planner {
namespace {

// A swap of `block` (its gap release_after .. needed_by) to be replaced by a regeneration from
// `source`, which the plan keeps resident over the gap.
struct Exchange {
  std::uint64_t block, source;  // block ids
  std::uint64_t release_after, needed_by;
  double freed_per_ns;  // the source's bytes per ns of replay
};

// True when the plan frees `block` anywhere in ops [first, last].
bool away_within(const plan::Plan& plan, std::uint64_t block, std::uint64_t first, std::uint64_t last) {
  for (const plan::BlockDecision& decision : plan.decisions) {
    if (decision.block != block) continue;
    for (const plan::Interval& interval : decision.intervals)
      if (interval.release_after < last && interval.needed_by > first) return true;
  }
  return false;
}

std::vector<Exchange> find_exchanges(const TraceIndex& index, const plan::Plan& plan) {
  std::vector<Exchange> found;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& swap : decision.intervals) {
      if (swap.action != plan::Action::swap || swap.bytes || swap.needed_by >= index.op_count()) continue;
      const std::uint32_t b = index.block_index(decision.block);
      const auto needed = static_cast<std::uint32_t>(swap.needed_by);
      if (!index.regenerable(b, needed)) continue;
      const std::vector<std::uint32_t> chain = index.version_chain(b, needed);
      if (chain.size() != 1 || chain.front() > swap.release_after) continue;
      // The largest input of the op, at least the block's size: the link carries no more.
      std::uint32_t source = ~std::uint32_t{0};
      for (const OpUse& u : index.uses(chain.front()))
        if (u.read && !u.write && u.block != b && index.block(u.block).size >= index.block(b).size &&
            (source == ~std::uint32_t{0} || index.block(u.block).size > index.block(source).size))
          source = u.block;
      if (source == ~std::uint32_t{0}) continue;
      const BlockInfo& info = index.block(source);
      if (info.from_start || info.last < needed) continue;
      if (away_within(plan, info.id, swap.release_after, swap.needed_by)) continue;
      const double replay = double(index.duration(chain.front()));
      found.push_back({decision.block, info.id, swap.release_after, swap.needed_by,
                       double(info.size) / std::max(1.0, replay)});
    }
  std::sort(found.begin(), found.end(), [](const Exchange& a, const Exchange& b) { return a.freed_per_ns > b.freed_per_ns; });
  return found;
}

// The source's idle gap around the block's: from its last use by the block's release to its
// next use at or after the block's need (swap_over_gap ends it at the replay that reads it).
bool apply(const PlanRequest& request, plan::Plan& plan, const Exchange& x) {
  const TraceIndex& index = *request.index;
  const std::uint32_t b = index.block_index(x.block), s = index.block_index(x.source);
  const BlockInfo& source = index.block(s);
  if (away_within(plan, x.source, x.release_after, x.needed_by)) return false;  // an earlier exchange took it
  auto decision = find_decision(plan, x.block);
  if (decision == plan.decisions.end()) return false;
  auto swap = std::find_if(decision->intervals.begin(), decision->intervals.end(), [&](const plan::Interval& i) {
    return i.action == plan::Action::swap && i.release_after == x.release_after && i.needed_by == x.needed_by;
  });
  if (swap == decision->intervals.end()) return false;
  // The source goes from its last use before the block is needed (which may fall inside the
  // block's gap) to its next use, or the replay.
  auto next = std::lower_bound(source.uses.begin(), source.uses.end(), static_cast<std::uint32_t>(x.needed_by));
  if (next == source.uses.end() || next == source.uses.begin()) return false;
  const std::uint64_t source_after = *(next - 1);
  if (source_after + 1 >= x.needed_by) return false;
  *swap = regeneration_interval(index, b, static_cast<std::uint32_t>(x.release_after), static_cast<std::uint32_t>(x.needed_by));
  const plan::Interval source_swap = swap_over_gap(request, plan, x.source, source_after, *next);
  if (source_swap.needed_by <= source_swap.release_after + 1) return false;
  add_interval(plan, index, s, source_swap);
  return true;
}

}  // namespace

plan::Plan swap_sources(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                        const SourceSwapOptions& options) {
  if (!judged.feasible || options.max_groups == 0) return plan;
  const std::vector<Exchange> exchanges = find_exchanges(*request.index, plan);
  if (exchanges.empty()) return plan;
  const auto try_some = [&](std::span<const Exchange> some) {
    plan::Plan trial = plan;
    std::uint64_t first = ~std::uint64_t{0}, last = 0;
    IntervalPruningOptions pruning;
    for (const Exchange& x : some)
      if (apply(request, trial, x)) {
        first = std::min(first, x.release_after);
        last = std::max(last, x.needed_by);
        pruning.kept.push_back(x.block);
        pruning.kept.push_back(x.source);
      }
    if (first > last) return false;
    SimulationResult result = judge(request, trial);
    if (!result.feasible) return false;
    std::sort(pruning.kept.begin(), pruning.kept.end());
    pruning.max_tries = options.prune_tries;
    pruning.within = std::make_pair(first, last);
    trial = prune_intervals(request, std::move(trial), result, pruning);
    if (!result.feasible || result.step_time_ns >= judged.step_time_ns) return false;
    plan = std::move(trial);
    judged = result;
    return true;
  };
  // All at once, then the halves of a group that does not pay, in the order found.
  std::vector<std::span<const Exchange>> groups{std::span<const Exchange>(exchanges)};
  for (std::size_t k = 0; k < groups.size() && k < options.max_groups; ++k) {
    const std::span<const Exchange> group = groups[k];
    if (try_some(group) || group.size() == 1) continue;
    groups.push_back(group.first(group.size() / 2));
    groups.push_back(group.subspan(group.size() / 2));
  }
  return plan;
}

}  // namespace delta::planner
