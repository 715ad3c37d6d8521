// Passes for a plan whose copy lanes are what it waits for: copies back needed later issued
// behind those an op waits for (planner/delta/passes/placed/prefetch_deferral.hpp), swaps
// rebuilt where the link, not the budget, is what the step waits for (swaps_rebuilt.hpp), and
// copies back pulled into the lane's idle time with room made by rebuilds (lane_gap_fill.hpp).
// On the Titan V profile: 12 GB/s each way, 5 us of launch latency per copy.
#include "common/plan_edits.hpp"
#include "delta/passes/placed/lane_gap_fill.hpp"
#include "delta/passes/placed/prefetch_deferral.hpp"
#include "delta/passes/placed/swaps_rebuilt.hpp"
#include "hand_plans.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

constexpr std::uint64_t kQ = 120'000'000;  // 10 ms over the link
constexpr std::int64_t kUs = 1'000;

// P (kX, 100 ms of link) made by op 0 and read by op 7; Q (kQ) made by op 1 and read by op 5;
// op 2 (110 ms: both copies out are done by its end), op 3 and op 4 (1 ms each) and op 6 use
// nothing. Ops take 10 ms unless said.
trace::Trace two_copies_trace(bool p_read_at_op5 = false) {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, trace::kNever));
  t.blocks.push_back(block(2, kQ, 10 * kMs, trace::kNever));
  op(t, "produce_p", 10 * kMs, {{1, Access::write}});
  op(t, "produce_q", 10 * kMs, {{2, Access::write}});
  op(t, "filler", 110 * kMs, {});
  op(t, "short", 1 * kMs, {});
  op(t, "short", 1 * kMs, {});
  if (p_read_at_op5)
    op(t, "consume_q", 10 * kMs, {{2, Access::read}, {1, Access::read}});
  else
    op(t, "consume_q", 10 * kMs, {{2, Access::read}});
  op(t, "filler", 10 * kMs, {});
  op(t, "consume_p", 10 * kMs, {{1, Access::read}});
  return t;
}

// P fetched back at op 3, ahead of Q, fetched at op 4 for op 5.
plan::Plan p_fetched_first(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(1), swap(0, 3, 7));
  add_interval(p, *request.index, request.index->block_index(2), swap(1, 4, 5));
  return p;
}

std::uint64_t prefetch_of(const plan::Plan& p, std::uint64_t block) {
  for (const plan::BlockDecision& d : p.decisions)
    if (d.block == block) {
      REQUIRE(d.intervals.size() == 1);
      return d.intervals[0].prefetch_at;
    }
  FAIL("no decision for block " << block);
  return 0;
}

}  // namespace

TEST_CASE("a copy back needed later is issued behind the one an op waits for") {
  // Copies out: P 10 -> 110.005 ms, Q queued behind it to 120.010. Copies back: P issued at op
  // 3 (130 ms) to 230.005; Q, issued at op 4 (131 ms), behind it to 240.010, so op 5 waits for it
  // and the step ends at 270.010. With P issued at op 5, behind Q: Q comes back 131 -> 141.005,
  // op 5 runs then, P 141.005 -> 241.010, and op 7 waits for it: 251.010.
  trace::Trace t = two_copies_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2 * kX);
  plan::Plan p = p_fetched_first(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.step_time_ns == 270 * kMs + 10 * kUs);
  p = defer_blocking_prefetches(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  CHECK(prefetch_of(p, 1) == 5);
  CHECK(prefetch_of(p, 2) == 4);
  CHECK(judged.step_time_ns == 251 * kMs + 10 * kUs);
  CHECK(p.predicted.step_time_ns == judged.step_time_ns);
}

TEST_CASE("a copy back that the waiting op reads too stays ahead") {
  // As above, but op 5 reads P as well: it waits for both copies either way.
  trace::Trace t = two_copies_trace(true);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2 * kX);
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(1), swap(0, 3, 5));
  add_interval(p, *request.index, request.index->block_index(2), swap(1, 4, 5));
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  const std::int64_t before = judged.step_time_ns;
  p = defer_blocking_prefetches(request, std::move(p), judged);
  CHECK(prefetch_of(p, 1) == 3);
  CHECK(judged.step_time_ns == before);
}

namespace {

// W (1 MB parameter); op 0 (1 ms) makes A (kX) from W; op 1 (110 ms: A's copy out is done by
// its end) and op 2 (1 ms) use nothing; op 3 (10 ms) reads A. With `a_as_state`, A is state
// live before and after the step instead (read by op 0, which writes nothing): no op makes it.
trace::Trace cheap_activation_trace(bool a_as_state = false) {
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  if (a_as_state) {
    t.blocks.push_back(block(2, kX, trace::kNever, trace::kNever, trace::Category::optimizer_state));
    op(t, "read_s", 1 * kMs, {{1, Access::read}, {2, Access::read}});
  } else {
    t.blocks.push_back(block(2, kX, 0, trace::kNever));
    op(t, "make_a", 1 * kMs, {{1, Access::read}, {2, Access::write}});
  }
  op(t, "filler", 110 * kMs, {});
  op(t, "filler", 1 * kMs, {});
  op(t, "consume_a", 10 * kMs, {{2, Access::read}});
  return t;
}

// A swapped over ops 1 and 2, fetched back at op 2 for op 3.
plan::Plan a_swapped(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(2), swap(0, 2, 3));
  return p;
}

}  // namespace

