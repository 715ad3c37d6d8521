#include "simulate_command.hpp"

#include "exit_status.hpp"
#include "simulation_report.hpp"
#include "simulator.hpp"
#include "trace_index.hpp"
#include "trace_loading.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <string>

namespace deltactl {
namespace {

struct SimulateArgs {
  std::string trace_path;
  std::string plan_path;
  bool live_only = false;
  bool json = false;
};

// A plan file from anywhere (another tool, an older trace, a hand edit) is checked before it
// runs: its format, that it was made for this very trace, then every event in the simulator.
void run_simulate(const SimulateArgs& args) {
  using namespace delta;
  const trace::Trace trace = planner::load_any_trace(args.trace_path);
  const plan::Plan plan = plan::read_plan(args.plan_path);
  plan::check_plan_matches(plan, trace);
  planner::TraceIndex index(trace);
  planner::SimulationOptions options;
  options.gpu = gpu_profile(plan.gpu_profile);
  options.budget_bytes = plan.budget_bytes;
  options.through_allocator = !args.live_only && plan.budget_bytes > 0;
  const planner::SimulationResult sim = planner::simulate(index, plan, options);
  if (args.json) {
    nlohmann::json out = {{"trace", args.trace_path},
                          {"plan", args.plan_path},
                          {"method", plan.method},
                          {"budget_bytes", plan.budget_bytes},
                          {"through_allocator", options.through_allocator},
                          {"feasible", sim.feasible},
                          {"overhead", sim.feasible ? nlohmann::json(sim.overhead()) : nlohmann::json()},
                          {"peak_bytes", sim.peak_bytes},
                          {"reserved_peak_bytes", sim.allocator_reserved_peak},
                          {"step_time_ns", sim.step_time_ns},
                          {"native_step_time_ns", sim.native_step_time_ns},
                          {"stall_ns", sim.stall_ns},
                          {"extra_compute_ns", sim.extra_compute_ns},
                          {"bytes_d2h", sim.bytes_d2h},
                          {"bytes_h2d", sim.bytes_h2d},
                          {"swaps", sim.swaps},
                          {"regenerations", sim.regenerations},
                          {"revivals", sim.revivals},
                          {"discards", sim.discards}};
    if (!sim.feasible) {
      out["error"] = sim.error;
      out["first_bad_op"] = sim.first_bad_op;
    }
    std::cout << out.dump() << "\n";
  } else {
    std::cout << args.plan_path << ": " << plan.method << " plan on " << plan.gpu_profile << ", budget " << plan.budget_bytes
              << " bytes" << (options.through_allocator ? ", through the caching allocator" : ", live bytes") << "\n";
    if (sim.feasible) print_simulation(std::cout, sim, plan.budget_bytes, options.through_allocator);
  }
  if (!sim.feasible) throw ExitStatus(2, "the plan does not run: " + sim.error);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* command = app.add_subcommand(
      "simulate", "Check a plan file against its trace and replay it in the simulator (exit 2 when it does not run)");
  command->add_option("trace", args->trace_path, "Trace file (DELTA trace JSON[.gz] or a DTR op log)")->required();
  command->add_option("plan", args->plan_path, "Plan file (as `deltactl plan` writes it)")->required();
  command->add_flag("--live-only", args->live_only,
                    "Judge by live bytes only; by default the caching allocator, capped at the plan's budget, must place "
                    "every allocation too");
  command->add_flag("--json", args->json, "One JSON object: feasible, overhead, peaks, times, bytes moved, error");
  command->callback([args] { run_simulate(*args); });
}

}  // namespace deltactl
