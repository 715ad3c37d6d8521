// Activations rebuilt, state swapped (hybrid.hpp).
#include "delta/hybrid/hybrid.hpp"

#include <algorithm>
#include <limits>
#include <optional>

namespace delta::planner {

namespace {

// The plan simulated in live bytes with no limit, op by op.
SimulationResult unlimited(const PlanRequest& request, const plan::Plan& plan) {
  SimulationOptions live = simulation_options(request);
  live.through_allocator = false;
  live.budget_bytes = 0;
  live.record_timeline = true;
  return simulate(*request.index, plan, live);
}

// The first op the rematerialisation (with its budget by op) cannot fit, by the simulator in
// live bytes; absent where it fits every op.
std::optional<std::uint32_t> first_miss(const PlanRequest& request, const RematOptions& remat) {
  const SimulationResult result = unlimited(request, plan_offline_remat(request, remat));
  if (!result.feasible) return 0;
  for (std::size_t op = 0; op < result.timeline.size(); ++op)
    if (result.timeline[op].peak_bytes > remat.budget_by_op[op]) return static_cast<std::uint32_t>(op);
  return std::nullopt;
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
  const std::optional<std::uint32_t> until = first_miss(request, remat);
  if (until) std::fill(remat.budget_by_op.begin() + *until, remat.budget_by_op.end(), std::numeric_limits<std::uint64_t>::max());
  plan::Plan rebuilt = plan_offline_remat(request, remat);
  // A rematerialisation that does not run even unlimited (a rebuild it could not make) seeds
  // nothing: its plan is returned for the simulator to name where it fails.
  if (!unlimited(request, rebuilt).feasible) return rebuilt;
  DeltaOptions sweep;
  sweep.discard_dead = discards;
  sweep.allow_regenerate = false;
  sweep.exposed_swap_factor = options.exposed_swap_factor;
  sweep.state_swaps = options.state_swaps;
  sweep.seed = &rebuilt;
  sweep.method = remat.method;
  return plan_with_sweep(request, sweep);
}

}  // namespace delta::planner
