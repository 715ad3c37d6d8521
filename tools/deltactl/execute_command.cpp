#include "execute_command.hpp"

#include "exit_status.hpp"
#include "record_execute.hpp"
#include "methods.hpp"
#include "trace_args.hpp"
#include "trace/trace_index.hpp"
#include "trace/trace_loading.hpp"

#include "executor/step_program.hpp"
#include "tools/execute/program_runner.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <optional>

namespace deltactl {
namespace {

struct ExecuteArgs {
  std::string trace_path;
  std::string plan_path;
  std::string budget;
  std::string gpu;
  std::size_t iterations = 3;
  std::optional<std::uint64_t> perturb;
  bool json = false;
  bool drop_discards = false;
};

delta::plan::Plan make_plan(const delta::trace::Trace& trace, const std::string& gpu, const std::string& budget_text) {
  using namespace delta;
  planner::TraceIndex index(trace);
  planner::PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile(gpu);
  const Budget budget = parse_budget(budget_text, index.native_peak());
  request.budget_bytes = budget.bytes;
  request.budget_ratio = budget.ratio;
  request.through_allocator = true;
  planner::MethodResult result = planner::run_method("delta", request);
  if (!result.plan || !result.feasible)
    throw ExitStatus(1, "no plan fits a budget of " + std::to_string(budget.bytes) + " bytes: " + result.reason);
  return *result.plan;
}

void run_execute(const ExecuteArgs& args) {
  using namespace delta;
  const trace::Trace trace = planner::load_any_trace(args.trace_path);
  const std::string gpu = gpu_profile_for(trace, args.gpu);
  plan::Plan plan;
  if (!args.plan_path.empty()) {
    plan = plan::read_plan(args.plan_path);
  } else {
    plan = make_plan(trace, gpu, args.budget.empty() ? "0.5" : args.budget);
  }
  plan::check_plan_matches(plan, trace);
  const executor::StepProgram program = executor::step_program(trace);
  execute::ProgramOptions options;
  options.gpu = gpu;
  options.iterations = args.iterations;
  options.perturb = args.perturb;
  options.copy_discards = !args.drop_discards;
  const execute::ProgramRun cache = execute::run_program(trace, program, nullptr, options);
  if (!cache.error.empty()) throw ExitStatus(1, "the program does not run in cache mode: " + cache.error);
  const execute::ProgramRun run = execute::run_program(trace, program, &plan, options);
  const execute::Comparison same = execute::compare_runs(cache, run);
  const bool ok = run.error.empty() && same.identical && run.unmapped_accesses == 0;
  const executor::ExecutorStats& s = run.executor;
  const double overhead = cache.step_time_ns ? double(run.step_time_ns) / double(cache.step_time_ns) : 0.0;
  nlohmann::json j = {{"trace", args.trace_path},
                      {"gpu", gpu},
                      {"identical", same.identical && run.error.empty()},
                      {"first_mismatch", same.first_mismatch.empty() ? nlohmann::json() : nlohmann::json(same.first_mismatch)},
                      {"error", run.error.empty() ? nlohmann::json() : nlohmann::json(run.error)},
                      {"iterations", args.iterations},
                      {"budget_bytes", plan.budget_bytes},
                      {"budget_ratio", plan.budget_ratio},
                      {"reserved_peak_bytes", run.reserved_peak_bytes},
                      {"cache_reserved_peak_bytes", cache.reserved_peak_bytes},
                      {"cache_step_time_ns", cache.step_time_ns},
                      {"step_time_ns", run.step_time_ns},
                      {"predicted_step_time_ns", plan.predicted.step_time_ns},
                      {"overhead", overhead},
                      {"predicted_overhead", plan.predicted.overhead},
                      {"unmapped_accesses", run.unmapped_accesses},
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
                      {"perturbations", run.perturbations}};
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
  }
  if (!ok) throw ExitStatus(2, same.identical ? "the run under the plan failed: " + run.error
                                              : "the run under the plan differs from cache mode at " + same.first_mismatch);
}

}  // namespace

void add_execute_command(CLI::App& app) {
  auto args = std::make_shared<ExecuteArgs>();
  CLI::App* command = app.add_subcommand(
      "execute", "Run a trace as a program on the sim device, in cache mode and under a plan, and compare the data");
  command->add_option("trace", args->trace_path, "Trace file (DELTA trace JSON[.gz] or a DTR op log)")->required();
  auto* plan = command->add_option("--plan", args->plan_path, "A plan for the trace (from deltactl plan)");
  command->add_option("--budget", args->budget, "Plan with delta for this budget first: a fraction of the native peak (0.5) or bytes (6GiB); default 0.5")
      ->excludes(plan);
  command->add_option("--gpu", args->gpu, "GPU profile: h200, a100, v100, titanv (default: the trace's)");
  command->add_option("--iterations", args->iterations, "Iterations of the step to run")->capture_default_str()->check(CLI::Range(1, 1000));
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
  command->callback([args, record] {
    if (record->out_path.empty()) return run_execute(*args);
    if (!args->budget.empty() || args->perturb || args->drop_discards)
      throw std::invalid_argument("--record runs cache mode only: --budget, --perturb and --drop-discards do not apply");
    *record = {args->trace_path, record->out_path, record->truth_path, args->gpu, args->iterations, record->opaque, args->json};
    run_record_execute(*record);
  });
}

}  // namespace deltactl
