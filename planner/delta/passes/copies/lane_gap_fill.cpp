#include "delta/passes/copies/lane_gap_fill.hpp"

#include "common/parallel_for.hpp"
#include "common/plan_edits.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

// An idle stretch of the H2D lane: from the end of one copy back to the start of the next
// (`next`, an index into the lane's copies in order).
struct Gap {
  std::int64_t from_ns = 0, to_ns = 0;
  std::size_t next = 0;
};

// The H2D lane's copies, in the order they ran.
std::vector<const CopyMoment*> copies_back(const SimulationResult& seen) {
  std::vector<const CopyMoment*> lane;
  for (const CopyMoment& c : seen.copies)
    if (!c.to_host) lane.push_back(&c);
  std::stable_sort(lane.begin(), lane.end(), [](const CopyMoment* a, const CopyMoment* b) { return a->start_ns < b->start_ns; });
  return lane;
}

// The lane's idle stretches of at least `min_ns`, its head from the step's start included,
// longest first.
std::vector<Gap> idle_stretches(const std::vector<const CopyMoment*>& lane, std::int64_t min_ns) {
  std::vector<Gap> gaps;
  std::int64_t busy_until = 0;
  for (std::size_t i = 0; i < lane.size(); ++i) {
    if (lane[i]->start_ns - busy_until >= min_ns) gaps.push_back({busy_until, lane[i]->start_ns, i});
    busy_until = std::max(busy_until, lane[i]->end_ns);
  }
  std::stable_sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.to_ns - a.from_ns > b.to_ns - b.from_ns; });
  return gaps;
}

// When the copy out of `block` that its copy back `in` returns ended (0: none ran).
std::int64_t copied_out_by(const SimulationResult& seen, const CopyMoment& in) {
  std::int64_t end = 0;
  for (const CopyMoment& c : seen.copies)
    if (c.to_host && c.block == in.block && c.end_ns <= in.start_ns) end = std::max(end, c.end_ns);
  return end;
}

// The op running at `ns` on the plan's timeline (or the first to start after it).
std::uint32_t op_running_at(const std::vector<OpMoment>& timeline, std::int64_t ns) {
  const auto it = std::upper_bound(timeline.begin(), timeline.end(), ns, [](std::int64_t t, const OpMoment& m) { return t < m.end_ns; });
  return static_cast<std::uint32_t>(std::min<std::size_t>(it - timeline.begin(), timeline.size() - 1));
}

// How many of the copies after the idle stretch its idle time would carry (the last of them
// may run past its end).
std::size_t copies_carried(const std::vector<const CopyMoment*>& lane, const Gap& gap) {
  std::size_t count = 0;
  for (std::int64_t ns = 0; gap.next + count < lane.size() && ns < gap.to_ns - gap.from_ns; ++count)
    ns += lane[gap.next + count]->end_ns - lane[gap.next + count]->start_ns;
  return count;
}

// Whether an op waits while the copies the idle stretch would carry run. Those stretches are
// tried first; the others may still gain where the lane's backlog makes ops wait later.
bool waited_for(const SimulationResult& seen, const std::vector<const CopyMoment*>& lane, const Gap& gap) {
  std::int64_t until = gap.to_ns;
  const std::size_t end = gap.next + copies_carried(lane, gap);
  for (std::size_t i = gap.next; i < end; ++i) until = std::max(until, lane[i]->end_ns);
  const std::uint32_t last = op_running_at(seen.timeline, until);
  for (std::uint32_t op = op_running_at(seen.timeline, gap.to_ns); op <= last && op < seen.timeline.size(); ++op)
    if (seen.timeline[op].stall_ns > 0) return true;
  return false;
}

// A swap whose copy back is pulled earlier, named by its block and need (plan pointers do not
// survive edits).
struct Pull {
  std::uint64_t block = 0, needed_by = 0, bytes = 0, release_after = 0, prefetch_at = 0;
};

