// Passes of the polish: copies back issued earlier where an op waits for them
// (planner/delta/passes/copies/prefetch_advance.hpp), freed blocks that many replays rebuild kept
// instead (hub_retention.hpp), and evicted blocks that other replays rebuild rebuilt once
// (hub_rebuild.hpp), and swapped blocks rebuilt from a source swapped instead (source_swaps.hpp).
#include "common/plan_edits.hpp"
#include "delta/passes/copies/later_state_swaps.hpp"
#include "delta/passes/copies/prefetch_advance.hpp"
#include "delta/passes/evictions/source_swaps.hpp"
#include "delta/passes/replays/hub_rebuild.hpp"
#include "delta/passes/replays/hub_retention.hpp"
#include "hand_plans.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

#include <string>

#include <vector>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// X (kX: 100 ms each way on the Titan V's link) swapped over ops 1 to 3 of swap_trace, fetched
// back only at op 4, the op that reads it.
plan::Plan fetched_at_the_need(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(1), swap(0, 4, 4));
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

namespace {

// W (1 MB parameter); op 0 (10 ms) makes mask M (1 MB) from W; ops 1 and 2 (1 ms each) make A1
// and A2 (100 MB each) from M, and the program frees M after op 2; op 3 (10 ms) makes Y (150 MB),
// freed after it; ops 4 and 5 read A1 and A2; op 6 ends the step. Native peak 351 MB at op 3.
trace::Trace mask_trace() {
  using trace::Access;
  constexpr std::uint64_t kMb = 1'000'000;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 1 * kMb, 0, 12 * kMs));          // M
  t.blocks.push_back(block(3, 100 * kMb, 10 * kMs, 23 * kMs));  // A1
  t.blocks.push_back(block(4, 100 * kMb, 11 * kMs, 24 * kMs));  // A2
  t.blocks.push_back(block(5, 150 * kMb, 12 * kMs, 22 * kMs));  // Y
  op(t, "make_mask", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "make_a1", 1 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "make_a2", 1 * kMs, {{2, Access::read}, {4, Access::write}});
  op(t, "make_y", 10 * kMs, {{5, Access::write}});
  op(t, "read_a1", 1 * kMs, {{3, Access::read}});
  op(t, "read_a2", 1 * kMs, {{4, Access::read}});
  op(t, "tail", 1 * kMs, {});
  return t;
}

// A1 and A2 rebuilt before ops 4 and 5, each by replaying M's producer first, then its own.
plan::Plan rebuilding_through_the_mask(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(3), regeneration(1, 4, {0, 1}, {1}));
  add_interval(p, *request.index, request.index->block_index(4), regeneration(2, 5, {0, 2}, {1}));
  return p;
}

}  // namespace

TEST_CASE("a freed block rebuilt inside several replays is retained and the replays skip its ops") {
  // Both A1 and A2 must be away at op 3 (200 MB budget). Rebuilt by replaying M's producer
  // first, each costs 11 ms; with M retained from its free to the last replay (1 MB more at
  // op 3, 152 MB), 1 ms each.
  trace::Trace t = mask_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 200'000'000);
  plan::Plan p = rebuilding_through_the_mask(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.extra_compute_ns == 22 * kMs);
  p = retain_rebuilt_inputs(request, std::move(p), judged, {});
  REQUIRE(judged.feasible);
  CHECK(judged.extra_compute_ns == 2 * kMs);
  CHECK(judged.peak_bytes <= request.budget_bytes);
  CHECK(p.predicted.step_time_ns == judged.step_time_ns);
  bool retained = false;
  for (const plan::BlockDecision& d : p.decisions) {
    REQUIRE(d.intervals.size() == 1);
    const plan::Interval& x = d.intervals[0];
    if (d.block == 2) {
      retained = x.action == plan::Action::retain && x.release_after == 2 && x.until == 5;
    } else {
      CHECK(x.action == plan::Action::regenerate);
      CHECK(x.replay == std::vector<std::uint64_t>{d.block == 3 ? 1u : 2u});
      CHECK(x.inputs == std::vector<std::uint64_t>{2});
    }
  }
  CHECK(retained);
}

TEST_CASE("a freed block rebuilt inside replays stays rebuilt where keeping it breaks the budget") {
  // As above with 151 MB of budget: at op 3 W, Y and M take 152 MB.
  trace::Trace t = mask_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 151'500'000);
  plan::Plan p = rebuilding_through_the_mask(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  p = retain_rebuilt_inputs(request, std::move(p), judged, {});
  CHECK(judged.feasible);
  CHECK(judged.extra_compute_ns == 22 * kMs);
  for (const plan::BlockDecision& d : p.decisions) CHECK(d.block != 2);
}

