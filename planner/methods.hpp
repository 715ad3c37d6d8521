// Every way of meeting a memory budget that the project can judge: DELTA's planner and the
// baselines from the literature, all run on the same trace, GPU profile and simulator.
#pragma once

#include "simulator.hpp"
#include "trace_index.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace delta::planner {

struct PlanRequest {
  const TraceIndex* index = nullptr;
  GpuProfile gpu;
  std::uint64_t budget_bytes = 0;
  double budget_ratio = 0;  // budget / native peak, recorded in plans
  // Judge plans through the caching allocator on a sim device capped at the budget, so that
  // fragmentation counts (planning then aims below the budget until the allocator fits).
  bool through_allocator = false;
  // Threads the planner may use for independent candidates (0: DELTA_PLANNER_THREADS, else one
  // per core). The plan chosen does not depend on it.
  std::size_t threads = 0;
  // Local search on DELTA's chosen plan (planner/local_search.hpp): at most `search_rounds`
  // rounds, ending after `search_patience` rounds without a faster plan. Absent: the defaults
  // for the trace's size (short traces only). 0 rounds: none; patience 0: never ends early.
  std::optional<std::size_t> search_rounds, search_patience;
  // After the local search, search again from the plan with the lower bound's choice at the op
  // in most excess (planner/bound_guided.hpp): needs an LP solver, and costs the bound's LP, a
  // polish and a second search (resnet32 at 0.2 of its peak: 1.16663 to 1.16543, 4.6 to
  // 11.7 s). Absent: on traces of up to 2,000 ops and block uses together, where that takes
  // seconds.
  std::optional<bool> search_from_bound;
  // Called when the local search finds a faster plan, and once when it ends. May be empty.
  struct SearchProgress {
    std::size_t round = 0;         // rounds done
    std::size_t improvements = 0;  // faster plans found so far
    double overhead = 1;           // of the plan the search holds now
    bool done = false;
    bool from_bound = false;       // the second search, from the lower bound's optimum (search_from_bound)
  };
  std::function<void(const SearchProgress& progress)> on_search_progress;
  // Called after each budget fraction the fitting tries, with the allocator's verdict. For
  // progress on long plans; may be empty.
  struct FitAttempt {
    double fraction = 1;      // of the budget, planned for in live bytes
    bool fits_live = false;   // a plan fits that in live bytes
    std::string repaired_at;  // where the allocator first refused, when evictions there made room
  };
  std::function<void(const FitAttempt& attempt, const SimulationResult& placed)> on_fit_attempt;
};

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

// --- the individual methods (each in its own file) ---
plan::Plan plan_delta(const PlanRequest& request);
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

// Shared helpers.
// Regenerates `block` before `needed_by` by replaying its version chain; inputs are what the
// chain reads besides the block itself.
plan::Interval regeneration_interval(const TraceIndex& index, std::uint32_t block, std::uint32_t release_after,
                                     std::uint32_t needed_by);
// Compute the ops of a regeneration's replay take, ns.
double replay_compute_ns(const TraceIndex& index, const plan::Interval& interval);
plan::Plan empty_plan(const PlanRequest& request, const std::string& method);
void add_interval(plan::Plan& plan, const TraceIndex& index, std::uint32_t block, plan::Interval interval);
// The decision for block `id` (trace::Block::id), or plan.decisions.end().
std::vector<plan::BlockDecision>::iterator find_decision(plan::Plan& plan, std::uint64_t id);
// Whether the interval rebuilds its block by replays (a regeneration or a revival).
inline bool rebuilds(const plan::Interval& x) { return x.action == plan::Action::regenerate || x.action == plan::Action::revive; }
SimulationResult judge(const PlanRequest& request, plan::Plan& plan);  // fills plan.predicted

}  // namespace delta::planner