// The swap of `block` whose copy back ran at `op` (issued at or before it, needed at or after).
std::optional<Pull> swap_fetched_at(const TraceIndex& index, const plan::Plan& plan, std::uint64_t block, std::uint32_t op) {
  std::optional<Pull> found;
  for (const plan::BlockDecision& d : plan.decisions) {
    if (d.block != block) continue;
    for (const plan::Interval& x : d.intervals)
      if (x.action == plan::Action::swap && x.prefetch_at <= op + 1 && x.needed_by >= op && (!found || x.prefetch_at > found->prefetch_at))
        found = Pull{block, x.needed_by, plan::swapped_bytes(x, index.block(index.block_index(block)).size), x.release_after,
                     x.prefetch_at};
  }
  return found;
}

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
  std::optional<Rebuild> make(const TraceIndex::IdleAcross& idle) const {
    if (!index_.regenerable(idle.block, idle.before)) return std::nullopt;
    const plan::Interval interval = regeneration_interval(index_, idle.block, idle.after, idle.before);
    if (interval.replay.empty() || interval.replay.size() > max_chain_) return std::nullopt;
    std::vector<std::uint32_t> inputs;
    inputs.reserve(interval.inputs.size());
    for (std::uint64_t id : interval.inputs) inputs.push_back(index_.block_index(id));
    return Rebuild{idle.block, idle.after, idle.before, static_cast<std::int64_t>(replay_compute_ns(index_, interval)),
                   std::move(inputs)};
  }

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
            bool idle_pages_are_room)
      : request_(request), index_(*request.index), seen_(seen), rebuilds_(rebuilds), idle_pages_are_room_(idle_pages_are_room),
        change_(index_.op_count()) {
    const std::size_t blocks = index_.blocks().size();
    moved_.assign(blocks, nullptr);
    read_by_rebuilds_.assign(blocks, 0);
    rebuilt_.assign(blocks, 0);
    for (const plan::BlockDecision& d : plan.decisions) {
      if (index_.has_block(d.block)) moved_[index_.block_index(d.block)] = &d.intervals;
      for (const plan::Interval& x : d.intervals)
        for (std::uint64_t id : x.inputs)
          if (index_.has_block(id)) ++read_by_rebuilds_[index_.block_index(id)];
    }
  }

  // What a copy of `bytes` takes of the budget: whole pages where the allocator places it.
  std::uint64_t footprint(std::uint64_t bytes) const {
    if (!request_.through_allocator) return bytes;
    return (bytes + plan::kSwapGranularity - 1) / plan::kSwapGranularity * plan::kSwapGranularity;
  }

  // Makes room for `bytes` over ops [from, to) with rebuilds whose replays cost at most
  // `replay_budget_ns` in all. On failure nothing changes, and the op where no rebuild could
  // make the room (or the budget ran out) is returned: no issue op before it can work either.
  std::optional<std::uint32_t> make_room(std::uint32_t from, std::uint32_t to, std::uint64_t bytes, std::int64_t replay_budget_ns) {
    const std::size_t chosen_before = chosen_.size();
    const std::int64_t need = static_cast<std::int64_t>(footprint(bytes));
    std::int64_t changed = from < to ? change_.at(from) : 0;  // what the moves so far add at op k
    for (std::uint32_t k = from; k < to; ++k) {
      if (k > from) changed += change_.step(k);
      while (held(k) + changed + need > static_cast<std::int64_t>(request_.budget_bytes)) {
        const Rebuild* r = cheapest_across(k, from, to);
        if (!r || spent_ns_ + r->cost_ns > replay_budget_ns) {
          while (chosen_.size() > chosen_before) unchoose();
          return k;
        }
        choose(*r);
        changed -= static_cast<std::int64_t>(index_.size(r->block));  // the rebuild's gap spans op k
      }
    }
    change_.add(from, to, need);
    return std::nullopt;
  }

  // Writes the rebuilds chosen into `plan`.
  void write(plan::Plan& plan) const {
    for (const Rebuild& r : chosen_) add_interval(plan, index_, r.block, regeneration_interval(index_, r.block, r.after, r.before));
  }

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
  const Rebuild* cheapest_across(std::uint32_t k, std::uint32_t from, std::uint32_t to) {
    const Rebuild* best = nullptr;
    double best_score = 0;
    for (const TraceIndex::IdleAcross& idle : index_.idle_across(k)) {
      if (idle.before >= index_.op_count()) continue;
      const BlockInfo& info = index_.block(idle.block);
      if (info.from_start || info.size == 0 || rebuilt_[idle.block] || read_by_rebuilds_[idle.block] ||
          away_within(idle.block, idle.after, idle.before) || !may_move(request_, info))
        continue;
      const std::optional<Rebuild>& r = rebuilds_.of(idle);
      if (!r) continue;
      if (std::any_of(r->inputs.begin(), r->inputs.end(),
                      [&](std::uint32_t b) { return rebuilt_[b] || away_within(b, idle.before, idle.before); }))
        continue;
      const std::uint32_t lo = std::max(idle.after + 1, from), hi = std::min(idle.before, to);
      const double covered = hi > lo ? double(hi - lo) : 1.0;
      const double score = double(r->cost_ns) / (double(info.size) * covered);
      if (!best || score < best_score) {
        best = &*r;
        best_score = score;
      }
    }
    return best;
  }

  // Whether the plan has block `b` (an index) away at some op of [from, to] (a discard: from
  // its release on).
  bool away_within(std::uint32_t b, std::uint64_t from, std::uint64_t to) const {
    if (!moved_[b]) return false;
    for (const plan::Interval& x : *moved_[b]) {
      const std::uint64_t back = x.action == plan::Action::discard ? index_.op_count() : std::max(x.needed_by, x.until);
      if (x.release_after < to && back > from) return true;
    }
    return false;
  }

  void choose(const Rebuild& r) {
    change_.add(r.after + 1, r.before, -static_cast<std::int64_t>(index_.size(r.block)));
    rebuilt_[r.block] = 1;
    for (std::uint32_t b : r.inputs) ++read_by_rebuilds_[b];
    spent_ns_ += r.cost_ns;
    chosen_.push_back(r);
  }
  // Takes back the last rebuild chosen, as choose() made it.
  void unchoose() {
    const Rebuild& r = chosen_.back();
    change_.add(r.after + 1, r.before, static_cast<std::int64_t>(index_.size(r.block)));
    rebuilt_[r.block] = 0;
    for (std::uint32_t b : r.inputs) --read_by_rebuilds_[b];
    spent_ns_ -= r.cost_ns;
    chosen_.pop_back();
  }

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

