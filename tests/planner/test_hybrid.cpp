// Activations rebuilt beside swapped state (delta/hybrid/): the rematerialisation's room op by
// op, the sweep built on a seed plan, and the two together on a step whose state and gradients
// do not fit with regenerations alone.
#include "common/plan_edits.hpp"
#include "delta/hybrid/hybrid.hpp"
#include "delta/remat/remat.hpp"
#include "delta/sweep/sweep.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

#include <limits>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

constexpr std::uint64_t kMb = 1'000'000;

const plan::BlockDecision* decision_of(const plan::Plan& p, std::uint64_t id) {
  for (const plan::BlockDecision& d : p.decisions)
    if (d.block == id) return &d;
  return nullptr;
}

bool has_action(const plan::Plan& p, std::uint64_t id, plan::Action action) {
  const plan::BlockDecision* d = decision_of(p, id);
  if (!d) return false;
  for (const plan::Interval& x : d->intervals)
    if (x.action == action) return true;
  return false;
}

}  // namespace

TEST_CASE("the rematerialisation drops only where an op's own room is short") {
  const trace::Trace t = step_trace();
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 1200 * kMb);
  const PlanRequest request = titanv_request(index, 1000 * kMb);
  // At the budget everywhere, A1 goes at f2 (1100 MB there) and is rebuilt for b1.
  plan::Plan tight = plan_offline_remat(request, RematOptions{});
  CHECK(has_action(tight, 3, plan::Action::regenerate));
  CHECK(judge(request, tight).feasible);
  // With 200 MB more room from f2 to b1, nothing need go.
  RematOptions roomy;
  roomy.budget_by_op = {1000 * kMb, 1200 * kMb, 1200 * kMb, 1200 * kMb, 1000 * kMb, 1000 * kMb};
  plan::Plan kept = plan_offline_remat(request, roomy);
  CHECK_FALSE(has_action(kept, 3, plan::Action::regenerate));
  CHECK_FALSE(has_action(kept, 4, plan::Action::regenerate));
}

TEST_CASE("a sweep on a seed keeps the seed's decisions and frees only what the seed leaves over") {
  const trace::Trace t = step_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 800 * kMb);
  // The seed rebuilds A1 and holds 900 MB at b2 and b1: 100 MB over the budget there.
  RematOptions remat;
  remat.budget_by_op.assign(index.op_count() + 1, 900 * kMb);
  const plan::Plan seed = plan_offline_remat(request, remat);
  REQUIRE(has_action(seed, 3, plan::Action::regenerate));
  DeltaOptions options;
  options.discard_dead = true;
  options.allow_regenerate = false;
  options.seed = &seed;
  plan::Plan p = plan_with_sweep(request, options);
  REQUIRE_NOTHROW(plan::check_plan_matches(p, t));
  // A1's rebuild is the seed's, untouched.
  const plan::BlockDecision* a1 = decision_of(p, 3);
  const plan::BlockDecision* seeded = decision_of(seed, 3);
  REQUIRE(a1);
  REQUIRE(a1->intervals.size() == seeded->intervals.size());
  CHECK(a1->intervals[0].action == seeded->intervals[0].action);
  CHECK(a1->intervals[0].replay == seeded->intervals[0].replay);
  CHECK(a1->intervals[0].needed_by == seeded->intervals[0].needed_by);
  // The rest comes from S, idle until the optimizer: swapped, not rebuilt (nothing makes it).
  CHECK(has_action(p, 2, plan::Action::swap));
  // W is read by A1's replay before b1: it may not leave over it.
  CHECK(decision_of(p, 1) == nullptr);
  SimulationResult r = judge(request, p);
  INFO(r.error);
  CHECK(r.feasible);
  CHECK(r.peak_bytes <= 800 * kMb);
  // It adds S alone: 100 MB over at two ops, and S is the one block idle over both.
  std::size_t added = 0;
  for (const plan::BlockDecision& d : p.decisions)
    if (!decision_of(seed, d.block)) {
      ++added;
      CHECK(d.block == 2);
    }
  CHECK(added == 1);
}

