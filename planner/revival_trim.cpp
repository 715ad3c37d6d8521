#include "revival_trim.hpp"

#include <algorithm>
#include <unordered_map>

namespace delta::planner {

std::size_t trim_revivals(const TraceIndex& index, plan::Plan& plan) {
  // Revived block id -> its interval.
  std::unordered_map<std::uint64_t, plan::Interval*> revivals;
  for (plan::BlockDecision& decision : plan.decisions)
    for (plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::revive) revivals[decision.block] = &interval;
  if (revivals.empty()) return 0;
  // The last point (needed_by) of a rebuild whose replays read each revived block while it is
  // held; a revival is read by rebuilds at its own point too (after it, in the same sequence).
  std::unordered_map<std::uint64_t, std::uint64_t> last_reader;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::regenerate && interval.action != plan::Action::revive) continue;
      for (std::uint64_t op : interval.replay)
        for (const OpUse& use : index.uses(static_cast<std::uint32_t>(op))) {
          if (!use.read) continue;
          const std::uint64_t id = index.block(use.block).id;
          auto revival = revivals.find(id);
          if (revival == revivals.end() || id == decision.block) continue;
          const plan::Interval& r = *revival->second;
          if (interval.needed_by < r.needed_by || interval.needed_by > r.until) continue;
          std::uint64_t& last = last_reader[id];
          last = std::max(last, interval.needed_by);
        }
    }
  std::size_t changed = 0;
  for (plan::BlockDecision& decision : plan.decisions) {
    auto revival = revivals.find(decision.block);
    if (revival == revivals.end()) continue;
    auto reader = last_reader.find(decision.block);
    if (reader == last_reader.end()) {  // nothing reads it: no revival at all
      std::erase_if(decision.intervals, [](const plan::Interval& x) { return x.action == plan::Action::revive; });
      ++changed;
      continue;
    }
    // Held through the replays before op `last`: freed after op `last` runs (until == last),
    // or earlier would free it before those replays.
    if (revival->second->until > reader->second) {
      revival->second->until = reader->second;
      ++changed;
    }
  }
  std::erase_if(plan.decisions, [](const plan::BlockDecision& d) { return d.intervals.empty(); });
  return changed;
}

}  // namespace delta::planner
