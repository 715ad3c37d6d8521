// The planner's use of threads: parallel_for runs every task once and reports failures, and
// the portfolio chooses the same plan whatever the number of threads (also run under
// ThreadSanitizer).
#include "common/parallel_for.hpp"
#include "common/request.hpp"
#include "common/stage_memo.hpp"
#include "delta/pipeline.hpp"
#include "sim/stage_clock.hpp"
#include "planner_fixtures.hpp"
#include "tiny_traces.hpp"
#include "trace/dtr_loader.hpp"
#include "trace/trace_loading.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <stdexcept>
#include <vector>

using namespace delta;
using namespace delta::planner;
using namespace delta::planner::testing;

TEST_CASE("parallel_for runs every task exactly once on any number of threads") {
  for (std::size_t threads : {1u, 2u, 3u, 8u}) {
    std::vector<std::atomic<int>> runs(100);
    parallel_for(runs.size(), threads, [&](std::size_t i) { runs[i].fetch_add(1); });
    for (const auto& count : runs) CHECK(count.load() == 1);
  }
  parallel_for(0, 4, [](std::size_t) { FAIL("no task to run"); });
}

TEST_CASE("parallel_for rethrows a task's exception after the others finish") {
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH(parallel_for(64, 4,
                                 [&](std::size_t i) {
                                   if (i == 5) throw std::runtime_error("task 5 failed");
                                   finished.fetch_add(1);
                                 }),
                    "task 5 failed");
  CHECK(finished.load() < 64);
}

TEST_CASE("planner_threads honours the request, then DELTA_PLANNER_THREADS") {
  CHECK(planner_threads(3) == 3);
  setenv("DELTA_PLANNER_THREADS", "2", 1);
  CHECK(planner_threads() == 2);
  setenv("DELTA_PLANNER_THREADS", "two", 1);
  CHECK_THROWS_WITH(planner_threads(), Catch::Contains("DELTA_PLANNER_THREADS") && Catch::Contains("'two'"));
  setenv("DELTA_PLANNER_THREADS", "0", 1);
  CHECK_THROWS(planner_threads());
  unsetenv("DELTA_PLANNER_THREADS");
  CHECK(planner_threads() >= 1);
}

TEST_CASE("the portfolio chooses the same plan on one thread and on several") {
  // resnet32 gets the whole portfolio (every family, the polish and its deep exchange). At 0.8
  // of its peak the plan swaps and rebuilds, the short search finds faster plans, and it takes
  // 1.4 s on one thread (0.4 took 6 s), which keeps this short under ThreadSanitizer.
  const std::string log = dtr_log("resnet32");
  REQUIRE(!log.empty());
  trace::Trace t = load_dtr_log(log);
  TraceIndex index(t);
  PlanRequest request = titanv_request_at(index, 0.8);
  request.search_rounds = 8;  // the local search too, briefly: its tries run side by side
  request.search_patience = 0;
  request.threads = 1;
  plan::Plan alone = plan_delta(request);
  request.threads = 4;
  plan::Plan together = plan_delta(request);
  REQUIRE(alone.predicted.feasible);
  CHECK(plan::to_json_text(together) == plan::to_json_text(alone));
}

TEST_CASE("fitting through the allocator chooses the same plan on one thread and on several") {
  // The recorded GPT-2 small (4,140 ops, 15,742 uses) is long enough that the fitting plans two
  // fractions of the budget side by side. At 0.3 of its peak the allocator refuses the plans
  // for 1.0 and 0.99 and places the one for 0.98: the second pair is needed, and its second
  // fraction is planned for nothing. Then the three steps between 0.99 and 0.98, side by side.
  // The attempts are reported in order, each once.
  trace::Trace t = load_any_trace(std::string(DELTA_TEST_DATA_DIR) + "/h200-gpt2-small-recorded.json.gz");
  TraceIndex index(t);
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("h200");
  request.budget_bytes = static_cast<std::uint64_t>(double(index.native_peak()) * 0.3);
  request.budget_ratio = 0.3;
  request.through_allocator = true;
  std::vector<double> fractions;
  request.on_fit_attempt = [&](const PlanRequest::FitAttempt& attempt, const SimulationResult&) {
    fractions.push_back(attempt.fraction);
  };
  request.threads = 1;
  plan::Plan alone = plan_delta(request);
  const std::vector<double> tried_alone = fractions;
  fractions.clear();
  request.threads = 2;
  plan::Plan together = plan_delta(request);
  REQUIRE(alone.predicted.feasible);
  CHECK(tried_alone == std::vector<double>{1.0, 0.99, 0.98, 0.9875, 0.985, 0.9825});
  CHECK(fractions == tried_alone);
  CHECK(plan::to_json_text(together) == plan::to_json_text(alone));
}

