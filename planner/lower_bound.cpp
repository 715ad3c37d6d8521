#include "lower_bound.hpp"

#include "lp_solver.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <sstream>

namespace delta::planner {
namespace {

// One idle gap of a block: absent over ops (after, before).
struct Gap {
  std::uint32_t block;
  std::uint32_t after, before;       // `before` may be op_count(): the end of the step
  std::vector<std::uint32_t> chain;  // ops any regeneration replays; empty: cannot be regenerated
  bool copied_out = false;           // a swap must copy it out (written at `after`: no host copy is current)
};

// The ops every regeneration of `block` before `until` must replay: its overwrite chain (the
// simulator requires the rebuilt block at its current version, and an update cannot read a
// block that is gone). Empty when the block cannot be regenerated at all. Unlike
// TraceIndex::version_chain, a block not allocated by its first write qualifies, and the
// chain's inputs need not be resident or unchanged: a plan may rebuild them first (the bound
// stays below any plan).
std::vector<std::uint32_t> replayed_chain(const TraceIndex& index, std::uint32_t block, std::uint32_t until) {
  const BlockInfo& info = index.block(block);
  if (info.from_start || info.category == trace::Category::parameter || info.category == trace::Category::input) return {};
  return index.overwrite_chain(block, until);
}

}  // namespace

OverheadBound overhead_lower_bound(const PlanRequest& request, int solver_seconds) {
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
    std::vector<std::uint32_t> anchors(info.uses.begin(), info.uses.end());
    if (info.from_start && (anchors.empty() || anchors.front() != 0)) anchors.insert(anchors.begin(), 0);
    if (anchors.empty()) continue;
    const std::uint32_t last_held = info.to_end ? static_cast<std::uint32_t>(n - 1) : anchors.back();
    for (std::uint32_t i = anchors.front(); i <= last_held && i < n; ++i) held[i] += double(info.size);
    if (info.to_end) anchors.push_back(static_cast<std::uint32_t>(n));
    for (std::size_t k = 0; k + 1 < anchors.size(); ++k) {
      const std::uint32_t after = anchors[k], before = anchors[k + 1];
      if (before <= after + 1) continue;
      const OpUse* next_use = before < n ? index.use_at(before, b) : nullptr;
      if (next_use && !next_use->read && next_use->write) {  // overwritten unread: dead in the gap
        for (std::uint32_t i = after + 1; i < before; ++i) held[i] -= double(info.size);
        continue;
      }
      Gap gap{b, after, before, {}, false};
      const OpUse* last_use = index.use_at(after, b);
      gap.copied_out = last_use && last_use->write;
      gap.chain = replayed_chain(index, b, before);
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
  // Columns: x0 = the added time E (ms); per gap a swap share and, when it can be
  // regenerated, a regeneration share (both within [0, 1]); then per op that some chain
  // replays, how many times it is replayed (at least).
  struct Columns {
    std::size_t swap, regen;  // regen == 0: none
  };
  std::vector<Columns> columns(gaps.size());
  std::size_t count = 1;
  for (std::size_t g = 0; g < gaps.size(); ++g) {
    columns[g].swap = count++;
    columns[g].regen = gaps[g].chain.empty() ? 0 : count++;
  }
  const std::size_t shares = count;
  // An op replayed once can rebuild several blocks (all the outputs of one op, due at one
  // point), so replays are counted per op: at least as often as any one block needs it, one
  // replay per regenerated gap of that block.
  std::map<std::uint32_t, std::size_t> replay_column;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>> needs;  // (op, block) -> regen columns
  for (std::size_t g = 0; g < gaps.size(); ++g)
    for (std::uint32_t op : gaps[g].chain) {
      if (!replay_column.count(op)) replay_column.emplace(op, 0);
      needs[{op, gaps[g].block}].push_back(columns[g].regen);
    }
  for (auto& [op, column] : replay_column) column = count++;
  constexpr double kMs = 1e6, kMiB = double(1 << 20);
  const double d2h_ms_per_mib = kMiB / request.gpu.d2h_bytes_per_s * 1e3;
  const double h2d_ms_per_mib = kMiB / request.gpu.h2d_bytes_per_s * 1e3;
  // Windows for the copy lanes: the span of each gap, with every gap inside it.
  std::vector<std::size_t> by_span(gaps.size());
  for (std::size_t g = 0; g < gaps.size(); ++g) by_span[g] = g;
  std::sort(by_span.begin(), by_span.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(gaps[a].after, gaps[a].before) < std::pair(gaps[b].after, gaps[b].before);
  });
  auto write = [&](std::ostream& out) {
    out.precision(10);
    // Every column appears in the objective, in order (GLPK numbers columns that way).
    out << "Minimize\n obj: x0";
    for (std::size_t c = 1; c < count; ++c) out << " + 0 x" << c;
    out << "\nSubject To\n";
    out << " compute: x0";
    for (const auto& [op, column] : replay_column) out << " - " << double(index.duration(op)) / kMs << " x" << column;
    out << " >= 0\n";
    std::size_t r = 0;
    for (const auto& [key, regens] : needs) {
      out << " replay" << r++ << ": x" << replay_column.at(key.first);
      for (std::size_t column : regens) out << " - x" << column;
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
        const double mib = double(index.block(gaps[g].block).size) / kMiB;
        out << " + " << mib << " x" << columns[g].swap;
        if (columns[g].regen) out << " + " << mib << " x" << columns[g].regen;
        any = true;
      }
      if (!any) out << " 0 x0";
      out << " >= " << excess[i] / kMiB << "\n";
    }
    for (std::size_t g = 0; g < gaps.size(); ++g) {
      out << " one" << g << ": x" << columns[g].swap;
      if (columns[g].regen) out << " + x" << columns[g].regen;
      out << " <= 1\n";
    }
    // Lanes: the copies of the swaps inside a window take no longer than its compute plus E.
    std::size_t w = 0;
    std::pair<std::uint32_t, std::uint32_t> previous{~0u, ~0u};
    for (std::size_t k = 0; k < by_span.size(); ++k) {
      const Gap& window = gaps[by_span[k]];
      if (std::pair(window.after, window.before) == previous) continue;
      previous = {window.after, window.before};
      std::ostringstream d2h, h2d;
      std::size_t from = k;  // gaps starting where the window does and ending sooner come first
      while (from > 0 && gaps[by_span[from - 1]].after == window.after) --from;
      for (std::size_t j = from; j < by_span.size() && gaps[by_span[j]].after < window.before; ++j) {
        const Gap& inside = gaps[by_span[j]];
        if (inside.before > window.before) continue;
        const double mib = double(index.block(inside.block).size) / kMiB;
        if (inside.copied_out) d2h << " + " << mib * d2h_ms_per_mib << " x" << columns[by_span[j]].swap;
        h2d << " + " << mib * h2d_ms_per_mib << " x" << columns[by_span[j]].swap;
      }
      const double window_ms = double(index.compute_between(window.after + 1, std::min<std::size_t>(window.before, n))) / kMs;
      if (!d2h.str().empty()) out << " d2h" << w << ":" << d2h.str() << " - x0 <= " << window_ms << "\n";
      out << " h2d" << w << ":" << h2d.str() << " - x0 <= " << window_ms << "\n";
      ++w;
    }
    out << "Bounds\n";
    for (std::size_t c = 1; c < shares; ++c) out << " 0 <= x" << c << " <= 1\n";
    out << "End\n";
  };
  const LpOutcome outcome = solve_lp(write, count, solver_seconds);
  if (outcome.status == LpOutcome::Status::infeasible) {
    bound.status = OverheadBound::Status::unreachable;
    bound.message = "no plan can meet the budget: the blocks an op needs resident, with every idle block freed, exceed it";
    return bound;
  }
  if (outcome.status != LpOutcome::Status::solved || !outcome.optimal) {
    // A point short of the optimum lies above it: no bound.
    bound.message = outcome.status == LpOutcome::Status::solved ? "the LP solver stopped before the optimum" : outcome.message;
    return bound;
  }
  bound.status = OverheadBound::Status::bounded;
  bound.overhead = 1.0 + std::max(0.0, outcome.values[0]) * kMs / double(index.native_step_ns());
  return bound;
}

}  // namespace delta::planner
