#include "delta/passes/replays/hub_retention.hpp"

#include "delta/passes/replays/replay_trim.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

struct Hub {
  double saved_ns = 0;               // the compute the replays skip once it is kept
  std::uint64_t until = 0;           // the last op before which such a replay runs
  std::size_t replays = 0;
};

}  // namespace

plan::Plan retain_rebuilt_inputs(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                 const HubRetentionOptions& options) {
  if (!judged.feasible) return plan;
  const TraceIndex& index = *request.index;
  // Blocks the replays rebuild as a step towards their target, already freed by the program
  // where the replay runs (else the replay would read the block as it is).
  std::map<std::uint32_t, Hub> hubs;
  for (const plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t target = index.block_index(decision.block);
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::regenerate || interval.needed_by >= index.op_count()) continue;
      std::set<std::uint32_t> rebuilt;
      for (std::uint64_t op : interval.replay)
        for (const OpUse& u : index.uses(static_cast<std::uint32_t>(op))) {
          const BlockInfo& info = index.block(u.block);
          if (u.write && u.block != target && !info.from_start && !info.to_end && info.last < interval.needed_by) rebuilt.insert(u.block);
        }
      for (std::uint32_t b : rebuilt) {
        Hub& hub = hubs[b];
        hub.saved_ns += compute_saved_without(index, interval, target, b);
        hub.until = std::max<std::uint64_t>(hub.until, interval.needed_by);
        ++hub.replays;
      }
    }
  }
  std::vector<std::pair<double, std::uint32_t>> ranked;  // (-saved, block)
  for (const auto& [b, hub] : hubs)
    if (hub.replays >= 2 && hub.saved_ns > 0) ranked.emplace_back(-hub.saved_ns, b);
  std::sort(ranked.begin(), ranked.end());
  if (ranked.size() > options.max_tries) ranked.resize(options.max_tries);
  for (const auto& [negative_saved, b] : ranked) {
    const BlockInfo& info = index.block(b);
    plan::Plan trial = plan;
    // The block's own intervals: none, or a discard before the program frees it, which the
    // retention replaces.
    auto decision = find_decision(trial, info.id);
    if (decision != trial.decisions.end()) {
      const bool only_discards = std::all_of(decision->intervals.begin(), decision->intervals.end(),
                                             [](const plan::Interval& x) { return x.action == plan::Action::discard; });
      if (!only_discards) continue;
      trial.decisions.erase(decision);
    }
    plan::Interval retention;
    retention.action = plan::Action::retain;
    retention.release_after = info.last;
    retention.until = hubs[b].until;
    add_interval(trial, index, b, retention);
    for (plan::BlockDecision& d : trial.decisions) {
      const std::uint32_t target = index.block_index(d.block);
      for (plan::Interval& interval : d.intervals) {
        if (interval.action == plan::Action::regenerate && interval.needed_by > info.last) trim_replay(index, interval, target, b);
      }
    }
    SimulationResult result = judge(request, trial);
    if (!result.feasible || result.step_time_ns >= judged.step_time_ns) continue;
    plan = std::move(trial);
    judged = result;
  }
  return plan;
}

}  // namespace delta::planner
