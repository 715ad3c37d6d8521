// Fitting a plan to the caching allocator. The simulator counts live bytes; the allocator
// that runs the plan rounds blocks up and splits segments, so a plan that fits in live bytes
// may not be placeable under a cap at the budget. fit_to_allocator plans in live bytes for
// shrinking fractions of the budget until the allocator, capped at the real budget, places
// every allocation of the plan.
#pragma once

#include "common/request.hpp"

#include <delta/plan.hpp>

#include <vector>

namespace delta::planner {

// How a plan in live bytes is made (delta/pipeline.cpp: plan_in_live_bytes).
using LivePlanner = plan::Plan (*)(const PlanRequest& request);

// The plan `plan_live` makes for the largest fraction of the budget whose plan the allocator
// places, or a faster one placed nearby: the next fraction's, where the first is placed only by
// waiting for evictions in flight, and those of the fractions between the first placed and the
// one above it (fraction_steps_between), unless the refused plan above ran within 1% of the
// step of the placed one in live bytes; the fastest placed is kept. Where none is placed, the
// last plan tried that fits in live bytes, for its diagnosis. plan.predicted.planned_fraction
// says which fraction.
plan::Plan fit_to_allocator(const PlanRequest& request, LivePlanner plan_live);

// The fractions tried between `refused`, the smallest fraction whose plan the allocator did not
// place, and `placed`, the largest it did: the quarter points, nearest `refused` first. Near the
// edge of what fits, a plan's time swings by more than the fractions' step from one live budget
// to the next (BERT-Large at 0.6 of its peak: 2.0656 at 0.98, 2.0258 at 0.9875, 2.0941 at 0.985,
// 2.0456 at 0.9825), as does whether the allocator places it, so a few more plans made there
// find a faster one placed more often than the largest placed fraction alone.
std::vector<double> fraction_steps_between(double refused, double placed);

}  // namespace delta::planner
