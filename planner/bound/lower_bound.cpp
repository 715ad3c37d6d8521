#include "bound/lower_bound.hpp"

#include "bound/lp_solver.hpp"
#include "bound/relaxation.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <string>

namespace delta::planner {

using namespace relaxation;

OverheadBound overhead_lower_bound(const PlanRequest& request, int solver_seconds, bool integer, IntegerSolver solver,
                                   bool fewest_moved, bool link_windows) {
  const TraceIndex& index = *request.index;
  const std::size_t n = index.op_count();
  const std::uint64_t budget = request.budget_bytes;
  OverheadBound bound;
  // Live bytes every plan must hold at each op, before gaps are freed: a block from its first
  // use (op 0 when live at the start) to its last (the end when it must survive the step).
  // Dead stretches are left out: discarding them is free.
  std::vector<double> held(n, 0.0);
  std::vector<Gap> gaps;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    if (info.size == 0) continue;
    std::vector<std::uint32_t> anchors(info.uses.begin(), info.uses.end());
    if (info.from_start && (anchors.empty() || anchors.front() != 0)) anchors.insert(anchors.begin(), 0);
    if (anchors.empty()) continue;
    const std::uint32_t last_held = info.to_end ? static_cast<std::uint32_t>(n - 1) : anchors.back();
    for (std::uint32_t i = anchors.front(); i <= last_held && i < n; ++i) held[i] += double(info.size);
    if (info.to_end) anchors.push_back(static_cast<std::uint32_t>(n));
    std::int64_t last_write = -1;
    for (std::size_t k = 0; k + 1 < anchors.size(); ++k) {
      const std::uint32_t after = anchors[k], before = anchors[k + 1];
      const OpUse* last_use = index.use_at(after, b);
      if (last_use && last_use->write) last_write = after;
      if (before <= after + 1) continue;
      const OpUse* next_use = before < n ? index.use_at(before, b) : nullptr;
      if (next_use && !next_use->read && next_use->write) {  // overwritten unread: dead in the gap
        for (std::uint32_t i = after + 1; i < before; ++i) held[i] -= double(info.size);
        continue;
      }
      Gap gap{b, after, before, {}, last_write};
      gap.chain = forced_chain(index, b, after, before);
      gaps.push_back(std::move(gap));
    }
  }
  std::vector<double> excess(n, 0.0);
  bool over = false;
  for (std::size_t i = 0; i < n; ++i) {
    excess[i] = std::max(0.0, held[i] - double(budget));
    over |= excess[i] > 0;
  }
  if (!over) {
    bound.status = OverheadBound::Status::bounded;
    return bound;
  }
  // Only gaps over some op in excess matter.
  std::erase_if(gaps, [&](const Gap& g) {
    for (std::uint32_t i = g.after + 1; i < g.before && i < n; ++i)
      if (excess[i] > 0) return false;
    return true;
  });
  // Columns: x0 = the added time E (ms); per gap whether the block is away somewhere in it
  // and, when it can be regenerated, whether it is regenerated there (both within [0, 1]; a
  // plan may swap and regenerate within one gap); the checkpoints' shares; then per op that
  // some chain replays, how many times it is replayed (at least).
  std::vector<Columns> columns(gaps.size());
  std::size_t count = 1;
  for (std::size_t g = 0; g < gaps.size(); ++g) {
    columns[g].away = count++;
    columns[g].regen = gaps[g].chain.empty() ? 0 : count++;
  }
  const std::size_t shares = count;
  LateNeeds late;
  const std::vector<Checkpoint> checkpoints = pick_checkpoints(gaps, columns, excess, index, count, late);
  for (auto& [key, need] : late) need.column = count++;
  // An op replayed once can rebuild several blocks (all the outputs of one op, due at one
  // point), so replays are counted per op: at least as often as any one block needs it, one
  // replay per regenerated gap of that block.
  std::map<std::uint32_t, std::size_t> replay_column;
  ReplayNeeds needs;
  for (std::size_t g = 0; g < gaps.size(); ++g)
    for (std::uint32_t op : gaps[g].chain) {
      if (!replay_column.count(op)) replay_column.emplace(op, 0);
      needs[{op, gaps[g].block}].push_back(columns[g].regen);
    }
  for (const auto& [key, need] : late) {
    if (!replay_column.count(key.first)) replay_column.emplace(key.first, 0);
    needs[{key.first, gaps[key.second].block}].push_back(need.column);
  }
  for (auto& [op, column] : replay_column) column = count++;
  constexpr double kMs = 1e6, kMiB = double(1 << 20);
  const double d2h_ms_per_mib = kMiB / request.gpu.d2h_bytes_per_s * 1e3;
  const double h2d_ms_per_mib = kMiB / request.gpu.h2d_bytes_per_s * 1e3;
  // Gaps by start, for the coverage rows.
  std::vector<std::size_t> by_span(gaps.size());
  for (std::size_t g = 0; g < gaps.size(); ++g) by_span[g] = g;
  std::sort(by_span.begin(), by_span.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(gaps[a].after, gaps[a].before) < std::pair(gaps[b].after, gaps[b].before);
  });
  // The delay chain: the checkpoints' own delays, and a column at every other end of a lane
  // window either program writes. The linear program needs only its own windows' ends (the
  // others are free columns of the chain, its value the same), but without them cbc returns
  // another optimum, and the second start from it (bound_guided) plans resnet32 at 0.2 at
  // 1.16682 rather than 1.16580, short of half of DTR's extra time (1.16608): kept, at about
  // a fifth more solver time.
  DelayChain delays;
  for (const Checkpoint& c : checkpoints) delays.emplace(c.op, c.delay);
  for (const Checkpoint& c : checkpoints)
    for (std::size_t windows : {kLinearWindows, kEveryWindow}) {
      const auto [starts, ends] = window_points(c, gaps, windows);
      for (std::int64_t from : starts)
        if (from >= 0 && !delays.count(static_cast<std::uint32_t>(from))) delays.emplace(static_cast<std::uint32_t>(from), count++);
      for (std::uint32_t to : ends)
        if (to < n && !delays.count(to)) delays.emplace(to, count++);
    }
  bool whole = false;  // write the General section: shares and counts integral
  // >= 0: the second solve (fewest_moved): the added time held at most this (ms), the bytes
  // swapped minimised, each gap's rebuilt share within its away share.
  double added_at_most = -1;
  auto write = [&](std::ostream& out) {
    out.precision(10);
    // Every column appears in the objective, in order (GLPK numbers columns that way).
    if (added_at_most < 0) {
      out << "Minimize\n obj: x0";
      for (std::size_t c = 1; c < count; ++c) out << " + 0 x" << c;
    } else {
      // Bytes away less (nearly all of) the bytes rebuilt: a rebuilt share is away without
      // moving, and swapping the same share instead costs a little more.
      std::vector<double> weight(count, 0.0);
      for (std::size_t g = 0; g < gaps.size(); ++g) {
        const double mib = double(index.block(gaps[g].block).size) / kMiB;
        weight[columns[g].away] += mib;
        if (columns[g].regen) weight[columns[g].regen] -= 0.99 * mib;
      }
      // And no more replays than needed: where the added time is held by the link's windows,
      // replay counts are free up to it, and would be reported as replays the optimum makes.
      for (const auto& [op, column] : replay_column) weight[column] += 1e-3 * double(index.duration(op)) / kMs;
      out << "Minimize\n obj: 0 x0";
      for (std::size_t c = 1; c < count; ++c) out << " + " << weight[c] << " x" << c;
    }
    out << "\nSubject To\n";
    if (added_at_most >= 0) {
      out << " added: x0 <= " << added_at_most << "\n";
      for (std::size_t g = 0; g < gaps.size(); ++g)
        if (columns[g].regen) out << " within" << g << ": x" << columns[g].regen << " - x" << columns[g].away << " <= 0\n";
    }
    out << " compute: x0";
    for (const auto& [op, column] : replay_column) out << " - " << double(index.duration(op)) / kMs << " x" << column;
    out << " >= 0\n";
    write_replay_counts(out, " replay", replay_column, needs);
    std::size_t r = 0;
    for (const auto& [key, need] : late)
      for (const auto& [share, retentions] : need.regen_shares) {
        out << " late" << r++ << ": x" << need.column << " - x" << share;
        for (std::size_t retention : retentions) out << " + x" << retention;
        out << " >= 0\n";
      }
    // Coverage, op by op: gaps are sorted by start; those open at i are found by a scan.
    for (std::size_t i = 0; i < n; ++i) {
      if (excess[i] <= 0) continue;
      out << " op" << i << ":";
      bool any = false;
      for (std::size_t g : by_span) {
        if (gaps[g].after >= i) break;
        if (gaps[g].before <= i) continue;
        out << " + " << double(index.block(gaps[g].block).size) / kMiB << " x" << columns[g].away;
        any = true;
      }
      if (!any) out << " 0 x0";
      out << " >= " << excess[i] / kMiB << "\n";
    }
    for (const Checkpoint& c : checkpoints)
      write_checkpoint(out, c, gaps, columns, index, excess[c.op], {d2h_ms_per_mib, h2d_ms_per_mib},
                       whole ? kEveryWindow : kLinearWindows, delays);
    std::size_t row = 0, previous = 0;
    for (const auto& [op, column] : delays) {  // delays only accrue, up to the added time
      if (previous) out << " accrue" << row++ << ": x" << previous << " - x" << column << " <= 0\n";
      previous = column;
    }
    if (previous) out << " accrue" << row << ": x" << previous << " - x0 <= 0\n";
    out << "Bounds\n";
    for (std::size_t c = 1; c < shares; ++c) out << " 0 <= x" << c << " <= 1\n";
    for (const Checkpoint& c : checkpoints)
      for (const Checkpoint::Share& s : c.shares) {
        out << " 0 <= x" << s.swap << " <= 1\n";
        if (s.regen) out << " 0 <= x" << s.regen << " <= 1\n";
      }
    for (const Checkpoint& c : checkpoints)
      for (const auto& [block, column] : c.retained) out << " 0 <= x" << column << " <= 1\n";
    for (const Checkpoint& c : checkpoints)
      for (const Checkpoint::Spared& a : c.spared) out << " 0 <= x" << a.column << " <= 1\n";
    if (whole) {  // every column but the added time, the delays and the swaps counts whole things
      std::vector<bool> continuous(count, false);
      continuous[0] = true;
      for (const auto& [op, column] : delays) continuous[column] = true;
      // A plan may swap part of a block (whole pages, the rest kept): any share of a gap may
      // be away by swap, while a regeneration rebuilds the whole block.
      for (const Columns& gap : columns) continuous[gap.away] = true;
      for (const Checkpoint& c : checkpoints)
        for (const Checkpoint::Share& share : c.shares) continuous[share.swap] = true;
      out << "General\n";
      for (std::size_t c = 1; c < count; ++c)
        if (!continuous[c]) out << " x" << c << "\n";
    }
    out << "End\n";
  };
  LpOutcome outcome = solve_lp(write, count, solver_seconds, true);
  bool moved_fewest = false;
  if (fewest_moved && outcome.status == LpOutcome::Status::solved && outcome.optimal) {
    // The solver's tolerances: a hair above the optimum, which is still the bound reported.
    const double added = std::max(0.0, outcome.values[0]);
    added_at_most = added * (1.0 + 5e-4) + 1e-4;
    LpOutcome second = solve_lp(write, count, solver_seconds, true);
    added_at_most = -1;
    if (second.status == LpOutcome::Status::solved && second.optimal) {
      second.values[0] = outcome.values[0];
      outcome = std::move(second);
      moved_fewest = true;
    }
  }
  if (outcome.status == LpOutcome::Status::infeasible) {
    bound.status = OverheadBound::Status::unreachable;
    bound.message = "no plan can meet the budget: the blocks an op needs resident, with every idle block freed, exceed it";
    return bound;
  }
  const double step_ms = double(index.native_step_ns()) / kMs;
  if (outcome.status == LpOutcome::Status::solved && outcome.optimal) {
    bound.status = OverheadBound::Status::bounded;
    bound.overhead = 1.0 + std::max(0.0, outcome.values[0]) / step_ms;
    bound.explanation = explain(outcome.values, gaps, columns, checkpoints, replay_column, excess, index);
    bound.explanation->along_step = along_step(outcome.values, gaps, columns, excess, bound.explanation->peak_op, index);
    bound.explanation->fewest_moved = moved_fewest;
    double replayed_ms = 0;
    for (const auto& [op, ms] : bound.explanation->replay_ms) replayed_ms += ms;
    bound.explanation->added_ms = std::max(0.0, outcome.values[0]);
    bound.explanation->waiting_ms = std::max(0.0, bound.explanation->added_ms - replayed_ms);
    for (std::size_t g = 0; g < gaps.size(); ++g) {
      const double away = outcome.values[columns[g].away];
      if (away <= 1e-6) continue;
      const double regenerated = columns[g].regen ? outcome.values[columns[g].regen] : 0.0;
      bound.gap_shares.push_back({index.block(gaps[g].block).id, gaps[g].after, gaps[g].before, away, regenerated});
    }
  } else {
    // A point short of the optimum lies above it: no bound.
    bound.message = outcome.status == LpOutcome::Status::solved ? "the LP solver stopped before the optimum" : outcome.message;
  }
  if (link_windows && bound.status != OverheadBound::Status::unreachable) {
    const LinkWindowBound windows = link_window_bound(index, budget, request.gpu.h2d_bytes_per_s, request.gpu.d2h_bytes_per_s, solver_seconds);
    if (windows.unreachable) {
      bound.status = OverheadBound::Status::unreachable;
      bound.message = "no plan can meet the budget: an op reads more than the budget leaves beside what it makes";
      return bound;
    }
    bound.link_windows = windows.windows;
    bound.link_windows_overhead = 1.0 + windows.added_ms / step_ms;
    if (windows.message.empty() && windows.added_ms > 0 &&
        (bound.status != OverheadBound::Status::bounded || bound.link_windows_overhead > bound.overhead)) {
      bound.overhead = bound.link_windows_overhead;
      bound.status = OverheadBound::Status::bounded;
      bound.message.clear();
    }
  }
  if (!integer) return bound;
  // Whole choices: what HiGHS or cbc proves can only raise the linear bound (it may prove
  // nothing in time).
  whole = true;
  const LpOutcome proved = solve_for_lower_bound(write, solver_seconds, solver);
  if (proved.status == LpOutcome::Status::infeasible) {
    bound.status = OverheadBound::Status::unreachable;
    bound.message = "no plan can meet the budget: no whole choice of what to free covers every op";
  } else if (proved.proven_lower_bound) {
    const std::string solver_name = proved.solver + (proved.solver_version.empty() ? "" : " " + proved.solver_version);
    const double overhead = 1.0 + std::max(0.0, *proved.proven_lower_bound) / step_ms;
    if (bound.status != OverheadBound::Status::bounded || overhead > bound.overhead) {
      bound.overhead = overhead;
      bound.proved_by = solver_name;
      bound.status = OverheadBound::Status::bounded;
      bound.message.clear();
    } else {
      bound.integer_message = solver_name + " proved no more than the linear bound (or the link's windows)";
    }
  } else {
    bound.integer_message = proved.message;
  }
  return bound;
}

}  // namespace delta::planner