TEST_CASE("an evicted block rebuilt inside other replays is rebuilt once, at the first, and kept") {
  // The mask trace with M kept by the program until op 6, which reads it (as GPT-2 keeps the
  // MLP's projection for the backward pass). The plan has A1, A2 and M away at op 3, each
  // rebuilt where needed: A1 and A2 by replaying M's producer first (11 ms each), M by its
  // producer (10 ms). Rebuilt once at op 4, where A1's replay makes it anyway, and kept to op
  // 6: A1 and A2 replay their own producers alone, 12 ms in all.
  trace::Trace t = mask_trace();
  t.blocks[1].free_ns = t.ops.back().start_ns + t.ops.back().duration_ns;
  t.ops.back().blocks = {{2, trace::Access::read}};
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 200'000'000);
  plan::Plan p = rebuilding_through_the_mask(request);
  add_interval(p, index, index.block_index(2), regeneration(2, 6, {0}, {1}));
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.extra_compute_ns == 32 * kMs);
  p = rebuild_hubs_once(request, std::move(p), judged, {});
  REQUIRE(judged.feasible);
  CHECK(judged.extra_compute_ns == 12 * kMs);
  CHECK(judged.peak_bytes <= request.budget_bytes);
  for (const plan::BlockDecision& d : p.decisions) {
    REQUIRE(d.intervals.size() == 1);
    const plan::Interval& x = d.intervals[0];
    CHECK(x.action == plan::Action::regenerate);
    if (d.block == 2) {
      CHECK(x.needed_by == 4);
      CHECK(x.replay == std::vector<std::uint64_t>{0});
    } else {
      CHECK(x.replay == std::vector<std::uint64_t>{d.block == 3 ? 1u : 2u});
      CHECK(x.inputs == std::vector<std::uint64_t>{2});
    }
  }
}

namespace {

// States S1 .. Sn (kY each: 8.3 ms over the link, ids 1 .. n) live before the step; op 2
// (1 ms) makes Y (kY / 2, id n + 1), which needs one of them away; ops 3 .. n + 2 (5 ms each)
// update S1 .. Sn in turn.
trace::Trace states_updated_in_turn(std::uint64_t states) {
  using trace::Access;
  trace::Trace t = titanv_trace();
  for (std::uint64_t id = 1; id <= states; ++id)
    t.blocks.push_back(block(id, kY, trace::kNever, trace::kNever, trace::Category::optimizer_state));
  t.blocks.push_back(block(states + 1, kY / 2, 160 * kMs, 161 * kMs));
  op(t, "forward", 10 * kMs, {});
  op(t, "filler", 150 * kMs, {});
  op(t, "make_y", 1 * kMs, {{states + 1, Access::write}});
  for (std::uint64_t id = 1; id <= states; ++id)
    op(t, "update_s" + std::to_string(id), 5 * kMs, {{id, Access::read}, {id, Access::write}});
  op(t, "tail", 1 * kMs, {});
  return t;
}

// The plan that swaps S1, fetched back at op 3 (where it is updated), under room for all the
// states and Y but one state.
plan::Plan s1_swapped(const PlanRequest& request) {
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, *request.index, request.index->block_index(1), swap(0, 3, 3));
  return p;
}

}  // namespace

TEST_CASE("a state swap whose copy back stalls the optimizer goes to a state block read later") {
  // Two states (states_updated_in_turn). Swapping S1 fetched back at op 3 stalls op 3 the whole
  // copy; swapping S2 instead, fetched back at the same op, hides 5 ms of it behind op 3.
  trace::Trace t = states_updated_in_turn(2);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2 * kY + kY / 2 - 1'000'000);
  plan::Plan p = s1_swapped(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  const std::int64_t before = judged.step_time_ns;
  REQUIRE(judged.stall_ns > 8 * kMs);
  p = swap_later_state(request, std::move(p), judged, {});
  REQUIRE(judged.feasible);
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions[0].block == 2);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  CHECK(p.decisions[0].intervals[0].needed_by == 4);
  CHECK(p.decisions[0].intervals[0].prefetch_at == 3);
  CHECK(judged.step_time_ns == before - 5 * kMs);
  CHECK(judged.peak_bytes <= request.budget_bytes);
}

TEST_CASE("the state swaps of one size go, all at once, to the state blocks read last") {
  // Three states (states_updated_in_turn), S1 updated by op 3, S2 by op 4, S3 by op 5. The
  // plan swaps S1, fetched back at op 3: op 3 waits the whole copy. A block at a time moves it
  // to S2 (the first read later): 3.3 ms still. All at once it goes to S3, read last: the copy
  // back hides behind ops 3 and 4.
  trace::Trace t = states_updated_in_turn(3);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 3 * kY + kY / 2 - 1'000'000);
  plan::Plan p = s1_swapped(request);
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.stall_ns > 8 * kMs);
  plan::Plan one_at_a_time = p;
  SimulationResult one_judged = judged;
  one_at_a_time = swap_later_state(request, std::move(one_at_a_time), one_judged, {});
  REQUIRE(one_at_a_time.decisions.size() == 1);
  CHECK(one_at_a_time.decisions[0].block == 2);
  CHECK(one_judged.stall_ns > 3 * kMs);
  p = reorder_state_swaps(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions[0].block == 3);
  REQUIRE(p.decisions[0].intervals.size() == 1);
  CHECK(p.decisions[0].intervals[0].needed_by == 5);
  CHECK(p.decisions[0].intervals[0].prefetch_at == 3);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.peak_bytes <= request.budget_bytes);
  CHECK(judged.step_time_ns == judge(request, p).step_time_ns);
  // Nothing to gain, nothing changed: already on the block read last.
  const plan::Plan again = reorder_state_swaps(request, p, judged);
  CHECK(again.decisions.size() == 1);
  CHECK(again.decisions[0].block == 3);
}

