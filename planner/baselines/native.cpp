// No plan: the program as it ran, which fits no budget below its peak.
#include "baselines/baselines.hpp"
#include "common/plan_edits.hpp"

namespace delta::planner {

plan::Plan plan_native(const PlanRequest& request) { return empty_plan(request, "native"); }

}  // namespace delta::planner