TEST_CASE("a swap the link cannot bring back in time is rebuilt where its replay is cheaper") {
  // The swap: A out 1 -> 101.005 ms, back from op 2 (111 ms) to 211.005, op 3 waits for it:
  // 221.005 ms. Rebuilt by replaying op 0 (1 ms, W resident) before op 3: 1 + 110 + 1 + 1 + 10.
  trace::Trace t = cheap_activation_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2 * kX);
  plan::Plan p = a_swapped(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.step_time_ns == 221 * kMs + 5 * kUs);
  p = rebuild_swaps_the_link_cannot_carry(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  REQUIRE(p.decisions.size() == 1);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  const plan::Interval& rebuilt = p.decisions[0].intervals[0];
  CHECK(rebuilt.action == plan::Action::regenerate);
  CHECK(rebuilt.replay == std::vector<std::uint64_t>{0});
  CHECK(rebuilt.needed_by == 3);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.step_time_ns == 123 * kMs);
  CHECK(judged.bytes_h2d == 0);
}

TEST_CASE("a swapped block that no replay can rebuild stays swapped") {
  // A is state from before the step: no op of the step makes it.
  trace::Trace t = cheap_activation_trace(true);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2 * kX);
  plan::Plan p = a_swapped(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.stall_ns > 0);
  const std::int64_t before = judged.step_time_ns;
  p = rebuild_swaps_the_link_cannot_carry(request, std::move(p), judged);
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions[0].intervals[0].action == plan::Action::swap);
  CHECK(judged.step_time_ns == before);
}

namespace {

// W (1 MB parameter); P (kY) made by op 0, read by op 5; D (kY) made by op 2 from nothing, read
// by op 4; C (kY) made by op 3 from W, read by op 6. Each is freed after its last read. Ops take
// 1 ms but op 1 and op 4 (10 ms).
trace::Trace idle_lane_trace(bool c_made_from_d = false) {
  using trace::Access;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, kY, 0, 32 * kMs));        // P, freed after op 5 (24 ms)
  t.blocks.push_back(block(3, kY, 11 * kMs, 23 * kMs));  // D, freed after op 4 (23 ms)
  t.blocks.push_back(block(4, kY, 12 * kMs, 33 * kMs));  // C, freed after op 6 (25 ms)
  op(t, "make_p", 1 * kMs, {{2, Access::write}});
  op(t, "filler", 10 * kMs, {});
  op(t, "make_d", 1 * kMs, {{3, Access::write}});
  if (c_made_from_d)
    op(t, "make_c", 1 * kMs, {{3, Access::read}, {4, Access::write}});
  else
    op(t, "make_c", 1 * kMs, {{1, Access::read}, {4, Access::write}});
  op(t, "use_d", 10 * kMs, {{3, Access::read}});
  op(t, "consume_p", 1 * kMs, {{2, Access::read}});
  op(t, "use_c", 1 * kMs, {{4, Access::read}});
  return t;
}

// The budget: W and two of P, D and C.
PlanRequest idle_lane_request(const TraceIndex& index) { return titanv_request(index, 1'000'000 + 2 * kY); }

// P swapped after op 0 and fetched at op 5, once D is freed.
plan::Plan p_fetched_at_its_need(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(2), swap(0, 5, 5));
  return p;
}

}  // namespace

TEST_CASE("a copy back is pulled into the lane's idle time over room that rebuilds make") {
  // The budget holds W and two of P, D and C. P is swapped after op 0 (out 1 -> 9.338 ms) and
  // fetched at op 5, once D is freed: op 5 waits for it from 23 to 31.338 ms, the step ends at
  // 33.338 while the lane idled from 9.338. Pulled in: P fetched from op 2 (11 ms, once its copy
  // out is done) to 19.338, the room made by rebuilding D (op 2 replayed before op 4) and C (op 3
  // replayed before op 6): 1 + 10 + 1 + 1 + (1 + 10) + 1 + (1 + 1) = 27 ms, no wait.
  trace::Trace t = idle_lane_trace();
  TraceIndex index(t);
  const PlanRequest request = idle_lane_request(index);
  plan::Plan p = p_fetched_at_its_need(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  const std::int64_t copy = transfer_ns(kY, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns);  // 8.338 ms
  REQUIRE(copy / kUs == 8338);
  REQUIRE(judged.step_time_ns == 25 * kMs + copy);
  p = fill_lane_gaps(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  CHECK(prefetch_of(p, 2) == 2);
  for (std::uint64_t rebuilt : {3, 4}) {
    const auto d = find_decision(p, rebuilt);
    REQUIRE(d != p.decisions.end());
    REQUIRE(d->intervals.size() == 1);
    CHECK(d->intervals[0].action == plan::Action::regenerate);
  }
  CHECK(judged.stall_ns == 0);
  CHECK(judged.step_time_ns == 27 * kMs);
  CHECK(judged.peak_bytes <= request.budget_bytes);
}

TEST_CASE("no copy back is pulled where no rebuild can make the room") {
  // C is made from D: op 3 reads D, so D is not idle across op 3, and C's rebuild would read D,
  // freed after op 4. No rebuild makes room for P at op 3, and P stays fetched at op 5.
  trace::Trace t = idle_lane_trace(true);
  TraceIndex index(t);
  const PlanRequest request = idle_lane_request(index);
  plan::Plan p = p_fetched_at_its_need(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  const std::int64_t before = judged.step_time_ns;
  p = fill_lane_gaps(request, std::move(p), judged);
  CHECK(prefetch_of(p, 2) == 5);
  CHECK(p.decisions.size() == 1);
  CHECK(judged.step_time_ns == before);
}
