// Fitting a plan to the caching allocator as the executor places it (planner/delta/fitting.hpp):
// under executor placement a moved block sits on pages of its own, so a plan that moves many
// blocks smaller than a page wastes most of a page on each while they are resident. A request's
// min_moved_bytes keeps such blocks where they are, and the fitting plans that way where the
// allocator cannot place the plan that moves them.
#include "common/request.hpp"
#include "delta/fitting.hpp"
#include "delta/passes/discard_keeping.hpp"
#include "delta/pipeline.hpp"
#include "hand_plans.hpp"
#include "methods.hpp"
#include "delta/sweep/sweep.hpp"
#include "planner_fixtures.hpp"
#include "sim/allocator_ledger.hpp"
#include "sim/simulator.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

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

// The plans of `request` through the allocator with the planner's placement and as the executor
// places blocks, in that order; `request` is left asking for the executor's.
std::pair<plan::Plan, plan::Plan> plan_both_placements(PlanRequest& request) {
  request.through_allocator = true;
  request.executor_placement = false;
  plan::Plan planner_way = plan_delta(request);
  request.executor_placement = true;
  return {std::move(planner_way), plan_delta(request)};
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
  auto [planner_way, executor_way] = plan_both_placements(request);
  // The planner's placement frees a discarded block's bytes for any other block: moving the
  // small ones is placed there.
  REQUIRE(planner_way.predicted.feasible);
  CHECK(moves_below(index, planner_way, plan::kSwapGranularity));
  // The executor's: 64 small blocks on pages of their own are 128 MiB beside A at op 0, over
  // the 100 MiB budget, so no fraction of the budget places a plan that moves them; kept on
  // shared pages they take 4 MiB.
  const SimulationResult placed = judge(request, executor_way);
  INFO(placed.error);
  REQUIRE(placed.feasible);
  CHECK_FALSE(moves_below(index, executor_way, plan::kSwapGranularity));
  CHECK(placed.allocator_reserved_peak <= request.budget_bytes);
  CHECK(executor_way.predicted.planned_fraction == 1.0);
}

TEST_CASE("judge_if_faster through the allocator rules out in live bytes what cannot be faster, and agrees with judge") {
  trace::Trace t = small_blocks_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 100 * kMiB);
  auto [moves_small, keeps_small] = plan_both_placements(request);  // the first placed the planner's way only
  for (plan::Plan* plan : {&moves_small, &keeps_small}) {
    plan::Plan judged_copy = *plan;
    const SimulationResult placed = judge(request, judged_copy);
    SimulationOptions live = simulation_options(request);
    live.through_allocator = false;
    const SimulationResult in_live_bytes = simulate(index, *plan, live);
    REQUIRE(in_live_bytes.feasible);
    // The premise: placing a plan only adds waits.
    if (placed.feasible) CHECK(in_live_bytes.step_time_ns <= placed.step_time_ns);
    for (const std::int64_t than : {in_live_bytes.step_time_ns, placed.step_time_ns, placed.step_time_ns + 1,
                                    std::numeric_limits<std::int64_t>::max()}) {
      plan::Plan trial = *plan;
      const std::optional<SimulationResult> faster = judge_if_faster(request, trial, than);
      INFO("than " << than << ", placed " << placed.feasible << " at " << placed.step_time_ns);
      CHECK(faster.has_value() == (placed.feasible && placed.step_time_ns < than));
      if (faster) {
        CHECK(faster->step_time_ns == placed.step_time_ns);
        CHECK(trial.predicted.step_time_ns == placed.step_time_ns);  // judged, as judge() records it
      }
    }
  }
  // The plan that moves the small blocks fits in live bytes but is not placed as the executor
  // places blocks: never faster, whatever it is weighed against.
  plan::Plan trial = moves_small;
  CHECK_FALSE(judge(request, trial).feasible);
  CHECK_FALSE(judge_if_faster(request, trial, std::numeric_limits<std::int64_t>::max()).has_value());
}

