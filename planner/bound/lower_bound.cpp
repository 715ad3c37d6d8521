#include "bound/lower_bound.hpp"

#include "bound/lp_solver.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <string>

namespace delta::planner {
namespace {

// One idle gap of a block: absent over ops (after, before).
struct Gap {
  std::uint32_t block;
  std::uint32_t after, before;       // `before` may be op_count(): the end of the step
  std::vector<std::uint32_t> chain;  // ops any regeneration replays; empty: cannot be regenerated
  std::int64_t written = -1;         // the block's last write up to `after` (-1: none): no copy out before it
};

// A block the trace has freed that a regeneration's replay reads: a plan revives it (replays
// `ops`, the writes that made it) or retains it past its free, holding its bytes meanwhile.
struct FreedInput {
  std::uint32_t block;
  std::vector<std::uint32_t> ops;
  // The freed inputs whose revival needs this one, nearest last (empty: the chain itself
  // reads it). Retaining any of them spares this one.
  std::vector<std::uint32_t> needed_for;
};

// The ops every regeneration of `block` in its idle gap (after, before) must replay. First its
// overwrite chain (the simulator requires the rebuilt block at its current version, and an
// update cannot read a block that is gone). Then, for every block those ops read whose version
// is gone at any point of the gap (overwritten since the read), the ops that rebuild the
// version read, and so on: the replay must make it first. Blocks the trace freed before the
// gap starts are not gone for every plan, since a plan may retain them: they are left out, or,
// where `freed` is given, listed there with the writes that made them (where retaining costs
// bytes, the caller charges one or the other). Empty when the block cannot be regenerated at
// all. Unlike TraceIndex::version_chain, a block not allocated by its first write qualifies,
// and inputs still allocated are not required to be resident or unchanged: a plan may rebuild
// them first (the bound stays below any plan).
std::vector<std::uint32_t> forced_chain(const TraceIndex& index, std::uint32_t block, std::uint32_t after, std::uint32_t before,
                                        std::vector<FreedInput>* freed = nullptr) {
  const BlockInfo& info = index.block(block);
  if (info.from_start || info.category == trace::Category::parameter || info.category == trace::Category::input) return {};
  std::vector<std::uint32_t> chain = index.overwrite_chain(block, before);
  if (chain.empty()) return {};
  constexpr std::size_t kMaxOps = 256;  // a longer closure is cut short: fewer forced ops, still a bound
  std::vector<std::uint32_t> rebuilt{block}, pending(chain);
  while (!pending.empty() && chain.size() < kMaxOps) {
    const std::uint32_t op = pending.back();
    pending.pop_back();
    for (const OpUse& u : index.uses(op)) {
      if (!u.read || std::find(rebuilt.begin(), rebuilt.end(), u.block) != rebuilt.end()) continue;
      if (index.version_at(u.block, after + 1) == u.version) {
        if (freed && index.block(u.block).last <= after) {
          rebuilt.push_back(u.block);
          std::vector<std::uint32_t> made = index.overwrite_chain(u.block, op);
          if (!made.empty()) freed->push_back({u.block, std::move(made), {}});  // else only retention serves
        }
        continue;
      }
      const std::vector<std::uint32_t> inner = index.overwrite_chain(u.block, op);
      if (inner.empty()) return {};  // its data cannot be made again: no regeneration works
      rebuilt.push_back(u.block);
      for (std::uint32_t p : inner)
        if (std::find(chain.begin(), chain.end(), p) == chain.end()) {
          chain.push_back(p);
          pending.push_back(p);
        }
    }
  }
  // A freed input is revived by replaying its writes, which may read blocks freed before the
  // gap too: those are revived or retained in turn (a few levels: fewer forced replays, still
  // a bound).
  constexpr std::size_t kMaxFreed = 64;
  for (std::size_t k = 0; freed && k < freed->size() && freed->size() < kMaxFreed; ++k) {
    if ((*freed)[k].needed_for.size() >= 4) continue;
    const FreedInput parent = (*freed)[k];
    for (std::uint32_t op : parent.ops)
      for (const OpUse& u : index.uses(op)) {
        if (!u.read || u.block == parent.block || index.block(u.block).last > after) continue;
        if (index.version_at(u.block, after + 1) != u.version) continue;  // overwritten since: not followed
        if (std::find(rebuilt.begin(), rebuilt.end(), u.block) != rebuilt.end() ||
            std::any_of(freed->begin(), freed->end(), [&](const FreedInput& f) { return f.block == u.block; }))
          continue;
        std::vector<std::uint32_t> made = index.overwrite_chain(u.block, op);
        if (made.empty()) continue;
        FreedInput child{u.block, std::move(made), parent.needed_for};
        child.needed_for.push_back(parent.block);
        freed->push_back(std::move(child));
      }
  }
  std::sort(chain.begin(), chain.end());
  return chain;
}

// The columns of a gap's shares over its whole gap.
struct Columns {
  std::size_t away;   // away somewhere in the gap, by any means (costs nothing by itself)
  std::size_t regen;  // regenerated somewhere in the gap; 0: it cannot be
};

// What each block needs replayed: (op, block) -> the columns of its regenerations that replay
// the op.
using ReplayNeeds = std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>>;

// An op at which the bound also follows, for every gap over it, whether the block is away at
// that very op, by swap or by regeneration (not only somewhere in its gap).
struct Checkpoint {
  struct Share {
    std::size_t gap, swap, regen;  // columns; regen == 0: none
  };
  std::uint32_t op = 0;
  std::vector<Share> shares;
  // The small blocks over the op count with their whole-gap shares (a weaker row, still a
  // bound), which keeps the LP small where thousands of blocks are live.
  std::vector<std::size_t> whole;
  // The delay accrued before the op (column): at most the added time, and at the ops in most
  // excess at most the added time less the replays that surely run after it, those of blocks
  // away there by regeneration and of gaps that start later (later_needs below).
  std::size_t delay = 0;
  ReplayNeeds later_needs;
  std::map<std::uint32_t, std::size_t> later_replays;
  // At the ops that touch whole lists, the delay before the op is at least the replays that
  // surely run before it (of gaps that end by then): the compute stream runs them ahead of
  // the op, so they are part of how late it starts, and cannot stand in for the lateness its
  // lists' copies need after it.
  ReplayNeeds earlier_needs;
  std::map<std::uint32_t, std::size_t> earlier_replays;
  // Blocks the trace freed before the op that rebuilds after it read: per block, the column
  // of its retention across the op (its bytes held there) instead of its revival.
  std::map<std::uint32_t, std::size_t> retained;
  // Where the delay is followed, the replays a retention would spare count as later ones in
  // proportion: columns (a, r, t) with a >= r - t, a in [0, 1], a among later_needs.
  struct Spared {
    std::size_t column, regen;
    std::vector<std::size_t> retentions;
  };
  std::vector<Spared> spared;                                       // op -> column
};

// A regeneration that keeps a block away at a checkpoint runs after it, when more of what its
// chain reads may be gone than at the start of the gap: those inputs' producers are replayed
// too. Per (op, gap), a column that is at least the gap's regeneration share at every
// checkpoint where the op is needed so.
struct LateNeed {
  std::size_t column;
  // Columns of r(gap, checkpoint), each less that of a retention that would spare the op (0:
  // none).
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> regen_shares;
};
using LateNeeds = std::map<std::pair<std::uint32_t, std::size_t>, LateNeed>;  // (op, gap)

// At most `count` values, evenly spread over the sorted `values`, the first and last included.
template <typename T>
std::vector<T> spread(std::vector<T> values, std::size_t count) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() <= count) return values;
  std::vector<T> out;
  for (std::size_t k = 0; k < count; ++k) out.push_back(values[k * (values.size() - 1) / (count - 1)]);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Any set of ops gives a bound; more ops a tighter and slower one. The ops in most excess, and
// others spread over the step. At each, the largest blocks (most of the bytes, at most
// kShared) get shares of their own; at the op in most excess, every block does. Counted with
// their whole-gap shares there, the small blocks' copies out escape the link's room before the
// peak: GPT2-XL in bfloat16 at batch 56 under an H200 has 180 GB of layer-norm, projection
// and GELU outputs over it, which the bound could count away at no cost (1.075 against 1.191
// with every block followed, solved faster too). So do the heaviest ops that touch whole lists
// of blocks (an optimizer's `_foreach_*` ops, kListUses and more): there the excess is small
// beside the hundreds of blocks of the other lists idle over the op, of a few MB each, and
// counted with whole-gap shares those covered it at no cost, while each list must come back
// over the link between two such ops (gpt2-large bfloat16 at 0.6 of its peak: 1.315 against
// 1.393 with every block followed there). Their columns are numbered from `count` on.
std::vector<Checkpoint> pick_checkpoints(const std::vector<Gap>& gaps, const std::vector<Columns>& columns,
                                         const std::vector<double>& excess, const TraceIndex& index, std::size_t& count,
                                         LateNeeds& late) {
  // At the op in most excess at most kSharedAtPeak (GPT2-XL has a few thousand blocks over it), so
  // that a trace with far more still gives a bound in reasonable time.
  constexpr std::size_t kSpread = 32, kShared = 256, kSharedAtPeak = 16'384;
  // Short traces afford more: every op in most excess also follows its delay.
  const std::size_t kMost = index.op_count() <= 1'000 ? 48 : 16;
  constexpr double kSharedBytes = 0.999;
  std::vector<std::uint32_t> over;
  for (std::uint32_t i = 0; i < excess.size(); ++i)
    if (excess[i] > 0) over.push_back(i);
  std::vector<std::uint32_t> picks = spread(over, kSpread);
  std::vector<std::uint32_t> by_excess(over);
  const std::size_t most = std::min(kMost, by_excess.size());
  std::partial_sort(by_excess.begin(), by_excess.begin() + most, by_excess.end(), [&](std::uint32_t a, std::uint32_t b) {
    return excess[a] != excess[b] ? excess[a] > excess[b] : a < b;
  });
  picks.insert(picks.end(), by_excess.begin(), by_excess.begin() + most);
  // And the ops over the budget that need the most bytes resident (an optimizer's `_foreach_*`
  // ops, each touching a whole list of state): what is away at each of them is idle there
  // alone, so the link carries a different set for each, in turn (the delay chain below).
  constexpr std::size_t kHeaviest = 16, kListUses = 256;
  std::vector<std::pair<double, std::uint32_t>> heavy;
  for (std::uint32_t op : over) {
    double touched = 0;
    for (const OpUse& u : index.uses(op)) touched += double(index.block(u.block).size);
    heavy.push_back({-touched, op});
  }
  const std::size_t heaviest = std::min(kHeaviest, heavy.size());
  std::partial_sort(heavy.begin(), heavy.begin() + heaviest, heavy.end());
  std::vector<std::uint32_t> lists;  // heaviest ops that touch whole lists: every block followed
  for (std::size_t k = 0; k < heaviest; ++k) {
    picks.push_back(heavy[k].second);
    if (index.uses(heavy[k].second).size() >= kListUses) lists.push_back(heavy[k].second);
  }
  std::sort(lists.begin(), lists.end());
  picks = spread(picks, picks.size());  // sorted, each once
  const std::vector<std::uint32_t> top = spread(std::vector<std::uint32_t>(by_excess.begin(), by_excess.begin() + most), most);
  std::vector<Checkpoint> out;
  auto size = [&](std::size_t g) { return index.block(gaps[g].block).size; };
  for (std::uint32_t op : picks) {
    Checkpoint c;
    c.op = op;
    const bool follow_delay = std::binary_search(top.begin(), top.end(), op);
    const bool every_block = (!by_excess.empty() && op == by_excess.front()) || std::binary_search(lists.begin(), lists.end(), op);
    std::vector<std::size_t> over_op;
    double bytes = 0;
    for (std::size_t g = 0; g < gaps.size(); ++g)
      if (gaps[g].after < op && op < gaps[g].before) {
        over_op.push_back(g);
        bytes += double(size(g));
      }
    std::stable_sort(over_op.begin(), over_op.end(), [&](std::size_t a, std::size_t b) { return size(a) > size(b); });
    double shared = 0;
    for (std::size_t g : over_op) {
      const bool small = every_block ? c.shares.size() >= kSharedAtPeak
                                     : c.shares.size() >= kShared || shared >= kSharedBytes * bytes;
      if (small) {
        c.whole.push_back(g);
        continue;
      }
      shared += double(size(g));
      Checkpoint::Share share{g, count++, 0};
      if (columns[g].regen) {
        std::vector<FreedInput> freed;
        const std::vector<std::uint32_t> chain = forced_chain(index, gaps[g].block, op, gaps[g].before, &freed);
        if (!chain.empty()) share.regen = count++;  // else no regeneration after op can rebuild it
        for (std::uint32_t replayed : chain) {
          if (follow_delay) c.later_needs[{replayed, gaps[g].block}].push_back(share.regen);
          if (std::binary_search(gaps[g].chain.begin(), gaps[g].chain.end(), replayed)) continue;
          late[{replayed, g}].regen_shares.push_back({share.regen, {}});
        }
        // A freed input is revived (its writes replayed) unless retained across op, or unless
        // one whose revival needs it is.
        if (share.regen)
          for (const FreedInput& f : freed) {
            auto held_at_op = [&](std::uint32_t b) { return index.block(b).last >= op; };
            // Still held at op: retaining it costs nothing there (nor reviving what it needs).
            if (held_at_op(f.block) || std::any_of(f.needed_for.begin(), f.needed_for.end(), held_at_op)) continue;
            std::vector<std::size_t> retentions;
            for (std::uint32_t b : f.needed_for) retentions.push_back(c.retained.at(b));
            auto [at, added] = c.retained.emplace(f.block, 0);
            if (added) at->second = count++;
            retentions.push_back(at->second);
            for (std::uint32_t replayed : f.ops) {
              if (std::binary_search(chain.begin(), chain.end(), replayed) ||
                  std::binary_search(gaps[g].chain.begin(), gaps[g].chain.end(), replayed))
                continue;
              late[{replayed, g}].regen_shares.push_back({share.regen, retentions});
              if (follow_delay) {
                c.spared.push_back({count++, share.regen, retentions});
                c.later_needs[{replayed, gaps[g].block}].push_back(c.spared.back().column);
              }
            }
          }
      }
      c.shares.push_back(share);
    }
    // Every checkpoint splits the added time into the delay before it (its copies out) and
    // after it (its copies back): a plan's delays only accrue, so the op starts at most E late,
    // and what it is late by is gone from the time after it. Without the split, a block away
    // only over the optimizer's last ops counted E for its copy out and E again for its copy
    // back.
    c.delay = count++;
    if (std::binary_search(lists.begin(), lists.end(), op)) {
      for (std::size_t g = 0; g < gaps.size(); ++g)
        if (gaps[g].before <= op && columns[g].regen)
          for (std::uint32_t replayed : gaps[g].chain) c.earlier_needs[{replayed, gaps[g].block}].push_back(columns[g].regen);
      for (const auto& [key, columns_needed] : c.earlier_needs) c.earlier_replays.emplace(key.first, 0);
      for (auto& [replayed, column] : c.earlier_replays) column = count++;
    }
    if (follow_delay) {
      for (std::size_t g = 0; g < gaps.size(); ++g)
        if (gaps[g].after >= op && columns[g].regen)
          for (std::uint32_t replayed : gaps[g].chain) c.later_needs[{replayed, gaps[g].block}].push_back(columns[g].regen);
      for (const auto& [key, columns_needed] : c.later_needs) c.later_replays.emplace(key.first, 0);
      for (auto& [replayed, column] : c.later_replays) column = count++;
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Rows "each op is replayed at least as often as any one block needs it": per (op, block), the
// op's replay count is at least the sum of the columns of that block's needs.
void write_replay_counts(std::ostream& out, const std::string& name, const std::map<std::uint32_t, std::size_t>& replays,
                         const ReplayNeeds& needs) {
  std::size_t row = 0;
  for (const auto& [key, columns] : needs) {
    out << name << row++ << ": x" << replays.at(key.first);
    for (std::size_t column : columns) out << " - x" << column;
    out << " >= 0\n";
  }
}

struct LaneRates {
  double d2h_ms_per_mib, h2d_ms_per_mib;
};

// Lane windows per checkpoint and direction. Each start left out lets the copies written from it
// on borrow the link's time before it, so the integer program, which has whole blocks to place
// and time to spend on it, takes (nearly) every start: on resnet32 at 0.2 of its peak the
// choice it finds with 8 moves 1,080 MB out between the first stage's second write (5.4 ms) and
// the peak (91.7 ms), which the link needs 90 ms for. The linear program gains little from them
// (1.1625 to 1.1626 there) and keeps a few, which it solves much faster.
constexpr std::size_t kLinearWindows = 8, kEveryWindow = 256;

// The rows of one checkpoint. The blocks away there cover its excess, each share within its
// whole-gap share. A block swapped away at op i was copied out after its last write and before
// op i, and is copied back between op i and its next use: those copies share one lane each
// way, within the compute in between plus the delay before op i (out) or after it (back);
// windows from the last writes and to the next uses are taken at `windows` points spread over
// them, the widest always. Where the delay is followed, it is the added time x0 less the
// replays surely run after op i, counted per op and block as in the whole step.
//
// Delays form a chain (`delays`: op -> the column of the delay before it, at every checkpoint
// and every window's end): a plan's delays only accrue, so a window has beyond its compute the
// delay before its end less the delay before its start, not the whole added time. A copy out
// written after another checkpoint cannot borrow the delay that checkpoint's copies spent
// before it, nor a copy back the delay spent after its use: the optimizer's ops, each with its
// own blocks away, pay for each set in turn.
using DelayChain = std::map<std::uint32_t, std::size_t>;

// The points a checkpoint's lane windows start at (the blocks' last writes, -1: none) and end
// at (their next uses, op_count(): the end of the step), `windows` of each at most.
std::pair<std::vector<std::int64_t>, std::vector<std::uint32_t>> window_points(const Checkpoint& c,
                                                                               const std::vector<Gap>& gaps,
                                                                               std::size_t windows) {
  std::vector<std::int64_t> starts;
  std::vector<std::uint32_t> ends;
  for (const Checkpoint::Share& s : c.shares) {
    starts.push_back(gaps[s.gap].written);
    ends.push_back(gaps[s.gap].before);
  }
  return {spread(starts, windows), spread(ends, windows)};
}

void write_checkpoint(std::ostream& out, const Checkpoint& c, const std::vector<Gap>& gaps,
                      const std::vector<Columns>& columns, const TraceIndex& index, double excess, LaneRates lanes,
                      std::size_t windows, const DelayChain& delays) {
  auto whole_mib = [&](std::size_t g) { return double(index.block(gaps[g].block).size) / double(1 << 20); };
  constexpr double kMs = 1e6, kMiB = double(1 << 20);
  const std::string name = " c" + std::to_string(c.op);
  auto mib = [&](const Checkpoint::Share& s) { return double(index.block(gaps[s.gap].block).size) / kMiB; };
  out << name << "cover:";
  for (const Checkpoint::Share& s : c.shares) {
    out << " + " << mib(s) << " x" << s.swap;
    if (s.regen) out << " + " << mib(s) << " x" << s.regen;
  }
  for (std::size_t g : c.whole) out << " + " << whole_mib(g) << " x" << columns[g].away;
  for (const auto& [block, column] : c.retained) out << " - " << double(index.block(block).size) / kMiB << " x" << column;
  if (c.shares.empty() && c.whole.empty() && c.retained.empty()) out << " 0 x0";
  out << " >= " << excess / kMiB << "\n";
  if (c.delay) {
    out << name << "delay: x0 - x" << c.delay;
    for (const auto& [replayed, column] : c.later_replays) out << " - " << double(index.duration(replayed)) / kMs << " x" << column;
    out << " >= 0\n";
    write_replay_counts(out, name + "later", c.later_replays, c.later_needs);
    if (!c.earlier_replays.empty()) {
      out << name << "lateness: x" << c.delay;
      for (const auto& [replayed, column] : c.earlier_replays) out << " - " << double(index.duration(replayed)) / kMs << " x" << column;
      out << " >= 0\n";
      write_replay_counts(out, name + "earlier", c.earlier_replays, c.earlier_needs);
    }
    for (std::size_t k = 0; k < c.spared.size(); ++k) {
      out << name << "spared" << k << ": x" << c.spared[k].column << " - x" << c.spared[k].regen;
      for (std::size_t retention : c.spared[k].retentions) out << " + x" << retention;
      out << " >= 0\n";
    }
  }
  for (std::size_t k = 0; k < c.shares.size(); ++k) {
    const Checkpoint::Share& s = c.shares[k];
    if (!s.regen) continue;
    out << name << "s" << k << ": x" << s.swap << " + x" << s.regen << " <= 1\n";
    out << name << "r" << k << ": x" << s.regen << " - x" << columns[s.gap].regen << " <= 0\n";
  }
  const auto [starts, ends] = window_points(c, gaps, windows);
  std::size_t row = 0;
  for (std::int64_t from : starts) {
    out << name << "d" << row++ << ":";
    for (const Checkpoint::Share& s : c.shares)
      if (gaps[s.gap].written >= from) out << " + " << mib(s) * lanes.d2h_ms_per_mib << " x" << s.swap;
    // The window opens when the last write `from` ends: the delay before it is spent.
    if (from >= 0) out << " + x" << delays.at(static_cast<std::uint32_t>(from));
    out << " - x" << c.delay << " <= " << double(index.compute_between(static_cast<std::size_t>(from + 1), c.op)) / kMs << "\n";
  }
  row = 0;
  for (std::uint32_t to : ends) {
    out << name << "h" << row++ << ":";
    for (const Checkpoint::Share& s : c.shares)
      if (gaps[s.gap].before <= to) out << " + " << mib(s) * lanes.h2d_ms_per_mib << " x" << s.swap;
    // The window closes when op `to` starts (the end of the step when `to` is op_count()).
    out << " - x" << (to < index.op_count() ? delays.at(to) : 0) << " + x" << c.delay;
    out << " <= " << double(index.compute_between(c.op, std::min<std::size_t>(to, index.op_count()))) / kMs << "\n";
  }
}

}  // namespace

// The linear optimum in op names: replays, and what is away at the op in most excess.
BoundExplanation explain(const std::vector<double>& values, const std::vector<Gap>& gaps, const std::vector<Columns>& columns,
                         const std::vector<Checkpoint>& checkpoints,
                         const std::map<std::uint32_t, std::size_t>& replay_column, const std::vector<double>& excess,
                         const TraceIndex& index) {
  constexpr double kTiny = 1e-6;
  BoundExplanation out;
  auto op_name = [&](std::uint32_t op) { return index.trace().ops[op].name; };
  auto made_by = [&](std::uint32_t block) {
    const BlockInfo& info = index.block(block);
    return info.producer >= 0 ? op_name(static_cast<std::uint32_t>(info.producer)) : std::string(trace::to_string(info.category));
  };
  for (const auto& [op, column] : replay_column) {
    if (values[column] <= kTiny) continue;
    out.replay_ms[op_name(op)] += values[column] * double(index.duration(op)) / 1e6;
    out.replay_count[op_name(op)] += values[column];
  }
  out.peak_op = static_cast<std::uint32_t>(std::max_element(excess.begin(), excess.end()) - excess.begin());
  out.excess_bytes = excess[out.peak_op];
  // The checkpoint nearest the peak (the op in most excess is always one).
  const Checkpoint* at = nullptr;
  for (const Checkpoint& c : checkpoints)
    if (c.op == out.peak_op) at = &c;
  if (!at) return out;
  for (const Checkpoint::Share& share : at->shares) {
    const double size = double(index.block(gaps[share.gap].block).size);
    const std::string name = made_by(gaps[share.gap].block);
    const double swapped = values[share.swap] > kTiny ? values[share.swap] : 0.0;
    const double regenerated = share.regen && values[share.regen] > kTiny ? values[share.regen] : 0.0;
    if (swapped > 0) out.swapped_bytes[name] += swapped * size;
    if (regenerated > 0) out.regenerated_bytes[name] += regenerated * size;
    if (swapped > 0 || regenerated > 0)
      out.peak_blocks.push_back({index.block(gaps[share.gap].block).id, swapped, regenerated});
  }
  for (std::size_t g : at->whole)
    if (values[columns[g].away] > kTiny)
      out.away_bytes[made_by(gaps[g].block)] += values[columns[g].away] * double(index.block(gaps[g].block).size);
  return out;
}

namespace {

// The optimum's whole-gap shares at a few ops over the budget, by category (StepPoint).
std::vector<BoundExplanation::StepPoint> along_step(const std::vector<double>& values, const std::vector<Gap>& gaps,
                                                    const std::vector<Columns>& columns, const std::vector<double>& excess,
                                                    std::uint32_t peak_op, const TraceIndex& index) {
  constexpr std::size_t kPoints = 8;
  constexpr double kTiny = 1e-6;
  std::vector<std::uint32_t> over;
  for (std::uint32_t i = 0; i < excess.size(); ++i)
    if (excess[i] > 0) over.push_back(i);
  std::vector<std::uint32_t> points = spread(over, kPoints);
  points.push_back(peak_op);
  points = spread(points, points.size());  // sorted, each once
  std::vector<BoundExplanation::StepPoint> out;
  for (std::uint32_t op : points) {
    BoundExplanation::StepPoint point;
    point.op = op;
    point.excess_bytes = excess[op];
    for (std::size_t g = 0; g < gaps.size(); ++g) {
      if (gaps[g].after >= op || op >= gaps[g].before) continue;
      const double away = values[columns[g].away];
      if (away <= kTiny) continue;
      const BlockInfo& info = index.block(gaps[g].block);
      const double rebuilt = columns[g].regen ? std::min(away, values[columns[g].regen]) : 0.0;
      const std::string category = trace::to_string(info.category);
      if (rebuilt > kTiny) point.regenerated_bytes[category] += rebuilt * double(info.size);
      if (away - rebuilt > kTiny) point.swapped_bytes[category] += (away - rebuilt) * double(info.size);
    }
    out.push_back(std::move(point));
  }
  return out;
}

}  // namespace

OverheadBound overhead_lower_bound(const PlanRequest& request, int solver_seconds, bool integer, IntegerSolver solver,
                                   bool fewest_moved) {
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
  LpOutcome outcome = solve_lp(write, count, solver_seconds);
  bool moved_fewest = false;
  if (fewest_moved && outcome.status == LpOutcome::Status::solved && outcome.optimal) {
    // The solver's tolerances: a hair above the optimum, which is still the bound reported.
    const double added = std::max(0.0, outcome.values[0]);
    added_at_most = added * (1.0 + 5e-4) + 1e-4;
    LpOutcome second = solve_lp(write, count, solver_seconds);
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
      bound.integer_message = solver_name + " proved no more than the linear bound";
    }
  } else {
    bound.integer_message = proved.message;
  }
  return bound;
}

}  // namespace delta::planner
