#include "planning/simulate_command.hpp"

#include "allocator/reports/format.hpp"
#include "common/exit_status.hpp"
#include "common/python_tools.hpp"
#include "planning/simulation_report.hpp"
#include "planning/time_by_phase.hpp"
#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"
#include "common/trace_input.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

namespace deltactl {

// Columns, one entry per op: the trace's schedule beside the plan's, so that a viewer can draw
// where memory goes over the budget and where the plan loses time. An infeasible plan's
// columns stop at the op that failed.
nlohmann::json timeline_json(const std::string& trace_path, const delta::planner::TraceIndex& index, const delta::plan::Plan& plan,
                             const delta::planner::SimulationResult& sim, bool through_allocator) {
  nlohmann::json names = nlohmann::json::array(), phases = nlohmann::json::array(), native_start = nlohmann::json::array(), native_live = nlohmann::json::array(),
                 start = nlohmann::json::array(), end = nlohmann::json::array(), held = nlohmann::json::array(), peak = nlohmann::json::array(), reserved = nlohmann::json::array(),
                 unused = nlohmann::json::array(), replay = nlohmann::json::array(), stall = nlohmann::json::array();
  for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
    const delta::planner::OpMoment& m = sim.timeline[i];
    names.push_back(index.trace().ops[i].name);
    phases.push_back(delta::trace::to_string(index.trace().ops[i].phase));
    native_start.push_back(index.native_start(i));
    native_live.push_back(index.native_live_bytes()[i]);
    start.push_back(m.start_ns);
    end.push_back(m.end_ns);
    held.push_back(m.held_bytes);
    peak.push_back(m.peak_bytes);
    reserved.push_back(m.reserved_bytes);
    unused.push_back(m.unused_page_bytes);
    replay.push_back(m.replay_ns);
    stall.push_back(m.stall_ns);
  }
  nlohmann::json out = {{"format", "delta-plan-timeline"},
                        {"version", 1},
                        {"trace", std::filesystem::path(trace_path).filename().string()},
                        {"model", index.trace().model},
                        {"method", plan.method},
                        {"gpu", plan.gpu_profile},
                        {"budget_bytes", plan.budget_bytes},
                        {"through_allocator", through_allocator},
                        {"feasible", sim.feasible},
                        {"native_step_ns", sim.native_step_time_ns},
                        {"native_peak_bytes", index.native_peak()},
                        {"step_ns", sim.step_time_ns},
                        {"ops",
                         {{"name", names},
                          {"phase", phases},
                          {"native_start_ns", native_start},
                          {"native_live_bytes", native_live},
                          {"start_ns", start},
                          {"end_ns", end},
                          {"held_bytes", held},
                          {"peak_bytes", peak},
                          {"replay_ns", replay},
                          {"stall_ns", stall}}}};
  if (through_allocator) {
    out["ops"]["reserved_bytes"] = reserved;
    out["ops"]["unused_page_bytes"] = unused;  // of the reserved, idle pages the next mapping takes
  }
  // Every copy on the two lanes, as columns too.
  nlohmann::json to_host = nlohmann::json::array(), copy_start = nlohmann::json::array(), copy_end = nlohmann::json::array(),
                 block = nlohmann::json::array(), bytes = nlohmann::json::array();
  for (const delta::planner::CopyMoment& c : sim.copies) {
    to_host.push_back(c.to_host);
    copy_start.push_back(c.start_ns);
    copy_end.push_back(c.end_ns);
    block.push_back(c.block);
    bytes.push_back(c.bytes);
  }
  out["copies"] = {{"to_host", to_host}, {"start_ns", copy_start}, {"end_ns", copy_end}, {"block", block}, {"bytes", bytes}};
  if (!sim.feasible) {
    out["error"] = sim.error;
    out["first_bad_op"] = sim.first_bad_op;
  }
  return out;
}