namespace {

// op0 (10 ms) writes S (softmax output, kX); op1 (5 ms, a dropout) reads S and writes D (kX);
// op2 (120 ms: room for one copy of kX, 100 ms); op3 (50 ms) writes L (kX / 2); op4 (100 ms)
// writes Y (kX), freed after it; op5 (10 ms) reads L, freed after it; op6 (120 ms); op7 (10
// ms) reads D; op8 (10 ms) reads S. Native 435 ms, peak S + D + L + Y at op 4.
trace::Trace dropout_trace() {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, trace::kNever));                   // S
  t.blocks.push_back(block(2, kX, 10 * kMs, trace::kNever));            // D
  t.blocks.push_back(block(3, kX / 2, 135 * kMs, 295 * kMs));           // L, freed during op 5
  t.blocks.push_back(block(4, kX, 185 * kMs, 285 * kMs));               // Y
  op(t, "softmax", 10 * kMs, {{1, Access::write}});
  op(t, "dropout", 5 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "filler_a", 120 * kMs, {});
  op(t, "layer_norm", 50 * kMs, {{3, Access::write}});
  op(t, "big", 100 * kMs, {{4, Access::write}});
  op(t, "layer_norm_backward", 10 * kMs, {{3, Access::read}});
  op(t, "filler_b", 120 * kMs, {});
  op(t, "bmm_backward", 10 * kMs, {{2, Access::read}});
  op(t, "softmax_backward", 10 * kMs, {{1, Access::read}});
  return t;
}

}  // namespace

TEST_CASE("a swapped block made from a resident source is rebuilt from it, the source swapped instead") {
  // At op 4 two of S, D and L must be away (budget 2.5 GB). The link carries one copy of kX
  // each way, so the plan swaps D and rebuilds L (50 ms). Swapping S instead moves the same
  // bytes; D is then rebuilt from S by the dropout (5 ms), and L, with S and D away, stays.
  trace::Trace t = dropout_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2'500'000'000);
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, index, index.block_index(2), swap(1, 6, 7));
  add_interval(p, index, index.block_index(3), regeneration(3, 5, {3}));
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  REQUIRE(judged.stall_ns == 0);
  REQUIRE(judged.extra_compute_ns == 50 * kMs);
  p = swap_sources(request, std::move(p), judged);
  REQUIRE(judged.feasible);
  CHECK(judged.stall_ns == 0);
  CHECK(judged.extra_compute_ns == 5 * kMs);
  CHECK(judged.step_time_ns == 440 * kMs);
  CHECK(judged.peak_bytes <= request.budget_bytes);
  CHECK(p.predicted.step_time_ns == judged.step_time_ns);
  REQUIRE(p.decisions.size() == 2);
  for (const plan::BlockDecision& d : p.decisions) {
    REQUIRE(d.intervals.size() == 1);
    const plan::Interval& x = d.intervals[0];
    if (d.block == 1) {  // S: from its read by the dropout to the dropout's replay
      CHECK(x.action == plan::Action::swap);
      CHECK(x.release_after == 1);
      CHECK(x.needed_by == 7);
    } else {
      REQUIRE(d.block == 2);
      CHECK(x.action == plan::Action::regenerate);
      CHECK(x.replay == std::vector<std::uint64_t>{1});
      CHECK(x.inputs == std::vector<std::uint64_t>{1});
    }
  }
}

TEST_CASE("a swapped block stays swapped where its source is not resident across its gap") {
  // As above, but the plan also has S away over op 4 (rebuilt by its producer): S is not a
  // source the pass can swap, so nothing changes.
  trace::Trace t = dropout_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 2'500'000'000);
  plan::Plan p = empty_plan(request, "test");
  add_interval(p, index, index.block_index(2), swap(1, 6, 7));
  add_interval(p, index, index.block_index(1), regeneration(1, 8, {0}));
  SimulationResult judged = judge(request, p);
  REQUIRE(judged.feasible);
  const plan::Plan before = p;
  p = swap_sources(request, std::move(p), judged);
  CHECK(judged.feasible);
  CHECK(p.decisions.size() == before.decisions.size());
  for (const plan::BlockDecision& d : p.decisions) {
    REQUIRE(d.intervals.size() == 1);
    CHECK(d.intervals[0].action == (d.block == 2 ? plan::Action::swap : plan::Action::regenerate));
  }
}
