// Fitting a plan to the caching allocator. The simulator counts live bytes; the allocator
// that runs the plan rounds blocks up and splits segments, so a plan that fits in live bytes
// may not be placeable under a cap at the budget. fit_to_allocator plans in live bytes for
// shrinking fractions of the budget until the allocator, capped at the real budget, places
// every allocation of the plan.
#pragma once

#include "common/request.hpp"

#include <delta/plan.hpp>

namespace delta::planner {

// How a plan in live bytes is made (delta/pipeline.cpp: plan_in_live_bytes).
using LivePlanner = plan::Plan (*)(const PlanRequest& request);

// The plan `plan_live` makes for the largest fraction of the budget whose plan the allocator
// places (the next fraction's too, where that one is placed only by waiting for evictions in
// flight, and the faster kept); where none is placed, the last plan tried that fits in live
// bytes, for its diagnosis. plan.predicted.planned_fraction says which fraction.
plan::Plan fit_to_allocator(const PlanRequest& request, LivePlanner plan_live);

}  // namespace delta::planner
