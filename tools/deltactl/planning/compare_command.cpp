#include "planning/compare_command.hpp"
#include "planning/bound_command.hpp"
#include "common/iteration_args.hpp"

#include "planning/plan_command.hpp"
#include "common/python_tools.hpp"
#include "common/trace_args.hpp"

#include "methods.hpp"
#include "trace/trace_index.hpp"
#include "common/progress.hpp"
#include "common/trace_input.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace deltactl {
namespace {

struct CompareArgs {
  std::vector<std::string> traces;
  std::string kineto;  // the Kineto profile of the one Execution Trace among them
  std::vector<std::string> budgets = {"0.8", "0.6", "0.5", "0.4", "0.3", "0.2"};
  std::vector<std::string> methods;
  std::string gpu;
  bool json = false;
  bool through_allocator = false;
  bool executor_placement = false;  // with through_allocator: moved blocks on pages of their own
  std::size_t threads = 0;  // 0: DELTA_PLANNER_THREADS, else one per core
  std::optional<std::size_t> search_rounds, search_patience;
  std::optional<bool> search_from_bound;  // absent: the planner's default for the trace's size
  std::string plot, html;
  std::string plot_script;  // empty: tools/plots/frontier.py, found when a drawing is asked for
  std::optional<std::uint32_t> iteration;  // of every trace; default: each one's last
  // The lowest overhead any plan could reach beside the methods (`deltactl bound`), and the
  // seconds its solver may take per budget.
  bool bound = false;
  int bound_seconds = 120;
};

// The bound's cell and JSON row: the same judge as the methods' here (live bytes, discards
// free, device time), so that a method's overhead compares with it directly.
struct BoundCell {
  std::string text;
  nlohmann::json row;
};

BoundCell bound_cell(const delta::planner::PlanRequest& request, const std::string& trace, const Budget& budget,
                     int seconds) {
  using Status = delta::planner::OverheadBound::Status;
  const delta::planner::OverheadBound bound = delta::planner::overhead_lower_bound(request, seconds, false);
  nlohmann::json row = bound_row(trace, budget, bound);
  std::ostringstream cell;
  if (bound.status == Status::bounded) cell << ">=" << std::fixed << std::setprecision(3) << bound.overhead;
  else cell << (bound.status == Status::unreachable ? "unreachable" : "n/a");
  return {cell.str(), std::move(row)};
}

void run_compare(const CompareArgs& args) {
  using namespace delta;
  const std::vector<std::string> methods = args.methods.empty() ? planner::method_names() : args.methods;
  for (const std::string& method : methods) {
    const auto& known = planner::method_names();
    if (std::find(known.begin(), known.end(), method) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument("unknown method '" + method + "' (known: " + list + ")");
    }
  }
  check_budgets(args.budgets);
  std::vector<nlohmann::json> rows, bounds;
  check_kineto(args.traces, args.kineto);
  Progress progress("compare", args.traces.size() * args.budgets.size() * (methods.size() + (args.bound ? 1 : 0)));
  for (const std::string& path : args.traces) {
    trace::Trace trace = step_to_plan(load_trace(path, detect_trace_kind(path) == TraceKind::execution_trace ? args.kineto : ""), args.iteration);
    require_ops(trace, path, "compare");
    planner::TraceIndex index(trace);
    const std::string gpu = gpu_profile_for(trace, args.gpu);
    const std::string name = trace_name(path);
    if (!args.json) {
      std::ostringstream header;
      header << name << ": " << trace.ops.size() << " ops, " << trace.blocks.size() << " blocks, native peak "
             << std::fixed << std::setprecision(1) << index.native_peak() / 1e6 << " MB, step "
             << index.native_step_ns() / 1e6 << " ms, gpu " << gpu << "\n"
             << std::setw(8) << "budget";
      for (const std::string& m : methods) header << std::setw(13) << m;
      if (args.bound) header << std::setw(13) << "bound";
      progress.write(std::cout, header.str() + "\n");
    }
    for (const std::string& text : args.budgets) {
      const Budget budget = parse_budget(text, index.native_peak());
      const double ratio = budget.ratio;
      planner::PlanRequest request;
      request.index = &index;
      request.gpu = gpu_profile(gpu);
      request.budget_ratio = ratio;
      request.budget_bytes = budget.bytes;
      request.through_allocator = args.through_allocator;
      request.executor_placement = args.executor_placement;
      request.threads = args.threads;
      request.search_rounds = args.search_rounds;
      request.search_patience = args.search_patience;
      request.search_from_bound = args.search_from_bound;
      // A row is written whole, so that the progress bar never cuts it.
      std::ostringstream line;
      if (!args.json) line << std::setw(8) << budget.label;
      for (const std::string& method : methods) {
        progress.start(name + " at " + budget.label + ": " + method);
        planner::MethodResult result = planner::run_method(method, request);
        nlohmann::json row = {{"trace", name},
                              {"method", method},
                              {"budget_ratio", ratio},
                              {"budget_bytes", budget.bytes},
                              {"feasible", result.feasible},
                              {"overhead", result.feasible ? nlohmann::json(result.simulation.overhead()) : nlohmann::json(nullptr)},
                              {"peak_bytes", result.simulation.peak_bytes}};
        if (!args.json) {
          std::ostringstream cell;
          if (result.feasible) cell << std::fixed << std::setprecision(3) << result.simulation.overhead();
          else cell << (result.simulation.native_step_time_ns == 0 && !result.plan && method == "milp" ? "n/a" : "infeasible");
          line << std::setw(13) << cell.str();
        }
        row["reason"] = result.reason;
        row["stall_ns"] = result.simulation.stall_ns;
        row["extra_compute_ns"] = result.simulation.extra_compute_ns;
        row["planning_seconds"] = result.planning_seconds;
        if (args.through_allocator) row["allocator_reserved_peak"] = result.simulation.allocator_reserved_peak;
        if (args.json) progress.write(std::cout, row.dump() + "\n");
        rows.push_back(row);
      }
      if (args.bound) {
        progress.start(name + " at " + budget.label + ": the lower bound");
        BoundCell bound = bound_cell(request, name, budget, args.bound_seconds);
        if (args.json) {
          nlohmann::json row = bound.row;
          row["method"] = "bound";
          progress.write(std::cout, row.dump() + "\n");
        } else {
          line << std::setw(13) << bound.text;
        }
        bounds.push_back(std::move(bound.row));
      }
      if (!args.json) progress.write(std::cout, line.str() + "\n");
    }
  }
  if (!args.plot.empty() || !args.html.empty()) {
    const TemporaryFile data("delta-compare", ".jsonl"), bound_data("delta-compare-bound", ".jsonl");
    {
      std::ofstream out(data.path());
      for (const auto& row : rows) out << row.dump() << "\n";
      std::ofstream bound_out(bound_data.path());
      for (const auto& row : bounds) bound_out << row.dump() << "\n";
    }
    run_drawing(args.plot_script.empty() ? tool_file("tools/plots/frontier.py") : std::filesystem::path(args.plot_script),
                data.path(), args.plot, args.html, "compare", args.bound ? bound_data.path() : std::filesystem::path());
  }
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* command = app.add_subcommand("compare", "Run every planner and baseline on traces at several budgets");
  command->add_option("traces", args->traces, std::string("Trace files, each ") + kTraceKinds)->required();
  add_kineto_option(command, &args->kineto);
  add_iteration_option(*command, args->iteration);
  command->add_option("--budgets", args->budgets,
                      "Budgets: fractions of each trace's native peak (0.5) or bytes (6GiB, 512MiB), comma-separated")->delimiter(',');
  command->add_option("--methods", args->methods, "Methods to run (default: all)")->delimiter(',');
  command->add_option("--gpu", args->gpu, "GPU profile (default: each trace's own)");
  command->add_flag("--json", args->json, "One JSON object per line instead of a table");
  command->add_flag("--through-allocator", args->through_allocator,
                    "Judge every plan through the caching allocator capped at the budget (fragmentation counts; "
                    "dtr, an online runtime, evicts until the allocator places each storage)");
  command->add_flag("--executor-placement", args->executor_placement,
                    "With --through-allocator: fit and judge DELTA's plans as the executor places blocks (a moved block "
                    "packed among moved blocks on pages no other block shares, unmapped and mapped back at its address), as "
                    "`deltactl plan` does by default")
      ->needs(command->get_option("--through-allocator"));
  command->add_option("--threads", args->threads,
                      "Threads the planner uses (default: DELTA_PLANNER_THREADS, else one per core; the plan does not depend on it)")
      ->check(CLI::Range(1, 1024));
  add_search_options(*command, args->search_rounds, args->search_patience, args->search_from_bound);
  command->add_flag("--bound", args->bound,
                    "Also the lowest overhead any plan could reach at each budget (`deltactl bound`, the linear bound, "
                    "judged as the methods are: live bytes, discards free, device time); `--json` rows with method "
                    "\"bound\", reachable and overhead_lower_bound");
  command->add_option("--bound-seconds", args->bound_seconds, "Time the bound's LP solver may take per budget")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  command->add_option("--plot", args->plot, "Write the overhead-versus-budget frontier as a PNG");
  command->add_option("--html", args->html, "Write an HTML page with the results and the plot");
  command->add_option("--plot-script", args->plot_script, "The plotting script (default: tools/plots/frontier.py, installed or in the source tree)");
  command->callback([args] { run_compare(*args); });
}

}  // namespace deltactl
