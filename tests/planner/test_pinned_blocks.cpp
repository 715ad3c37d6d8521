// Blocks live before the step and smaller than PlanRequest::min_moved_persistent_bytes never
// move: auto mode's step holds them on pages they share at the switch, so a plan that moved them
// could not run as made. Planned with them resident, the plan still fits its budget.
#include "common/request.hpp"
#include "delta/pipeline.hpp"
#include "planner_fixtures.hpp"
#include "sim/simulator.hpp"
#include "trace/dtr_loader.hpp"

#include <catch2/catch.hpp>

#include <cstdint>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// The decisions of `plan` for blocks live before the step smaller than `bytes`.
std::size_t small_persistent_moved(const TraceIndex& index, const plan::Plan& plan, std::uint64_t bytes) {
  std::size_t moved = 0;
  for (const plan::BlockDecision& d : plan.decisions) {
    const BlockInfo& info = index.block(index.block_index(d.block));
    if (info.from_start && info.size < bytes && !d.intervals.empty()) ++moved;
  }
  return moved;
}

}  // namespace

TEST_CASE("Small blocks live before the step stay resident where the request pins them, and the plan still fits") {
  const std::string log = dtr_log("lstm");
  REQUIRE(!log.empty());
  trace::Trace t = load_dtr_log(log);
  TraceIndex index(t);
  constexpr std::uint64_t kPage = std::uint64_t{2} << 20;
  PlanRequest request = titanv_request_at(index, 0.2);  // where its plan moves 37 of them
  request.search_rounds = 0;
  // Unpinned, the plan moves some of them: the setting has something to change.
  const plan::Plan free_plan = plan_delta(request);
  REQUIRE(free_plan.predicted.feasible);
  CHECK(small_persistent_moved(index, free_plan, kPage) > 0);

  request.min_moved_persistent_bytes = kPage;
  plan::Plan pinned_plan = plan_delta(request);
  REQUIRE(pinned_plan.predicted.feasible);
  CHECK(small_persistent_moved(index, pinned_plan, kPage) == 0);
  // Judged afresh, as made: within the budget.
  const SimulationResult again = judge(request, pinned_plan);
  CHECK(again.feasible);
  CHECK(again.peak_bytes <= request.budget_bytes);
  // Blocks made during the step and blocks of a page or more may still move.
  CHECK(!pinned_plan.decisions.empty());
}
