// Auto mode watching itself on the sim. A program whose shape changes (the unet log's step and
// the same with its activations and kernel times halved): a plan per shape, the program handed
// back to the online policy the moment it strays from the running plan, the plan for the
// shape just run taking over at the boundary, from memory or from the plan cache; identical to
// cache mode and within the budget throughout. And a device that slows down under a plan:
// made again once, not in a loop.
#include "executor/step/step_program.hpp"
#include "tools/execute/auto_program.hpp"
#include "tools/execute/program_shapes.hpp"
#include "trace/trace_index.hpp"
#include "trace/trace_loading.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace delta;

namespace {

std::string dtr_log(const std::string& name) {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DELTA_TRACES_DIR) + "/dtr"))
    if (entry.path().filename().string().rfind(name + "-", 0) == 0) return entry.path().string();
  FAIL("no DTR log " << name);
  return {};
}

struct ShapedRun {
  execute::ProgramRun cache, run;
  autopilot::AutoReport report;
  std::uint64_t budget = 0;
};

// `shapes`: the shape of each iteration, 0 the traced step, 1 the step at half scale.
ShapedRun run_shaped(const std::vector<std::uint32_t>& shapes, const std::string& cache_dir,
                     std::size_t slow_from = 0, bool growing = false, bool check_every_op = false) {
  const trace::Trace t = planner::load_any_trace(dtr_log("unet"));
  const executor::StepProgram program = executor::step_program(t);
  const executor::StepProgram half = execute::scaled_program(program, 0.5);
  ShapedRun out;
  out.budget = static_cast<std::uint64_t>(0.5 * double(planner::TraceIndex(t).native_peak()));
  execute::ProgramOptions options;
  options.gpu = "titanv";
  options.iterations = shapes.size();
  options.shapes = {&program, &half};
  options.shape_of_iteration = shapes;
  options.slow_from = slow_from;
  options.slow_factor = growing ? 1.15 : 1.3;
  options.slow_growing = growing;
  out.cache = execute::run_program(t, program, nullptr, options);
  autopilot::AutoOptions automatic;
  automatic.budget_bytes = out.budget;
  automatic.gpu = "titanv";
  automatic.wait_for_plan = true;
  automatic.use_cache = !cache_dir.empty();
  automatic.cache_dir = cache_dir;
  options.check_invariants = check_every_op;  // the policy's or the executor's, and the autopilot's, after every op
  execute::run_auto(options, automatic, &out.report);
  out.run = execute::run_program(t, program, nullptr, options);
  return out;
}

void require_sound(const ShapedRun& r) {
  INFO(r.run.error << " / refused: " << r.report.refused);
  REQUIRE(r.run.error.empty());
  CHECK(execute::compare_runs(r.cache, r.run).identical);
  CHECK(r.run.unmapped_accesses == 0);
  CHECK(r.run.reserved_peak_bytes <= r.budget);
  CHECK(r.report.online.budget_exceeded == 0);
}

}  // namespace

TEST_CASE("scaled shapes and their syntax", "[autopilot][shapes]") {
  const auto runs = execute::parse_shapes("1x4,0.5x2");
  REQUIRE(runs.size() == 2);
  CHECK(runs[1].scale == 0.5);
  CHECK(runs[1].iterations == 2);
  CHECK_THROWS_WITH(execute::parse_shapes("1x4,0.5"), Catch::Contains("'0.5' is not SCALExCOUNT"));
  CHECK_THROWS_WITH(execute::parse_shapes("5x1"), Catch::Contains("not in (0, 4]"));
  CHECK_THROWS_WITH(execute::parse_shapes("1x0"), Catch::Contains("runs no iteration"));
  CHECK_THROWS_WITH(execute::parse_shapes("1x4,"), Catch::Contains("'' is not"));
  const trace::Trace t = planner::load_any_trace(dtr_log("unet"));
  const executor::StepProgram program = executor::step_program(t);
  const executor::StepProgram half = execute::scaled_program(program, 0.5);
  bool some_scaled = false;
  for (std::size_t b = 0; b < program.blocks.size(); ++b) {
    if (program.blocks[b].persistent || program.blocks[b].to_end) CHECK(half.blocks[b].size == program.blocks[b].size);
    else some_scaled = some_scaled || half.blocks[b].size < program.blocks[b].size;
  }
  CHECK(some_scaled);
}

