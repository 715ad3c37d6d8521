// Weight gradients rebuilt where the optimizer reads them, from their inputs held
// (delta/passes/replays/gradient_rebuilds.hpp), on gradient_trace: which gradients qualify, the
// plan the rebuild makes, and the share chosen by how the finished plans run.
#include "delta/passes/evictions/interval_pruning.hpp"
#include "delta/passes/replays/gradient_rebuilds.hpp"
#include "delta/pipeline.hpp"
#include "hand_plans.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

constexpr std::uint64_t kMb = 1'000'000;
constexpr std::uint64_t kBudget = 660 * kMb;  // below the native 700 MB, above the 640 MB held with the rebuild

const plan::BlockDecision* decision_of(const plan::Plan& p, std::uint64_t id) {
  for (const plan::BlockDecision& d : p.decisions)
    if (d.block == id) return &d;
  return nullptr;
}

// The pruning pass as the finish, the rebuild and its holds left as they are: with the
// gradient rebuilt the state's swap is no longer needed and goes; without, it stays.
void prune_finish(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged) {
  IntervalPruningOptions options;
  options.kept = {3, 4, 5};
  plan = prune_intervals(request, std::move(plan), judged, options);
}

}  // namespace

TEST_CASE("a weight gradient is rebuilt where the optimizer reads it, from its inputs held") {
  const trace::Trace t = gradient_trace();
  TraceIndex index(t);
  REQUIRE(index.native_peak() == 700 * kMb);
  const std::vector<GradientRebuild> found = gradient_rebuilds(index, plan_for(t, kBudget));
  REQUIRE(found.size() == 1);
  const GradientRebuild& g = found.front();
  CHECK(index.block(g.block).id == 5);
  CHECK(g.producer == 3);    // bwd_w
  CHECK(g.first_read == 5);  // opt
  std::vector<std::uint64_t> held;
  for (std::uint32_t b : g.held) held.push_back(index.block(b).id);
  CHECK(held == std::vector<std::uint64_t>{3, 4});  // X and DY, freed at bwd_w
  CHECK(g.freed_bytes == static_cast<std::int64_t>(60 * kMb));

  const PlanRequest request = titanv_request(index, kBudget);
  plan::Plan none = plan_for(t, kBudget);
  CHECK_FALSE(judge(request, none).feasible);  // 700 MB at scratch
  plan::Plan rebuilt = with_gradient_rebuilds(index, none, found);
  REQUIRE_NOTHROW(plan::check_plan_matches(rebuilt, t));
  const plan::BlockDecision* gradient = decision_of(rebuilt, 5);
  REQUIRE(gradient);
  REQUIRE(gradient->intervals.size() == 1);
  const plan::Interval& r = gradient->intervals.front();
  CHECK(r.action == plan::Action::regenerate);
  CHECK(r.release_after == 3);
  CHECK(r.needed_by == 5);
  CHECK(r.replay == std::vector<std::uint64_t>{3});
  for (std::uint64_t input : {3, 4}) {
    const plan::BlockDecision* d = decision_of(rebuilt, input);
    REQUIRE(d);
    REQUIRE(d->intervals.size() == 1);
    CHECK(d->intervals.front().action == plan::Action::retain);
    CHECK(d->intervals.front().release_after == 3);  // the program's free
    CHECK(d->intervals.front().until == 5);
  }
  const SimulationResult run = judge(request, rebuilt);
  INFO(run.error);
  REQUIRE(run.feasible);
  CHECK(run.peak_bytes == 640 * kMb);
  CHECK(run.extra_compute_ns == 2 * kMs);  // bwd_w once more
  CHECK(run.regenerations == 1);

  // rebuild_gradients: a share rounded to whole gradients; none at 0.
  plan::Plan kept = none;
  SimulationResult unjudged;
  CHECK_FALSE(rebuild_gradients(request, kept, unjudged, 0.0));
  CHECK(kept.decisions.empty());
  CHECK_FALSE(rebuild_gradients(request, kept, unjudged, 0.25));  // a quarter of one: none
  CHECK(kept.decisions.empty());
  CHECK(rebuild_gradients(request, kept, unjudged, 0.5));
  REQUIRE(decision_of(kept, 5));
  CHECK(unjudged.feasible);
  CHECK(unjudged.step_time_ns == run.step_time_ns);
}

