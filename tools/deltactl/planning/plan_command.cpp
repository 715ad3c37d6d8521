#include "planning/plan_command.hpp"
#include "common/iteration_args.hpp"

#include "methods.hpp"
#include "sim/stage_clock.hpp"
#include "trace/trace_index.hpp"
#include "common/request.hpp"
#include "common/trace_input.hpp"
#include "common/trace_args.hpp"
#include "planning/simulation_report.hpp"

#include <delta/plan.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <chrono>
#include <map>
#include <iostream>
#include <unordered_map>
#include <unordered_set>
#include <optional>
#include <stdexcept>

namespace deltactl {

namespace {

struct PlanArgs {
  std::string trace_path;
  std::string kineto;  // an Execution Trace's Kineto profile
  std::string budget = "0.5";
  std::string gpu;
  std::string method = "delta";
  std::string output = "plan.json";
  bool live_only = false;
  std::size_t threads = 0;  // 0: DELTA_PLANNER_THREADS, else one per core
  std::optional<std::size_t> search_rounds, search_patience;
  std::optional<bool> search_from_bound;  // absent: the planner's default for the trace's size
  std::optional<std::uint32_t> iteration;
  bool planner_placement = false;  // moved blocks placed like any other (the planner's own fitting)
  bool drop_discards = false;      // judge discards as freed at once (DELTA_DISCARD=drop)
  bool device_time_only = false;   // judge without the host's launch pace
  bool timings = false;            // where the planning time went, by stage
  std::optional<double> time_limit;  // seconds of planning, after which it refines no more
  bool rebuild_gradients = false;    // weight gradients rebuilt from their inputs held (opt-in)
};

// Where the planning time went (planner/sim/stage_clock.hpp), as a tree of stages: each stage's
// CPU time with its inner stages, its own, and the simulations it ran itself. Stages under 1%
// of the whole are left out, and counted.
void print_stage_times(std::ostream& out, const std::vector<delta::planner::StageTime>& rows) {
  static const std::string kSeparator = " › ";
  double all = 0;
  std::uint64_t simulations = 0;
  std::map<std::string, std::vector<const delta::planner::StageTime*>> children;  // by parent path, in order entered
  for (const auto& row : rows) {
    all += row.self_seconds;
    simulations += row.simulations;
    const std::size_t cut = row.path.rfind(kSeparator);
    children[cut == std::string::npos ? std::string() : row.path.substr(0, cut)].push_back(&row);
  }
  out << "  where the planning time went: " << std::fixed << std::setprecision(2) << all << " CPU s over all threads, "
      << simulations << " simulations\n";
  out << "      CPU s    own s   simulations     calls  stage\n";
  std::size_t hidden = 0;
  const std::function<void(const std::string&, int)> walk = [&](const std::string& parent, int depth) {
    const auto it = children.find(parent);
    if (it == children.end()) return;
    for (const delta::planner::StageTime* row : it->second) {
      if (row->total_seconds < 0.01 * all) {
        ++hidden;
        continue;
      }
      const std::size_t cut = row->path.rfind(kSeparator);
      const std::string name = cut == std::string::npos ? row->path : row->path.substr(cut + kSeparator.size());
      out << "  " << std::setw(9) << row->total_seconds << std::setw(9) << row->self_seconds << std::setw(14)
          << row->simulations << std::setw(10) << row->calls << "  " << std::string(2 * depth, ' ') << name << "\n";
      walk(row->path, depth + 1);
    }
  };
  walk(std::string(), 0);
  if (hidden > 0) out << "  (" << hidden << " stages under 1% of the time left out)\n";
  out << std::defaultfloat;
}

// Uses of unknown direction (kernel arguments seen by the recorder) rule regeneration out for
// the blocks they touch: say so, since the plan then leans on swaps alone.
void warn_about_touches(const delta::trace::Trace& trace) {
  std::size_t uses = 0, touches = 0;
  for (const delta::trace::Op& op : trace.ops)
    for (const delta::trace::BlockUse& use : op.blocks) {
      ++uses;
      touches += use.access == delta::trace::Access::touch ? 1 : 0;
    }
  if (touches > 0)
    std::cerr << "deltactl: " << touches << " of " << uses
              << " block uses are touches (direction unknown, as recorded from kernel arguments): the blocks they "
                 "touch are not regenerated, only swapped\n";
  // A recording that learned its directions says what it could not learn (docs/directions.md).
  const auto learned = trace.metadata.find("learned_uses");
  const auto swap_only = trace.metadata.find("swap_only_blocks");
  if (learned != trace.metadata.end() && swap_only != trace.metadata.end())
    std::cerr << "deltactl: directions learned for " << learned->second << " uses; " << swap_only->second
              << " blocks are swap only (their producers' replays did not reproduce them)\n";
}

// What touches cost the plan, as far as it shows: the bytes it swaps of blocks it could not
// regenerate because a use of theirs is a touch.
void report_touched_swaps(const delta::trace::Trace& trace, const delta::plan::Plan& plan) {
  std::unordered_set<std::uint64_t> touched;
  for (const delta::trace::Op& op : trace.ops)
    for (const delta::trace::BlockUse& use : op.blocks)
      if (use.access == delta::trace::Access::touch) touched.insert(use.block);
  if (touched.empty()) return;
  std::unordered_map<std::uint64_t, std::uint64_t> sizes;
  for (const delta::trace::Block& block : trace.blocks) sizes[block.id] = block.size;
  std::uint64_t swapped = 0, of_touched = 0;
  for (const delta::plan::BlockDecision& decision : plan.decisions)
    for (const delta::plan::Interval& interval : decision.intervals) {
      if (interval.action != delta::plan::Action::swap) continue;
      const std::uint64_t bytes = delta::plan::swapped_bytes(interval, sizes[decision.block]);
      swapped += bytes;
      if (touched.count(decision.block)) of_touched += bytes;
    }
  std::cout << "  touches: " << of_touched << " of the " << swapped
            << " bytes swapped are of touched blocks, which the plan could not regenerate\n";
}

// Where the plan will be written, checked before planning (which takes seconds to minutes on
// a long trace) rather than after: a file created there and removed, the same way write_plan
// creates its temporary.
void check_output_writable(const std::string& path) {
  const std::string probe = path + ".tmp";
  std::error_code ignored;
  const bool existed = std::filesystem::exists(probe, ignored);  // write_plan's own temporary, left by a run that stopped
  {
    std::ofstream out(probe, std::ios::binary | std::ios::app);  // appends nothing: an existing file keeps its bytes
    if (!out) throw std::runtime_error(path + ": cannot write the plan file there (checked before planning)");
  }
  if (!existed) std::remove(probe.c_str());
}

void run_plan(const PlanArgs& args) {
  using namespace delta;
  check_output_writable(args.output);
  std::optional<std::uint32_t> iteration;
  trace::Trace trace = step_to_plan(load_trace(args.trace_path, args.kineto), args.iteration, &iteration);
  require_ops(trace, args.trace_path, "plan");
  warn_about_touches(trace);
  planner::TraceIndex index(trace);
  planner::PlanRequest request;
  request.index = &index;
  const std::string gpu = gpu_profile_for(trace, args.gpu);
  request.gpu = gpu_profile(gpu);
  const Budget budget = parse_budget(args.budget, index.native_peak());
  request.budget_bytes = budget.bytes;
  request.budget_ratio = budget.ratio;
  // A plan is meant to run: by default it must fit through the caching allocator too.
  request.through_allocator = !args.live_only;
  request.rebuild_gradients = args.rebuild_gradients;
  request.executor_placement = !args.planner_placement;
  request.discard_copies = !args.drop_discards;
  request.host_pace = !args.device_time_only;
  request.threads = args.threads;
  request.search_rounds = args.search_rounds;
  request.search_patience = args.search_patience;
  request.search_from_bound = args.search_from_bound;
  request.on_fit_attempt = [](const planner::PlanRequest::FitAttempt& attempt, const planner::SimulationResult& placed) {
    std::cerr << "deltactl: " << (*attempt.plan ? std::string("[") + attempt.plan + "] " : std::string()) << "planned for " << attempt.fraction << " of the budget in live bytes: "
              << (!attempt.fits_live ? "no plan fits even that"
                  : !placed.feasible ? "the caching allocator cannot place it (" + placed.error.substr(0, placed.error.find("): ") + 1) + ")"
                  : attempt.repaired_at.empty() ? "the caching allocator places it"
                                                : "the caching allocator places it after a few evictions near " + attempt.repaired_at)
              << "\n";
  };
  request.on_search_progress = [](const planner::PlanRequest::SearchProgress& progress) {
    const std::string search = (*progress.plan ? std::string("[") + progress.plan + "] " : std::string()) +
                               (progress.from_bound ? "local search from the bound's optimum" : "local search");
    if (progress.done)
      std::cerr << "deltactl: " << search << " ended after " << progress.round << " rounds, " << progress.improvements
                << " faster plans\n";
    else
      std::cerr << "deltactl: " << search << ", round " << progress.round << ": overhead " << progress.overhead << "\n";
  };
  request.on_note = [](const std::string& note) { std::cerr << "deltactl: " << note << "\n"; };
  if (args.method == "dtr") throw std::invalid_argument("dtr decides online and makes no plan; use `deltactl compare`");
  planner::StageClock::enable(args.timings);
  if (args.time_limit)
    request.deadline = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(*args.time_limit));
  planner::MethodResult result = planner::run_method(args.method, request);
  const std::vector<planner::StageTime> stage_times = planner::StageClock::report();
  planner::StageClock::enable(false);
  if (!result.plan) throw std::runtime_error(result.reason);
  if (!result.feasible)
    throw std::runtime_error("no feasible plan for a budget of " + std::to_string(request.budget_bytes) +
                             " bytes; the simulator says: " + result.reason);
  result.plan->trace_iteration = iteration;
  plan::write_plan(*result.plan, args.output);
  std::cout << "plan written to " << args.output << ": " << args.method << " on " << gpu << ", budget "
            << request.budget_bytes << " bytes (" << request.budget_ratio << " of the native peak "
            << index.native_peak() << "), planned in " << result.planning_seconds << " s\n";
  if (planner::past_deadline(request))
    std::cout << "  the time limit (" << *args.time_limit << " s) passed while planning: from then on the plan was "
                 "refined no more (see --time-limit)\n";
  print_simulation(std::cout, result.simulation, request.budget_bytes, request.through_allocator);
  print_time_by_phase(std::cout, time_by_phase(index, planner::simulate_op_by_op(planner::as_placed(request, *result.plan), *result.plan)));
  report_touched_swaps(trace, *result.plan);
  if (args.timings) print_stage_times(std::cout, stage_times);
}

}  // namespace