TEST_CASE("plans that share a stage memo are the plans made without one") {
  // The fitting plans one live budget with and without state swaps only the link limits, and
  // the second takes what the first's stages made (common/stage_memo.hpp): each plan must be
  // the one made afresh, whichever way comes first, and the memo must have been used.
  const std::string log = dtr_log("resnet32");
  REQUIRE(!log.empty());
  trace::Trace t = load_dtr_log(log);
  TraceIndex index(t);
  PlanRequest request = titanv_request_at(index, 0.8);
  request.search_rounds = 0;
  std::string afresh[2];
  for (const bool within : {true, false}) {
    request.state_swaps_within_link = within;
    afresh[within] = plan::to_json_text(plan_delta(request));
  }
  for (const bool first : {true, false}) {
    StageMemo memo;
    request.stage_memo = &memo;
    for (const bool within : {first, !first}) {
      request.state_swaps_within_link = within;
      CHECK(plan::to_json_text(plan_delta(request)) == afresh[within]);
    }
    CHECK(memo.made() >= 1);
    CHECK(memo.reused() >= 1);  // the second plan took the portfolio's choice the first made
  }
  // A memo shared by plans of two budgets gives each its own stages' plans.
  StageMemo memo;
  request.stage_memo = &memo;
  request.state_swaps_within_link = true;
  const std::size_t made_for_one = (plan_delta(request), memo.made());
  PlanRequest tighter = titanv_request_at(index, 0.7);
  tighter.search_rounds = 0;
  const std::string tighter_afresh = plan::to_json_text(plan_delta(tighter));
  tighter.stage_memo = &memo;
  CHECK(plan::to_json_text(plan_delta(tighter)) == tighter_afresh);
  CHECK(memo.made() > made_for_one);  // its own, not the looser budget's
}

TEST_CASE("a stage memo makes each key once and gives the kept plan after") {
  StageMemo memo;
  int made = 0;
  const auto make = [&]() -> StageMemo::Made {
    ++made;
    plan::Plan plan;
    plan.method = "made " + std::to_string(made);
    SimulationResult verdict;
    verdict.step_time_ns = made;
    return {plan, verdict};
  };
  CHECK(memo.get("a", make).first.method == "made 1");
  CHECK(memo.get("a", make).first.method == "made 1");
  CHECK(memo.get("b", make).first.method == "made 2");
  CHECK(memo.get("a", make).second.step_time_ns == 1);
  CHECK(made == 2);
  CHECK(memo.made() == 2);
  CHECK(memo.reused() == 2);
  // Asked from many threads at once, every caller gets the one plan kept.
  std::vector<std::string> seen(16);
  parallel_for(seen.size(), 8, [&](std::size_t k) {
    seen[k] = memo.get("c", [&]() -> StageMemo::Made {
                    plan::Plan plan;
                    plan.method = "made by task " + std::to_string(k);
                    return {plan, SimulationResult{}};
                  }).first.method;
  });
  REQUIRE(seen[0].rfind("made by task ", 0) == 0);
  CHECK(std::all_of(seen.begin(), seen.end(), [&](const std::string& s) { return s == seen[0]; }));
  CHECK(memo.made() == 3);
}

