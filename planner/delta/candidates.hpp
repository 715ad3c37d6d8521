// The candidate plans' settings: the sweep's (each also planned for a slightly tighter budget
// while the simulator finds its plan infeasible) and the offline rematerialisation's, most
// useful first. The portfolio (delta/portfolio.hpp) plans with each and keeps the fastest.
#pragma once

#include "common/request.hpp"
#include "delta/remat/remat.hpp"
#include "delta/sweep/sweep.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <cstddef>
#include <functional>
#include <vector>

namespace delta::planner {

// Short regeneration chains first; long ones (up to kLongChain ops) free more at tight
// budgets but tie up more inputs, so they are a second try rather than the default.
// Regeneration alone is the last try: where transfers cannot hide (fast compute, slow
// link), swaps that look cheap hold memory through their copies and cost more regeneration
// elsewhere.
inline constexpr std::size_t kLongChain = 64;
// The rules of two baselines that share the sweep join as candidates too: on some models
// their simple choices (swap whatever hides; largest stale block first) land better.
struct SweepSetting {
  std::size_t chain;
  double factor;
  bool swap;
  Policy policy = Policy::delta;
};
inline constexpr SweepSetting kSweepSettings[] = {
    {4, 1.0, true},          {4, 3.0, true},          {4, 10.0, true},           {kLongChain, 1.0, true},
    {kLongChain, 3.0, true}, {kLongChain, 10.0, true}, {4, 1.0, false},          {kLongChain, 1.0, false},
    {4, 1.0, true, Policy::capuchin}, {4, 1.0, true, Policy::delta_public}};

// One sweep setting, planned for the budget and, while the simulator finds its plan
// infeasible, for 3% less twice more; `visit(plan, verdict)` sees each plan, judged at the
// real budget. A setting without swaps plans nothing where regeneration alone cannot fit
// (regeneration_alone_cannot_fit): its plans could only fail.
void sweep_tightening(const PlanRequest& request, const SweepSetting& setting, StateSwaps state_swaps,
                      const std::function<void(plan::Plan& plan, const SimulationResult& verdict)>& visit);

// The offline replay's settings, most useful first. Restored replay inputs stay resident only
// with `restore_headroom` sizes of room left for temporaries (little room rebuilds less at
// loose budgets, more fails less at tight ones); a drop's cost looks `rebuild_depth` levels
// through inputs that are gone as well (shallow judges loose budgets better, deep the long
// chains of tight ones) and, with `children` weight, at the dropped blocks made from it (what
// keeps tight budgets from stranding long rebuilds: densenet121 at 0.2, 1.91 to 1.48); and
// the weight of time against cost in the drop score shifts between models.
std::vector<RematOptions> remat_settings(std::size_t count, std::size_t revived, std::size_t siblings, std::size_t shared_inputs,
                                        std::size_t restarts);

}  // namespace delta::planner
