#include "sim/simulator.hpp"

#include "sim/replay.hpp"
#include "sim/stage_clock.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
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

void ReplayOrder::compute(std::span<const plan::Interval* const> intervals) {
  auto last_replayed = [](const plan::Interval* x) {
    return x->replay.empty() ? 0 : *std::max_element(x->replay.begin(), x->replay.end());
  };
  keyed_.clear();
  sequence_.clear();
  for (const plan::Interval* x : intervals) keyed_.emplace_back(last_replayed(x), x);
  std::stable_sort(keyed_.begin(), keyed_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Ops are trace positions: a bitmap beats hashing. Cleared after use, op by op, rather than
  // allocated per call (a simulation orders the replays before every op that has some).
  for (const auto& [last, x] : keyed_) {
    if (seen_.size() <= last) seen_.resize(last + 1, 0);
    for (std::uint64_t op : x->replay)
      if (!seen_[op]) {
        seen_[op] = 1;
        sequence_.push_back(op);
      }
  }
  for (std::uint64_t op : sequence_) seen_[op] = 0;
}

std::vector<std::uint64_t> replay_order(std::vector<const plan::Interval*> intervals) {
  ReplayOrder order;
  order.compute(intervals);
  return std::vector<std::uint64_t>(order.sequence().begin(), order.sequence().end());
}

namespace {

// The blocks a step's allocations keep across its end into the next step: those live from its
// start to its end (the program's state). The rest of what lives at its end, the next step frees.
std::vector<std::uint64_t> kept_across_steps(const TraceIndex& index) {
  std::vector<std::uint64_t> kept;
  for (std::uint32_t b : index.live_at_start())
    if (index.block(b).to_end) kept.push_back(b);
  return kept;
}

}  // namespace

SimulationResult simulate(const TraceIndex& index, const plan::Plan& plan, const SimulationOptions& options) {
  count_simulation();
  try {
    std::unique_ptr<AllocatorLedger> ledger;
    if (options.through_allocator && options.steps_before > 0) {
      // Timelines recorded as asked: a step before that fails is the verdict, its ops with it.
      const std::vector<std::uint64_t> kept = kept_across_steps(index);
      for (std::uint32_t k = 0; k < options.steps_before; ++k) {
        simulation::Replay earlier(index, plan, options, std::move(ledger));
        SimulationResult result = earlier.run();
        if (!result.feasible) return result;
        ledger = earlier.take_ledger();
        ledger->next_step(kept);
      }
    }
    simulation::Replay replay(index, plan, options, std::move(ledger));
    SimulationResult result = replay.run();
    if (!result.feasible && options.steps_before > 0 && options.through_allocator)
      result.error += " (in a step after " + std::to_string(options.steps_before) + " of the same plan, the allocator as they left it)";
    return result;
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
