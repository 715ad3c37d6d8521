// Fitting a plan to the caching allocator as the executor places it (planner/delta/fitting.hpp):
// under executor placement a moved block sits on pages of its own, so a plan that moves many
// blocks smaller than a page wastes most of a page on each while they are resident. A request's
// min_moved_bytes keeps such blocks where they are, and the fitting plans that way where the
// allocator cannot place the plan that moves them.
#include "common/request.hpp"
#include "delta/pipeline.hpp"
#include "delta/sweep/sweep.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

constexpr std::uint64_t kMiB = 1u << 20;
constexpr std::uint64_t kSmall = 64 * 1024;  // far below a 2 MiB page
constexpr std::uint64_t kSmallCount = 64;
constexpr std::uint64_t kBig = 64 * kMiB;

// Op 0 writes A (64 MiB, to the end of the step) and 64 small blocks G (64 KiB each, read
// last at op 1 and freed by the program only during op 4: each may be discarded after op 1). Op 3 writes and frees
// B (64 MiB). Op 5 reads A. Native peak at op 3: A + B + all of G = 132 MiB.
trace::Trace small_blocks_trace() {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kBig, 0, trace::kNever));
  std::vector<std::pair<std::uint64_t, Access>> written{{1, Access::write}}, read;
  for (std::uint64_t i = 0; i < kSmallCount; ++i) {
    t.blocks.push_back(block(100 + i, kSmall, 0, 125 * kMs, trace::Category::gradient));
    written.push_back({100 + i, Access::write});
    read.push_back({100 + i, Access::read});
  }
  op(t, "produce", 10 * kMs, written);
  op(t, "read_small", 10 * kMs, read);
  op(t, "filler_a", 50 * kMs, {});
  t.blocks.push_back(block(2, kBig, 70 * kMs, 80 * kMs));
  op(t, "produce_b", 10 * kMs, {{2, Access::write}});
  op(t, "filler_b", 50 * kMs, {});
  op(t, "consume_a", 10 * kMs, {{1, Access::read}});
  return t;
}

// Whether the plan swaps, rebuilds or discards a block of the trace smaller than `bytes`.
bool moves_below(const TraceIndex& index, const plan::Plan& plan, std::uint64_t bytes) {
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if ((interval.action == plan::Action::swap || interval.action == plan::Action::regenerate ||
           interval.action == plan::Action::discard) &&
          index.block(index.block_index(decision.block)).size < bytes)
        return true;
  return false;
}

}  // namespace

TEST_CASE("min_moved_bytes keeps blocks smaller than it resident in the sweep and the whole method") {
  trace::Trace t = small_blocks_trace();
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 2 * kBig + kSmallCount * kSmall);
  PlanRequest request = titanv_request(index, 100 * kMiB);
  DeltaOptions options;
  options.discard_dead = true;
  // Without it, the small blocks held past their last read are discarded (they cost nothing
  // in live bytes), so the test can tell.
  CHECK(moves_below(index, plan_with_sweep(request, options), plan::kSwapGranularity));
  CHECK(moves_below(index, plan_delta(request), plan::kSwapGranularity));
  request.min_moved_bytes = plan::kSwapGranularity;
  plan::Plan swept = plan_with_sweep(request, options);
  CHECK_FALSE(moves_below(index, swept, plan::kSwapGranularity));
  plan::Plan delta = plan_delta(request);
  CHECK_FALSE(moves_below(index, delta, plan::kSwapGranularity));
  CHECK(judge(request, delta).feasible);  // A away over op 3 is enough
}

TEST_CASE("fitted under executor placement, a plan keeps small blocks resident where moving them cannot be placed") {
  trace::Trace t = small_blocks_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 100 * kMiB);
  request.through_allocator = true;
  // The planner's placement frees a discarded block's bytes for any other block: moving the
  // small ones is placed there.
  request.executor_placement = false;
  plan::Plan planner_way = plan_delta(request);
  REQUIRE(planner_way.predicted.feasible);
  CHECK(moves_below(index, planner_way, plan::kSwapGranularity));
  // The executor's: 64 small blocks on pages of their own are 128 MiB beside A at op 0, over
  // the 100 MiB budget, so no fraction of the budget places a plan that moves them; kept on
  // shared pages they take 4 MiB.
  request.executor_placement = true;
  plan::Plan executor_way = plan_delta(request);
  const SimulationResult placed = judge(request, executor_way);
  INFO(placed.error);
  REQUIRE(placed.feasible);
  CHECK_FALSE(moves_below(index, executor_way, plan::kSwapGranularity));
  CHECK(placed.allocator_reserved_peak <= request.budget_bytes);
  CHECK(executor_way.predicted.planned_fraction == 1.0);
}