// The copies after `gap` that its idle time would carry, in lane order, issued at the op
// running when the lane went idle, each over the room rebuilds make; at most `count` of them.
// Returns how many moved.
std::size_t pull_into(const PlanRequest& request, plan::Plan& plan, const SimulationResult& seen, const std::vector<const CopyMoment*>& lane,
               const Gap& gap, std::size_t count, RebuildCache& rebuilds, bool idle_pages_are_room) {
  const TraceIndex& index = *request.index;
  const std::uint32_t issue_at = op_running_at(seen.timeline, gap.from_ns);
  const std::int64_t idle_ns = gap.to_ns - gap.from_ns;
  RoomMaker room(request, plan, seen, rebuilds, idle_pages_are_room);
  std::int64_t carried = 0;
  std::vector<Pull> pulled;
  for (std::size_t i = gap.next; i < lane.size() && carried < idle_ns && pulled.size() < count; ++i) {
    const CopyMoment& c = *lane[i];
    const std::optional<Pull> pull = swap_fetched_at(index, plan, c.block, op_running_at(seen.timeline, c.start_ns));
    if (!pull) break;
    // From the op running when the lane went idle, or the first after it where rebuilds can
    // make the room; not before the op after the block's copy out ends (issued while it runs,
    // the copy out is cancelled and the block never leaves), nor ahead of the copies pulled
    // before it.
    const std::int64_t out_end = copied_out_by(seen, c);
    const std::uint64_t after_out = out_end > 0 ? op_running_at(seen.timeline, out_end) + 1 : 0;
    std::uint64_t to = std::max<std::uint64_t>({issue_at, pull->release_after + 1, after_out, pulled.empty() ? 0 : pulled.back().prefetch_at});
    // Replays worth at most half the idle time: past that the rebuilds cost what the copies save.
    while (to < pull->prefetch_at) {
      const std::optional<std::uint32_t> short_at =
          room.make_room(static_cast<std::uint32_t>(to), static_cast<std::uint32_t>(pull->prefetch_at), pull->bytes, idle_ns / 2);
      if (!short_at) break;
      to = *short_at + 1;
    }
    if (to >= pull->prefetch_at) break;  // no earlier: nor the copies behind it
    Pull moved = *pull;
    moved.prefetch_at = to;
    pulled.push_back(moved);
    carried += c.end_ns - c.start_ns;
  }
  for (const Pull& p : pulled)
    if (plan::Interval* swap = find_interval(plan, p.block, plan::Action::swap, p.needed_by)) swap->prefetch_at = p.prefetch_at;
  room.write(plan);
  return pulled.size();
}

