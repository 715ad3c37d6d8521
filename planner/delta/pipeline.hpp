// DELTA's method: the plan for a request, made by the stages and passes in the order
// delta/pipeline.cpp lists them.
#pragma once

#include "common/request.hpp"

#include <delta/plan.hpp>

namespace delta::planner {

plan::Plan plan_delta(const PlanRequest& request);

}  // namespace delta::planner
