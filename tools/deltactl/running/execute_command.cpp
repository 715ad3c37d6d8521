#include "running/execute_command.hpp"
#include "running/auto_execute.hpp"
#include "common/iteration_args.hpp"

#include "allocator/reports/format.hpp"
#include "common/exit_status.hpp"
#include "running/executed_phases.hpp"
#include "running/run_pair_json.hpp"
#include "running/record_execute.hpp"
#include "methods.hpp"
#include "common/python_tools.hpp"
#include "planning/simulate_command.hpp"
#include "common/trace_args.hpp"
#include "trace/trace_index.hpp"
#include "common/trace_input.hpp"

#include "executor/step/step_program.hpp"
#include "tools/execute/program_runner.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

namespace deltactl {
namespace {

struct ExecuteArgs {
  std::string trace_path;
  std::string kineto;  // an Execution Trace's Kineto profile
  std::string plan_path;
  std::string budget;
  std::string gpu;
  std::size_t iterations = 3;
  std::optional<std::uint64_t> perturb;
  bool json = false;
  bool drop_discards = false;
  std::optional<std::uint32_t> iteration;
  bool planner_placement = false;  // the plan made here is fitted as the executor places blocks
  std::string timeline, html;  // the executed step beside the planned one: JSON, drawn
  std::string plot_script;  // empty: tools/plots/execute_timeline.py, installed or in the source tree
};

// The planned step (the simulator's timeline) and the executed one (the last iteration under
// the plan, and in cache mode), for tools/plots/execute_timeline.py.
nlohmann::json execute_timeline(const ExecuteArgs& args, const delta::trace::Trace& trace, const delta::plan::Plan& plan,
                                const delta::execute::ProgramRun& cache, const delta::execute::ProgramRun& run) {
  using namespace delta;
  planner::TraceIndex index(trace);
  planner::SimulationOptions options;
  options.gpu = gpu_profile(plan.gpu_profile);
  options.budget_bytes = plan.budget_bytes;
  options.through_allocator = plan.budget_bytes > 0;
  options.executor_placement = true;  // as the executor placed the blocks it moved
  options.packed_moves = plan.predicted.packed_moves;
  options.packed_groups = plan.predicted.packed_groups;
  options.steps_before = planner::kJudgedAfterSteps;  // the executed step is a later one too
  options.discard_copies = !args.drop_discards;  // as the executor ran the discards
  options.host_pace = true;                       // and the sim device the launches
  options.record_timeline = true;
  const planner::SimulationResult sim = planner::simulate(index, plan, options);
  auto ops_json = [&](const execute::ProgramRun& r) {
    nlohmann::json op = nlohmann::json::array(), start = nlohmann::json::array(), end = nlohmann::json::array(),
                   reserved = nlohmann::json::array();
    for (const execute::ExecutedTimeline::Op& o : r.timeline.ops) {
      op.push_back(o.op);
      start.push_back(o.start_ns);
      end.push_back(o.end_ns);
      reserved.push_back(o.reserved_bytes);
    }
    return nlohmann::json{{"op", op}, {"start_ns", start}, {"end_ns", end}, {"reserved_bytes", reserved}};
  };
  auto spans_json = [](const std::vector<execute::ExecutedTimeline::Span>& spans) {
    nlohmann::json to_host = nlohmann::json::array(), start = nlohmann::json::array(), end = nlohmann::json::array(),
                   bytes = nlohmann::json::array();
    for (const auto& s : spans) {
      to_host.push_back(s.to_host);
      start.push_back(s.start_ns);
      end.push_back(s.end_ns);
      bytes.push_back(s.bytes);
    }
    return nlohmann::json{{"to_host", to_host}, {"start_ns", start}, {"end_ns", end}, {"bytes", bytes}};
  };
  return {{"format", "delta-execute-timeline"},
          {"version", 1},
          {"planned", timeline_json(args.trace_path, index, plan, sim, options.through_allocator)},
          {"executed",
           {{"step_ns", run.step_time_ns},
            {"reserved_peak_bytes", run.reserved_peak_bytes},
            {"ops", ops_json(run)},
            {"copies", spans_json(run.timeline.copies)},
            {"replays", spans_json(run.timeline.replays)}}},
          {"cache", {{"step_ns", cache.step_time_ns}, {"ops", ops_json(cache)}}}};
}

void write_execute_timeline(const ExecuteArgs& args, const nlohmann::json& timeline) {
  std::optional<TemporaryFile> temporary;
  std::filesystem::path data = args.timeline;
  if (data.empty()) {
    temporary.emplace("delta-execute-timeline", ".json");
    data = temporary->path();
  }
  delta::write_file_atomically(data.string(), timeline.dump() + "\n");
  if (!args.html.empty())
    run_drawing(args.plot_script.empty() ? tool_file("tools/plots/execute_timeline.py") : std::filesystem::path(args.plot_script),
                data, "", args.html, "execute");
}

delta::plan::Plan make_plan(const delta::trace::Trace& trace, const std::string& gpu, const std::string& budget_text,
                            bool executor_placement, bool discard_copies) {
  using namespace delta;
  planner::TraceIndex index(trace);
  planner::PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile(gpu);
  const Budget budget = parse_budget(budget_text, index.native_peak());
  request.budget_bytes = budget.bytes;
  request.budget_ratio = budget.ratio;
  request.through_allocator = true;
  request.executor_placement = executor_placement;
  request.discard_copies = discard_copies;  // as the executor will run the discards
  request.host_pace = true;                 // and the sim device the launches
  planner::MethodResult result = planner::run_method("delta", request);
  if (!result.plan || !result.feasible)
    throw ExitStatus(1, "no plan fits a budget of " + std::to_string(budget.bytes) + " bytes: " + result.reason);
  return *result.plan;
}

void run_execute(const ExecuteArgs& args) {
  using namespace delta;
  // The program is the step the plan is for: the plan's iteration, or the one --iteration
  // (by default the last) picks for the plan made here.
  trace::Trace trace = load_trace(args.trace_path, args.kineto);
  require_ops(trace, args.trace_path, "execute");
  std::string gpu = gpu_profile_for(trace, args.gpu);
  plan::Plan plan;
  if (!args.plan_path.empty()) {
    plan = plan::read_plan(args.plan_path);
    // The program runs on the GPU the plan was made for: its figures are that GPU's.
    try {
      gpu_profile(plan.gpu_profile);
    } catch (const std::exception& e) {
      throw ExitStatus(1, args.plan_path + ": gpu: " + e.what());
    }
    if (!args.gpu.empty() && args.gpu != plan.gpu_profile)
      throw ExitStatus(1, "--gpu " + args.gpu + ": the plan " + args.plan_path + " was made for " + plan.gpu_profile +
                              " (leave --gpu out to run it there, or plan again for " + args.gpu + ")");
    gpu = plan.gpu_profile;
    if (args.iteration && plan.trace_iteration != args.iteration)
      throw ExitStatus(1, "--iteration " + std::to_string(*args.iteration) + ": the plan is for " +
                              (plan.trace_iteration ? "iteration " + std::to_string(*plan.trace_iteration) : std::string("the whole trace")));
    trace = plan::plan_step(trace, plan);
  } else {
    std::optional<std::uint32_t> iteration;
    trace = step_to_plan(std::move(trace), args.iteration, &iteration);
    plan = make_plan(trace, gpu, args.budget.empty() ? "0.5" : args.budget, !args.planner_placement, !args.drop_discards);
    plan.trace_iteration = iteration;
  }
  plan::check_plan_matches(plan, trace);
  const executor::StepProgram program = executor::step_program(trace);
  execute::ProgramOptions options;
  options.gpu = gpu;
  options.iterations = args.iterations;
  options.perturb = args.perturb;
  options.copy_discards = !args.drop_discards;
  options.record_timeline = true;  // the time by phase reads the last iteration's ops
  const execute::ProgramRun cache = execute::run_program(trace, program, nullptr, options);
  if (!cache.error.empty()) throw ExitStatus(1, "the program does not run in cache mode: " + cache.error);
  const execute::ProgramRun run = execute::run_program(trace, program, &plan, options);
  const execute::Comparison same = execute::compare_runs(cache, run);
  const bool ok = run.error.empty() && same.identical && run.unmapped_accesses == 0;
  const executor::ExecutorStats& s = run.executor;
  const double overhead = cache.step_time_ns ? double(run.step_time_ns) / double(cache.step_time_ns) : 0.0;
  nlohmann::json j = run_pair_json({args.trace_path, gpu, args.iterations, plan.budget_bytes, plan.budget_ratio}, cache, run, same);
  j.update({{"predicted_step_time_ns", plan.predicted.step_time_ns},
            {"predicted_overhead", plan.predicted.overhead},
            {"swaps", s.swaps},
            {"prefetches", s.prefetches},
            {"late_fetches", s.late_fetches},
            {"regenerations", s.regenerations},
            {"revivals", s.revivals},
            {"discards", s.discards},
            {"partial_swaps", s.partial_swaps},
            {"bytes_d2h", s.bytes_d2h},
            {"bytes_h2d", s.bytes_h2d},
            {"stall_ns", s.stall_ns},
            {"host_wait_ns", s.host_wait_ns},
            {"pressure_waits", s.pressure_waits},
            {"divergences", s.divergences},
            {"budget_exceeded", s.budget_exceeded},
            {"off_plan_evictions", s.off_plan_evictions}});
  const ExecutedPhases by_phase = executed_phases(trace, cache, run);
  if (!by_phase.phases.empty()) {
    nlohmann::json phases = nlohmann::json::array();
    for (const ExecutedPhase& p : by_phase.phases)
      phases.push_back({{"phase", trace::to_string(p.phase)}, {"step_ns", p.step_ns}, {"cache_step_ns", p.cache_ns}});
    j["phases"] = phases;
    j["end_wait_ns"] = by_phase.end_wait_ns;
    j["cache_end_wait_ns"] = by_phase.cache_end_wait_ns;
  }
  if (args.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "executed " << args.iterations << " iterations of " << args.trace_path << " on a simulated " << gpu
              << ", in cache mode and under the plan (budget " << plan.budget_bytes << " bytes)\n"
              << "  data:      " << (same.identical ? "identical to cache mode" : "DIFFERS at " + same.first_mismatch)
              << (run.error.empty() ? "" : "; the run stopped: " + run.error) << "\n"
              << "  memory:    reserved peak " << run.reserved_peak_bytes << " bytes under the plan (cache mode "
              << cache.reserved_peak_bytes << "), unmapped accesses " << run.unmapped_accesses << "\n"
              << "  time:      step " << run.step_time_ns << " ns, cache mode " << cache.step_time_ns << " ns (x"
              << overhead << "), the plan predicted " << plan.predicted.step_time_ns << " ns\n"
              << "  actions:   " << s.swaps << " swaps (" << s.partial_swaps << " partial), " << s.prefetches
              << " prefetches, " << s.late_fetches << " late fetches, " << s.regenerations << " regenerations, "
              << s.revivals << " revivals, " << s.discards << " discards; " << s.bytes_d2h << " bytes out, "
              << s.bytes_h2d << " back; stalls " << s.stall_ns << " ns\n"
              << "  off plan:  " << s.divergences << " divergences (" << run.perturbations << " perturbations), "
              << s.budget_exceeded << " allocations above the budget\n";
    if (!by_phase.phases.empty()) {
      std::ostringstream line;
      line << std::fixed << std::setprecision(2) << "  by phase:  ms under the plan against cache mode:";
      const char* separator = " ";
      for (const ExecutedPhase& p : by_phase.phases) {
        line << separator << trace::to_string(p.phase) << " " << p.step_ns / 1e6 << " against " << p.cache_ns / 1e6;
        separator = "; ";
      }
      if (by_phase.end_wait_ns > 0) line << "; after the last op " << by_phase.end_wait_ns / 1e6;
      std::cout << line.str() << "\n";
    }
  }
  // Drawn whatever the outcome: a run that went wrong is where the picture helps most.
  if (!args.timeline.empty() || !args.html.empty()) write_execute_timeline(args, execute_timeline(args, trace, plan, cache, run));
  if (!ok) throw ExitStatus(2, same.identical ? "the run under the plan failed: " + run.error
                                              : "the run under the plan differs from cache mode at " + same.first_mismatch);
}

}  // namespace

void add_execute_command(CLI::App& app) {
  auto args = std::make_shared<ExecuteArgs>();
  CLI::App* command = app.add_subcommand(
      "execute", "Run a trace as a program on the sim device, in cache mode and under a plan, and compare the data");
  command->add_option("trace", args->trace_path, std::string("Trace file: ") + kTraceKinds)->required();
  add_kineto_option(command, &args->kineto);
  auto* plan = command->add_option("--plan", args->plan_path, "A plan for the trace (from deltactl plan)");
  command->add_option("--budget", args->budget, "Plan with delta for this budget first: a fraction of the native peak (0.5) or bytes (6GiB); default 0.5")
      ->excludes(plan);
  command->add_option("--gpu", args->gpu, "GPU profile: h200, a100, v100, titanv (default: the trace's)");
  command->add_option("--iterations", args->iterations, "Iterations of the step to run")->capture_default_str()->check(CLI::Range(1, 1000));
  add_iteration_option(*command, args->iteration);
  command->add_flag("--planner-placement", args->planner_placement,
                    "With --budget: fit the plan as `deltactl plan` does by default, moved blocks placed like any "
                    "other, rather than as the executor places them");
  command->add_option("--timeline", args->timeline,
                      "Write the executed step beside the planned one, op by op and copy by copy, as JSON");
  command->add_option("--html", args->html,
                      "Draw the executed step beside the planned one (memory, drift from the plan, copy lanes) into an "
                      "HTML page (needs matplotlib)");
  command->add_option("--perturb", args->perturb, "Seed: the program strays from its trace about once per 100 ops, in both runs alike");
  command->add_flag("--json", args->json, "One JSON object");
  command->add_flag("--drop-discards", args->drop_discards,
                    "Discarded blocks go without a copy to host (DELTA_DISCARD=drop): faster, but a program that strays "
                    "and reads one loses it");
  // Recording (record_execute.hpp): cache mode only, recorded through the recorder.
  auto record = std::make_shared<RecordExecuteArgs>();
  auto* record_out = command->add_option("--record", record->out_path, "Run in cache mode only and record it through DELTA's recorder into this trace")
                         ->excludes(plan);
  command->add_flag("--opaque", record->opaque, "With --record: kernels show only their parameter bytes, as on a GPU; directions are learned")
      ->needs(record_out);
  command->add_option("--truth", record->truth_path, "With --record --opaque: also write the trace with the sim's true directions")
      ->needs(record_out);
  // Auto mode and the online policy (auto_execute.hpp): no plan given.
  auto automatic = std::make_shared<AutoExecuteArgs>();
  auto auto_on = std::make_shared<bool>(false);
  auto* auto_flag = command->add_flag("--auto", *auto_on,
                                      "Run under auto mode from the first iteration: the online policy while recording, "
                                      "then a plan made in the background (no plan given)")
                        ->excludes(plan)->excludes(record_out);
  command->add_flag("--online", automatic->online_only, "Run under the online policy alone (no plan, no recording)")
      ->excludes(plan)->excludes(record_out)->excludes(auto_flag);
  command->add_option("--record-iterations", automatic->record_iterations,
                      "With --auto: iterations recorded before planning (DELTA_RECORD_ITERATIONS)")
      ->capture_default_str()->check(CLI::Range(1, 100))->needs(auto_flag);
  command->add_option("--plan-cache", automatic->plan_cache, "With --auto: cache plans in this directory (DELTA_PLAN_CACHE)")
      ->needs(auto_flag);
  command->add_option("--plan-seconds", automatic->plan_seconds,
                      "With --auto: a limit on each plan's planning time, in seconds (DELTA_PLAN_SECONDS); past it the "
                      "planner refines no more and the plan depends on this machine's speed (default: none)")
      ->check(CLI::Range(0.0, 1e6))->needs(auto_flag);
  command->add_option("--shapes", automatic->shapes,
                      "With --auto or --online: a program whose shape changes, SCALExCOUNT,...: COUNT iterations of the "
                      "step with its activations and kernel times scaled by SCALE, in turn (e.g. 1x4,0.5x4,1x2,0.5x2; "
                      "sets the iterations)");
  command->add_option("--host-budget", automatic->host_budget,
                      "With --auto or --online: pinned host memory the online policy and the plan may take, in bytes "
                      "(DELTA_HOST_BUDGET; default none on the sim)");
  command->add_option("--slow-kernels", automatic->slow_kernels,
                      "With --auto or --online: FACTOR@ITERATION, every kernel FACTOR times slower from that iteration "
                      "(1-based) on, in both runs (the device changes under a plan)");
  command->callback([args, record, automatic, auto_on, command] {
    const bool auto_mode = *auto_on;
    if (auto_mode || automatic->online_only) {
      AutoExecuteArgs a = *automatic;
      a.online_only = !auto_mode;
      a.trace_path = args->trace_path;
      a.kineto = args->kineto;
      a.budget = args->budget;
      a.gpu = args->gpu;
      a.iterations = command->count("--iterations") ? args->iterations : 8;
      a.iteration = args->iteration;
      a.perturb = args->perturb;
      a.drop_discards = args->drop_discards;
      a.json = args->json;
      if (!a.shapes.empty() && command->count("--iterations"))
        throw std::invalid_argument("--shapes sets the iterations: --iterations does not apply");
      if (!args->timeline.empty() || !args->html.empty() || args->planner_placement)
        throw std::invalid_argument("--auto and --online: --timeline, --html and --planner-placement do not apply");
      return run_auto_execute(a);
    }
    if (!automatic->shapes.empty() || !automatic->slow_kernels.empty() || automatic->host_budget)
      throw std::invalid_argument("--shapes, --slow-kernels and --host-budget apply with --auto or --online");
    if (record->out_path.empty()) return run_execute(*args);
    if (!args->budget.empty() || args->perturb || args->drop_discards)
      throw std::invalid_argument("--record runs cache mode only: --budget, --perturb and --drop-discards do not apply");
    *record = {args->trace_path, record->out_path, record->truth_path, args->gpu, args->iterations, record->opaque, args->json};
    run_record_execute(*record);
  });
}

}  // namespace deltactl