TEST_CASE("a sweep on a seed leaves resident what the seed's replays read") {
  // P (100 MB) is idle from f1 to opt and would free the 100 MB the seed leaves over at b2 and
  // b1 for a fraction of S's copies; but A1's rebuild before b1 replays f1, which reads P.
  const trace::Trace t = step_trace(true);
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, 900 * kMb);
  RematOptions remat;
  remat.budget_by_op.assign(index.op_count() + 1, 1000 * kMb);
  const plan::Plan seed = plan_offline_remat(request, remat);
  const plan::BlockDecision* a1 = decision_of(seed, 3);
  REQUIRE(a1);
  REQUIRE(a1->intervals.back().action == plan::Action::regenerate);
  REQUIRE(a1->intervals.back().inputs == std::vector<std::uint64_t>{1, 6});
  DeltaOptions options;
  options.discard_dead = true;
  options.allow_regenerate = false;
  options.seed = &seed;
  plan::Plan p = plan_with_sweep(request, options);
  if (const plan::BlockDecision* pd = decision_of(p, 6))
    for (const plan::Interval& x : pd->intervals) CHECK(x.needed_by <= a1->intervals.back().needed_by - 1);
  CHECK(has_action(p, 2, plan::Action::swap));
  SimulationResult r = judge(request, p);
  INFO(r.error);
  CHECK(r.feasible);
}

TEST_CASE("activations rebuilt and state swapped fit where regenerations alone cannot") {
  const trace::Trace t = step_trace();
  TraceIndex index(t);
  // 800 MB: the optimizer needs W, S and G (600 MB) and b2 needs W, S, A2 and G (900 MB), so
  // no plan of regenerations alone fits; S must travel.
  const PlanRequest request = titanv_request(index, 800 * kMb);
  CHECK(regeneration_alone_cannot_fit(request));
  HybridOptions options;
  plan::Plan p = plan_rebuilds_then_swaps(request, options);
  REQUIRE_NOTHROW(plan::check_plan_matches(p, t));
  SimulationResult r = judge(request, p);
  INFO(r.error);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes <= 800 * kMb);
  CHECK(has_action(p, 2, plan::Action::swap));        // the state travels
  CHECK(has_action(p, 3, plan::Action::regenerate));  // the activation is rebuilt
  CHECK(r.regenerations >= 1);
  CHECK(r.swaps >= 1);
  // A head start the step waits for lets the rematerialisation keep A1 from the first op on;
  // the plan still fits.
  options.head_start_bytes = 300 * kMb;
  plan::Plan waited = plan_rebuilds_then_swaps(request, options);
  SimulationResult w = judge(request, waited);
  INFO(w.error);
  CHECK(w.feasible);
}

TEST_CASE("where discards are copied to host, activations rebuilt beside swapped state discard nothing") {
  // A discard's copy would queue behind the state's on the D2H lane.
  const trace::Trace t = step_trace(false, true);
  TraceIndex index(t);
  for (const bool later : {false, true}) {
    PlanRequest request = titanv_request(index, 800 * kMb);
    request.discard_copies = !later;
    request.discards_copied_later = later;
    plan::Plan p = plan_rebuilds_then_swaps(request, HybridOptions{});
    for (const plan::BlockDecision& d : p.decisions)
      for (const plan::Interval& x : d.intervals) CHECK(x.action != plan::Action::discard);
    SimulationResult r = judge(request, p);
    INFO(r.error);
    CHECK(r.feasible);
    CHECK(r.discards == 0);
  }
  // With discards free, A2 goes right after its last read: the rule above is what kept it.
  PlanRequest free = titanv_request(index, 800 * kMb);
  const plan::Plan p = plan_rebuilds_then_swaps(free, HybridOptions{});
  std::size_t discards = 0;
  for (const plan::BlockDecision& d : p.decisions)
    for (const plan::Interval& x : d.intervals) discards += x.action == plan::Action::discard;
  CHECK(discards > 0);
}
