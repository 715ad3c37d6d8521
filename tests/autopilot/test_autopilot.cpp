// Auto mode on the sim: a DTR log run from its first iteration with no plan given. The online
// policy holds the budget while the recorder records; the planner runs in its own thread; the
// plan takes over at a fixed boundary; data identical to cache mode throughout. Then the plan
// cache: a second run starts planned, the key follows the budget and the program, and a
// corrupt entry is reported by name and planned again.
#include "autopilot/budget_setting.hpp"
#include "autopilot/plan_cache.hpp"
#include "autopilot/steps/step_key.hpp"
#include "executor/step/step_program.hpp"
#include "tools/execute/auto_program.hpp"
#include "trace/trace_index.hpp"
#include "trace/trace_loading.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

using namespace delta;

namespace {

std::string dtr_log(const std::string& name) {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DELTA_TRACES_DIR) + "/dtr"))
    if (entry.path().filename().string().rfind(name + "-", 0) == 0) return entry.path().string();
  FAIL("no DTR log " << name);
  return {};
}

struct AutoRun {
  execute::ProgramRun cache, run;
  autopilot::AutoReport report;
  std::uint64_t budget = 0;
};

AutoRun run_auto(const trace::Trace& t, double ratio, const std::string& cache_dir, std::size_t iterations = 4,
                 std::optional<double> plan_seconds = std::nullopt, bool wait_for_plan = true) {
  const executor::StepProgram program = executor::step_program(t);
  AutoRun out;
  out.budget = static_cast<std::uint64_t>(ratio * double(planner::TraceIndex(t).native_peak()));
  execute::ProgramOptions options;
  options.gpu = "titanv";
  options.iterations = iterations;
  out.cache = execute::run_program(t, program, nullptr, options);
  autopilot::AutoOptions automatic;
  automatic.budget_bytes = out.budget;
  automatic.gpu = "titanv";
  automatic.wait_for_plan = wait_for_plan;
  automatic.use_cache = !cache_dir.empty();
  automatic.cache_dir = cache_dir;
  automatic.plan_seconds = plan_seconds;
  options.check_invariants = true;  // the policy's, then the executor's, after every op
  execute::run_auto(options, automatic, &out.report);
  out.run = execute::run_program(t, program, nullptr, options);
  return out;
}

void require_sound(const AutoRun& r) {
  INFO(r.run.error << " / refused: " << r.report.refused);
  REQUIRE(r.run.error.empty());
  CHECK(execute::compare_runs(r.cache, r.run).identical);
  CHECK(r.run.unmapped_accesses == 0);
  CHECK(r.run.reserved_peak_bytes <= r.budget);
}

}  // namespace

TEST_CASE("auto mode: online while recording, the plan from the planner's thread after it", "[autopilot]") {
  const trace::Trace t = planner::load_any_trace(dtr_log("unet"));
  const AutoRun r = run_auto(t, 0.5, "", 5);
  require_sound(r);
  // Two iterations recorded, a third run online while the planner works, the switch after it.
  CHECK(r.report.planned_after == 3);
  CHECK(r.report.plan_from == "planner");
  CHECK(r.report.planning_wall_seconds > 0);
  // Planned for no more than the simulator then judges it at (the budget less the layout
  // margin): the first try's plan is taken (aimed above it, two were refused first).
  CHECK(r.report.plan_attempts == 1);
  const std::uint64_t page = std::uint64_t{2} << 20, margin = std::max<std::uint64_t>(8 * page, r.budget / 200 / page * page);
  CHECK(r.report.plan_aimed_bytes + margin <= r.budget);
  CHECK(r.report.online.evictions > 0);
  REQUIRE(r.report.executor);
  CHECK(r.report.executor->divergences == 0);
  CHECK(r.report.executor->steps == 2);
}

