// The local search on a finished plan (planner/delta/local_search.hpp): it finds faster plans that
// still run under the budget where the polish has stopped, does so whatever the number of
// threads, and leaves a plan alone when it has nothing to search. Its second start, the plan
// with the lower bound's choice at the peak (planner/delta/bound_guided.hpp), follows that choice.
#include "bound/lower_bound.hpp"
#include "common/plan_edits.hpp"
#include "delta/bound_guided.hpp"
#include "delta/local_search.hpp"
#include "delta/pipeline.hpp"
#include "planner_fixtures.hpp"
#include "trace/dtr_loader.hpp"

#include <catch2/catch.hpp>

#include <optional>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

namespace {

// resnet32 at 0.2 of its peak in live bytes, planned without the search.
struct Resnet32AtFifth {
  trace::Trace trace = load_dtr_log(dtr_log("resnet32"));
  TraceIndex index{trace};
  PlanRequest request = [this] {
    PlanRequest r = titanv_request_at(index, 0.2);
    r.search_rounds = 0;
    return r;
  }();
  plan::Plan polished = plan_delta(request);
};

}  // namespace

TEST_CASE("the local search takes a polished plan further, still under the budget") {
  REQUIRE(!dtr_log("resnet32").empty());
  Resnet32AtFifth at;
  SimulationResult start = judge(at.request, at.polished);
  REQUIRE(start.feasible);
  LocalSearchOptions options;
  options.rounds = 40;
  SimulationResult judged = start;
  plan::Plan searched = search_locally(at.request, at.polished, judged, options);
  INFO("polished " << start.overhead() << ", searched " << judged.overhead());
  CHECK(judged.feasible);
  CHECK(judged.step_time_ns < start.step_time_ns);
  // The verdict it returns is the plan's own, and the plan holds the budget at every op.
  SimulationResult again = judge(at.request, searched);
  CHECK(again.feasible);
  CHECK(again.step_time_ns == judged.step_time_ns);
  CHECK(again.peak_bytes <= at.request.budget_bytes);
}

TEST_CASE("the local search chooses the same plan on one thread and on several") {
  REQUIRE(!dtr_log("resnet32").empty());
  Resnet32AtFifth at;
  LocalSearchOptions options;
  options.rounds = 12;
  options.width = 3;
  PlanRequest one = at.request, several = at.request;
  one.threads = 1;
  several.threads = 3;
  SimulationResult a = judge(one, at.polished), b = judge(several, at.polished);
  const plan::Plan alone = search_locally(one, at.polished, a, options);
  const plan::Plan together = search_locally(several, at.polished, b, options);
  CHECK(plan::to_json_text(alone) == plan::to_json_text(together));
  CHECK(a.step_time_ns == b.step_time_ns);
}

TEST_CASE("the local search leaves a plan alone with no rounds, and an infeasible plan alone") {
  REQUIRE(!dtr_log("resnet32").empty());
  Resnet32AtFifth at;
  SimulationResult judged = judge(at.request, at.polished);
  LocalSearchOptions none;
  const plan::Plan same = search_locally(at.request, at.polished, judged, none);
  CHECK(plan::to_json_text(same) == plan::to_json_text(at.polished));

  // Under a budget the plan does not fit, there is nothing to start from.
  PlanRequest tighter = at.request;
  tighter.budget_bytes = at.request.budget_bytes / 2;
  plan::Plan copy = at.polished;
  SimulationResult over = judge(tighter, copy);
  REQUIRE(!over.feasible);
  LocalSearchOptions some;
  some.rounds = 5;
  const plan::Plan untouched = search_locally(tighter, copy, over, some);
  CHECK(plan::to_json_text(untouched) == plan::to_json_text(copy));
  CHECK(!over.feasible);
}

TEST_CASE("plan_delta runs the search by default on short traces, and a request can turn it off") {
  REQUIRE(!dtr_log("resnet32").empty());
  Resnet32AtFifth at;
  PlanRequest searching = at.request;
  searching.search_rounds.reset();
  searching.search_patience = 20;
  plan::Plan searched = plan_delta(searching);
  REQUIRE(searched.predicted.feasible);
  REQUIRE(at.polished.predicted.feasible);
  CHECK(searched.predicted.step_time_ns < at.polished.predicted.step_time_ns);
}

TEST_CASE("through the caching allocator, the searched plan is placed and faster than the one it started from") {
  REQUIRE(!dtr_log("resnet32").empty());
  trace::Trace t = load_dtr_log(dtr_log("resnet32"));
  TraceIndex index(t);
  PlanRequest request = titanv_request_at(index, 0.3);
  request.through_allocator = true;
  request.search_rounds = 0;
  plan::Plan plain = plan_delta(request);
  request.search_rounds.reset();
  request.search_patience = 20;
  plan::Plan searched = plan_delta(request);
  REQUIRE(plain.predicted.feasible);
  // Judged again from scratch through the allocator capped at the budget.
  SimulationResult placed = judge(request, searched);
  INFO("without the search " << plain.predicted.overhead << ", with it " << placed.overhead());
  CHECK(placed.feasible);
  CHECK(placed.step_time_ns < plain.predicted.step_time_ns);
  CHECK(searched.budget_bytes == request.budget_bytes);
}

TEST_CASE("the bound's optimum as a start: the plan takes its choice at the peak and still runs under the budget") {
  REQUIRE(!dtr_log("resnet32").empty());
  Resnet32AtFifth at;
  const OverheadBound bound = overhead_lower_bound(at.request);
  REQUIRE(bound.status == OverheadBound::Status::bounded);
  REQUIRE(bound.explanation);
  const BoundExplanation& optimum = *bound.explanation;
  const std::optional<plan::Plan> guided = follow_bound(at.request, at.polished, optimum);
  REQUIRE(guided);
  CHECK(plan::to_json_text(*guided) != plan::to_json_text(at.polished));
  plan::Plan copy = *guided;
  const SimulationResult judged = judge(at.request, copy);
  INFO(judged.error);
  CHECK(judged.feasible);
  CHECK(judged.peak_bytes <= at.request.budget_bytes);
  // Block by block at the op in most excess: what the optimum swaps is swapped there, and what
  // it rebuilds is rebuilt (all but what a rebuild before the peak needs back sooner).
  auto away_at_peak = [&](std::uint64_t block, plan::Action action) {
    for (const plan::BlockDecision& d : guided->decisions)
      if (d.block == block)
        for (const plan::Interval& x : d.intervals)
          if (x.action == action && x.release_after < optimum.peak_op && x.needed_by > optimum.peak_op) return true;
    return false;
  };
  double swapped = 0, swapped_followed = 0, rebuilt = 0, rebuilt_followed = 0;
  for (const BoundExplanation::PeakBlock& b : optimum.peak_blocks) {
    const double bytes = double(at.index.block(at.index.block_index(b.block)).size);
    if (b.swapped >= 0.5) {
      swapped += bytes;
      if (away_at_peak(b.block, plan::Action::swap)) swapped_followed += bytes;
    } else if (b.regenerated >= 0.5) {
      rebuilt += bytes;
      if (away_at_peak(b.block, plan::Action::regenerate)) rebuilt_followed += bytes;
    }
  }
  REQUIRE(swapped > 0);
  REQUIRE(rebuilt > 0);
  CHECK(swapped_followed >= 0.9 * swapped);
  CHECK(rebuilt_followed >= 0.9 * rebuilt);
}