void add_search_options(CLI::App& command, std::optional<std::size_t>& rounds, std::optional<std::size_t>& patience,
                        std::optional<bool>& from_bound) {
  command.add_option("--search-rounds", rounds,
                     "Most rounds of local search on delta's plan, two perturbations each (default: 1000 on traces "
                     "of up to 12,000 ops and block uses together, else 0: none)")
      ->check(CLI::Range(0, 1'000'000));
  command.add_option("--search-patience", patience,
                     "End the local search after this many rounds without a faster plan (default 100; 0: never)")
      ->check(CLI::Range(0, 1'000'000));
  CLI::Option* on = command.add_flag_callback(
      "--search-from-bound", [&from_bound] { from_bound = true; },
      "After the local search, search again from the plan with the lower bound's choice at the op in most excess, "
      "and keep the faster (needs cbc or glpsol; costs the bound's LP and a second search; default: on traces of up "
      "to 2,000 ops and block uses together)");
  command.add_flag_callback("--no-search-from-bound", [&from_bound] { from_bound = false; },
                            "No second start, whatever the trace's size")
      ->excludes(on);
}

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* command = app.add_subcommand("plan", "Plan swaps and regenerations for a trace under a memory budget");
  command->add_option("trace", args->trace_path, std::string("Trace file: ") + kTraceKinds)->required();
  add_kineto_option(command, &args->kineto);
  command->add_option("--budget", args->budget, "Fraction of the native peak (0.5) or bytes (6GiB)")->capture_default_str();
  command->add_option("--gpu", args->gpu, "GPU profile: h200, a100, v100, titanv (default: the trace's)");
  command->add_option("--method", args->method, "Planner: delta or a plan-making baseline")->capture_default_str();
  command->add_option("-o,--output", args->output, "Where to write the plan")->capture_default_str();
  command->add_option("--threads", args->threads,
                      "Threads the planner uses (default: DELTA_PLANNER_THREADS, else one per core; the plan does not depend on it)")
      ->check(CLI::Range(1, 1024));
  add_search_options(*command, args->search_rounds, args->search_patience, args->search_from_bound);
  add_iteration_option(*command, args->iteration);
  // The default since plans are run: a plan fitted the planner's way may exceed its budget when
  // the executor runs it (lstm by 6%, unet at 0.3 by 7.7%, docs/executor.md).
  auto* planner_placement = command->add_flag(
      "--planner-placement", args->planner_placement,
      "Fit with the planner's own placement (a moved block's memory free for any block once it leaves) rather "
      "than as the executor places blocks (packed among moved blocks on pages no other block shares, unmapped and mapped back at their address)");
  command->add_flag("--executor-placement")
      ->description("The default: fit as the executor places blocks (accepted for older scripts)")
      ->excludes(planner_placement);
  // The default since plans are run and the executor keeps a host copy of a discarded block
  // by default: a plan judged without those copies runs above its prediction (the DTR lstm
  // at 0.5 by 22%, docs/executor.md).
  command->add_flag("--drop-discards", args->drop_discards,
                    "Judge a discard as freeing its bytes at once, as the executor runs it with DELTA_DISCARD=drop; by "
                    "default each discarded block is first copied to host, as the executor does (DELTA_DISCARD=keep)");
  command->add_flag("--device-time-only", args->device_time_only,
                    "Judge the step in device time alone; by default each op starts no earlier than the host issues it "
                    "(the GPU profile's launch cost after the one before), as on the sim device");
  command->add_flag("--live-only", args->live_only,
                    "Judge by live bytes only; by default the plan must also fit through the caching allocator "
                    "capped at the budget (fragmentation counts)");
  command->add_option("--time-limit", args->time_limit,
                      "Seconds of planning after which the planner refines no more and returns the fastest plan it has "
                      "(it still goes on until the allocator places one); the plan then depends on the machine's speed. "
                      "Default: none")
      ->check(CLI::Range(0.0, 1e6));
  command->add_flag("--rebuild-gradients", args->rebuild_gradients,
                    "Let DELTA's plans rebuild weight gradients where the optimizer reads them, from their inputs held, "
                    "where those are smaller (GPT2-XL at 1,024 tokens). Experimental: the executor on the sim device "
                    "has placed such a plan above its budget at one allocation (docs/planner-results.md)");
  command->add_flag("--timings", args->timings,
                    "After the plan, where the planning time went: CPU seconds and simulations by stage and pass");
  command->callback([args] { run_plan(*args); });
}

}  // namespace deltactl
