// The room-maker of the lane gap fill (lane_gap_fill.hpp): room over a stretch of ops for a copy
// back pulled earlier, made where the plan has none by rebuilding blocks idle there, and taken
// back when it cannot be made. Tracks what the pulled copies add and the rebuilds free at each
// op, over what the plan held as it ran.
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace delta::planner::lane_room {

// A rebuild that makes room: block `block` (an index), idle between ops `after` and `before`,
// rebuilt at `before` by its version chain from `inputs` (indices), at `cost_ns` of replays.
struct Rebuild {
  std::uint32_t block = 0, after = 0, before = 0;
  std::int64_t cost_ns = 0;
  std::vector<std::uint32_t> inputs;
};

// The rebuild of each block over each idle gap, made once for the whole pass: it depends on
// the trace alone, and the room-maker asks for the same few hundred blocks at every op it
// scans (a search tree of them was over half of the pass's time on GPT2-XL).
class RebuildCache {
 public:
  RebuildCache(const TraceIndex& index, std::size_t max_chain) : index_(index), max_chain_(max_chain), by_block_(index.blocks().size()) {}

  // The block's rebuild over its idle gap, if its chain is short and replayable there. Valid
  // until the next request for the same block (a caller scanning one op's idle blocks asks for
  // each once).
  const std::optional<Rebuild>& of(const TraceIndex::IdleAcross& idle) {
    std::vector<Entry>& entries = by_block_[idle.block];  // a block has a few gaps: scanned
    for (const Entry& e : entries)
      if (e.before == idle.before) return e.rebuild;
    entries.push_back({idle.before, make(idle)});
    return entries.back().rebuild;
  }

 private:
  struct Entry {
    std::uint32_t before = 0;
    std::optional<Rebuild> rebuild;
  };
  std::optional<Rebuild> make(const TraceIndex::IdleAcross& idle) const;

  const TraceIndex& index_;
  std::size_t max_chain_;
  std::vector<std::vector<Entry>> by_block_;
};

// Bytes added over ranges of ops, read op by op: a difference array, with a Fenwick tree over
// it for the sum up to any op. A rebuild frees its block over its whole idle gap (thousands of
// ops for AdamW's state), so adding op by op was a fifth of the pass.
class RangeAdds {
 public:
  explicit RangeAdds(std::size_t n) : diff_(n + 1, 0), tree_(n + 2, 0) {}
  // Adds `v` at every op of [lo, hi).
  void add(std::size_t lo, std::size_t hi, std::int64_t v) {
    hi = std::min(hi, diff_.size() - 1);
    if (lo >= hi) return;
    point(lo, v);
    point(hi, -v);
  }
  // What is added at op k.
  std::int64_t at(std::size_t k) const {
    std::int64_t sum = 0;
    for (std::size_t i = k + 1; i > 0; i -= i & (~i + 1)) sum += tree_[i];
    return sum;
  }
  // The difference between op k and op k-1 (a walk over ops keeps its sum so).
  std::int64_t step(std::size_t k) const { return diff_[k]; }

 private:
  void point(std::size_t k, std::int64_t v) {
    diff_[k] += v;
    for (std::size_t i = k + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += v;
  }
  std::vector<std::int64_t> diff_, tree_;
};

// Room over ops for copies pulled earlier, made by rebuilding blocks idle there. Tracks what
// the pulled copies add and the rebuilds free at each op, over what the plan held as it ran.
class RoomMaker {
 public:
  RoomMaker(const PlanRequest& request, const plan::Plan& plan, const SimulationResult& seen, RebuildCache& rebuilds,
            bool idle_pages_are_room);

  // What a copy of `bytes` takes of the budget: whole pages where the allocator places it.
  std::uint64_t footprint(std::uint64_t bytes) const {
    if (!request_.through_allocator) return bytes;
    return (bytes + plan::kSwapGranularity - 1) / plan::kSwapGranularity * plan::kSwapGranularity;
  }

  // Makes room for `bytes` over ops [from, to) with rebuilds whose replays cost at most
  // `replay_budget_ns` in all. On failure nothing changes, and the op where no rebuild could
  // make the room (or the budget ran out) is returned: no issue op before it can work either.
  std::optional<std::uint32_t> make_room(std::uint32_t from, std::uint32_t to, std::uint64_t bytes, std::int64_t replay_budget_ns);

  // Writes the rebuilds chosen into `plan`.
  void write(plan::Plan& plan) const;

 private:
  // What the plan held at op k as it ran (its live bytes with replays', or what the allocator
  // mapped, whichever is more), before the moves made here; with idle_pages_are_room_, less the
  // idle cached pages among what it mapped, which it takes for its next mapping, at the cap too.
  std::int64_t held(std::uint32_t k) const {
    const OpMoment& m = seen_.timeline[k];
    const std::uint64_t idle = idle_pages_are_room_ ? std::min(m.unused_page_bytes, m.reserved_bytes) : 0;
    return static_cast<std::int64_t>(std::max(m.peak_bytes, m.reserved_bytes - idle));
  }

  // The rebuild of a block idle across op k that costs least per byte and per op of [from, to)
  // it frees: a block the plan keeps resident, made in the step, whose version chain of at
  // most max_chain ops rebuilds it before its next use from inputs the plan keeps resident,
  // and that no rebuild reads.
  const Rebuild* cheapest_across(std::uint32_t k, std::uint32_t from, std::uint32_t to);

  // Whether the plan has block `b` (an index) away at some op of [from, to] (a discard: from
  // its release on).
  bool away_within(std::uint32_t b, std::uint64_t from, std::uint64_t to) const;

  void choose(const Rebuild& r);
  // Takes back the last rebuild chosen, as choose() made it.
  void unchoose();
  // Counts rebuild `r` in (sign 1) or out (sign -1): the bytes it frees, what it reads, its cost.
  void count(const Rebuild& r, int sign);

  const PlanRequest& request_;
  const TraceIndex& index_;
  const SimulationResult& seen_;
  RebuildCache& rebuilds_;
  bool idle_pages_are_room_;
  std::vector<const std::vector<plan::Interval>*> moved_;  // the plan's intervals, by block index (null: none)
  // What the moves so far changed (a failed make_room takes back the rebuilds it chose):
  RangeAdds change_;                              // per op: bytes the pulled copies add, less what the rebuilds free
  std::vector<std::uint32_t> read_by_rebuilds_;   // per block index: the rebuilds that read it
  std::vector<std::uint8_t> rebuilt_;             // per block index: rebuilt here
  std::vector<Rebuild> chosen_;
  std::int64_t spent_ns_ = 0;
};

}  // namespace delta::planner::lane_room