TEST_CASE("auto mode: a plan per shape, switched by structure at boundaries, from the cache the second time",
          "[autopilot][shapes]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "delta-test-auto-shapes").string();
  std::filesystem::remove_all(dir);
  // A A A A A | B B B B B B | A A A | B B B
  const std::vector<std::uint32_t> shapes = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1};
  const ShapedRun first = run_shaped(shapes, dir, 0, false, true);
  require_sound(first);
  const autopilot::AutoReport& r = first.report;
  // A: recorded in 1-2, online in 3 while planned, planned from 4 (5 calibrates its watch).
  // B strays from A's plan in 6 (online at once), is recorded in 7-8, online in 9 while
  // planned, planned from 10; A strays from B's plan in 12: A's plan (known) from 13; B
  // strays from it in 15: B's plan (known) from 16.
  REQUIRE(r.shapes.size() == 2);
  CHECK(r.plans_made == 2);
  CHECK(r.replans == 1);
  CHECK(r.timing_replans == 0);  // nothing slowed down
  CHECK(r.plan_switches == 4);     // A after 3, B after 9, A after 12, B after 15
  CHECK(r.program_changes == 3);   // in steps 6, 12 and 15
  for (const autopilot::ShapeReport& shape : r.shapes) {
    INFO("shape " << shape.key);
    CHECK(shape.plan_from == "planner");
    CHECK(shape.steps_planned == 4);  // A: 4, 5, 13, 14; B: 10, 11, 16, 17
    // After both shapes are planned, each runs as its plan runs on this device: within 10%
    // of its prediction times the model's error measured on its first step judged.
    REQUIRE(shape.calibration > 0);
    CHECK(double(shape.last_step_time_ns) / double(shape.predicted_step_time_ns) / shape.calibration ==
          Approx(1.0).epsilon(0.10));
  }
  CHECK(r.shapes[0].key != r.shapes[1].key);

  // The same program again: both plans from the cache, none made.
  const ShapedRun second = run_shaped(shapes, dir);
  require_sound(second);
  CHECK(second.report.plans_made == 0);
  CHECK(second.report.planned_after == 1);
  REQUIRE(second.report.shapes.size() == 2);
  for (const autopilot::ShapeReport& shape : second.report.shapes) CHECK(shape.plan_from == "cache");
  std::filesystem::remove_all(dir);
}

TEST_CASE("auto mode: a device slower than the plan's prediction is planned again once, not in a loop",
          "[autopilot][watch]") {
  // (Unchanged steps plan nothing again: the shapes test above, 17 steps, no timing replan.)
  // A device slower every step, 1.15 times the step before from step 6: every plan falls
  // behind. Steps 6-8 off, recorded 9-10, the plan made again from 12 (predicting the slower
  // steps the recording saw), its steps 14-16 off again: kept (a warning), not made a third
  // time.
  const ShapedRun degrading = run_shaped(std::vector<std::uint32_t>(17, 0), "", 6, true);
  require_sound(degrading);
  CHECK(degrading.report.timing_replans == 1);
  CHECK(degrading.report.plans_made == 2);
  CHECK(degrading.report.plan_switches == 2);
  REQUIRE(degrading.report.shapes.size() == 1);
  const autopilot::ShapeReport& shape = degrading.report.shapes[0];
  CHECK(shape.timing_replans == 1);
  // Planned again from steps 9-10, 1.15^4 and 1.15^5 times slower than cache mode's step 5.
  CHECK(double(shape.predicted_step_time_ns) > 1.5 * double(degrading.cache.step_times_ns.at(4)));
}

TEST_CASE("auto mode within a host budget: a plan that pins more is refused; the online policy keeps blocks it "
          "cannot copy out, and says so", "[autopilot][host]") {
  const trace::Trace t = planner::load_any_trace(dtr_log("unet"));
  const executor::StepProgram program = executor::step_program(t);
  execute::ProgramOptions options;
  options.gpu = "titanv";
  options.iterations = 5;
  const execute::ProgramRun cache = execute::run_program(t, program, nullptr, options);
  autopilot::AutoOptions automatic;
  automatic.budget_bytes = static_cast<std::uint64_t>(0.5 * double(planner::TraceIndex(t).native_peak()));
  automatic.host_limit_bytes = std::uint64_t{256} << 20;
  automatic.gpu = "titanv";
  automatic.wait_for_plan = true;
  automatic.use_cache = false;
  autopilot::AutoReport report;
  execute::run_auto(options, automatic, &report);
  const execute::ProgramRun run = execute::run_program(t, program, nullptr, options);
  INFO(run.error);
  REQUIRE(run.error.empty());
  CHECK(execute::compare_runs(cache, run).identical);
  CHECK(run.unmapped_accesses == 0);
  CHECK(report.planned_after == 0);  // no plan ran
  CHECK_THAT(report.refused, Catch::Contains("DELTA_HOST_BUDGET"));
  REQUIRE(report.shapes.size() == 1);
  CHECK_THAT(report.shapes[0].refused, Catch::Contains("pinned host memory"));
  CHECK(report.plans_made == 1);  // refused once, not planned again step after step
  CHECK(report.online.host_refusals > 0);
  CHECK(report.online.host_pinned_peak > 0);
  CHECK(report.online.host_pinned_peak <= automatic.host_limit_bytes);
  CHECK(report.online.budget_exceeded > 0);  // kept above the device budget, counted
}
