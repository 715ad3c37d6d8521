#include "sim/simulator.hpp"

#include "sim/replay.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <span>
#include <stdexcept>

namespace delta::planner {

std::int64_t transfer_ns(std::uint64_t bytes, double bytes_per_s, double latency_ns) {
  return static_cast<std::int64_t>(std::ceil(latency_ns + double(bytes) / bytes_per_s * 1e9));
}

std::int64_t native_step_ns(const TraceIndex& index, const SimulationOptions& options) {
  if (!options.host_pace) return index.native_step_ns();
  const auto launch = static_cast<std::int64_t>(options.gpu.launch_cost_ns());
  std::int64_t host = 0, device = 0;
  for (std::size_t i = 0; i < index.op_count(); ++i) {
    host += launch;
    device = std::max(device, host) + index.duration(i);
  }
  return device;
}

std::vector<std::uint64_t> replay_order(std::vector<const plan::Interval*> intervals) {
  auto last_replayed = [](const plan::Interval* x) {
    return x->replay.empty() ? 0 : *std::max_element(x->replay.begin(), x->replay.end());
  };
  std::vector<std::pair<std::uint64_t, const plan::Interval*>> keyed;
  keyed.reserve(intervals.size());
  std::uint64_t highest = 0;
  for (const plan::Interval* x : intervals) {
    keyed.emplace_back(last_replayed(x), x);
    highest = std::max(highest, keyed.back().first);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::uint64_t> sequence;
  std::vector<bool> seen(highest + 1, false);  // ops are trace positions: a bitmap beats hashing
  for (const auto& [last, x] : keyed)
    for (std::uint64_t op : x->replay)
      if (!seen[op]) {
        seen[op] = true;
        sequence.push_back(op);
      }
  return sequence;
}

SimulationResult simulate(const TraceIndex& index, const plan::Plan& plan, const SimulationOptions& options) {
  try {
    simulation::Replay replay(index, plan, options);
    return replay.run();
  } catch (const simulation::Infeasible& e) {
    SimulationResult result;
    result.feasible = false;
    result.error = e.what();
    result.first_bad_op = e.op;
    result.native_step_time_ns = native_step_ns(index, options);
    return result;
  }
}

}  // namespace delta::planner
