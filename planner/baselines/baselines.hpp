// The baselines DELTA is compared with, each reduced to its decision rule and judged by the
// same simulator: one file each (dtr_runtime.cpp for DTR).
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <optional>
#include <string>

namespace delta::planner {

plan::Plan plan_native(const PlanRequest& request);
plan::Plan plan_vdnn(const PlanRequest& request);
plan::Plan plan_capuchin(const PlanRequest& request);
plan::Plan plan_delta_public(const PlanRequest& request);
plan::Plan plan_chen(const PlanRequest& request);
plan::Plan plan_knapsack(const PlanRequest& request);
// Online: DTR's runtime with its equivalence-class heuristic, on the trace's op graph.
SimulationResult run_dtr(const PlanRequest& request);
// Exact MILP via an external solver; nullopt with `reason` when none is installed or the trace
// is too large.
std::optional<plan::Plan> plan_milp(const PlanRequest& request, std::string& reason);

}  // namespace delta::planner
