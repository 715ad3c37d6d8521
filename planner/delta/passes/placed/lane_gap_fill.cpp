#include "delta/passes/placed/lane_gap_fill.hpp"

#include "delta/passes/placed/room_maker.hpp"

#include "common/parallel_for.hpp"
#include "common/plan_edits.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

using lane_room::RebuildCache;
using lane_room::RoomMaker;

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
  for (std::size_t round = 0; round < options.max_gaps && trials < options.max_trials && !past_deadline(request); ++round) {
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
