// Every way of meeting a memory budget that the project can judge, by name: DELTA's method and
// the baselines from the literature, all run on the same trace, GPU profile and simulator. The
// planner's roof: it includes every room, and nothing in the planner includes it.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <optional>
#include <string>
#include <vector>

namespace delta::planner {

struct MethodResult {
  std::string method;
  bool feasible = false;
  std::string reason;                 // why infeasible
  SimulationResult simulation;
  std::optional<plan::Plan> plan;     // absent for online methods (dtr)
  double planning_seconds = 0;
};

// delta, native, vdnn, capuchin, dtr, delta-public, chen, knapsack, milp.
const std::vector<std::string>& method_names();
// Throws std::invalid_argument naming the known methods for an unknown name.
MethodResult run_method(const std::string& method, const PlanRequest& request);

}  // namespace delta::planner