namespace {

// A step whose placement from an empty allocator fits its budget to the page, and whose next
// step, placed among what the first left cached, does not. The caching allocator keeps freed
// blocks of up to 1 MiB in bins of their exact size, unmerged, and serves the next request of
// that size from the bin, last freed first: where a step frees small blocks late, the next
// step's early ones land where those were, on other pages. P (1 MiB, the program's state) is
// read at op 0; L (1 MiB) written at op 0, idle over op 1, read at op 2; Z (20 MiB) written and
// freed at op 1; T1 and T2 (1 MiB each) written at op 3 and freed after it, T2 last. From empty
// P and L share page 0, and op 1 holds that page and Z's ten: 22 MiB. The next step takes L
// from the bin, where T2 was, on page 1: at op 1 P and L pin two small pages, and Z's ten more
// do not fit, with no idle page left to reclaim.
constexpr std::uint64_t kSmallPage = 2 * kMiB, kZ = 20 * kMiB;
constexpr std::uint64_t kStepBudget = kSmallPage + kZ;

trace::Trace binned_trace() {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kMiB, trace::kNever, trace::kNever, trace::Category::parameter));
  t.blocks.push_back(block(2, kMiB, 0, 30 * kMs));
  t.blocks.push_back(block(3, kZ, 10 * kMs, 20 * kMs));
  t.blocks.push_back(block(4, kMiB, 30 * kMs, 40 * kMs));
  t.blocks.push_back(block(5, kMiB, 30 * kMs, 40 * kMs));
  op(t, "produce_l", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "produce_z", 10 * kMs, {{3, Access::write}});
  op(t, "consume_l", 10 * kMs, {{2, Access::read}});
  op(t, "produce_t", 10 * kMs, {{4, Access::write}, {5, Access::write}});
  return t;
}

SimulationResult placed_after(const PlanRequest& request, const plan::Plan& plan, std::uint32_t steps_before) {
  SimulationOptions options;
  options.gpu = request.gpu;
  options.budget_bytes = request.budget_bytes;
  options.through_allocator = true;
  options.executor_placement = request.executor_placement;
  options.steps_before = steps_before;
  return simulate(*request.index, plan, options);
}

}  // namespace

TEST_CASE("a plan is fitted so that the step after a step places it, among the pieces the first left cached") {
  trace::Trace t = binned_trace();
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 2 * kMiB + kZ);
  for (const bool executor_placement : {true, false}) {
    INFO("executor placement: " << executor_placement);
    PlanRequest request = titanv_request(index, kStepBudget);
    request.through_allocator = true;
    request.executor_placement = executor_placement;
    plan::Plan nothing_moved;
    nothing_moved.method = "none";
    nothing_moved.budget_bytes = request.budget_bytes;
    // From an empty allocator it fits to the byte; in the next step Z does not, at op 1.
    const SimulationResult first = placed_after(request, nothing_moved, 0);
    INFO(first.error);
    REQUIRE(first.feasible);
    CHECK(first.allocator_reserved_peak == kStepBudget);
    const SimulationResult second = placed_after(request, nothing_moved, 1);
    REQUIRE_FALSE(second.feasible);
    CHECK(second.first_bad_op == 1);
    CHECK(second.error.find("fragmentation") != std::string::npos);
    CHECK(second.error.find("in a step after 1 of the same plan") != std::string::npos);
    // The planner judges the step after a step: its plan is placed there, and in the steps
    // after that (the layout settles).
    plan::Plan fitted = plan_delta(request);
    const SimulationResult judged = judge(request, fitted);
    INFO(judged.error);
    REQUIRE(judged.feasible);
    CHECK_FALSE(fitted.decisions.empty());
    for (std::uint32_t steps : {0u, 1u, 2u, 3u}) {
      const SimulationResult later = placed_after(request, fitted, steps);
      INFO("after " << steps << " steps: " << later.error);
      CHECK(later.feasible);
      CHECK(later.allocator_reserved_peak <= request.budget_bytes);
    }
  }
}

