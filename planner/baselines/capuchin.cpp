#include "baselines/baselines.hpp"
#include "common/plan_edits.hpp"
#include "delta/sweep/sweep.hpp"
#include "sim/simulator.hpp"

namespace delta::planner {

plan::Plan plan_capuchin(const PlanRequest& request) {
  // Capuchin (Peng et al., ASPLOS 2020): swap first when the transfer can be hidden, recompute
  // where it cannot; then tune prefetches with feedback from measured (here: simulated) runs,
  // issuing late ones earlier while the budget still holds.
  DeltaOptions options;
  options.policy = Policy::capuchin;
  options.method = "capuchin";
  plan::Plan plan = plan_with_sweep(request, options);
  SimulationResult best = judge(request, plan);
  const TraceIndex& index = *request.index;
  for (int round = 1; round <= 3 && best.feasible && best.stall_ns > 0; ++round) {
    plan::Plan tuned = plan;
    for (plan::BlockDecision& decision : tuned.decisions)
      for (plan::Interval& interval : decision.intervals) {
        if (interval.action != plan::Action::swap) continue;
        const std::uint64_t size = index.block(index.block_index(decision.block)).size;
        const double needed = (transfer_ns(size, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns)) * (1.0 + 0.5 * round);
        while (interval.prefetch_at > interval.release_after + 1 &&
               double(index.compute_between(interval.prefetch_at, interval.needed_by)) < needed)
          --interval.prefetch_at;
      }
    SimulationResult result = judge(request, tuned);
    if (result.feasible && result.step_time_ns < best.step_time_ns) {
      plan = std::move(tuned);
      best = result;
    } else {
      break;
    }
  }
  judge(request, plan);
  return plan;
}

}  // namespace delta::planner
