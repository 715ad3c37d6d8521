#include "delta/passes/replays/hub_rebuild.hpp"

#include "delta/passes/replays/replay_trim.hpp"

#include <algorithm>
#include <map>
#include <span>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

// A block the plan regenerates by `needed_by`, rebuilt inside other replays before that.
struct Hub {
  std::uint64_t block;      // block id
  std::uint64_t needed_by;  // of its own regeneration
  std::uint64_t first = 0;  // the earliest point of a replay that rebuilds it
  std::vector<std::uint64_t> made_by;  // that replay's ops that make it
  double saved_ns = 0;      // what the replays skip once it is resident
};

// The simulations the halving may take per block options.max_tries allows alone.
constexpr std::size_t kSimulationsPerTry = 8;

plan::Interval* interval_ending(plan::Plan& plan, std::uint64_t block, std::uint64_t needed_by) {
  auto decision = find_decision(plan, block);
  if (decision == plan.decisions.end()) return nullptr;
  for (plan::Interval& interval : decision->intervals)
    if (interval.needed_by == needed_by) return &interval;
  return nullptr;
}

// Its regeneration moved to the first replay that rebuilds it, and every replay before its
// use made without the ops that only made it. False where the plan has changed underneath.
bool apply(const TraceIndex& index, plan::Plan& plan, const Hub& hub) {
  plan::Interval* own = interval_ending(plan, hub.block, hub.needed_by);
  if (!own || own->action != plan::Action::regenerate || own->release_after >= hub.first) return false;
  const std::uint32_t kept = index.block_index(hub.block);
  own->needed_by = hub.first;
  own->replay = hub.made_by;
  own->inputs = replay_inputs(index, own->replay, kept);
  for (plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t target = index.block_index(decision.block);
    if (target == kept) continue;
    for (plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::regenerate && hub.first <= interval.needed_by && interval.needed_by < hub.needed_by)
        trim_replay(index, interval, target, kept);
  }
  return true;
}

}  // namespace

plan::Plan rebuild_hubs_once(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                             const HubRetentionOptions& options) {
  if (!judged.feasible) return plan;
  const TraceIndex& index = *request.index;
  // Where each block is away by a regeneration of its own: (release, needed_by) by block.
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> away;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::regenerate)
        away[index.block_index(decision.block)].push_back({interval.release_after, interval.needed_by});
  std::map<std::pair<std::uint32_t, std::uint64_t>, Hub> hubs;  // by (block, its needed_by)
  for (const plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t target = index.block_index(decision.block);
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::regenerate) continue;
      for (std::uint64_t op : interval.replay)
        for (const OpUse& u : index.uses(static_cast<std::uint32_t>(op))) {
          if (!u.write || u.block == target) continue;
          const auto own = away.find(u.block);
          if (own == away.end()) continue;
          for (const auto& [release, needed_by] : own->second) {
            if (!(release < interval.needed_by && interval.needed_by < needed_by)) continue;
            Hub& hub = hubs[{u.block, needed_by}];
            const double saved = compute_saved_without(index, interval, target, u.block);
            if (saved <= 0) continue;
            hub.block = index.block(u.block).id;
            hub.needed_by = needed_by;
            hub.saved_ns += saved;
            if (hub.made_by.empty() || interval.needed_by < hub.first) {
              hub.first = interval.needed_by;
              hub.made_by = without_rebuilding(index, interval.replay, u.block, static_cast<std::uint32_t>(-1));
            }
          }
        }
    }
  }
  std::vector<const Hub*> ranked;
  for (const auto& [key, hub] : hubs)
    if (hub.saved_ns > 0 && !hub.made_by.empty()) ranked.push_back(&hub);
  if (ranked.empty()) return plan;
  std::sort(ranked.begin(), ranked.end(), [](const Hub* a, const Hub* b) { return a->saved_ns > b->saved_ns; });
  const auto try_hubs = [&](std::span<const Hub* const> some) {
    plan::Plan trial = plan;
    bool changed = false;
    for (const Hub* hub : some) changed |= apply(index, trial, *hub);
    if (!changed) return false;
    SimulationResult result = judge(request, trial);
    if (!result.feasible || result.step_time_ns >= judged.step_time_ns) return false;
    plan = std::move(trial);
    judged = result;
    return true;
  };
  // All at once, then the halves of a group the simulator refuses (a hub whose block cannot
  // stay shares the group's fate), most compute saved first, within the simulations allowed.
  std::vector<std::span<const Hub* const>> groups{std::span<const Hub* const>(ranked)};
  std::size_t simulations = 0;
  for (std::size_t k = 0; k < groups.size() && simulations < kSimulationsPerTry * options.max_tries; ++k) {
    const std::span<const Hub* const> group = groups[k];
    ++simulations;
    if (try_hubs(group) || group.size() == 1) continue;
    groups.push_back(group.first(group.size() / 2));
    groups.push_back(group.subspan(group.size() / 2));
  }
  return plan;
}

}  // namespace delta::planner
