// Exact baseline: the same candidate model as DELTA's sweep (each idle interval of a block
// may be freed by a swap whose transfers fit in the gap's compute, or by regenerating it from
// its version chain: producer and in-place updates), solved to optimality as a 0/1 covering problem: minimise the added time so
// that at every op the bytes freed cover the excess over the budget. Written as an LP file and
// solved by an external solver binary (bound/lp_solver.hpp). Where the simulator refuses the optimum
// for bytes the model does not see, those bytes join that op's excess and it is solved again.
#include "baselines/baselines.hpp"
#include "bound/lp_solver.hpp"
#include "common/plan_edits.hpp"
#include "common/rebuild_inputs.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

namespace delta::planner {
namespace {

struct Variable {
  std::uint32_t block;
  plan::Interval interval;
  std::uint32_t first, last;  // freed ops
  double cost;
  // Swaps: the ops over which the copy out and the copy in run, and their durations; the
  // lanes' capacity is modelled as a rate (sum of transfer time / window length <= 1 per op).
  std::uint32_t out_first = 0, out_last = 0, in_first = 0, in_last = 0;
  double out_rate = 0, in_rate = 0;
};

// Seconds the solver may run: DELTA_MILP_SECONDS, default 30.
int solver_seconds() {
  const char* text = std::getenv("DELTA_MILP_SECONDS");
  if (!text) return 30;
  const int seconds = std::atoi(text);
  if (seconds <= 0) throw std::invalid_argument(std::string("DELTA_MILP_SECONDS must be a positive number of seconds, got '") + text + "'");
  return seconds;
}

}  // namespace

std::optional<plan::Plan> plan_milp(const PlanRequest& request, std::string& reason) {
  constexpr std::size_t kMaxOps = 4000;
  const TraceIndex& index = *request.index;
  if (find_lp_solver().empty()) {
    reason = "milp: no MILP solver found (install coinor-cbc or glpk-utils)";
    return std::nullopt;
  }
  if (index.op_count() > kMaxOps) {
    reason = "milp: the trace has " + std::to_string(index.op_count()) + " ops, more than the " + std::to_string(kMaxOps) + " this baseline solves exactly";
    return std::nullopt;
  }
  plan::Plan plan = empty_plan(request, "milp");
  if (index.native_peak() <= request.budget_bytes) return plan;
  const auto& live = index.native_live_bytes();
  std::vector<Variable> variables;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> gaps;
    for (std::size_t u = 0; u + 1 < info.uses.size(); ++u)
      if (info.uses[u + 1] > info.uses[u] + 1) gaps.push_back({info.uses[u], info.uses[u + 1]});
    if (info.to_end && !info.uses.empty() && info.uses.back() + 1 < index.op_count())
      gaps.push_back({info.uses.back(), static_cast<std::uint32_t>(index.op_count())});
    for (auto [after, before] : gaps) {
      bool useful = false;
      for (std::uint32_t i = after + 1; i < before && !useful; ++i) useful = live[i] > request.budget_bytes;
      if (!useful) continue;
      // Swap: evict right after `after`, prefetch as late as the transfer allows.
      const std::int64_t out = transfer_ns(info.size, request.gpu.d2h_bytes_per_s, request.gpu.launch_latency_ns);
      const std::int64_t in = transfer_ns(info.size, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns);
      const std::int64_t free_from = index.native_end(after) + out;
      std::uint32_t first = after + 1;
      while (first < before && index.native_start(first) < free_from) ++first;
      std::uint32_t prefetch = before;
      while (prefetch > first && index.compute_between(prefetch, before) < in) --prefetch;
      if (first < prefetch) {
        plan::Interval interval;
        interval.action = plan::Action::swap;
        interval.release_after = after;
        interval.prefetch_at = prefetch;
        interval.needed_by = before;
        Variable v{b, interval, first, prefetch - 1, 1.0 + 0.01 * double(in)};
        v.out_first = after + 1;
        v.out_last = first - 1;
        v.in_first = prefetch;
        v.in_last = before - 1;
        const double out_window = double(std::max<std::int64_t>(1, index.compute_between(after + 1, first)));
        const double in_window = double(std::max<std::int64_t>(1, index.compute_between(prefetch, before)));
        v.out_rate = std::min(1.0, double(out) / out_window);
        v.in_rate = std::min(1.0, double(in) / in_window);
        if (v.out_first > v.out_last) v.out_rate = 0;  // evicted during the op after the use: no window
        variables.push_back(v);
      }
      if (before < index.op_count() && index.regenerable(b, before)) {
        plan::Interval interval = regeneration_interval(index, b, after, before);
        const double compute = replay_compute_ns(index, interval);
        variables.push_back({b, interval, after + 1, before - 1, compute});
      }
    }
  }
  std::vector<std::uint64_t> more(index.op_count(), 0);  // bytes the simulator found held beyond the model, per op
  auto write = [&](std::ostream& out) {
    out << "Minimize\n obj:";
    for (std::size_t v = 0; v < variables.size(); ++v) out << " + " << variables[v].cost << " x" << v;
    out << "\nSubject To\n";
    const double scale = 1.0 / (1 << 20);  // MiB keeps coefficients well conditioned
    // Each op's covering row, gathered in one pass over the choices rather than one per op.
    std::vector<std::ostringstream> rows(index.op_count());
    for (std::size_t v = 0; v < variables.size(); ++v)
      for (std::uint32_t i = variables[v].first; i <= variables[v].last && i < rows.size(); ++i)
        rows[i] << " + " << double(index.block(variables[v].block).size) * scale << " x" << v;
    for (std::size_t i = 0; i < index.op_count(); ++i) {
      const std::uint64_t excess = live[i] + more[i] > request.budget_bytes ? live[i] + more[i] - request.budget_bytes : 0;
      if (excess == 0) continue;
      const std::string terms = rows[i].str();
      out << " op" << i << ":" << (terms.empty() ? std::string(" 0 x0") : terms) << " >= " << double(excess) * scale << "\n";
    }
    for (std::size_t k = 0; k < index.op_count(); ++k) {
      std::ostringstream out_lane, in_lane;
      for (std::size_t v = 0; v < variables.size(); ++v) {
        const Variable& x = variables[v];
        if (x.interval.action != plan::Action::swap) continue;
        if (x.out_rate > 0 && x.out_first <= k && k <= x.out_last) out_lane << " + " << x.out_rate << " x" << v;
        if (x.in_first <= k && k <= x.in_last) in_lane << " + " << x.in_rate << " x" << v;
      }
      if (!out_lane.str().empty()) out << " d2h" << k << ":" << out_lane.str() << " <= 1\n";
      if (!in_lane.str().empty()) out << " h2d" << k << ":" << in_lane.str() << " <= 1\n";
    }
    // One choice per gap (a swap and a regeneration of the same interval exclude each other).
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<std::size_t>> by_gap;
    for (std::size_t v = 0; v < variables.size(); ++v) by_gap[{variables[v].block, variables[v].interval.release_after}].push_back(v);
    std::size_t g = 0;
    for (const auto& [key, list] : by_gap) {
      if (list.size() < 2) continue;
      out << " gap" << g++ << ":";
      for (std::size_t v : list) out << " + x" << v;
      out << " <= 1\n";
    }
    out << "Binary\n";
    for (std::size_t v = 0; v < variables.size(); ++v) out << " x" << v << "\n";
    out << "End\n";
  };
  // The model misses what a plan holds beyond its choices: an input fetched back for a rebuild
  // that a rebuilt input's own rebuild needs earlier still, a replay's temporaries. Where the
  // simulator finds an op over the budget, that op's row asks for the excess more and the
  // program is solved again, a few times at most.
  constexpr int kRounds = 12;
  const auto started = std::chrono::steady_clock::now();
  const int seconds = solver_seconds();
  std::optional<plan::Plan> refused;
  for (int round = 0; round < kRounds; ++round) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (round > 0 && spent > 2.0 * seconds) break;
    const LpOutcome outcome = solve_lp(write, variables.size(), seconds);
    if (outcome.status != LpOutcome::Status::solved) {
      if (refused) break;  // a later round found nothing: the refused plan says more
      reason = outcome.status == LpOutcome::Status::infeasible ? "milp: no choice of intervals covers the budget"
                                                               : "milp: " + outcome.message;
      return std::nullopt;
    }
    plan::Plan candidate = plan;
    for (std::size_t v = 0; v < variables.size(); ++v)
      if (outcome.values[v] > 0.5) add_interval(candidate, index, variables[v].block, variables[v].interval);
    // The model frees each gap on its own; a rebuild that reads a block chosen away at its point
    // (a batch norm's output rebuilt for the relu rebuilt from it, due an op later) would be
    // refused by the simulator, so that block comes back by then.
    inputs_back_in_time(request, candidate);
    const SimulationResult verdict = judge(request, candidate);
    if (verdict.feasible) return candidate;
    refused = std::move(candidate);
    if (verdict.first_bad_op < 0 || verdict.shortfall_bytes == 0) break;  // not a matter of bytes
    more[static_cast<std::size_t>(verdict.first_bad_op)] += verdict.shortfall_bytes;
  }
  return refused;  // the caller's judgement names why it is refused
}

}  // namespace delta::planner
