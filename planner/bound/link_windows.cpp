// The link's windows (relaxation.hpp): a bound of its own, beside the linear program's; here a
// choice of stretches solved.
//
// Take a stretch of ops W = [a, b]. When op a starts, at most the budget is on the device, and
// op a's own new blocks are among it. Every block W uses that holds bytes before a (made before
// it, live at the start, or placed before its first write) and that is not on the device then
// must arrive within W, as must what the step leaves live where W runs to its end: copied in
// over the host-to-device lane, or rebuilt by replays on the compute stream. So W
// lasts at least its compute plus those replays, and at least the copies' time on the lane;
// its added time is the larger excess. A block copied in is back before the first op of W that
// uses it starts, by a copy that starts after op a ends, so the lane's time for every block due
// by an op is also at most the compute between and the time added. Stretches that do not overlap add up. Where one follows
// another at once, state live before the step that the second reads and the first does not
// is on the device when the first starts, or comes back over the first's lane (a copy may run
// on into the second, its room held there), or is still away when the second starts: the
// first's room counts it, and what it has away of it returns in one of the two. The linear
// program counts a small block away at no cost of the link wherever it does not follow it op
// by op, and no op of an optimizer split into its launches reads whole lists: there this bound
// is the tighter one (two stretches of AdamW's updates each read every list).
//
// A choice of stretches (link_window_search.cpp) is solved as one small linear program that
// may also rebuild what can be rebuilt: a regeneration replays the block's forced chain within W, and each input of it the
// trace freed before a is held when W starts (its bytes count against the budget there) or
// revived within W (its producers replayed, their own freed inputs in turn). A revival that
// reads a version gone by a (a parameter the optimizer updated in place before W, read by the
// forward op that made an activation) cannot run in W: that input is held, or nothing is
// rebuilt through it.
#include "bound/relaxation.hpp"

#include "bound/link_window_stretches.hpp"
#include "bound/lp_solver.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

