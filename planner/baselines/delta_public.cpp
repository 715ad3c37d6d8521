// DELTA's public code, as its rule: the sweep picking the block with the largest size x
// staleness, regenerated when that is cheaper than a round trip over PCIe, else swapped and
// fetched at its use (no prefetch).
#include "baselines/baselines.hpp"
#include "delta/sweep/sweep.hpp"

namespace delta::planner {

plan::Plan plan_delta_public(const PlanRequest& request) {
  DeltaOptions options;
  options.policy = Policy::delta_public;
  options.hide_prefetch = false;
  options.method = "delta-public";
  return plan_with_sweep(request, options);
}

}  // namespace delta::planner