TEST_CASE("the allocator ledger carries what lives across a step boundary, frees the rest and keeps its cache") {
  std::unique_ptr<AllocatorLedger> ledger = make_allocator_ledger("titanv", 100 * kMiB);
  REQUIRE(ledger);
  ledger->mark_moved(2);
  ledger->allocate(1, 20 * kMiB);   // kept across the boundary
  ledger->allocate(2, 30 * kMiB);   // moved: kept, its pages away at the boundary
  ledger->allocate(3, 40 * kMiB);   // carried to the end, freed by the next step
  ledger->check_invariants();
  REQUIRE(ledger->evict(2, 30 * kMiB));
  CHECK(ledger->reserved() == 60 * kMiB);
  ledger->check_invariants();
  const std::uint64_t kept[] = {1, 2};
  ledger->next_step(kept);
  ledger->check_invariants();
  // Key 2 is mapped whole again, key 3's segment stays cached: nothing returned to the device.
  CHECK(ledger->reserved() == 90 * kMiB);
  // The kept keys are in place: allocating them again places nothing.
  ledger->allocate(1, 20 * kMiB);
  ledger->allocate(2, 30 * kMiB);
  CHECK(ledger->reserved() == 90 * kMiB);
  ledger->check_invariants();
  // Key 3 was freed: allocated again, it takes its cached segment.
  ledger->allocate(3, 40 * kMiB);
  CHECK(ledger->reserved() == 90 * kMiB);
  // Once placed in the new step a key is live as any other: allocating it again is a bug.
  CHECK_THROWS_AS(ledger->allocate(1, 20 * kMiB), std::logic_error);
  // A key kept across a boundary must be allocated.
  const std::uint64_t unknown[] = {7};
  CHECK_THROWS_WITH(ledger->next_step(unknown), Catch::Contains("key 7 kept across the step boundary is not allocated"));
  ledger->check_invariants();
}

TEST_CASE("a budget the allocator refuses at op 0 says the state before the step fills it") {
  // The state S, live before the step and after it, is 19.5 MiB of a 20 MiB budget: in live
  // bytes op 0's 100 KiB fit beside it, but through the allocator S's pages take the whole
  // budget and op 0's small block needs a page of its own. No plan can move S before op 0.
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, 39 * kMiB / 2, trace::kNever, trace::kNever, trace::Category::optimizer_state));
  t.blocks.push_back(block(2, 100 * 1024, 0, 15 * kMs));
  op(t, "produce_a", 10 * kMs, {{2, Access::write}});
  op(t, "update", 10 * kMs, {{1, Access::read}, {1, Access::write}, {2, Access::read}});
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 20 * kMiB);
  request.through_allocator = false;
  CHECK(run_method("delta", request).feasible);
  request.through_allocator = true;
  request.executor_placement = true;
  const MethodResult refused = run_method("delta", request);
  INFO(refused.reason);
  REQUIRE_FALSE(refused.feasible);
  CHECK(refused.simulation.first_bad_op == 0);
  CHECK_THAT(refused.reason, Catch::Contains("at op 0 every block live before the step is on the device") &&
                                 Catch::Contains("1 blocks, 0.02 GiB, 97.5% of the 0.02 GiB budget"));
  // Where the state alone is more than the budget, the same (the allocator fails placing it).
  request.budget_bytes = 10 * kMiB;
  CHECK_THAT(run_method("delta", request).reason,
             Catch::Contains("195.0% of the 0.01 GiB budget: more than the budget holds, whatever the plan"));
  // Refused at a later op, the message is the simulator's alone: with a state of 10 MiB, op 1
  // writes 12 MiB beside it, which no plan fits in 20 MiB.
  t.blocks[0].size = 10 * kMiB;
  t.blocks.push_back(block(3, 12 * kMiB, 10 * kMs, trace::kNever));
  t.ops[1].blocks.push_back({3, Access::write});
  TraceIndex later_index(t);
  request = titanv_request(later_index, 20 * kMiB);
  request.through_allocator = true;
  request.executor_placement = true;
  const MethodResult later = run_method("delta", request);
  INFO(later.reason);
  REQUIRE_FALSE(later.feasible);
  CHECK(later.simulation.first_bad_op != 0);
  CHECK_THAT(later.reason, !Catch::Contains("every block live before the step"));
  // Nothing live before the step: op 0's own allocation more than the budget says no more.
  trace::Trace alone = titanv_trace();
  alone.blocks.push_back(block(1, 30 * kMiB, 0, 15 * kMs));
  op(alone, "produce", 10 * kMs, {{1, Access::write}});
  op(alone, "consume", 10 * kMs, {{1, Access::read}});
  TraceIndex alone_index(alone);
  request = titanv_request(alone_index, 20 * kMiB);
  request.through_allocator = true;
  request.executor_placement = true;
  const MethodResult too_big = run_method("delta", request);
  REQUIRE_FALSE(too_big.feasible);
  CHECK(too_big.simulation.first_bad_op == 0);
  CHECK_THAT(too_big.reason, !Catch::Contains("every block live before the step"));
}