namespace delta::planner::relaxation {
namespace {

constexpr double kMs = 1e6, kMiB = double(1 << 20);

// Freed inputs followed per stretch at most: past them, what a revival reads is taken as there.
constexpr std::size_t kMaxFreed = 20000;

// One stretch's columns in the linear program.
struct StretchColumns {
  std::size_t added = 0;
  std::size_t waits_before = 0;  // the time added between the stretch before (or the step's start) and this one
  // Copies due before an op: per op of the stretch that first reads a block away at its start
  // (in order), the lane's time for every such block first read there or before.
  std::vector<std::pair<std::uint32_t, std::size_t>> due;
  struct Read {
    std::uint32_t block = 0;
    // Columns; 0: none. Op a's own reads are on the device when it starts (no swap, no rebuild).
    std::size_t swap = 0, regen = 0;
    std::uint32_t first_use = 0;  // the first op of the stretch that uses it; 0: none (kept to the end only)
    std::vector<std::uint32_t> chain;
    std::vector<std::uint32_t> freed;  // the blocks the chain reads that the trace freed before a
  };
  std::vector<Read> reads;
  // Blocks live before the step that the stretch after reads, where it follows at once, and
  // this one does not: away when this one starts (counted in its room), they are copied back
  // within it, or by a copy that ends in the next (holding its room when the next starts; the
  // lane's time in the next, done before the next first uses the block), or are still away
  // when the next starts.
  struct Later {
    std::uint32_t block = 0;
    std::size_t away = 0, back = 0, late = 0;
  };
  std::vector<Later> later;
  std::map<std::uint32_t, std::size_t> replays;  // op -> replay count column
  // A block the trace freed before the stretch that a rebuild reads: held when the stretch
  // starts, or revived within it by replaying the writes that made it, which read further
  // freed blocks (`inputs`), held or revived in turn, as deep as the step goes.
  struct Freed {
    std::vector<std::uint32_t> ops, inputs;
    std::size_t held = 0, revived = 0;
    bool revivable = true;  // else only held (revival_reads_gone)
  };
  std::map<std::uint32_t, Freed> freed;
  // Freed blocks held when this stretch starts only if held or revived in the one before.
  std::vector<std::uint32_t> held_since_before;
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

// Where stretch w + 1 follows w at once: what w has away of the state w + 1 reads is back by
// w's end, late (a copy running on into w + 1), or away when w + 1 starts (its share there).
void write_later_rows(std::ostream& out, const std::vector<StretchColumns>& columns, std::size_t w) {
  const StretchColumns& c = columns[w];
  if (!c.later.empty()) {
    std::map<std::uint32_t, const StretchColumns::Read*> next;
    for (const auto& r : columns[w + 1].reads) next[r.block] = &r;
    for (std::size_t k = 0; k < c.later.size(); ++k) {
      const auto& l = c.later[k];
      out << " later" << w << "_" << k << ": x" << l.back << " + x" << l.late;
      if (const auto* r = next.at(l.block); r) {
        if (r->swap) out << " + x" << r->swap;
        if (r->regen) out << " + x" << r->regen;
      }
      out << " - x" << l.away << " >= 0\n";
    }
  }
}

// The late copies of the stretch before w, done before w first uses each block (or by the
// step's end), behind the copies due by then.
void write_late_rows(std::ostream& out, const TraceIndex& index, const std::vector<Stretch>& stretches,
                     const std::vector<StretchColumns>& columns, std::size_t w, double h2d_ms_per_byte) {
  const Stretch& s = stretches[w];
  const StretchColumns& c = columns[w];
  if (w > 0)
    for (std::size_t k = 0; k < columns[w - 1].later.size(); ++k) {
      const auto& l = columns[w - 1].later[k];
      std::uint32_t u = s.first;
      while (u < s.last && !index.use_at(u, l.block)) ++u;
      // Kept to the step's end only, never used here: due by the end, after the last op.
      const std::uint32_t by = index.use_at(u, l.block) ? u : s.last + 1;
      out << " late_by" << w << "_" << k << ": x" << c.added;
      const auto due = std::find_if(c.due.rbegin(), c.due.rend(), [&](const auto& d) { return d.first <= by; });
      if (due != c.due.rend()) out << " - x" << due->second;
      out << " - " << double(index.size(l.block)) * h2d_ms_per_byte << " x" << l.late
          << " >= " << -double(index.compute_between(s.first, by)) / kMs << "\n";
    }
}

}  // namespace

LinkWindowBound solve_stretches(const TraceIndex& index, const std::vector<Stretch>& stretches, const LinkRates& rates,
                                int solver_seconds) {
  const double h2d_ms_per_byte = rates.h2d_ms_per_byte;
  LinkWindowBound result;
  // Columns: x0 the added time of them all; per stretch its added time, per block read its
  // swapped and rebuilt shares, per op its chains replay a count, per freed input whether it is
  // held at the start or revived.
  std::size_t count = 1;
  std::vector<StretchColumns> columns(stretches.size());
  std::vector<std::uint32_t> pending;
  // Follows a freed block in stretch w (once); whether it is followed.
  auto follow = [&](std::size_t w, std::uint32_t block, std::vector<std::uint32_t> ops) {
    StretchColumns& c = columns[w];
    if (c.freed.count(block)) return true;
    if (c.freed.size() >= kMaxFreed) return false;
    StretchColumns::Freed& f = c.freed[block];
    f.held = count++;
    f.revived = count++;
    // Revived within the stretch: after its first op has run (before it, the block would be
    // on the device when the stretch starts).
    f.revivable = !ops.empty() && !revival_reads_gone(index, ops, block, stretches[w].first + 1);
    for (std::uint32_t op : ops)
      if (!c.replays.count(op)) c.replays.emplace(op, count++);
    f.ops = std::move(ops);
    pending.push_back(block);
    return true;
  };
  // Follows what the revivals of stretch w's pending blocks read, in turn.
  auto follow_inputs = [&](std::size_t w) {
    StretchColumns& c = columns[w];
    while (!pending.empty()) {
      const std::uint32_t block = pending.back();
      pending.pop_back();
      for (auto& [input, ops] : freed_inputs(index, c.freed.at(block).ops, block, stretches[w].first))
        if (follow(w, input, std::move(ops))) c.freed.at(block).inputs.push_back(input);
    }
  };
  for (std::size_t w = 0; w < stretches.size(); ++w) {
    const Stretch& s = stretches[w];
    StretchColumns& c = columns[w];
    c.added = count++;
    c.waits_before = count++;
    std::map<std::uint32_t, std::uint32_t> first_use;
    for (std::uint32_t u = s.last + 1; u-- > s.first;)
      for (const OpUse& use : index.uses(u)) first_use[use.block] = u;
    std::set<std::uint32_t> due_ops;
    for (std::uint32_t b : s.reads) {
      StretchColumns::Read read;
      read.block = b;
      const bool used_at_start = index.use_at(s.first, b) != nullptr;  // op a reads it: on the device then
      if (!used_at_start) read.swap = count++;
      if (const auto it = first_use.find(b); it != first_use.end() && !used_at_start) {
        read.first_use = it->second;
        due_ops.insert(it->second);
      }
      // Nothing older than op 0 was made in the step: only what the step made is rebuilt.
      if (!used_at_start && s.first > 0) {
        std::uint32_t u = s.first;
        while (u < s.last && !index.use_at(u, b)) ++u;
        read.chain = forced_chain(index, b, s.first - 1, u);
      }
      if (!read.chain.empty()) {
        read.regen = count++;
        for (std::uint32_t op : read.chain)
          if (!c.replays.count(op)) c.replays.emplace(op, count++);
        // Every freed input, also one that no write can make again (held, then).
        for (auto& [input, ops] : freed_inputs(index, read.chain, b, s.first))
          if (std::find(read.freed.begin(), read.freed.end(), input) == read.freed.end() && follow(w, input, std::move(ops)))
            read.freed.push_back(input);
      }
      c.reads.push_back(std::move(read));
    }
    for (std::uint32_t u : due_ops) c.due.emplace_back(u, count++);
    follow_inputs(w);
  }
  // A block live before the step and not written since can only be copied (no replay makes
  // what the step started with): one the next stretch reads, away when this one starts,
  // returns over this one's lane or is away at the next.
  for (std::size_t w = 0; w + 1 < stretches.size(); ++w) {
    if (stretches[w].last + 1 != stretches[w + 1].first) continue;
    const std::set<std::uint32_t> own(stretches[w].reads.begin(), stretches[w].reads.end());
    for (std::uint32_t b : stretches[w + 1].reads) {
      const BlockInfo& info = index.block(b);
      const bool as_it_started = info.writes.empty() || info.writes.front() >= stretches[w + 1].first;
      if (info.from_start && as_it_started && !own.count(b) && index.size(b) > 0) columns[w].later.push_back({b, count++, count++, count++});
    }
  }
  // A freed block held when a stretch starts was on the device since its free, or revived
  // since (the simulator neither copies a freed block out nor back): freed before the stretch
  // before, and not revivable between the two, it is held when that one starts too, its bytes
  // counted there, or revived within it. From the last stretch back, so that a block held
  // through three stretches is followed through all of them.
  for (std::size_t w = stretches.size(); w-- > 1;) {
    const Stretch& earlier = stretches[w - 1];
    for (const auto& [block, f] : columns[w].freed) {
      if (index.block(block).last >= earlier.first) continue;
      if (!f.ops.empty() && !revival_reads_gone(index, f.ops, block, earlier.last + 1)) continue;  // revivable between
      if (follow(w - 1, block, f.ops)) columns[w].held_since_before.push_back(block);
    }
    follow_inputs(w - 1);
  }
  // The op after which the data a block holds when op `a` starts came to be: its last write
  // before, else its placement (op 0 for a block live before the step: the simulator starts a
  // step with no host copies). Only after it can a copy out be current.
  auto made_at = [&](std::uint32_t block, std::uint32_t a) -> std::uint32_t {
    const BlockInfo& info = index.block(block);
    const auto next = std::lower_bound(info.writes.begin(), info.writes.end(), a);
    if (next != info.writes.begin()) return *(next - 1);
    return info.from_start ? 0 : info.first;
  };
  // What is away when stretch w starts, in data made since op `since`, was copied out after it
  // came to be and before the stretch, over the device-to-host lane (a swap copies out even a
  // block no op has written yet): the time from `since` to the stretch's start (its compute,
  // the stretches between and the waits) holds those copies. Since the stretch before starts,
  // and since the step's start.
  auto copied_out_rows = [&](std::ostream& out, std::size_t w) {
    const std::uint32_t a = stretches[w].first;
    auto row = [&](std::uint32_t since, const std::string& name, auto&& time_between) {
      out << " " << name << ": x" << columns[w].waits_before;
      time_between();
      for (const auto& r : columns[w].reads) {
        if (!r.swap) continue;
        if (made_at(r.block, a) < since) continue;  // a host copy made before `since` may be current
        out << " - " << double(index.size(r.block)) * rates.d2h_ms_per_byte << " x" << r.swap;
      }
      for (const auto& l : columns[w].later)
        if (made_at(l.block, a) >= since) out << " - " << double(index.size(l.block)) * rates.d2h_ms_per_byte << " x" << l.away;
      out << " >= " << -double(index.compute_between(since, a)) / kMs << "\n";
    };
    // Since the step's start: every stretch before and every wait.
    row(0, "out" + std::to_string(w), [&] {
      for (std::size_t v = 0; v < w; ++v) out << " + x" << columns[v].added << " + x" << columns[v].waits_before;
    });
    // Since the stretch before starts: it, and the wait after it.
    if (w > 0) row(stretches[w - 1].first, "out_after" + std::to_string(w), [&] { out << " + x" << columns[w - 1].added; });
  };
  auto write = [&](std::ostream& out) {
    out.precision(10);
    out << "Minimize\n obj: x0";
    for (std::size_t k = 1; k < count; ++k) out << " + 0 x" << k;
    out << "\nSubject To\n total: x0";
    for (const StretchColumns& c : columns) out << " - x" << c.added << " - x" << c.waits_before;
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
      double later_bytes = 0;
      for (const auto& l : c.later) {
        out << " + " << double(index.size(l.block)) / kMiB << " x" << l.away;
        later_bytes += double(index.size(l.block));
      }
      for (const auto& [block, f] : c.freed) out << " - " << double(index.size(block)) / kMiB << " x" << f.held;
      out << " >= " << (s.read_bytes + later_bytes - s.room_bytes) / kMiB << "\n";
      out << " link" << w << ": x" << c.added;
      for (const auto& r : c.reads)
        if (r.swap) out << " - " << double(index.size(r.block)) * h2d_ms_per_byte << " x" << r.swap;
      for (const auto& l : c.later) out << " - " << double(index.size(l.block)) * h2d_ms_per_byte << " x" << l.back;
      if (w > 0)
        for (const auto& l : columns[w - 1].later) out << " - " << double(index.size(l.block)) * h2d_ms_per_byte << " x" << l.late;
      out << " >= " << -s.compute_ms << "\n";
      write_later_rows(out, columns, w);
      // A block away when the stretch starts is back before the first op that uses it starts,
      // and its copy starts no sooner than op a ends (a copy back is issued between ops and
      // holds its room from then: one issued before op a would have the block on the device
      // when op a starts); the lane carries one copy at a time: whatever is due by an op has had
      // the compute between and the time added so far, at most the stretch's. (The link row
      // above asks it of the stretch's end alone, from its start, where copies that ran on from
      // the stretch before also count.)
      for (std::size_t k = 0; k < c.due.size(); ++k) {
        const auto [op, column] = c.due[k];
        out << " due" << w << "_" << k << ": x" << column;
        if (k > 0) out << " - x" << c.due[k - 1].second;
        for (const auto& r : c.reads)
          if (r.swap && r.first_use == op) out << " - " << double(index.size(r.block)) * h2d_ms_per_byte << " x" << r.swap;
        out << " = 0\n";
        out << " due_by" << w << "_" << k << ": x" << c.added << " - x" << column
            << " >= " << -double(index.compute_between(s.first + 1, op)) / kMs << "\n";
      }
      // The same of them all, by the stretch's end: a copy back that op a waits for or that
      // only the step's end asks for starts no sooner either.
      out << " link_after" << w << ": x" << c.added;
      for (const auto& r : c.reads)
        if (r.swap) out << " - " << double(index.size(r.block)) * h2d_ms_per_byte << " x" << r.swap;
      out << " >= " << -double(index.compute_between(s.first + 1, s.last + 1)) / kMs << "\n";
      write_late_rows(out, index, stretches, columns, w, h2d_ms_per_byte);
      copied_out_rows(out, w);
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
      for (std::uint32_t block : c.held_since_before) {
        const StretchColumns::Freed& before = columns[w - 1].freed.at(block);
        out << " since" << w << "_" << row++ << ": x" << c.freed.at(block).held << " - x" << before.held << " - x"
            << before.revived << " <= 0\n";
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
      for (const auto& l : c.later)
        out << " 0 <= x" << l.away << " <= 1\n 0 <= x" << l.back << " <= 1\n 0 <= x" << l.late << " <= 1\n";
      for (const auto& [block, f] : c.freed) {
        out << " 0 <= x" << f.held << " <= 1\n";
        out << " 0 <= x" << f.revived << " <= " << (f.revivable ? 1 : 0) << "\n";  // else held
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
    for (const auto& l : columns[w].later) window.next_reads_bytes += double(index.size(l.block));
    window.compute_ms = s.compute_ms;
    window.added_ms = std::max(0.0, outcome.values[columns[w].added]);
    window.waits_before_ms = std::max(0.0, outcome.values[columns[w].waits_before]);
    for (const auto& r : columns[w].reads) {
      if (r.regen) window.rebuilt_bytes += outcome.values[r.regen] * double(index.size(r.block));
      if (r.swap) window.copied_bytes += outcome.values[r.swap] * double(index.size(r.block));
    }
    for (const auto& l : columns[w].later)
      window.copied_bytes += (outcome.values[l.back] + outcome.values[l.late]) * double(index.size(l.block));
    for (const auto& [block, f] : columns[w].freed) {
      window.held_bytes += outcome.values[f.held] * double(index.size(block));
      window.revived_bytes += outcome.values[f.revived] * double(index.size(block));
    }
    std::map<std::string, double> by_name;
    for (const auto& [op, column] : columns[w].replays) {
      const double ms = outcome.values[column] * double(index.duration(op)) / kMs;
      window.replay_ms += ms;
      if (ms > 0) by_name[index.trace().ops[op].name] += ms;
    }
    window.replays.assign(by_name.begin(), by_name.end());
    std::sort(window.replays.begin(), window.replays.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    result.windows.push_back(window);
  }
  return result;
}

}  // namespace delta::planner::relaxation
