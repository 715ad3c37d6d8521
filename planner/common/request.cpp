#include "common/request.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace delta::planner {

SimulationOptions simulation_options(const PlanRequest& request) {
  SimulationOptions options;
  options.gpu = request.gpu;
  options.budget_bytes = request.budget_bytes;
  options.through_allocator = request.through_allocator;
  options.executor_placement = request.executor_placement;
  options.packed_moves = request.packed_moves;
  options.packed_groups = request.packed_groups;
  options.discard_copies = request.discard_copies;
  options.host_pace = request.host_pace;
  return options;
}

SimulationResult judge(const PlanRequest& request, plan::Plan& plan) {
  const auto by_block = [](const plan::BlockDecision& a, const plan::BlockDecision& b) { return a.block < b.block; };
  // Mostly they are, but for the few a pass has just added at the end: sort those and merge
  // them in, rather than sort the whole plan again (that sort was a tenth of planning time).
  const auto unsorted = std::is_sorted_until(plan.decisions.begin(), plan.decisions.end(), by_block);
  if (unsorted != plan.decisions.end()) {
    std::sort(unsorted, plan.decisions.end(), by_block);
    std::inplace_merge(plan.decisions.begin(), unsorted, plan.decisions.end(), by_block);
  }
  SimulationOptions options = simulation_options(request);
  options.steps_before = kJudgedAfterSteps;  // placed where a run's later steps are (through the allocator)
  SimulationResult result = simulate(*request.index, plan, options);
  plan.predicted.peak_bytes = result.peak_bytes;
  plan.predicted.step_time_ns = result.step_time_ns;
  plan.predicted.native_step_time_ns = result.native_step_time_ns;
  plan.predicted.overhead = result.overhead();
  plan.predicted.feasible = result.feasible;
  plan.predicted.reserved_peak_bytes = request.through_allocator ? result.allocator_reserved_peak : 0;
  plan.predicted.executor_placement = request.through_allocator && request.executor_placement;
  plan.predicted.packed_moves = plan.predicted.executor_placement && request.packed_moves;
  plan.predicted.packed_groups = plan.predicted.packed_moves && request.packed_groups;
  plan.predicted.discard_copies = request.discard_copies;
  plan.predicted.host_pace = request.host_pace;
  return result;
}

std::optional<SimulationResult> judge_if_faster(const PlanRequest& request, plan::Plan& trial, std::int64_t than_ns) {
  if (request.through_allocator) {
    SimulationOptions live = simulation_options(request);
    live.through_allocator = false;
    const SimulationResult in_live_bytes = simulate(*request.index, trial, live);
    if (!in_live_bytes.feasible || in_live_bytes.step_time_ns >= than_ns) return std::nullopt;
  }
  SimulationResult result = judge(request, trial);
  if (!result.feasible || result.step_time_ns >= than_ns) return std::nullopt;
  return result;
}

PlanRequest as_placed(const PlanRequest& request, const plan::Plan& plan) {
  PlanRequest placed = request;
  placed.packed_moves = plan.predicted.executor_placement && plan.predicted.packed_moves;
  placed.packed_groups = placed.packed_moves && plan.predicted.packed_groups;
  return placed;
}

SimulationResult simulate_op_by_op(const PlanRequest& request, const plan::Plan& plan) {
  SimulationOptions timed = simulation_options(request);
  timed.steps_before = kJudgedAfterSteps;  // the step judge() judges
  timed.record_timeline = true;
  return simulate(*request.index, plan, timed);
}

std::vector<std::uint32_t> longest_stalls(const SimulationResult& traced, std::size_t max_ops) {
  std::vector<std::pair<std::int64_t, std::uint32_t>> stalls;  // (-stall, op)
  for (std::uint32_t op = 0; op < traced.timeline.size(); ++op)
    if (traced.timeline[op].stall_ns > 0) stalls.emplace_back(-traced.timeline[op].stall_ns, op);
  std::sort(stalls.begin(), stalls.end());
  if (stalls.size() > max_ops) stalls.resize(max_ops);
  std::vector<std::uint32_t> ops;
  for (const auto& [negative_stall, op] : stalls) ops.push_back(op);
  return ops;
}

}  // namespace delta::planner
