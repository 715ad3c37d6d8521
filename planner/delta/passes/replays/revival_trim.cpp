#include "delta/passes/replays/revival_trim.hpp"

#include <algorithm>
#include <unordered_map>

namespace delta::planner {

std::size_t trim_revivals(const TraceIndex& index, plan::Plan& plan) {
  // Revived block id -> its revivals (a block may be revived more than once).
  struct Held {
    plan::Interval* interval;
    std::uint64_t from = 0;  // the first op before which replays can read it
    std::uint64_t last_reader = 0;
    bool read = false;
  };
  std::unordered_map<std::uint64_t, std::vector<Held>> revivals;
  for (plan::BlockDecision& decision : plan.decisions)
    for (plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::revive) revivals[decision.block].push_back({&interval, interval.needed_by});
      else if (interval.action == plan::Action::retain) revivals[decision.block].push_back({&interval, interval.release_after + 1});
  if (revivals.empty()) return 0;
  // Each rebuild whose replays read a revived block while one of its revivals holds it (from
  // that revival's point, where it is read after being rebuilt, to its end) is a reader.
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals) {
      if (!rebuilds(interval)) continue;
      for (std::uint64_t op : interval.replay)
        for (const OpUse& use : index.uses(static_cast<std::uint32_t>(op))) {
          if (!use.read) continue;
          const std::uint64_t id = index.block(use.block).id;
          auto found = revivals.find(id);
          if (found == revivals.end() || id == decision.block) continue;
          for (Held& held : found->second)
            if (held.from <= interval.needed_by && interval.needed_by <= held.interval->until) {
              held.read = true;
              held.last_reader = std::max(held.last_reader, interval.needed_by);
            }
        }
    }
  // Held through the replays before op `last_reader`: freed after that op runs (until ==
  // last_reader); earlier would free it before those replays. Revivals nothing reads go.
  std::size_t changed = 0;
  for (plan::BlockDecision& decision : plan.decisions) {
    auto found = revivals.find(decision.block);
    if (found == revivals.end()) continue;
    std::vector<const plan::Interval*> unread;
    for (Held& held : found->second) {
      if (!held.read) {
        unread.push_back(held.interval);
      } else if (held.interval->until > held.last_reader) {
        held.interval->until = held.last_reader;
        ++changed;
      }
    }
    if (unread.empty()) continue;
    changed += unread.size();
    std::vector<plan::Interval> kept;
    for (const plan::Interval& x : decision.intervals)
      if (std::find(unread.begin(), unread.end(), &x) == unread.end()) kept.push_back(x);
    decision.intervals = std::move(kept);
  }
  std::erase_if(plan.decisions, [](const plan::BlockDecision& d) { return d.intervals.empty(); });
  return changed;
}

}  // namespace delta::planner
