// Off plan (the program strayed from the plan's step): the rest of the step keeps the budget
// by the online policy's rule (online_policy.hpp) among the blocks the executor holds a host
// slot for: the one with the lowest DTR score, cost / (size × staleness), a swap's cost
// being the time to bring it back, leaves to host; the guard brings it back when a launch
// needs it. Blocks without a slot, or with only a partial one, stay: what they need beyond
// the budget is lifted and counted, as before.
#include "executor/executor_state.hpp"

#include <algorithm>
#include <limits>

namespace delta::executor {

bool Executor::State::evict_off_plan() {
  // Nothing leaves while a graph is captured (no VMM calls then) or everything comes back.
  if (bringing_back || capturing > 0) return false;
  constexpr double latency_ns = 10'000, bytes_per_ns = 12.0;  // as OnlineOptions' defaults
  std::int64_t best = -1;
  double best_score = std::numeric_limits<double>::infinity();
  for (std::uint32_t b = 0; b < blocks.size(); ++b) {
    const BlockState& block = blocks[b];
    const std::uint64_t size = program.blocks[b].size;
    if (block.where != Residency::resident || !block.own_pages || block.hold_free || block.revived) continue;
    if (is_pinned(b)) continue;  // exported, or used by a captured graph: it never leaves
    if (!host.slot(b) || schedule.host_slot_bytes[b] < size) continue;
    if (std::find(launch_blocks.begin(), launch_blocks.end(), b) != launch_blocks.end()) continue;
    const double staleness = double(stats.launches - std::min(stats.launches, block.last_use)) + 1.0;
    const double score = (latency_ns + double(size) / bytes_per_ns) / (double(size) * staleness);
    if (score < best_score) {
      best_score = score;
      best = b;
    }
  }
  if (best < 0) return false;
  const auto b = static_cast<std::uint32_t>(best);
  BlockState& block = blocks[b];
  block.moved_offset = 0;
  if (!block.host_current && !copy_out(b)) return false;  // written since its last copy (even one in flight)
  release(b, false);
  stats.off_plan_evictions++;
  return true;
}

}  // namespace delta::executor
