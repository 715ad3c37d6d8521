#include "delta/passes/replays/replay_sharing.hpp"

#include <algorithm>
#include <map>

namespace delta::planner {
namespace {

struct Rebuild {
  std::uint64_t block, release_after, needed_by;
};

struct Move {
  double shared_ns;  // compute of the ops both rebuilds replay
  Rebuild later;
  std::uint64_t to;  // the earlier rebuild's point
};

}  // namespace

plan::Plan share_replays(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const ReplaySharingOptions& options) {
  const TraceIndex& index = *request.index;
  if (!judged.feasible) return plan;
  std::map<std::uint64_t, std::vector<Rebuild>> by_op;  // replayed op -> the rebuilds replaying it
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (rebuilds(interval))
        for (std::uint64_t op : interval.replay) by_op[op].push_back({decision.block, interval.release_after, interval.needed_by});
  // Per (later rebuild, earlier point): the compute the two share.
  std::map<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>, Move> moves;
  for (const auto& [op, list] : by_op)
    for (const Rebuild& later : list)
      for (const Rebuild& earlier : list) {
        // The later block must be gone (released) before the earlier point to be rebuilt there.
        if (earlier.needed_by >= later.needed_by || later.release_after >= earlier.needed_by) continue;
        Move& move = moves[{later.block, later.release_after, earlier.needed_by}];
        move.later = later;
        move.to = earlier.needed_by;
        move.shared_ns += double(index.duration(op));
      }
  std::vector<Move> tries;
  for (auto& [key, move] : moves) tries.push_back(move);
  std::stable_sort(tries.begin(), tries.end(), [](const Move& a, const Move& b) { return a.shared_ns > b.shared_ns; });
  if (tries.size() > options.max_tries) tries.resize(options.max_tries);
  for (const Move& move : tries) {
    // Searched again each time: judge() sorts the decisions.
    auto decision = find_decision(plan, move.later.block);
    if (decision == plan.decisions.end()) continue;
    auto interval = std::find_if(decision->intervals.begin(), decision->intervals.end(), [&](const plan::Interval& x) {
      return rebuilds(x) && x.release_after == move.later.release_after && x.needed_by == move.later.needed_by;
    });
    if (interval == decision->intervals.end()) continue;  // moved already
    const std::uint64_t block = decision->block, release_after = interval->release_after, was = interval->needed_by;
    interval->needed_by = move.to;
    SimulationResult result = judge(request, plan);
    if (result.feasible && result.step_time_ns < judged.step_time_ns) {
      judged = result;
      continue;
    }
    for (plan::Interval& x : find_decision(plan, block)->intervals)  // judge() sorted the decisions
      if (rebuilds(x) && x.release_after == release_after && x.needed_by == move.to) x.needed_by = was;
  }
  judged = judge(request, plan);
  return plan;
}

}  // namespace delta::planner
