#include "running/auto_execute.hpp"

#include "common/exit_status.hpp"
#include "running/run_pair_json.hpp"
#include "common/iteration_args.hpp"
#include "common/trace_args.hpp"
#include "common/trace_input.hpp"
#include "trace/trace_index.hpp"

#include "executor/step/step_program.hpp"
#include "tools/execute/auto_program.hpp"
#include "tools/execute/program_shapes.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

namespace deltactl {

// "FACTOR@ITERATION" of --slow-kernels.
static void s_parse_slow(const std::string& text, delta::execute::ProgramOptions& options) {
  const std::size_t at = text.find('@');
  try {
    if (at == std::string::npos) throw std::invalid_argument("no @");
    std::size_t used = 0;
    options.slow_factor = std::stod(text.substr(0, at), &used);
    if (used != at) throw std::invalid_argument("factor");
    const std::string from = text.substr(at + 1);
    options.slow_from = std::stoul(from, &used);
    if (used != from.size() || from.empty() || from[0] == '-') throw std::invalid_argument("iteration");
  } catch (const std::exception&) {
    throw ExitStatus(1, "--slow-kernels: '" + text + "' is not FACTOR@ITERATION (e.g. 1.3@6)");
  }
  if (!(options.slow_factor > 0) || options.slow_from == 0)
    throw ExitStatus(1, "--slow-kernels: '" + text + "' needs a positive factor and an iteration from 1");
}

void run_auto_execute(const AutoExecuteArgs& args) {
  using namespace delta;
  trace::Trace trace = load_trace(args.trace_path, args.kineto);
  require_ops(trace, args.trace_path, "execute");
  const std::string gpu = gpu_profile_for(trace, args.gpu);
  trace = step_to_plan(std::move(trace), args.iteration);
  const Budget budget = parse_budget(args.budget.empty() ? "0.5" : args.budget, planner::TraceIndex(trace).native_peak());
  const executor::StepProgram program = executor::step_program(trace);

  execute::ProgramOptions options;
  options.gpu = gpu;
  options.iterations = args.iterations;
  options.perturb = args.perturb;
  options.copy_discards = !args.drop_discards;
  // A program of several shapes: one StepProgram per scale met, an iteration each.
  std::vector<double> scales;
  std::vector<executor::StepProgram> shaped;
  if (!args.shapes.empty()) {
    std::vector<execute::ShapeRun> runs;
    try {
      runs = execute::parse_shapes(args.shapes);
    } catch (const std::invalid_argument& e) {
      throw ExitStatus(1, e.what());
    }
    for (const execute::ShapeRun& run : runs)
      if (std::find(scales.begin(), scales.end(), run.scale) == scales.end()) scales.push_back(run.scale);
    shaped.reserve(scales.size());
    for (double scale : scales) shaped.push_back(execute::scaled_program(program, scale));
    for (const executor::StepProgram& p : shaped) options.shapes.push_back(&p);
    for (const execute::ShapeRun& run : runs)
      options.shape_of_iteration.insert(options.shape_of_iteration.end(), run.iterations,
                                        static_cast<std::uint32_t>(std::find(scales.begin(), scales.end(), run.scale) - scales.begin()));
    options.iterations = options.shape_of_iteration.size();
  }
  if (!args.slow_kernels.empty()) s_parse_slow(args.slow_kernels, options);
  const execute::ProgramRun cache = execute::run_program(trace, program, nullptr, options);
  if (!cache.error.empty()) throw ExitStatus(1, "the program does not run in cache mode: " + cache.error);

  executor::OnlineStats online;
  autopilot::AutoReport report;
  if (args.online_only) {
    executor::OnlineOptions o;
    o.budget_bytes = budget.bytes;
    o.host_limit_bytes = args.host_budget;
    execute::run_online(options, o, &online);
  } else {
    autopilot::AutoOptions o;
    o.budget_bytes = budget.bytes;
    o.host_limit_bytes = args.host_budget;
    o.gpu = gpu;
    o.record_iterations = args.record_iterations;
    o.use_cache = !args.plan_cache.empty();
    o.cache_dir = args.plan_cache;
    o.wait_for_plan = true;  // the switch at a boundary that does not depend on this machine's speed
    o.copy_discards = !args.drop_discards;
    o.plan_seconds = args.plan_seconds;
    execute::run_auto(options, o, &report);
  }
  const execute::ProgramRun run = execute::run_program(trace, program, nullptr, options);
  if (!args.online_only) online = report.online;
  const execute::Comparison same = execute::compare_runs(cache, run);
  const bool ok = run.error.empty() && same.identical && run.unmapped_accesses == 0;
  const double overhead = cache.step_time_ns ? double(run.step_time_ns) / double(cache.step_time_ns) : 0.0;
  // The online policy's step: the last iteration before the switch (the last one, online only).
  const std::size_t online_steps = report.planned_after ? report.planned_after : run.step_times_ns.size();
  const std::uint64_t online_step = online_steps ? run.step_times_ns[online_steps - 1] : 0;
  nlohmann::json j = run_pair_json({args.trace_path, gpu, options.iterations, budget.bytes, budget.ratio}, cache, run, same);
  if (!options.shape_of_iteration.empty()) {
    j["shape_scales"] = scales;
    j["shape_of_iteration"] = options.shape_of_iteration;
  }
  j.update({{"mode", args.online_only ? "online" : "auto"},
            {"step_times_ns", run.step_times_ns},
            {"online_step_time_ns", online_step},
            {"online_overhead", cache.step_time_ns ? double(online_step) / double(cache.step_time_ns) : 0.0},
            {"evictions", online.evictions},
            {"copies_spared", online.copies_spared},
            {"fetches", online.fetches},
            {"online_bytes_d2h", online.bytes_d2h},
            {"online_bytes_h2d", online.bytes_h2d},
            {"online_stall_ns", online.stall_ns},
            {"online_host_wait_ns", online.host_wait_ns},
            {"online_budget_exceeded", online.budget_exceeded},
            {"host_budget_bytes", args.host_budget},
            {"online_host_refusals", online.host_refusals},
            {"online_host_pinned_peak", online.host_pinned_peak}});
  if (!args.online_only) {
    j["planned_after"] = report.planned_after;
    j["plan_from"] = report.plan_from.empty() ? nlohmann::json() : nlohmann::json(report.plan_from);
    j["planning_wall_s"] = report.planning_wall_seconds;
    j["plan_seconds_limit"] = args.plan_seconds ? nlohmann::json(*args.plan_seconds) : nlohmann::json();
    j["plan_aimed_bytes"] = report.plan_aimed_bytes;
    j["plan_attempts"] = report.plan_attempts;
    j["refused"] = report.refused.empty() ? nlohmann::json() : nlohmann::json(report.refused);
    j["cache_warning"] = report.cache_warning.empty() ? nlohmann::json() : nlohmann::json(report.cache_warning);
    j["plans_made"] = report.plans_made;
    j["replans"] = report.replans;
    j["timing_replans"] = report.timing_replans;
    j["budget_replans"] = report.budget_replans;
    j["plan_switches"] = report.plan_switches;
    j["program_changes"] = report.program_changes;
    nlohmann::json shapes = nlohmann::json::array();
    for (const autopilot::ShapeReport& shape : report.shapes)
      shapes.push_back({{"key", shape.key},
                        {"plan_from", shape.plan_from.empty() ? nlohmann::json() : nlohmann::json(shape.plan_from)},
                        {"refused", shape.refused.empty() ? nlohmann::json() : nlohmann::json(shape.refused)},
                        {"predicted_step_time_ns", shape.predicted_step_time_ns},
                        {"steps_planned", shape.steps_planned},
                        {"last_step_time_ns", shape.last_step_time_ns},
                        {"last_over_predicted", shape.predicted_step_time_ns && shape.steps_planned
                                                    ? double(shape.last_step_time_ns) / double(shape.predicted_step_time_ns)
                                                    : 0.0},
                        {"calibration", shape.calibration},
                        {"timing_replans", shape.timing_replans},
                        {"budget_replans", shape.budget_replans}});
    j["shapes"] = shapes;
    if (report.executor) {
      const executor::ExecutorStats& s = *report.executor;
      j["swaps"] = s.swaps;
      j["prefetches"] = s.prefetches;
      j["late_fetches"] = s.late_fetches;
      j["regenerations"] = s.regenerations;
      j["discards"] = s.discards;
      j["divergences"] = s.divergences;
      j["budget_exceeded"] = s.budget_exceeded;
    }
  }
  if (args.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "executed " << options.iterations << " iterations of " << args.trace_path << " on a simulated " << gpu
              << (args.online_only ? " under the online policy" : " in auto mode") << " (budget " << budget.bytes
              << " bytes)\n"
              << "  data:      " << (same.identical ? "identical to cache mode" : "DIFFERS at " + same.first_mismatch)
              << (run.error.empty() ? "" : "; the run stopped: " + run.error) << "\n"
              << "  memory:    reserved peak " << run.reserved_peak_bytes << " bytes (cache mode "
              << cache.reserved_peak_bytes << "), unmapped accesses " << run.unmapped_accesses << "\n"
              << "  online:    step " << online_step << " ns, " << online.evictions << " evictions, " << online.fetches
              << " fetches, stalls " << online.stall_ns << " ns\n";
    if (!args.online_only)
      std::cout << "  plan:      "
                << (report.planned_after ? "from the " + report.plan_from + " after " + std::to_string(report.planned_after) +
                                               " iterations (planning " + std::to_string(report.planning_wall_seconds) + " s)"
                                         : "none: " + report.refused)
                << "; " << report.shapes.size() << " shape(s), " << report.plan_switches << " plan switch(es), "
                << report.replans << " replan(s) (" << report.timing_replans << " for time, " << report.budget_replans
                << " for the budget), " << report.program_changes
                << " program change(s) mid-plan\n";
    std::cout << "  time:      last step " << run.step_time_ns << " ns, cache mode " << cache.step_time_ns << " ns (x"
              << overhead << ")\n";
  }
  if (!ok) throw ExitStatus(2, same.identical ? "the run failed: " + run.error : "the run differs from cache mode at " + same.first_mismatch);
}

}  // namespace deltactl
