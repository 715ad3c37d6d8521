// A limit on planning time (PlanRequest::deadline): past it DELTA refines no more, yet still
// returns a whole plan that the caching allocator places within the budget, and with no limit
// the plan is as it always was.
#include "common/request.hpp"
#include "delta/pipeline.hpp"
#include "planner_fixtures.hpp"
#include "sim/simulator.hpp"
#include "sim/stage_clock.hpp"
#include "trace/dtr_loader.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// As `deltactl plan` asks by default: fitted to the caching allocator as the executor places
// moved blocks; without the local search, which has tests of its own.
PlanRequest placed_request(const TraceIndex& index, double ratio) {
  PlanRequest request = titanv_request_at(index, ratio);
  request.through_allocator = true;
  request.executor_placement = true;
  request.search_rounds = 0;
  return request;
}

struct Planned {
  plan::Plan plan;
  std::uint64_t simulations = 0;
  std::uint64_t sweeps_polished = 0;  // the other sweeps polished beside the portfolio's choice
};

Planned plan_counting(const PlanRequest& request) {
  StageClock::enable(true);
  Planned out{plan_delta(request)};
  const std::string polished = "a sweep polished";
  for (const StageTime& row : StageClock::report()) {
    out.simulations += row.simulations;
    if (row.path.ends_with(polished)) out.sweeps_polished += row.calls;
  }
  StageClock::enable(false);
  return out;
}

// The plan's verdict as it will run: through the allocator capped at the budget, the moved
// blocks placed as the fitting chose.
SimulationResult as_it_runs(const PlanRequest& request, const TraceIndex& index, const plan::Plan& plan) {
  SimulationOptions options = simulation_options(request);
  options.packed_moves = plan.predicted.packed_moves;
  options.packed_groups = plan.predicted.packed_groups;
  return simulate(index, plan, options);
}

// Planned with the limit passed before planning starts, and run as the plan will run: placed
// within the budget.
std::pair<Planned, SimulationResult> planned_past_limit(const TraceIndex& index, double ratio) {
  PlanRequest limited = placed_request(index, ratio);
  limited.deadline = std::chrono::steady_clock::now();
  Planned quick = plan_counting(limited);
  SimulationResult run = as_it_runs(limited, index, quick.plan);
  INFO(run.error);
  REQUIRE(run.feasible);
  CHECK(run.peak_bytes <= limited.budget_bytes);
  return {std::move(quick), std::move(run)};
}

}  // namespace

TEST_CASE("A planning time limit already passed still gives a whole plan the allocator places, for a fraction of the work") {
  const std::string log = dtr_log("unet");
  REQUIRE(!log.empty());
  trace::Trace t = load_dtr_log(log);
  TraceIndex index(t);

  const auto [quick, quick_run] = planned_past_limit(index, 0.5);
  REQUIRE_NOTHROW(plan::check_plan_matches(quick.plan, t));
  CHECK(quick_run.step_time_ns == quick.plan.predicted.step_time_ns);  // the plan says what it will do
  CHECK(quick.plan.predicted.overhead > 1.0);  // a real plan: unet at 0.5 cannot run at native speed

  // Everything past the limit is decided without the clock: the same plan again.
  PlanRequest limited = placed_request(index, 0.5);
  limited.deadline = std::chrono::steady_clock::now();
  const Planned again = plan_counting(limited);
  CHECK(plan::to_json_text(again.plan) == plan::to_json_text(quick.plan));

  // With no limit: the refinements run, far more simulations, and a plan no slower.
  const PlanRequest unlimited = placed_request(index, 0.5);
  const Planned thorough = plan_counting(unlimited);
  const SimulationResult thorough_run = as_it_runs(unlimited, index, thorough.plan);
  REQUIRE(thorough_run.feasible);
  CHECK(thorough.simulations > 20 * quick.simulations);
  CHECK(thorough_run.step_time_ns < quick_run.step_time_ns);

  // A limit far off changes nothing: the plan is the one made with none.
  PlanRequest distant = placed_request(index, 0.5);
  distant.deadline = std::chrono::steady_clock::now() + std::chrono::hours(24);
  CHECK(plan::to_json_text(plan_delta(distant)) == plan::to_json_text(thorough.plan));
}

TEST_CASE("Past the planning time limit, with a plan that runs, no other sweep is polished") {
  // Each is a portfolio's sweeps and a polish: seconds on GPT2-XL, where a 2 s limit returned in
  // up to 4.7 s while they ran.
  const std::string log = dtr_log("unet");
  REQUIRE(!log.empty());
  trace::Trace t = load_dtr_log(log);
  TraceIndex index(t);

  const Planned quick = planned_past_limit(index, 0.3).first;
  CHECK(quick.sweeps_polished == 0);

  // With no limit they are: unet at 0.3 swaps parameters, and a sweep with them resident is
  // polished beside the portfolio's choice.
  const Planned thorough = plan_counting(placed_request(index, 0.3));
  CHECK(thorough.sweeps_polished > 0);
}
