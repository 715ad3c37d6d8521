#include "baselines/baselines.hpp"
#include "baselines/saved_activations.hpp"
#include "common/plan_edits.hpp"

#include <algorithm>

namespace delta::planner {

plan::Plan plan_vdnn(const PlanRequest& request) {
  // vDNN (Rhu et al., MICRO 2016), "all" policy: offload every activation saved for backward
  // after its last forward use; prefetch it one layer (op) ahead of its first backward use.
  const TraceIndex& index = *request.index;
  plan::Plan plan = empty_plan(request, "vdnn");
  for (const Saved& s : saved_for_backward(index)) {
    plan::Interval interval;
    interval.action = plan::Action::swap;
    interval.release_after = s.last_forward_use;
    interval.prefetch_at = std::max(s.last_forward_use + 1, s.first_backward_use - 1);
    interval.needed_by = s.first_backward_use;
    add_interval(plan, index, s.block, interval);
  }
  return plan;
}

}  // namespace delta::planner