TEST_CASE("a budget past the GPU's memory is refused by name when the step needs more than the GPU holds") {
  const trace::Trace t = small_blocks_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request_at(index, 0.9);
  request.through_allocator = true;
  request.executor_placement = true;
  // A GPU smaller than the step's native peak (132 MiB): the allocator could reserve no more.
  request.gpu.memory_bytes = 100 * kMiB;
  const MethodResult refused = run_method("delta", request);
  CHECK_FALSE(refused.feasible);
  CHECK_FALSE(refused.plan);
  CHECK_THAT(refused.reason, Catch::Contains("more than the titanv profile's") && Catch::Contains("device memory"));
  // In live bytes the budget is only a number; and a GPU that holds the whole step needs no
  // more than the step, whatever the budget.
  request.through_allocator = false;
  CHECK(run_method("delta", request).feasible);
  request.through_allocator = true;
  request.gpu.memory_bytes = 200 * kMiB;
  request.budget_bytes = 300 * kMiB;
  CHECK(run_method("delta", request).feasible);
}

namespace {

// The fitting's steps between fractions, with a planner made for the test: at each fraction of
// the budget it returns a plan of small_blocks_trace() chosen by the fraction. At 0.98 A is
// rebuilt for op 5 (its 10 ms producer replayed), at 0.9875 A is swapped (the copies hide behind
// the fillers), and anywhere else A is kept (132 MiB at op 3, over the 100 MiB budget).
constexpr std::uint64_t kFitBudget = 100 * kMiB;
const trace::Trace* g_fit_trace = nullptr;

bool near(double a, double b) { return a > b - 1e-6 && a < b + 1e-6; }

// The fraction of the budget a live request was made for.
double fraction_of(const PlanRequest& live) { return double(live.budget_bytes) / double(kFitBudget); }

plan::Plan plan_by_fraction(const PlanRequest& live) {
  const double fraction = fraction_of(live);
  plan::Plan p = plan_for(*g_fit_trace, live.budget_bytes);
  if (near(fraction, 0.98)) p.decisions.push_back({1, {regeneration(0, 5, {0})}});
  if (near(fraction, 0.9875)) p.decisions.push_back({1, {swap(0, 4, 5)}});
  judge(live, p);
  return p;
}

}  // namespace

TEST_CASE("the fitting also tries the fractions between the first placed and the one above it, and keeps the fastest") {
  const std::vector<double> steps = fraction_steps_between(0.99, 0.98);
  REQUIRE(steps.size() == 3);
  CHECK((near(steps[0], 0.9875) && near(steps[1], 0.985) && near(steps[2], 0.9825)));
  const trace::Trace t = small_blocks_trace();
  g_fit_trace = &t;
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, kFitBudget);
  request.through_allocator = true;
  request.executor_placement = true;
  std::vector<double> tried;
  std::vector<bool> placed;
  request.on_fit_attempt = [&](const PlanRequest::FitAttempt& attempt, const SimulationResult& verdict) {
    tried.push_back(attempt.fraction);
    placed.push_back(verdict.feasible);
  };
  std::vector<std::string> notes;
  request.on_note = [&](const std::string& note) { notes.push_back(note); };
  const plan::Plan fitted = fit_to_allocator(request, plan_by_fraction);
  // 1 and 0.99 keep A and are refused; 0.98 is placed, then the three steps above it are tried.
  // Placed below the whole budget with moved blocks on pages of their own, the same fractions
  // are tried again with them packed, and packed in groups (fit_to_allocator), placed the same
  // here.
  REQUIRE(tried.size() == 18);
  const double expected[] = {1.0, 0.99, 0.98, 0.9875, 0.985, 0.9825};
  for (std::size_t k = 0; k < tried.size(); ++k) CHECK(near(tried[k], expected[k % 6]));
  const std::vector<bool> one_fitting{false, false, true, true, false, false};
  for (std::size_t k = 0; k < tried.size(); ++k) CHECK(placed[k] == one_fitting[k % 6]);
  // The swap at 0.9875 runs at native speed, the rebuild at 0.98 does not: the swap is kept.
  REQUIRE(fitted.decisions.size() == 1);
  REQUIRE(fitted.decisions[0].intervals.size() == 1);
  CHECK(fitted.decisions[0].intervals[0].action == plan::Action::swap);
  CHECK(near(fitted.predicted.planned_fraction, 0.9875));
  plan::Plan kept = fitted;
  const SimulationResult judged = judge(request, kept);
  REQUIRE(judged.feasible);
  CHECK(judged.step_time_ns == index.native_step_ns());
  // Each fitting's note, and the placements' three: the first fitting's comes first, and the
  // plan with whole pages is kept on a tie.
  REQUIRE(notes.size() == 6);
  CHECK_THAT(notes[0], Catch::Contains("kept the plan for 0.9875 of the budget") && Catch::Contains("for 0.98:"));
  CHECK_THAT(notes[1], Catch::Contains("moved blocks on pages of their own: placed for 0.9875") && Catch::Contains("now packed side by side"));
  CHECK_THAT(notes[3], Catch::Contains("moved blocks on pages of their own: placed for 0.9875") && Catch::Contains("now packed in groups"));
  CHECK_THAT(notes[5], Catch::Contains("kept the plan with the moved blocks on pages of their own"));
  CHECK_FALSE(fitted.predicted.packed_moves);
  // Where the first plan placed is the fastest, it is kept, and no note is written. Below
  // 0.985 A's copy back is issued at its use, so the step waits for it.
  tried.clear();
  placed.clear();
  notes.clear();
  plan::Plan again = fit_to_allocator(request, [](const PlanRequest& live) {
    plan::Plan p = plan_for(*g_fit_trace, live.budget_bytes);
    if (fraction_of(live) < 0.985) p.decisions.push_back({1, {swap(0, 5, 5)}});
    judge(live, p);
    return p;
  });
  CHECK(near(again.predicted.planned_fraction, 0.98));
  CHECK(again.predicted.step_time_ns > index.native_step_ns());
  CHECK(tried.size() == 18);  // each placement's fitting: six fractions
  CHECK(std::none_of(notes.begin(), notes.end(), [](const std::string& note) { return note.find("kept the plan for") != std::string::npos; }));
  // Where the first plan placed runs at native speed, no plan between can be faster: none is made.
  tried.clear();
  plan::Plan native = fit_to_allocator(request, [](const PlanRequest& live) {
    plan::Plan p = plan_for(*g_fit_trace, live.budget_bytes);
    if (fraction_of(live) < 0.985) p.decisions.push_back({1, {swap(0, 4, 5)}});
    judge(live, p);
    return p;
  });
  CHECK(near(native.predicted.planned_fraction, 0.98));
  CHECK(native.predicted.step_time_ns == index.native_step_ns());
  CHECK(tried.size() == 9);  // each placement's fitting: three fractions
}

