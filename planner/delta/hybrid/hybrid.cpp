// Activations rebuilt, state swapped (hybrid.hpp).
#include "delta/hybrid/hybrid.hpp"

#include <algorithm>
#include <limits>
#include <optional>

namespace delta::planner {

namespace {

// The rematerialisation's plan and the first op it does not fit (with its budget by op), by
// the simulator in live bytes with no limit: absent where it fits every op, op 0 where the
// plan does not run at all.
struct Rebuilt {
  plan::Plan plan;
  std::optional<std::uint32_t> miss;
};

Rebuilt rematerialise(const PlanRequest& request, const RematOptions& remat) {
  Rebuilt out{plan_offline_remat(request, remat), std::nullopt};
  SimulationOptions live = simulation_options(request);
  live.through_allocator = false;
  live.budget_bytes = 0;
  live.record_timeline = true;
  const SimulationResult result = simulate(*request.index, out.plan, live);
  if (!result.feasible) {
    out.miss = 0;
    return out;
  }
  for (std::size_t op = 0; op < result.timeline.size(); ++op)
    if (result.timeline[op].peak_bytes > remat.budget_by_op[op]) {
      out.miss = static_cast<std::uint32_t>(op);
      break;
    }
  return out;
}

}  // namespace

plan::Plan plan_rebuilds_then_swaps(const PlanRequest& request, const HybridOptions& options) {
  const TraceIndex& index = *request.index;
  const std::size_t n = index.op_count();
  RematOptions remat = options.remat;
  // Where discards are copied to host first (or the plan will be judged so), they queue behind
  // the state's copies on the D2H lane: blocks stay until the program frees them. With them
  // the family's plan for gpt2-large float32 at 0.6 of its peak, made with discards free,
  // judged with their copies ran at 3.0159, where the plan made without the family ran at
  // 2.4943; without them the family's plan made with the copies wins, 2.3815.
  const bool discards = !request.discard_copies && !request.discards_copied_later;
  remat.discard_dead = remat.discard_dead && discards;
  // The extra room is made by copies out from the step's start, as fast as the link carries
  // them, after a head start the step waits for.
  const double rate = request.gpu.d2h_bytes_per_s * 1e-9;  // bytes per ns
  remat.budget_by_op.resize(n + 1);
  for (std::size_t op = 0; op <= n; ++op) {
    const double cleared = double(options.head_start_bytes) + rate * double(op < n ? index.native_start(op) : index.native_step_ns());
    remat.budget_by_op[op] = request.budget_bytes + static_cast<std::uint64_t>(cleared);
  }
  // From the first op where regeneration cannot fit on, the rematerialisation is unlimited:
  // the sweep swaps the state there.
  Rebuilt rebuilt = rematerialise(request, remat);
  if (rebuilt.miss) {
    std::fill(remat.budget_by_op.begin() + *rebuilt.miss, remat.budget_by_op.end(), std::numeric_limits<std::uint64_t>::max());
    rebuilt.plan = plan_offline_remat(request, remat);
  }
  DeltaOptions sweep;
  sweep.discard_dead = discards;
  sweep.allow_regenerate = false;
  sweep.exposed_swap_factor = options.exposed_swap_factor;
  sweep.state_swaps = options.state_swaps;
  sweep.seed = &rebuilt.plan;
  sweep.method = remat.method;
  return plan_with_sweep(request, sweep);
}

}  // namespace delta::planner
