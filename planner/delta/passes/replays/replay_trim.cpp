#include "delta/passes/replays/replay_trim.hpp"

#include <algorithm>
#include <set>

namespace delta::planner {

std::vector<std::uint64_t> without_rebuilding(const TraceIndex& index, const std::vector<std::uint64_t>& replay,
                                              std::uint32_t target, std::uint32_t kept) {
  std::set<std::uint32_t> wanted{target};
  std::vector<bool> needed(replay.size(), false);
  for (std::size_t k = replay.size(); k-- > 0;) {
    const auto uses = index.uses(static_cast<std::uint32_t>(replay[k]));
    needed[k] = std::any_of(uses.begin(), uses.end(), [&](const OpUse& u) { return u.write && u.block != kept && wanted.count(u.block); });
    if (!needed[k]) continue;
    for (const OpUse& u : uses)
      if (u.read && u.block != kept) wanted.insert(u.block);
  }
  std::vector<std::uint64_t> out;
  for (std::size_t k = 0; k < replay.size(); ++k)
    if (needed[k]) out.push_back(replay[k]);
  return out;
}

std::vector<std::uint64_t> replay_inputs(const TraceIndex& index, const std::vector<std::uint64_t>& replay, std::uint32_t target) {
  std::set<std::uint32_t> made;
  std::set<std::uint64_t> inputs;
  for (std::uint64_t op : replay) {
    for (const OpUse& u : index.uses(static_cast<std::uint32_t>(op)))
      if (u.read && u.block != target && !made.count(u.block)) inputs.insert(index.block(u.block).id);
    for (const OpUse& u : index.uses(static_cast<std::uint32_t>(op)))
      if (u.write) made.insert(u.block);
  }
  return {inputs.begin(), inputs.end()};
}

double compute_saved_without(const TraceIndex& index, const plan::Interval& rebuild, std::uint32_t target, std::uint32_t kept) {
  const std::vector<std::uint64_t> shorter = without_rebuilding(index, rebuild.replay, target, kept);
  double saved = 0;  // the ops dropped: shorter is a subsequence of the replay
  for (std::size_t k = 0, j = 0; k < rebuild.replay.size(); ++k) {
    if (j < shorter.size() && shorter[j] == rebuild.replay[k]) {
      ++j;
      continue;
    }
    saved += double(index.duration(rebuild.replay[k]));
  }
  return saved;
}

bool trim_replay(const TraceIndex& index, plan::Interval& rebuild, std::uint32_t target, std::uint32_t kept) {
  std::vector<std::uint64_t> shorter = without_rebuilding(index, rebuild.replay, target, kept);
  if (shorter.size() == rebuild.replay.size()) return false;
  rebuild.replay = std::move(shorter);
  rebuild.inputs = replay_inputs(index, rebuild.replay, target);
  return true;
}

}  // namespace delta::planner
