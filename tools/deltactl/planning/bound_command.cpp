#include "planning/bound_command.hpp"
#include "common/iteration_args.hpp"

#include "bound/lower_bound.hpp"
#include "common/trace_args.hpp"
#include "trace/trace_index.hpp"
#include "common/progress.hpp"
#include "common/trace_input.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <iostream>
#include <memory>
#include <stdexcept>

namespace deltactl {
namespace {

struct BoundArgs {
  std::vector<std::string> traces;
  std::string kineto;  // the Kineto profile of the one Execution Trace among them
  std::vector<std::string> budgets = {"0.8", "0.6", "0.5", "0.4", "0.3", "0.2"};
  std::string gpu;
  int seconds = 120;
  bool integer = false;
  std::string solver = "auto";  // with --integer: auto, highs or cbc
  bool explain = false;
  bool json = false;
  std::optional<std::uint32_t> iteration;  // of every trace; default: each one's last
};

// Largest first, as "name 12.3" pairs; `scale` converts the values to the unit shown.
std::string largest(const std::map<std::string, double>& values, double scale, int precision) {
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto& [name, value] : values) sorted.emplace_back(value * scale, name);
  std::sort(sorted.rbegin(), sorted.rend());
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision);
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    if (sorted[k].first < 0.5 * std::pow(10.0, -precision)) break;
    out << (k ? ", " : "") << sorted[k].second << " " << sorted[k].first;
  }
  return sorted.empty() ? "none" : out.str();
}

nlohmann::json explanation_json(const delta::planner::BoundExplanation& e) {
  // Per block away at the peak op: [block, swapped share, regenerated share].
  nlohmann::json peak_blocks = nlohmann::json::array();
  for (const auto& b : e.peak_blocks) peak_blocks.push_back({b.block, b.swapped, b.regenerated});
  nlohmann::json along = nlohmann::json::array();
  for (const auto& p : e.along_step)
    along.push_back({{"op", p.op},
                     {"excess_bytes", p.excess_bytes},
                     {"swapped_bytes", p.swapped_bytes},
                     {"regenerated_bytes", p.regenerated_bytes}});
  return {{"replay_ms", e.replay_ms},         {"replay_count", e.replay_count},
          {"peak_op", e.peak_op},             {"excess_bytes", e.excess_bytes},
          {"swapped_bytes", e.swapped_bytes}, {"regenerated_bytes", e.regenerated_bytes},
          {"away_bytes", e.away_bytes},       {"peak_blocks", std::move(peak_blocks)},
          {"along_step", std::move(along)},   {"fewest_moved", e.fewest_moved},
          {"added_ms", e.added_ms},           {"waiting_ms", e.waiting_ms}};
}

void print_explanation(std::ostream& out, const delta::planner::BoundExplanation& e, const delta::planner::TraceIndex& index) {
  constexpr double kGb = 1e-9;
  if (!e.fewest_moved) out << "        (the first optimum found: the one that swaps the fewest bytes was not solved)\n";
  out << "        the linear program: added " << std::fixed << std::setprecision(2) << e.added_ms << " ms: " << e.added_ms - e.waiting_ms
      << " replaying, " << e.waiting_ms << " waiting for the link\n";
  out << "        replayed (ms): " << largest(e.replay_ms, 1.0, 2) << "\n"
            << "        at op " << e.peak_op << " (" << std::fixed << std::setprecision(2) << e.excess_bytes * kGb
            << " GB over the budget), away by swap (GB): " << largest(e.swapped_bytes, kGb, 2) << "\n"
            << "          by regeneration (GB): " << largest(e.regenerated_bytes, kGb, 2) << "\n";
  if (!e.away_bytes.empty()) out << "          small blocks, either way (GB): " << largest(e.away_bytes, kGb, 2) << "\n";
  out << "        along the step, whole gaps away (GB, by category):\n";
  for (const auto& p : e.along_step)
    out << "          op " << p.op << " " << index.trace().ops[p.op].name << " (" << std::setprecision(2) << p.excess_bytes * kGb
        << " over): swapped " << largest(p.swapped_bytes, kGb, 2) << "; rebuilt " << largest(p.regenerated_bytes, kGb, 2) << "\n";
}

