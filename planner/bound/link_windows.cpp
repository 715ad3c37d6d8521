// The link's windows (relaxation.hpp): a bound of its own, beside the linear program's.
//
// Take a stretch of ops W = [a, b]. When op a starts, at most the budget is on the device, and
// op a's own new blocks are among it. Every block W reads whose data is older than a (made
// before it, or live at the start) and that is not on the device then must arrive within W:
// copied in over the host-to-device lane, or rebuilt by replays on the compute stream. So W
// lasts at least its compute plus those replays, and at least the copies' time on the lane;
// its added time is the larger excess. Stretches that do not overlap add up. The linear
// program counts a small block away at no cost of the link wherever it does not follow it op
// by op, and no op of an optimizer split into its launches reads whole lists: there this bound
// is the tighter one (two stretches of AdamW's updates each read every list).
//
// The stretches are chosen by their swap-only excess (a dynamic program over disjoint
// stretches), then solved as one small linear program that may also rebuild what can be
// rebuilt: a regeneration replays the block's forced chain within W, and each input of it the
// trace freed before a is held when W starts (its bytes count against the budget there) or
// revived within W (its producers replayed, their own freed inputs in turn).
#include "bound/relaxation.hpp"

#include "bound/lp_solver.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

namespace delta::planner::relaxation {
namespace {

constexpr double kMs = 1e6, kMiB = double(1 << 20);
// Starts tried at most: each costs a scan of the uses after it.
constexpr std::size_t kMaxStarts = 1500;

// What W = [first, last] reads of older data, and what the budget leaves for it at its start.
struct Stretch {
  std::uint32_t first = 0, last = 0;
  std::vector<std::uint32_t> reads;  // blocks, by index
  double read_bytes = 0, room_bytes = 0, compute_ms = 0;
};

bool older_than(const BlockInfo& info, std::uint32_t op) {
  return info.from_start || (!info.uses.empty() && info.uses.front() < op);
}

// Whether the stretch starting at `first` reads `use`'s block as data made before it (else, at
// op `first` itself, the block is made or overwritten there and takes room).
bool reads_older(const TraceIndex& index, const OpUse& use, std::uint32_t first) {
  return use.read && older_than(index.block(use.block), first);
}

// Made by the step's own ops: maybe cheaper to rebuild than to copy.
bool made_in_step(const BlockInfo& info) {
  return !info.from_start && info.category != trace::Category::parameter && info.category != trace::Category::input;
}

// Live bytes every plan holds at each op, as the linear program counts them (first use, or op
// 0 for a block live at the start, to last use, or the end): no stretch starting where they
// fit in the budget can read more than the budget leaves.
std::vector<double> held_bytes(const TraceIndex& index) {
  const std::size_t n = index.op_count();
  std::vector<double> held(n + 1, 0.0);
  for (const BlockInfo& info : index.blocks()) {
    if (info.size == 0 || (info.uses.empty() && !info.from_start)) continue;
    const std::uint32_t from = info.from_start ? 0 : info.uses.front();
    const std::uint32_t to = info.to_end ? static_cast<std::uint32_t>(n - 1) : (info.uses.empty() ? 0 : info.uses.back());
    if (from > to) continue;
    held[from] += double(info.size);
    held[to + 1] -= double(info.size);
  }
  for (std::size_t i = 1; i <= n; ++i) held[i] += held[i - 1];
  held.pop_back();
  return held;
}

// The stretches whose swap-only excess adds up to the most, disjoint: best[a] is the most the
// ops from a on give; a scan from each start a over the ops after it finds what each end reads.
std::vector<Stretch> choose_stretches(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, double made_weight) {
  const std::size_t n = index.op_count();
  const std::vector<double> held = held_bytes(index);
  std::vector<std::uint32_t> starts;
  for (std::uint32_t a = 0; a < n; ++a)
    if (held[a] > double(budget)) starts.push_back(a);
  if (starts.empty()) return {};
  starts = spread(std::move(starts), kMaxStarts);
  std::vector<bool> is_start(n, false);
  for (std::uint32_t a : starts) is_start[a] = true;
  std::vector<double> best(n + 1, 0.0);
  std::vector<std::int64_t> end_at(n, -1);  // the chosen stretch's last op from each start
  std::vector<std::uint32_t> seen(index.blocks().size(), ~0u);
  for (std::int64_t a = std::int64_t(n) - 1; a >= 0; --a) {
    best[a] = best[a + 1];
    if (!is_start[a]) continue;
    const std::uint32_t first = static_cast<std::uint32_t>(a);
    double reads = 0, room = double(budget);
    for (std::uint32_t u = first; u < n; ++u) {
      for (const OpUse& use : index.uses(u)) {
        if (seen[use.block] == first) continue;
        seen[use.block] = first;
        const double size = double(index.size(use.block));
        if (reads_older(index, use, first)) reads += made_in_step(index.block(use.block)) ? made_weight * size : size;
        else if (u == first) room -= size;  // made (or overwritten unread) by op a: held there
      }
      const double excess_ms = (reads - room) * h2d_ms_per_byte - double(index.compute_between(first, u + 1)) / kMs;
      if (excess_ms > 0 && excess_ms + best[u + 1] > best[a]) {
        best[a] = excess_ms + best[u + 1];
        end_at[a] = u;
      }
    }
  }
  std::vector<Stretch> chosen;
  for (std::size_t a = 0; a < n;) {
    if (end_at[a] < 0 || best[a] <= best[a + 1]) {
      ++a;
      continue;
    }
    Stretch s;
    s.first = static_cast<std::uint32_t>(a);
    s.last = static_cast<std::uint32_t>(end_at[a]);
    s.room_bytes = double(budget);
    s.compute_ms = double(index.compute_between(s.first, s.last + 1)) / kMs;
    std::set<std::uint32_t> counted;
    for (std::uint32_t u = s.first; u <= s.last; ++u)
      for (const OpUse& use : index.uses(u)) {
        if (!counted.insert(use.block).second) continue;
        if (reads_older(index, use, s.first)) {
          s.reads.push_back(use.block);
          s.read_bytes += double(index.size(use.block));
        } else if (u == s.first) {
          s.room_bytes -= double(index.size(use.block));
        }
      }
    chosen.push_back(std::move(s));
    a = end_at[a] + 1;
  }
  return chosen;
}

// Freed inputs followed per stretch at most: past them, what a revival reads is taken as there.
constexpr std::size_t kMaxFreed = 20000;

// One stretch's columns in the linear program.
struct StretchColumns {
  std::size_t added = 0;
  struct Read {
    std::uint32_t block = 0;
    // Columns; 0: none. Op a's own reads are on the device when it starts (no swap, no rebuild).
    std::size_t swap = 0, regen = 0;
    std::vector<std::uint32_t> chain;
    std::vector<std::uint32_t> freed;  // the blocks the chain reads that the trace freed before a
  };
  std::vector<Read> reads;
  std::map<std::uint32_t, std::size_t> replays;  // op -> replay count column
  // A block the trace freed before the stretch that a rebuild reads: held when the stretch
  // starts, or revived within it by replaying the writes that made it, which read further
  // freed blocks (`inputs`), held or revived in turn, as deep as the step goes.
  struct Freed {
    std::vector<std::uint32_t> ops, inputs;
    std::size_t held = 0, revived = 0;
  };
  std::map<std::uint32_t, Freed> freed;
};

// The freed blocks the writes `ops` read at the version they read, freed before op `first`.
std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>> freed_inputs(const TraceIndex& index,
                                                                               const std::vector<std::uint32_t>& ops,
                                                                               std::uint32_t made, std::uint32_t first) {
  std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>> inputs;
  for (std::uint32_t op : ops)
    for (const OpUse& u : index.uses(op)) {
      if (!u.read || u.block == made || index.block(u.block).last >= first) continue;
      if (index.version_at(u.block, first) != u.version) continue;  // overwritten since: not followed
      inputs.emplace_back(u.block, index.overwrite_chain(u.block, op));
    }
  return inputs;
}

// The stretches' least added time, as one linear program.
LinkWindowBound solve_stretches(const TraceIndex& index, const std::vector<Stretch>& stretches, double h2d_ms_per_byte,
                                int solver_seconds) {
  LinkWindowBound result;
  // Columns: x0 the added time of them all; per stretch its added time, per block read its
  // swapped and rebuilt shares, per op its chains replay a count, per freed input whether it is
  // held at the start or revived.
  std::size_t count = 1;
  std::vector<StretchColumns> columns(stretches.size());
  for (std::size_t w = 0; w < stretches.size(); ++w) {
    const Stretch& s = stretches[w];
    StretchColumns& c = columns[w];
    c.added = count++;
    std::vector<std::uint32_t> pending;
    // Follows a freed block (once); whether it is followed.
    auto follow = [&](std::uint32_t block, std::vector<std::uint32_t> ops) {
      if (c.freed.count(block)) return true;
      if (c.freed.size() >= kMaxFreed) return false;
      StretchColumns::Freed& f = c.freed[block];
      f.held = count++;
      f.revived = count++;
      for (std::uint32_t op : ops)
        if (!c.replays.count(op)) c.replays.emplace(op, count++);
      f.ops = std::move(ops);
      pending.push_back(block);
      return true;
    };
    for (std::uint32_t b : s.reads) {
      StretchColumns::Read read;
      read.block = b;
      const bool used_at_start = index.use_at(s.first, b) != nullptr;  // op a reads it: on the device then
      if (!used_at_start) read.swap = count++;
      // Nothing older than op 0 was made in the step: only what the step made is rebuilt.
      std::vector<FreedInput> freed;
      if (!used_at_start && s.first > 0) {
        std::uint32_t u = s.first;
        while (u < s.last && !index.use_at(u, b)) ++u;
        read.chain = forced_chain(index, b, s.first - 1, u, &freed);
      }
      if (!read.chain.empty()) {
        read.regen = count++;
        for (std::uint32_t op : read.chain)
          if (!c.replays.count(op)) c.replays.emplace(op, count++);
        for (const FreedInput& f : freed)
          if (f.needed_for.empty() && follow(f.block, f.ops)) read.freed.push_back(f.block);
      }
      c.reads.push_back(std::move(read));
    }
    while (!pending.empty()) {
      const std::uint32_t block = pending.back();
      pending.pop_back();
      for (auto& [input, ops] : freed_inputs(index, c.freed.at(block).ops, block, s.first))
        if (follow(input, std::move(ops))) c.freed.at(block).inputs.push_back(input);
    }
  }
  auto write = [&](std::ostream& out) {
    out.precision(10);
    out << "Minimize\n obj: x0";
    for (std::size_t k = 1; k < count; ++k) out << " + 0 x" << k;
    out << "\nSubject To\n total: x0";
    for (const StretchColumns& c : columns) out << " - x" << c.added;
    out << " >= 0\n";
    for (std::size_t w = 0; w < stretches.size(); ++w) {
      const Stretch& s = stretches[w];
      const StretchColumns& c = columns[w];
      // What is not on the device at the start, with what rebuilds hold there, covers the
      // reads beyond the room.
      out << " room" << w << ": 0 x" << c.added;
      for (const auto& r : c.reads) {
        const double mib = double(index.size(r.block)) / kMiB;
        if (r.swap) out << " + " << mib << " x" << r.swap;
        if (r.regen) out << " + " << mib << " x" << r.regen;
      }
      for (const auto& [block, f] : c.freed) out << " - " << double(index.size(block)) / kMiB << " x" << f.held;
      out << " >= " << (s.read_bytes - s.room_bytes) / kMiB << "\n";
      out << " link" << w << ": x" << c.added;
      for (const auto& r : c.reads)
        if (r.swap) out << " - " << double(index.size(r.block)) * h2d_ms_per_byte << " x" << r.swap;
      out << " >= " << -s.compute_ms << "\n";
      out << " replay" << w << ": x" << c.added;
      for (const auto& [op, column] : c.replays) out << " - " << double(index.duration(op)) / kMs << " x" << column;
      out << " >= 0\n";
      std::size_t row = 0;
      for (const auto& r : c.reads) {
        if (r.swap && r.regen) out << " one" << w << "_" << row++ << ": x" << r.swap << " + x" << r.regen << " <= 1\n";
        if (!r.regen) continue;
        for (std::uint32_t op : r.chain) out << " chain" << w << "_" << row++ << ": x" << c.replays.at(op) << " - x" << r.regen << " >= 0\n";
        for (std::uint32_t f : r.freed)
          out << " freed" << w << "_" << row++ << ": x" << c.freed.at(f).held << " + x" << c.freed.at(f).revived << " - x"
              << r.regen << " >= 0\n";
      }
      for (const auto& [block, f] : c.freed) {
        for (std::uint32_t op : f.ops)
          out << " revive" << w << "_" << row++ << ": x" << c.replays.at(op) << " - x" << f.revived << " >= 0\n";
        for (std::uint32_t input : f.inputs)
          out << " input" << w << "_" << row++ << ": x" << c.freed.at(input).held << " + x" << c.freed.at(input).revived << " - x"
              << f.revived << " >= 0\n";
      }
    }
    out << "Bounds\n";
    for (const StretchColumns& c : columns) {
      for (const auto& r : c.reads) {
        if (r.swap) out << " 0 <= x" << r.swap << " <= 1\n";
        if (r.regen) out << " 0 <= x" << r.regen << " <= 1\n";
      }
      for (const auto& [block, f] : c.freed) {
        out << " 0 <= x" << f.held << " <= 1\n";
        out << " 0 <= x" << f.revived << " <= " << (f.ops.empty() ? 0 : 1) << "\n";  // nothing remakes it: held
      }
    }
    out << "End\n";
  };
  const LpOutcome outcome = solve_lp(write, count, solver_seconds, true);
  if (outcome.status == LpOutcome::Status::infeasible) {
    result.unreachable = true;
    return result;
  }
  if (outcome.status != LpOutcome::Status::solved || !outcome.optimal) {
    result.message = outcome.status == LpOutcome::Status::solved ? "the LP solver stopped before the optimum" : outcome.message;
    return result;
  }
  result.added_ms = std::max(0.0, outcome.values[0]);
  for (std::size_t w = 0; w < stretches.size(); ++w) {
    const Stretch& s = stretches[w];
    LinkWindow window;
    window.first = s.first;
    window.last = s.last;
    window.read_bytes = s.read_bytes;
    window.room_bytes = s.room_bytes;
    window.compute_ms = s.compute_ms;
    window.added_ms = std::max(0.0, outcome.values[columns[w].added]);
    for (const auto& r : columns[w].reads)
      if (r.regen) window.rebuilt_bytes += outcome.values[r.regen] * double(index.size(r.block));
    result.windows.push_back(window);
  }
  return result;
}

}  // namespace

LinkWindowBound link_window_bound(const TraceIndex& index, std::uint64_t budget, double h2d_bytes_per_s, int solver_seconds) {
  LinkWindowBound best;
  if (h2d_bytes_per_s <= 0) return best;
  const double h2d_ms_per_byte = 1e3 / h2d_bytes_per_s;
  // Which stretches bind depends on what rebuilds cost, known only once solved: the choice is
  // made with the data the step made counted whole, at a part, and not at all, and the best
  // solved choice kept (any choice is a bound).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> tried;
  for (double made_weight : {1.0, 0.5, 0.25, 0.0}) {
    const std::vector<Stretch> stretches = choose_stretches(index, budget, h2d_ms_per_byte, made_weight);
    if (stretches.empty()) continue;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;
    for (const Stretch& s : stretches) spans.emplace_back(s.first, s.last);
    if (spans == tried) continue;
    tried = spans;
    LinkWindowBound solved = solve_stretches(index, stretches, h2d_ms_per_byte, solver_seconds);
    if (solved.unreachable) return solved;
    if (!solved.message.empty()) {
      if (best.windows.empty()) best.message = solved.message;
      continue;
    }
    if (best.windows.empty() || solved.added_ms > best.added_ms) best = std::move(solved);
  }
  return best;
}

}  // namespace delta::planner::relaxation