TEST_CASE("auto mode plans the step's small persistent blocks resident where dropping their moves is refused",
          "[autopilot]") {
  // lstm at 0.3: its plan moved 112 of them; dropped from it after, they held room the plan had
  // counted free, and all three tries were refused, lowering the aim. Planned resident at the
  // same aim, the second try is taken.
  const trace::Trace t = planner::load_any_trace(dtr_log("lstm"));
  const AutoRun r = run_auto(t, 0.3, "", 5);
  require_sound(r);
  CHECK(r.report.planned_after == 3);
  CHECK(r.report.plan_from == "planner");
  CHECK(r.report.plan_attempts == 2);
  REQUIRE(r.report.executor);
  CHECK(r.report.executor->divergences == 0);
}

TEST_CASE("auto mode: a plan whose steps go over the budget live is made again once, for that much less",
          "[autopilot][budget]") {
  // The transformer log at 0.3: the live layout after the online steps (the state where the
  // online policy placed it) lacks 172 MB the planner's ledger had, beyond the layout margin;
  // the first planned step is served above the budget. Recorded and planned again for that much
  // less, the second plan holds the budget in every step it runs.
  const trace::Trace t = planner::load_any_trace(dtr_log("transformer"));
  const AutoRun r = run_auto(t, 0.3, "", 10);
  INFO(r.run.error << " / refused: " << r.report.refused);
  REQUIRE(r.run.error.empty());
  CHECK(execute::compare_runs(r.cache, r.run).identical);
  CHECK(r.run.unmapped_accesses == 0);
  CHECK(r.report.budget_replans == 1);
  CHECK(r.report.plans_made == 2);
  REQUIRE(r.report.shapes.size() == 1);
  CHECK(r.report.shapes[0].budget_replans == 1);
  CHECK(r.report.shapes[0].steps_planned >= 2);  // the second plan ran whole steps
  REQUIRE(r.report.executor);                     // the second plan's executor
  CHECK(r.report.executor->budget_exceeded == 0);
  CHECK(r.report.executor->over_budget_on_plan_bytes == 0);
  CHECK(r.report.executor->divergences == 0);

  // Where the program does not wait for the planner (as in a job), the plan that went over the
  // budget does not come back while its successor is recorded and planned: the online policy
  // keeps the program until the new plan is taken. The first plan from the cache (a run that
  // ended before its replan was made), the rest of this run online.
  const std::string dir = (std::filesystem::temp_directory_path() / "delta-test-budget-replan").string();
  std::filesystem::remove_all(dir);
  const AutoRun first = run_auto(t, 0.3, dir, 5);  // planned after 3; step 4 over; its replan not done
  CHECK(first.report.budget_replans == 1);
  const AutoRun cached = run_auto(t, 0.3, dir, 8, std::nullopt, false);
  INFO(cached.run.error << " / refused: " << cached.report.refused);
  REQUIRE(cached.run.error.empty());
  CHECK(execute::compare_runs(cached.cache, cached.run).identical);
  CHECK(cached.report.plan_from == "cache");
  CHECK(cached.report.budget_replans == 1);
  CHECK(cached.report.plan_switches == 1);  // the cached plan once, never again after its replan
  std::filesystem::remove_all(dir);
}

TEST_CASE("auto mode under a planning time limit (DELTA_PLAN_SECONDS): a whole plan at once, as sound", "[autopilot]") {
  const trace::Trace t = planner::load_any_trace(dtr_log("unet"));
  // A limit of no time: the planner refines nothing, yet the plan it makes takes over at the
  // same boundary, holds the budget and leaves the data as cache mode does.
  const AutoRun limited = run_auto(t, 0.5, "", 5, 0.0);
  require_sound(limited);
  CHECK(limited.report.planned_after == 3);
  CHECK(limited.report.plan_from == "planner");
  REQUIRE(limited.report.executor);
  CHECK(limited.report.executor->divergences == 0);
  // The limit took effect: the unrefined plan predicts a slower step than the plan made without one.
  const AutoRun unlimited = run_auto(t, 0.5, "", 5);
  require_sound(unlimited);
  REQUIRE(limited.report.shapes.size() == 1);
  REQUIRE(unlimited.report.shapes.size() == 1);
  CHECK(limited.report.shapes[0].predicted_step_time_ns > unlimited.report.shapes[0].predicted_step_time_ns);
}