// The link's windows, one line each: where the bound's time is the link's, by op.
void print_link_windows(std::ostream& out, const delta::planner::OverheadBound& bound, const delta::planner::TraceIndex& index) {
  if (bound.link_windows.empty()) return;
  constexpr double kGb = 1e-9;
  out << "        the link's windows: >= " << std::fixed << std::setprecision(4) << bound.link_windows_overhead
      << " (stretches that read more older data than the budget leaves room for at their start)\n";
  for (const delta::planner::LinkWindow& w : bound.link_windows) {
    out << "          ops " << w.first << " " << index.trace().ops[w.first].name << " .. " << w.last << " "
        << index.trace().ops[w.last].name << ": reads " << std::setprecision(2) << w.read_bytes * kGb << " GB";
    if (w.next_reads_bytes > 0) out << " (and " << w.next_reads_bytes * kGb << " GB of state the next one reads)";
    out << ", room "
        << w.room_bytes * kGb << " GB, compute " << w.compute_ms << " ms, adds " << w.added_ms << " ms ("
        << w.copied_bytes * kGb << " GB copied in, " << w.rebuilt_bytes * kGb << " GB rebuilt)\n";
    if (w.waits_before_ms > 0)
      out << "            before it, " << w.waits_before_ms << " ms more: what it has away, written since, is copied out first\n";
    if (w.replay_ms <= 0) continue;
    // What the rebuilds cost: replays by op, and the freed blocks they read.
    out << "            rebuilt by " << w.replay_ms << " ms of replays (";
    for (std::size_t k = 0; k < w.replays.size() && k < 4; ++k) out << (k ? ", " : "") << w.replays[k].first << " " << w.replays[k].second;
    out << (w.replays.size() > 4 ? ", ..." : "") << "), holding " << w.held_bytes * kGb << " GB of freed inputs from the start, reviving "
        << w.revived_bytes * kGb << " GB\n";
  }
}

// Each window as the text shows it, with its ops' names and its replays' time by op name.
nlohmann::json link_windows_json(const delta::planner::OverheadBound& bound, const delta::planner::TraceIndex& index) {
  nlohmann::json windows = nlohmann::json::array();
  for (const delta::planner::LinkWindow& w : bound.link_windows) {
    nlohmann::json replays = nlohmann::json::object();
    for (const auto& [name, ms] : w.replays) replays[name] = ms;
    windows.push_back({{"first", w.first},
                       {"first_op", index.trace().ops[w.first].name},
                       {"last", w.last},
                       {"last_op", index.trace().ops[w.last].name},
                       {"replays_ms", std::move(replays)},
                       {"read_bytes", w.read_bytes},
                       {"room_bytes", w.room_bytes},
                       {"next_reads_bytes", w.next_reads_bytes},
                       {"waits_before_ms", w.waits_before_ms},
                       {"compute_ms", w.compute_ms},
                       {"added_ms", w.added_ms},
                       {"rebuilt_bytes", w.rebuilt_bytes},
                       {"copied_bytes", w.copied_bytes},
                       {"held_bytes", w.held_bytes},
                       {"revived_bytes", w.revived_bytes},
                       {"replay_ms", w.replay_ms}});
  }
  return windows;
}

