// The linear program behind overhead_lower_bound (lower_bound.hpp), private to bound/: its
// gaps and columns, the checkpoints it follows op by op, and the optimum explained. Its parts,
// each in a file of its own:
//   gap_chains.cpp    what every regeneration of a gap must replay, and the freed inputs it reads;
//   checkpoints.cpp   which ops are followed block by block, and their rows (cover, lanes, delays);
//   explanation.cpp   the optimum in op names and categories (BoundExplanation);
//   lower_bound.cpp   the program: columns, coverage, the delay chain; solved, and read back.
#pragma once

#include "bound/lower_bound.hpp"
#include "trace/trace_index.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace delta::planner::relaxation {

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
  // False where `ops` read data gone where the rebuild runs (revival_reads_gone): only a
  // retention serves then.
  bool revivable = true;
};

// Whether replaying `ops` (the writes that made the freed block `freed`) at op `at` would read
// a block at a version gone by then that no write of the step can make again: a parameter the
// optimizer updated in place, read by the forward op that made an activation. The simulator
// replays an op only on the data it first read, so such a block is revived before that update
// or not at all.
bool revival_reads_gone(const TraceIndex& index, const std::vector<std::uint32_t>& ops, std::uint32_t freed, std::uint32_t at);
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
    // Further gaps that move with `gap` as one: blocks that cannot be regenerated, written last
    // and used next by the same ops, meet the same rows, so one column serves them all (an
    // optimizer's lists: hundreds of blocks each, one share). `bytes` counts them all.
    std::vector<std::size_t> alike;
    std::uint64_t bytes = 0;
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
  // The delay before the op is at least the replays that surely run before it (of gaps that
  // end by then): the compute stream runs them ahead of the op, so they are part of how late
  // it starts, and cannot stand in for the lateness its copies need after it.
  ReplayNeeds earlier_needs;
  std::map<std::uint32_t, std::size_t> earlier_replays;
  // Blocks the trace freed before the op that rebuilds after it read: per block, the column
  // of its retention across the op (its bytes held there) instead of its revival.
  std::map<std::uint32_t, std::size_t> retained;
  // Regenerations (column) that read a freed block no replay can make again after the op, and
  // the retentions of which one must hold it (its own, or one whose revival needs it).
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> retention_only;
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

// The rows of one checkpoint, as above, with `windows` lane windows each way.
void write_checkpoint(std::ostream& out, const Checkpoint& c, const std::vector<Gap>& gaps,
                      const std::vector<Columns>& columns, const TraceIndex& index, double excess, LaneRates lanes,
                      std::size_t windows, const DelayChain& delays);

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
                                        std::vector<FreedInput>* freed = nullptr);

// Any set of ops gives a bound; more ops a tighter and slower one. The ops in most excess, and
// others spread over the step. At each, the largest blocks (most of the bytes, at most
// kShared shares; blocks alike that no regeneration rebuilds share one) get shares of their
// own; at the op in most excess, every block does. Counted with
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
                                         LateNeeds& late);

// Rows "each op is replayed at least as often as any one block needs it": per (op, block), the
// op's replay count is at least the sum of the columns of that block's needs.
void write_replay_counts(std::ostream& out, const std::string& name, const std::map<std::uint32_t, std::size_t>& replays,
                         const ReplayNeeds& needs);

// The points a checkpoint's lane windows start at (the blocks' last writes, -1: none) and end
// at (their next uses, op_count(): the end of the step), `windows` of each at most.
std::pair<std::vector<std::int64_t>, std::vector<std::uint32_t>> window_points(const Checkpoint& c,
                                                                               const std::vector<Gap>& gaps,
                                                                               std::size_t windows);

// The link's windows (link_windows.cpp): stretches of ops that read more older data than the
// budget leaves room for when they start, the rest copied in or rebuilt within them; their
// least added time, solved as one linear program of its own (LinkWindow).
struct LinkWindowBound {
  double added_ms = 0;
  std::vector<LinkWindow> windows;
  bool unreachable = false;  // op a alone reads more than the budget leaves
  std::string message;       // why no bound (the solver failed); empty otherwise
};
LinkWindowBound link_window_bound(const TraceIndex& index, std::uint64_t budget, double h2d_bytes_per_s, double d2h_bytes_per_s,
                                  int solver_seconds);

// The linear optimum in op names: replays, and what is away at the op in most excess.
BoundExplanation explain(const std::vector<double>& values, const std::vector<Gap>& gaps, const std::vector<Columns>& columns,
                         const std::vector<Checkpoint>& checkpoints,
                         const std::map<std::uint32_t, std::size_t>& replay_column, const std::vector<double>& excess,
                         const TraceIndex& index);

// The optimum's whole-gap shares at a few ops over the budget, by category (StepPoint).
std::vector<BoundExplanation::StepPoint> along_step(const std::vector<double>& values, const std::vector<Gap>& gaps,
                                                    const std::vector<Columns>& columns, const std::vector<double>& excess,
                                                    std::uint32_t peak_op, const TraceIndex& index);

}  // namespace delta::planner::relaxation
