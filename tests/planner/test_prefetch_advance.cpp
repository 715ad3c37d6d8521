// Copies back issued earlier where an op waits for them (planner/delta/passes/prefetch_advance.hpp).
#include "common/plan_edits.hpp"
#include "delta/passes/prefetch_advance.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// X (kX: 100 ms each way on the Titan V's link) swapped over ops 1 to 3 of swap_trace, fetched
// back only at op 4, the op that reads it.
plan::Plan fetched_at_the_need(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  plan::Interval swap;
  swap.action = plan::Action::swap;
  swap.release_after = 0;
  swap.prefetch_at = 4;
  swap.needed_by = 4;
  add_interval(p, *request.index, request.index->block_index(1), swap);
  return p;
}

const plan::Interval& only_swap(const plan::Plan& p) {
  REQUIRE(p.decisions.size() == 1);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  return p.decisions[0].intervals[0];
}

}  // namespace

TEST_CASE("a copy back an op waits for is issued earlier where the budget has room") {
  // Op 4 waits the whole copy (100 ms): 520 ms. Y is freed after op 2, so X fits back from op 3
  // (150 ms of compute, more than its copy): nothing waits, 420 ms.
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  plan::Plan p = fetched_at_the_need(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.step_time_ns == 520 * kMs + 5'000);  // the copy's launch latency too
  p = advance_prefetches(request, std::move(p), judged, {});
  REQUIRE(judged.feasible);
  CHECK(only_swap(p).prefetch_at == 3);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.step_time_ns == 420 * kMs);
  CHECK(judged.peak_bytes <= request.budget_bytes);
  CHECK(p.predicted.step_time_ns == judged.step_time_ns);  // the plan's prediction is its verdict
}

TEST_CASE("a copy back stays where it is when no earlier op has room for the block") {
  // As above, but op 3 reads Y, so Y is live until op 3 ends: X does not fit beside it before
  // op 4, and the plan keeps its wait rather than break the budget.
  trace::Trace t = swap_trace();
  t.blocks[1].free_ns = 410 * kMs;
  t.ops[3].blocks = {{2, trace::Access::read}};
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kX + kY / 2);
  plan::Plan p = fetched_at_the_need(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  const std::int64_t before = judged.step_time_ns;
  REQUIRE(judged.stall_ns > 0);
  p = advance_prefetches(request, std::move(p), judged, {});
  CHECK(judged.feasible);
  CHECK(only_swap(p).prefetch_at == 4);
  CHECK(judged.step_time_ns == before);
}
