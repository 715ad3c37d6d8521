#include "delta/passes/replays/revival_retention.hpp"

#include "delta/passes/replays/revival_trim.hpp"

#include <algorithm>
#include <map>

namespace delta::planner {
namespace {

struct Revival {
  std::uint64_t block;  // trace::Block::id
  std::uint64_t needed_by;
  double compute;       // its replay, ns
};

// Block `id`'s first revival, right after the program frees it (not after a discard, whose
// data is gone, nor a later revival, whose block is already freed again) becomes a
// retention from that free to the revival's end. False when it is not such a revival.
bool retain_instead(const TraceIndex& index, plan::Plan& plan, std::uint64_t id, std::uint64_t needed_by) {
  auto decision = find_decision(plan, id);
  if (decision == plan.decisions.end()) return false;
  const BlockInfo& info = index.block(index.block_index(id));
  for (std::size_t k = 0; k < decision->intervals.size(); ++k) {
    plan::Interval& x = decision->intervals[k];
    if (x.action == plan::Action::discard || x.action == plan::Action::retain) return false;
    if (x.action != plan::Action::revive) continue;
    if (x.needed_by != needed_by) return false;  // a later revival: not the first
    plan::Interval retention;
    retention.action = plan::Action::retain;
    retention.release_after = info.last;
    retention.until = std::max<std::uint64_t>(x.until, info.last + 1);
    x = retention;
    return true;
  }
  return false;
}

// The compute the plan's rebuilds replay, counted per interval.
double rebuild_compute(const TraceIndex& index, const plan::Plan& plan) {
  double total = 0;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (rebuilds(interval)) total += replay_compute_ns(index, interval);
  return total;
}

}  // namespace

plan::Plan retain_revived_blocks(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                 const RevivalRetentionOptions& options) {
  const TraceIndex& index = *request.index;
  if (!judged.feasible) return plan;
  std::vector<Revival> revivals;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::revive)
        revivals.push_back({decision.block, interval.needed_by, replay_compute_ns(index, interval)});
  if (revivals.empty()) return plan;
  // Moves: every revival due at one op together (their replays run there together, and one
  // eviction can make room for all), most compute first; then each alone.
  std::map<std::uint64_t, std::vector<Revival>> at;
  for (const Revival& r : revivals) at[r.needed_by].push_back(r);
  std::vector<std::vector<Revival>> moves;
  for (auto& [op, group] : at) moves.push_back(group);
  auto compute = [](const std::vector<Revival>& move) {
    double total = 0;
    for (const Revival& r : move) total += r.compute;
    return total;
  };
  std::stable_sort(moves.begin(), moves.end(), [&](const auto& a, const auto& b) { return compute(a) > compute(b); });
  std::vector<Revival> singles = revivals;
  std::stable_sort(singles.begin(), singles.end(), [](const Revival& a, const Revival& b) { return a.compute > b.compute; });
  for (const Revival& r : singles) moves.push_back({r});
  if (moves.size() > options.max_tries) moves.resize(options.max_tries);
  double compute_now = rebuild_compute(index, plan);
  for (const std::vector<Revival>& move : moves) {
    plan::Plan candidate = plan;
    bool changed = false;
    for (const Revival& r : move) changed |= retain_instead(index, candidate, r.block, r.needed_by);
    if (!changed) continue;
    trim_revivals(index, candidate);  // revivals that only fed the replaced ones go
    const double saved = compute_now - rebuild_compute(index, candidate);
    if (saved <= 0) continue;
    SimulationResult result = judge(request, candidate);
    if (!result.feasible && !repair_with_evictions(request, candidate, result, saved, judged.step_time_ns, options.repair))
      continue;
    if (!result.feasible || result.step_time_ns >= judged.step_time_ns) continue;
    plan = std::move(candidate);
    judged = result;
    compute_now = rebuild_compute(index, plan);
  }
  return plan;
}

}  // namespace delta::planner