TEST_CASE("discards the live budget has room for are kept resident, the most page waste first") {
  // Op 0 writes A (3 MiB: a page short of 1 MiB on its own pages) and B (2.5 MiB: 1.5 MiB short);
  // op 1 reads both, the last use; op 2 writes and frees C (10 MiB); the program frees A and B
  // during op 3. Budget 14 MiB: with both discarded after op 1, ops 2 and 3 have 4 MiB of room,
  // enough for B (kept first: more of its last page wasted) but then not for A.
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, 3 * kMiB, 0, 35 * kMs));
  t.blocks.push_back(block(2, 5 * kMiB / 2, 0, 35 * kMs));
  t.blocks.push_back(block(3, 10 * kMiB, 20 * kMs, 30 * kMs));
  op(t, "produce", 10 * kMs, {{1, Access::write}, {2, Access::write}});
  op(t, "read", 10 * kMs, {{1, Access::read}, {2, Access::read}});
  op(t, "produce_c", 10 * kMs, {{3, Access::write}});
  op(t, "filler", 10 * kMs, {});
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 14 * kMiB);
  plan::Plan p = plan_for(t, request.budget_bytes);
  plan::Interval discard;
  discard.action = plan::Action::discard;
  discard.release_after = 1;
  p.decisions.push_back({1, {discard}});
  p.decisions.push_back({2, {discard}});
  const SimulationResult before = judge(request, p);
  REQUIRE(before.feasible);
  const plan::Plan kept = keep_discards_with_room(request, p);
  REQUIRE(kept.decisions.size() == 1);
  CHECK(kept.decisions[0].block == 1);
  CHECK(kept.predicted.feasible);
  CHECK(kept.predicted.step_time_ns == before.step_time_ns);
  CHECK(kept.predicted.peak_bytes <= request.budget_bytes);
  // With 12 MiB, 2 MiB of room holds neither: the plan comes back as it was.
  const PlanRequest tighter = titanv_request(index, 12 * kMiB);
  const plan::Plan unchanged = keep_discards_with_room(tighter, p);
  CHECK(unchanged.decisions.size() == 2);
}