namespace {

struct SimulateArgs {
  std::string trace_path;
  std::string kineto;  // an Execution Trace's Kineto profile
  std::string plan_path;
  bool live_only = false;
  bool json = false;
  // Moved blocks placed as the executor places them, or the planner's way; neither: as the plan
  // says it was fitted (predicted.placement).
  bool executor_placement = false;
  bool planner_placement = false;
  // Steps of the plan run before the one reported, the allocator carrying their layout.
  std::uint32_t steps_before = delta::planner::kJudgedAfterSteps;
  // Discards copied to host first, or freed at once; neither: as the plan was judged
  // (predicted.discards).
  bool copy_discards = false, drop_discards = false;
  std::string timeline;  // JSON of the plan's memory and delays, op by op
  std::string png, html;  // the same drawn by plot_script
  std::string plot_script;  // empty: tools/plots/plan_timeline.py, found when a drawing is asked for
};

// The drawing reads the timeline from a file: the one --timeline names, else a temporary one.
void draw_timeline(const SimulateArgs& args, const nlohmann::json& timeline) {
  std::optional<TemporaryFile> temporary;
  std::filesystem::path data = args.timeline;
  if (data.empty()) {
    temporary.emplace("delta-timeline", ".json");
    data = temporary->path();
    delta::write_file_atomically(data.string(), timeline.dump() + "\n");
  }
  run_drawing(args.plot_script.empty() ? tool_file("tools/plots/plan_timeline.py") : std::filesystem::path(args.plot_script), data, args.png, args.html, "simulate");
}

// A plan file from anywhere (another tool, an older trace, a hand edit) is checked before it
// runs: its format, that it was made for this very trace, then every event in the simulator.
void run_simulate(const SimulateArgs& args) {
  using namespace delta;
  const plan::Plan plan = plan::read_plan(args.plan_path);
  const trace::Trace trace = plan::plan_step(load_trace(args.trace_path, args.kineto), plan);
  require_ops(trace, args.trace_path, "simulate");
  plan::check_plan_matches(plan, trace);
  planner::TraceIndex index(trace);
  planner::SimulationOptions options;
  options.gpu = gpu_profile(plan.gpu_profile);
  options.budget_bytes = plan.budget_bytes;
  options.through_allocator = !args.live_only && plan.budget_bytes > 0;
  options.executor_placement =
      args.executor_placement || (!args.planner_placement && plan.predicted.executor_placement);
  options.packed_moves = options.executor_placement && plan.predicted.packed_moves;  // as the plan was fitted
  options.packed_groups = options.packed_moves && plan.predicted.packed_groups;
  options.steps_before = args.steps_before;
  options.discard_copies = args.copy_discards || (!args.drop_discards && plan.predicted.discard_copies);
  options.host_pace = plan.predicted.host_pace;
  options.record_timeline = true;  // one simulation: the time by phase reads it too
  const planner::SimulationResult sim = planner::simulate(index, plan, options);
  const TimeByPhase by_phase = time_by_phase(index, sim);
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
                          {"partial_swaps", sim.partial_swaps},
                          {"regenerations", sim.regenerations},
                          {"revivals", sim.revivals},
                          {"discards", sim.discards}};
    if (!by_phase.phases.empty()) {
      nlohmann::json phases = nlohmann::json::array();
      for (const PhaseTime& p : by_phase.phases)
        phases.push_back({{"phase", trace::to_string(p.phase)},
                          {"first_op", p.first_op},
                          {"last_op", p.last_op},
                          {"ops", p.ops},
                          {"native_ns", p.native_ns},
                          {"step_ns", p.step_ns},
                          {"stall_ns", p.stall_ns},
                          {"replay_ns", p.replay_ns}});
      out["phases"] = phases;
      out["end_wait_ns"] = by_phase.end_wait_ns;
    }
    if (!sim.feasible) {
      out["error"] = sim.error;
      out["first_bad_op"] = sim.first_bad_op;
    }
    std::cout << out.dump() << "\n";
  } else {
    std::cout << args.plan_path << ": " << plan.method << " plan on " << plan.gpu_profile << ", budget " << plan.budget_bytes
              << " bytes" << (options.through_allocator ? ", through the caching allocator" : ", live bytes") << "\n";
    if (sim.feasible) {
      print_simulation(std::cout, sim, plan.budget_bytes, options.through_allocator);
      print_time_by_phase(std::cout, by_phase);
    }
  }
  if (!args.timeline.empty() || !args.png.empty() || !args.html.empty()) {
    const nlohmann::json timeline = timeline_json(args.trace_path, index, plan, sim, options.through_allocator);
    if (!args.timeline.empty()) delta::write_file_atomically(args.timeline, timeline.dump() + "\n");
    if (!args.png.empty() || !args.html.empty()) draw_timeline(args, timeline);
  }
  if (!sim.feasible) throw ExitStatus(2, "the plan does not run: " + sim.error);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* command = app.add_subcommand(
      "simulate", "Check a plan file against its trace and replay it in the simulator (exit 2 when it does not run)");
  command->add_option("trace", args->trace_path, std::string("Trace file: ") + kTraceKinds)->required();
  add_kineto_option(command, &args->kineto);
  command->add_option("plan", args->plan_path, "Plan file (as `deltactl plan` writes it)")->required();
  command->add_flag("--live-only", args->live_only,
                    "Judge by live bytes only; by default the caching allocator, capped at the plan's budget, must place "
                    "every allocation too");
  auto* executor_placement = command->add_flag(
      "--executor-placement", args->executor_placement,
      "Place the blocks the plan moves as the executor does (packed among moved blocks on pages no other block "
      "shares, unmapped and mapped back at their address); default: as the plan was fitted (its predicted.placement)");
  command->add_flag("--planner-placement", args->planner_placement,
                    "Place moved blocks the planner's way (their memory free for any block once they leave)")
      ->excludes(executor_placement);
  command->add_option("--steps-before", args->steps_before,
                      "Through the allocator: steps of the plan run first, the allocator carrying what each leaves, as "
                      "a run's later steps are placed (0: from an empty allocator)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  auto* copy_discards = command->add_flag(
      "--copy-discards", args->copy_discards,
      "Copy each discarded block to host before its bytes go, as the executor does by default (DELTA_DISCARD=keep); "
      "default: as the plan was judged (its predicted.discards)");
  command->add_flag("--drop-discards", args->drop_discards, "Free a discarded block's bytes at once (DELTA_DISCARD=drop)")
      ->excludes(copy_discards);
  command->add_flag("--json", args->json, "One JSON object: feasible, overhead, peaks, times, bytes moved, error");
  command->add_option("--timeline", args->timeline,
                      "Write the plan's memory held and delays op by op, beside the trace's own schedule, as JSON");
  command->add_option("--png", args->png, "Draw the timeline: memory against the budget, and where the step loses time");
  command->add_option("--html", args->html, "The same drawing in an HTML page with the plan's figures");
  command->add_option("--plot-script", args->plot_script, "The plotting script (default: tools/plots/plan_timeline.py, installed or in the source tree)");
  command->callback([args] { run_simulate(*args); });
}

}  // namespace deltactl