// The pass, with the room over ops judged one way (RoomMaker::held).
plan::Plan fill_gaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const LaneGapFillOptions& options,
                     bool idle_pages_are_room) {
  SimulationResult seen = simulate_op_by_op(request, plan);
  if (!traced_whole(request, seen)) return plan;
  std::set<std::uint32_t> tried;  // by the op running when the lane went idle
  RebuildCache rebuilds(*request.index, options.max_chain);
  std::size_t trials = 0;
  for (std::size_t round = 0; round < options.max_gaps && trials < options.max_trials; ++round) {
    const std::vector<const CopyMoment*> lane = copies_back(seen);
    // The longest stretch not tried yet, one an op waits behind first.
    std::optional<Gap> gap;
    for (const bool waited : {true, false}) {
      for (const Gap& g : idle_stretches(lane, options.min_gap_ns))
        if (!tried.count(op_running_at(seen.timeline, g.from_ns)) && waited_for(seen, lane, g) == waited) {
          gap = g;
          break;
        }
      if (gap) break;
    }
    if (!gap) break;
    tried.insert(op_running_at(seen.timeline, gap->from_ns));
    // Every copy the idle time would carry, then half as many, and so on: where the allocator
    // cannot place the plan with them all, fewer may still fit.
    for (std::size_t count = copies_carried(lane, *gap); count > 0 && trials < options.max_trials;) {
      plan::Plan trial = plan;
      const std::size_t pulled = pull_into(request, trial, seen, lane, *gap, count, rebuilds, idle_pages_are_room);
      if (pulled == 0) break;
      count = std::min(count, pulled) / 2;
      ++trials;
      if (!keep_if_faster(request, plan, judged, trial, seen)) continue;
      if (!traced_whole(request, seen)) return plan;
      break;
    }
    if (judged.stall_ns == 0) break;
  }
  return plan;
}

}  // namespace

// Twice, the faster kept (on a tie, without the idle pages): counting the allocator's idle
// cached pages as room, the pass pulls copies where the allocator is at its cap but has pages
// no block uses, and settles elsewhere, faster on some steps and slower on others. GPT2-XL
// bfloat16 at 0.7 of its peak: 1.4304 without, 1.2878 with (the word embedding's `exp_avg`,
// 161 MB, comes back before the optimizer instead of at its first `_foreach_lerp_`);
// gpt2-large float32 at 0.6: 1.5409 without, 1.5638 with.
plan::Plan fill_lane_gaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const LaneGapFillOptions& options) {
  if (!judged.feasible || judged.stall_ns == 0) return plan;
  plan::Plan counted = plan;
  SimulationResult counted_judged = judged;
  parallel_for(2, planner_threads(request.threads) >= 2 ? 2 : 1, [&](std::size_t k) {
    if (k == 0) plan = fill_gaps(request, std::move(plan), judged, options, false);
    else counted = fill_gaps(request, std::move(counted), counted_judged, options, true);
  });
  if (counted_judged.feasible && counted_judged.step_time_ns < judged.step_time_ns) {
    judged = std::move(counted_judged);
    return counted;
  }
  return plan;
}

}  // namespace delta::planner