void run_bound(const BoundArgs& args) {
  using namespace delta;
  check_budgets(args.budgets);
  check_kineto(args.traces, args.kineto);
  Progress progress(args.integer ? "bound --integer" : "bound", args.traces.size() * args.budgets.size());
  for (const std::string& path : args.traces) {
    trace::Trace trace = step_to_plan(load_trace(path, detect_trace_kind(path) == TraceKind::execution_trace ? args.kineto : ""), args.iteration);
    require_ops(trace, path, "bound");
    planner::TraceIndex index(trace);
    const std::string gpu = gpu_profile_for(trace, args.gpu);
    const std::string name = trace_name(path);
    if (!args.json) progress.write(std::cout, name + " (gpu " + gpu + "): lowest overhead any plan can reach\n");
    const planner::IntegerSolver solver = args.solver == "highs" ? planner::IntegerSolver::highs
                                          : args.solver == "cbc"   ? planner::IntegerSolver::cbc
                                                                   : planner::IntegerSolver::automatic;
    for (const std::string& text : args.budgets) {
      const Budget budget = parse_budget(text, index.native_peak());
      const double ratio = budget.ratio;
      planner::PlanRequest request;
      request.index = &index;
      request.gpu = gpu_profile(gpu);
      request.budget_ratio = ratio;
      request.budget_bytes = budget.bytes;
      progress.start(name + " at " + budget.label);
      // Explained, the optimum that swaps the fewest bytes: the first one marks gaps away at no
      // cost wherever the link does not bind, which says what may be away, not what must.
      const planner::OverheadBound bound = planner::overhead_lower_bound(request, args.seconds, args.integer, solver, args.explain);
      using Status = planner::OverheadBound::Status;
      if (args.json) {
        nlohmann::json row = bound_row(name, budget, bound);
        if (!bound.proved_by.empty()) row["proved_by"] = bound.proved_by;
        if (!bound.integer_message.empty()) row["integer_message"] = bound.integer_message;
        if (!bound.link_windows.empty()) {
          row["link_windows_overhead"] = bound.link_windows_overhead;
          row["link_windows"] = link_windows_json(bound, index);
        }
        if (args.explain && bound.explanation) {
          row["explanation"] = explanation_json(*bound.explanation);
          // Per idle gap of the optimum: [block, after op, before op, away share, rebuilt share].
          nlohmann::json gaps = nlohmann::json::array();
          for (const planner::GapShare& g : bound.gap_shares)
            gaps.push_back({g.block, g.after, g.before, g.away, g.regenerated});
          row["explanation"]["gaps"] = std::move(gaps);
        }
        progress.write(std::cout, row.dump() + "\n");
        continue;
      }
      // The budget's lines are written whole, so that the progress bar never cuts them.
      std::ostringstream out;
      out << "  " << budget.label << "  " << std::fixed;
      if (bound.status == Status::bounded) {
        out << std::setprecision(4) << ">= " << bound.overhead;
        if (!bound.proved_by.empty()) out << "  (whole regenerations: " << bound.proved_by << ")";
        if (!bound.integer_message.empty()) out << "  (the linear bound: " << bound.integer_message << ")";
        out << "\n";
        if (args.explain && bound.explanation) print_explanation(out, *bound.explanation, index);
        if (args.explain) print_link_windows(out, bound, index);
      } else if (bound.status == Status::unreachable) {
        out << "unreachable: " << bound.message << "\n";
      } else {
        out << "no bound: " << bound.message;
        if (!bound.integer_message.empty()) out << "; whole regenerations: " << bound.integer_message;
        out << "\n";
      }
      progress.write(std::cout, out.str());
    }
  }
}

}  // namespace

nlohmann::json bound_row(const std::string& trace, const Budget& budget, const delta::planner::OverheadBound& bound) {
  using Status = delta::planner::OverheadBound::Status;
  nlohmann::json row = {{"trace", trace}, {"budget_ratio", budget.ratio}, {"budget_bytes", budget.bytes}};
  row["reachable"] = bound.status == Status::unsolved ? nlohmann::json(nullptr) : nlohmann::json(bound.status == Status::bounded);
  row["overhead_lower_bound"] = bound.status == Status::bounded ? nlohmann::json(bound.overhead) : nlohmann::json(nullptr);
  if (!bound.message.empty()) row["reason"] = bound.message;
  return row;
}

void add_bound_command(CLI::App& app) {
  auto args = std::make_shared<BoundArgs>();
  CLI::App* command = app.add_subcommand(
      "bound", "The lowest overhead any plan could reach (a linear relaxation of every plan), or that none can meet the budget");
  command->add_option("traces", args->traces, std::string("Trace files, each ") + kTraceKinds)->required();
  add_kineto_option(command, &args->kineto);
  add_iteration_option(*command, args->iteration);
  command->add_option("--budgets", args->budgets,
                      "Budgets: fractions of each trace's native peak (0.5) or bytes (6GiB, 512MiB), comma-separated")->delimiter(',');
  command->add_option("--gpu", args->gpu, "GPU profile (default: each trace's own)");
  command->add_option("--seconds", args->seconds, "Time the LP solver may take per budget")->capture_default_str()->check(CLI::Range(1, 3600));
  command->add_flag("--integer", args->integer,
                    "Solve with whole regenerations, as in any plan (swaps may take part of a block): the best bound "
                    "HiGHS (highspy, from DELTA_PYTHON, python3 or the project's venv) or else cbc proves within "
                    "--seconds; at least the linear one, often higher");
  command->add_option("--solver", args->solver, "With --integer: auto (HiGHS where available, else cbc), highs or cbc")
      ->check(CLI::IsMember({"auto", "highs", "cbc"}))
      ->capture_default_str();
  command->add_flag("--explain", args->explain,
                    "Also show how the linear optimum spends its time (replays by op), what it has away at the op in "
                    "most excess (by swap, by regeneration, by the op that made each block) and at a few ops along the "
                    "step (by category); the optimum that swaps the fewest bytes, solved a second time (about twice "
                    "the solver time)");
  command->add_flag("--json", args->json, "One JSON object per line: trace, budget_ratio, reachable, overhead_lower_bound; and link_windows, the stretches the link bounds (ops by index and name, added time, bytes copied and rebuilt, replays by op)");
  command->callback([args] { run_bound(*args); });
}

}  // namespace deltactl