TEST_CASE("no gradient is rebuilt where its inputs outweigh it, it is accumulated, or the plan moves it") {
  SECTION("inputs larger than the gradient") {
    const trace::Trace t = gradient_trace(/*inputs_mb=*/95);  // 105 MB held for 100 MB freed
    TraceIndex index(t);
    CHECK(gradient_rebuilds(index, plan_for(t, kBudget)).empty());
    CHECK_FALSE(gradients_worth_rebuilding(index, kBudget));
  }
  SECTION("accumulated by a second op") {
    const trace::Trace t = gradient_trace(30, /*accumulated=*/true);
    TraceIndex index(t);
    CHECK(gradient_rebuilds(index, plan_for(t, kBudget)).empty());
  }
  SECTION("swapped by the plan over the gap, or an input swapped past its free") {
    const trace::Trace t = gradient_trace();
    TraceIndex index(t);
    plan::Plan swapped = plan_for(t, kBudget);
    swapped.decisions.push_back({5, {swap(3, 4, 5)}});
    CHECK(gradient_rebuilds(index, swapped).empty());
    plan::Plan retained = plan_for(t, kBudget);
    plan::Interval hold;
    hold.action = plan::Action::retain;
    hold.release_after = 3;
    hold.until = 4;
    retained.decisions.push_back({3, {hold}});  // X already held by the plan: not held twice
    CHECK(gradient_rebuilds(index, retained).empty());
  }
  SECTION("worth it only against a hundredth of the budget") {
    const trace::Trace t = gradient_trace();
    TraceIndex index(t);
    CHECK(gradients_worth_rebuilding(index, kBudget));           // 60 MB of 660
    CHECK_FALSE(gradients_worth_rebuilding(index, 10'000 * kMb));  // 60 MB of 10 GB
  }
}

TEST_CASE("the share of gradients rebuilt is the one whose finished plan runs fastest") {
  const trace::Trace t = gradient_trace();
  TraceIndex index(t);
  const PlanRequest request = titanv_request(index, kBudget);
  // Without the rebuild the state must travel: 400 MB out through the filler and back at the
  // optimizer, 33 ms waited. With it the state's swap is pruned away and the step waits for
  // nothing.
  plan::Plan state_swapped = plan_for(t, kBudget);
  state_swapped.decisions.push_back({2, {swap(0, 5, 5)}});
  const SimulationResult base = judge(request, state_swapped);
  INFO(base.error);
  REQUIRE(base.feasible);
  REQUIRE(base.stall_ns > 0);
  // One candidate: a quarter rounds to none, a half to it.
  CHECK(choose_rebuild_share(request, state_swapped, prune_finish) == 0.5);
  // Where nothing waits, the rebuild only adds its replay: none.
  const PlanRequest roomy = titanv_request(index, 700 * kMb);
  const Finisher as_is = [](const PlanRequest&, plan::Plan&, SimulationResult&) {};
  CHECK(choose_rebuild_share(roomy, plan_for(t, 700 * kMb), as_is) == 0);
}

TEST_CASE("DELTA's plan rebuilds the gradient where asked to, and keeps to swaps and rebuilds of its own by default") {
  const trace::Trace t = gradient_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, kBudget);
  request.threads = 1;
  // By default no gradient is rebuilt from held inputs: nothing retains X or DY.
  plan::Plan plain = plan_delta(request);
  CHECK(judge(request, plain).feasible);
  for (std::uint64_t input : {3, 4})
    if (const plan::BlockDecision* d = decision_of(plain, input))
      for (const plan::Interval& x : d->intervals) CHECK(x.action != plan::Action::retain);
  // Asked to, the plan holds X and DY and rebuilds G before opt: 2 ms of replay, where
  // moving 100 MB of G or S over the 12 GB/s link waits longer.
  request.rebuild_gradients = true;
  plan::Plan rebuilt = plan_delta(request);
  const SimulationResult run = judge(request, rebuilt);
  INFO(run.error);
  REQUIRE(run.feasible);
  const plan::BlockDecision* g = decision_of(rebuilt, 5);
  REQUIRE(g);
  CHECK(g->intervals.front().action == plan::Action::regenerate);
  CHECK(g->intervals.front().replay == std::vector<std::uint64_t>{3});
  CHECK(run.step_time_ns < judge(request, plain).step_time_ns);
}