TEST_CASE("the plan cache: a second run starts planned; budget and program change the key; a bad entry is replanned",
          "[autopilot][cache]") {
  const std::string dir = (std::filesystem::temp_directory_path() / ("delta-auto-cache-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  const trace::Trace t = planner::load_any_trace(dtr_log("unet"));

  const AutoRun first = run_auto(t, 0.5, dir);
  require_sound(first);
  CHECK(first.report.plan_from == "planner");
  REQUIRE_FALSE(first.report.cache_key.empty());
  const autopilot::PlanCache cache(dir);
  REQUIRE(std::filesystem::exists(cache.plan_path(first.report.cache_key)));

  const AutoRun second = run_auto(t, 0.5, dir);
  require_sound(second);
  CHECK(second.report.plan_from == "cache");
  CHECK(second.report.planned_after == 1);  // the first step is how the program is recognised
  CHECK(second.report.cache_key == first.report.cache_key);

  const AutoRun other_budget = run_auto(t, 0.4, dir);
  require_sound(other_budget);
  CHECK(other_budget.report.cache_key != first.report.cache_key);
  CHECK(other_budget.report.plan_from == "planner");

  // Another program, same budget and GPU: another key.
  autopilot::StepKey a, b;
  a.allocation(1 << 20);
  a.launch("conv", 3);
  b.allocation(1 << 20);
  b.launch("conv", 2);
  CHECK(a.hex() != b.hex());
  CHECK(autopilot::PlanCache::key(a.hex(), "titanv", 100) != autopilot::PlanCache::key(b.hex(), "titanv", 100));
  CHECK(autopilot::PlanCache::key(a.hex(), "titanv", 100) != autopilot::PlanCache::key(a.hex(), "a100", 100));

  // A corrupt entry: a warning naming the file, a plan made again, and the entry written anew.
  std::ofstream(cache.plan_path(first.report.cache_key)) << "{ not json";
  const AutoRun corrupt = run_auto(t, 0.5, dir);
  require_sound(corrupt);
  CHECK(corrupt.report.plan_from == "planner");
  CHECK_THAT(corrupt.report.cache_warning, Catch::Contains(cache.plan_path(first.report.cache_key)));
  const AutoRun again = run_auto(t, 0.5, dir);
  CHECK(again.report.plan_from == "cache");
  std::filesystem::remove_all(dir);
}

TEST_CASE("budget settings: fractions, byte counts and what each refuses, naming the setting", "[autopilot]") {
  using autopilot::parse_budget_setting;
  using autopilot::parse_byte_count_setting;
  const std::uint64_t device = std::uint64_t{80} << 30;
  CHECK(parse_budget_setting("DELTA_BUDGET", "0.5", device) == device / 2);
  CHECK(parse_budget_setting("DELTA_BUDGET", "5e-1", device) == device / 2);  // a fraction written without a point
  CHECK(parse_budget_setting("DELTA_BUDGET", "40GiB", device) == std::uint64_t{40} << 30);
  CHECK_THROWS_WITH(parse_budget_setting("DELTA_BUDGET", "1e-300", device), Catch::Contains("less than a byte"));
  CHECK_THROWS_WITH(parse_budget_setting("DELTA_BUDGET", "1.5", device), Catch::Contains("fraction above 1"));
  CHECK(parse_byte_count_setting("DELTA_HOST_BUDGET", "8000000000") == 8'000'000'000u);
  for (const char* bad : {"-1", "+5", " 5", "5 ", "lots", "", "0", "99999999999999999999999"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_byte_count_setting("DELTA_HOST_BUDGET", bad), Catch::Contains("DELTA_HOST_BUDGET='"));
  }
  using autopilot::parse_seconds_setting;
  CHECK(parse_seconds_setting("DELTA_PLAN_SECONDS", "2") == 2.0);
  CHECK(parse_seconds_setting("DELTA_PLAN_SECONDS", "0.5") == 0.5);
  CHECK(parse_seconds_setting("DELTA_PLAN_SECONDS", "0") == 0.0);
  for (const char* bad : {"-1", "2s", "inf", "nan", "1e3", "", ".", "1.2.3", "2000000", " 2"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_seconds_setting("DELTA_PLAN_SECONDS", bad), Catch::Contains("DELTA_PLAN_SECONDS='"));
  }
}