TEST_CASE("the sweeps of the portfolio's last stages, polished side by side, give the plan made one by one") {
  // The five-op training step (tiny_traces.hpp) at 800 of its 1,200 MB: the portfolio's choice
  // swaps the optimizer's state before its first use, so the stage after it polishes the sweep
  // without state swaps and the one within the link. On two threads those two are made side
  // by side first, into the stage memo the stage then takes them from; on one, the stage makes
  // its own.
  trace::Trace t = step_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, 800'000'000);
  std::string plans[2];
  for (const std::size_t threads : {1u, 2u}) {
    StageMemo memo;
    request.stage_memo = &memo;
    request.threads = threads;
    plans[threads - 1] = plan::to_json_text(plan_delta(request));
    CHECK(memo.made() == 3);  // the portfolio's choice and two sweeps
    CHECK(memo.reused() == (threads == 1 ? 0u : 2u));
  }
  CHECK(plans[1] == plans[0]);
}

namespace {

// Spends about `ns` of this thread's CPU time.
void burn(std::int64_t ns) {
  const auto cpu = [] {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return std::int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  };
  volatile std::uint64_t sink = 0;
  for (const std::int64_t until = cpu() + ns; cpu() < until;)
    for (int k = 0; k < 1000; ++k) sink = sink + k;
}

std::map<std::string, StageTime> by_path(const std::vector<StageTime>& rows) {
  std::map<std::string, StageTime> out;
  for (const StageTime& row : rows) out[row.path] = row;
  return out;
}

}  // namespace

TEST_CASE("the stage clock counts each stage's own time and simulations, and workers' in the stage that started them") {
  StageClock::enable(true);
  {
    StageScope outer("outer");
    count_simulation();
    burn(2'000'000);
    for (int k = 0; k < 2; ++k) {
      StageScope inner("inner");
      count_simulation();
      burn(3'000'000);
    }
    parallel_for(4, 4, [](std::size_t) {
      count_simulation();
      burn(1'000'000);
    });
  }
  count_simulation();  // outside any stage
  const std::map<std::string, StageTime> rows = by_path(StageClock::report());
  StageClock::enable(false);
  REQUIRE(rows.size() == 3);
  const StageTime& outer = rows.at("outer");
  const StageTime& inner = rows.at("outer › inner");
  CHECK(outer.calls == 1);
  CHECK(inner.calls == 2);
  CHECK(outer.simulations == 1 + 4);  // its own and its workers'
  CHECK(inner.simulations == 2);
  CHECK(rows.at("(outside any stage)").simulations == 1);
  // Own times apart: the inner stage's 6 ms are not the outer one's 2 + 4 (its workers').
  CHECK(inner.self_seconds >= 0.006);
  CHECK(outer.self_seconds >= 0.006);
  CHECK(outer.self_seconds < 0.006 + 0.004);  // a margin for the scheduler, not the inner stage's time
  CHECK(inner.total_seconds == inner.self_seconds);
  CHECK(outer.total_seconds == Approx(outer.self_seconds + inner.self_seconds));
  // Off, scopes count nothing.
  { StageScope ignored("after"); }
  StageClock::enable(true);
  CHECK(StageClock::report().empty());
  StageClock::enable(false);
}

TEST_CASE("a plan made with the stage clock on is the plan made without it, and says where its time went") {
  trace::Trace t = swap_trace();
  TraceIndex index(t);
  PlanRequest request = titanv_request(index, kX + kY / 2);  // X must leave while Y is written
  request.through_allocator = true;
  request.threads = 2;
  const plan::Plan unclocked = plan_delta(request);
  StageClock::enable(true);
  const plan::Plan clocked = plan_delta(request);
  const std::vector<StageTime> rows = StageClock::report();
  StageClock::enable(false);
  REQUIRE(unclocked.predicted.feasible);
  CHECK(plan::to_json_text(clocked) == plan::to_json_text(unclocked));
  const auto ends_with = [](const std::string& path, const std::string& name) {
    return path.size() >= name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0;
  };
  const StageTime* fitted = nullptr;
  std::uint64_t simulations = 0, within_fitting = 0;
  for (const StageTime& row : rows) {
    simulations += row.simulations;
    if (ends_with(row.path, "fitted to the allocator")) fitted = &row;
  }
  REQUIRE(fitted != nullptr);
  for (const StageTime& row : rows)
    if (row.path.rfind(fitted->path + " › planned in live bytes", 0) == 0) within_fitting += row.simulations;
  CHECK(within_fitting > 0);  // the live plans made for the fitting, as its inner stage
  CHECK(simulations > within_fitting);
  CHECK(fitted->total_seconds >= fitted->self_seconds);
}
