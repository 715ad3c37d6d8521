// What freeing one candidate gap costs the sweep now (sweep_planner.hpp): a swap booked on the
// copy lanes forward from the block's last write and back before its next use, or a
// regeneration by a short chain of replays with its inputs pinned.
#include "delta/sweep/sweep_planner.hpp"

#include <algorithm>

namespace delta::planner::sweep {

Option SweepPlanner::evaluate(const Candidate& c, std::size_t i) const {
  Option swap, regen;
  if (options_.allow_swap) swap = evaluate_swap(c, i);
  if (options_.allow_regenerate) regen = evaluate_regeneration(c, i);
  switch (options_.policy) {
    case Policy::capuchin: {
      const bool hidden = swap.cost <= 0.01 * double(swap.h2d_length) + 1.0;
      if (hidden || regen.cost == kInfinity) return swap;
      return regen;
    }
    case Policy::delta_public: {
      const std::uint64_t size = index_.block(c.block).size;
      const double round_trip = 2.0 * double(size) / request_.gpu.h2d_bytes_per_s * 1e9;
      Option chosen = (regen.cost != kInfinity && regen.cost < round_trip) ? regen : swap;
      if (chosen.cost == kInfinity) chosen = regen.cost != kInfinity ? regen : swap;
      return chosen;
    }
    case Policy::delta:
      break;
  }
  return regen.cost < swap.cost ? regen : swap;
}

Option SweepPlanner::evaluate_swap(const Candidate& c, std::size_t i) const {
  const BlockInfo& info = index_.block(c.block);
  Option option;
  // A host copy still valid (swapped in earlier and not written since) makes eviction free.
  bool clean = false;
  if (host_copy_until_[c.block] >= 0) {
    auto w = std::upper_bound(info.writes.begin(), info.writes.end(), static_cast<std::uint32_t>(host_copy_until_[c.block]) - 1);
    clean = w == info.writes.end() || *w > c.after;
  }
  const std::int64_t out = clean ? 0 : d2h_time(info.size);
  const std::int64_t in = h2d_time(info.size);
  // The copy starts once the data is final (its last write), after any earlier interval has
  // brought the block back.
  std::uint32_t resident_from = 0;
  for (const auto& [first_free, last_free] : freed_[c.block])
    if (last_free < c.after) resident_from = std::max(resident_from, last_free + 1);
  const std::uint32_t copy_from = earliest_copy_out(index_, c.block, c.after, resident_from);
  const std::int64_t s1 = clean ? index_.native_end(c.after) : d2h_.find_forward_or_queue(index_.native_end(copy_from), out);
  const std::int64_t e1 = s1 + out;
  std::uint32_t f = static_cast<std::uint32_t>(std::lower_bound(starts_.begin(), starts_.end(), e1) - starts_.begin());
  f = std::max<std::uint32_t>(f, c.after + 1);
  // A regeneration chosen earlier may need this block resident at some op of the gap: the
  // block must then be back by the first such op after i (and none may fall before i).
  std::uint32_t limit = c.before;
  {
    const std::set<std::uint32_t>& pins = pins_[c.block];
    auto pin = pins.lower_bound(c.after + 1);
    if (pin != pins.end() && *pin <= i) return option;
    if (pin != pins.end() && *pin < limit) limit = *pin;
  }
  const std::int64_t deadline = start_of(limit);
  std::uint32_t j = limit;  // prefetch op
  std::int64_t s2 = -1;
  if (options_.hide_prefetch) {
    s2 = h2d_.find_backward(deadline, in, e1);
    if (s2 >= 0) j = static_cast<std::uint32_t>(std::max<std::size_t>(index_.op_at_time(s2), c.after + 1));
  }
  double cost = 0;
  std::uint32_t first = f, after_last = j;  // freed over [first, after_last)
  if (first > i) {  // the copy out must be waited for
    if (c.before_first_use && options_.state_swaps == StateSwaps::within_link) {
      if (f < c.before) option.ready_op = f;
      return option;
    }
    cost += double(e1 - start_of(i));
    first = static_cast<std::uint32_t>(i);
  }
  if (after_last <= i) {  // the copy in is issued late
    after_last = static_cast<std::uint32_t>(i + 1);
  }
  const std::int64_t issue = std::max(start_of(after_last), e1);
  const std::int64_t h2d_start = (s2 >= 0 && after_last == j) ? s2 : h2d_.find_forward_or_queue(issue, in);
  const std::int64_t late_in = std::max<std::int64_t>(0, h2d_start + in - deadline);
  // Within the link, a state's copy back is done by its first use too, unless the op being
  // fixed has no other room (late_state_swaps_): the optimizer waits for every late copy, and
  // the estimate here is the best case (the backward's own copies, booked later, queue first).
  if (c.before_first_use && options_.state_swaps == StateSwaps::within_link && late_in > 0 && !late_state_swaps_) return option;
  cost += double(late_in);
  if (after_last > limit || first >= after_last) return option;
  option.cost = cost * options_.exposed_swap_factor + 0.01 * double(in);  // a hidden swap still uses the link
  option.interval.action = plan::Action::swap;
  option.interval.release_after = c.after;
  option.interval.prefetch_at = after_last;
  if (!clean && copy_from < c.after) option.interval.copy_after = copy_from;
  option.interval.needed_by = c.before;
  option.freed_first = first;
  option.freed_last = after_last - 1;
  option.d2h_start = clean ? -1 : s1;
  option.d2h_length = out;
  option.h2d_start = h2d_start;
  option.h2d_length = in;
  return option;
}

bool SweepPlanner::build_chain(std::uint32_t block, std::uint32_t at, std::vector<std::uint64_t>& chain,
                   std::vector<std::uint32_t>& inputs, std::vector<std::uint32_t>& rebuilt) const {
  const std::vector<std::uint32_t> versions = index_.version_chain(block, at);
  if (versions.empty()) return false;
  for (std::uint32_t op : versions) {
    if (std::find(chain.begin(), chain.end(), op) != chain.end()) continue;
    for (const OpUse& u : index_.uses(op)) {
      if (!u.read || u.block == block) continue;
      if (!index_.unchanged_between(u.block, op, at)) return false;  // the op read an older version
      if (std::find(rebuilt.begin(), rebuilt.end(), u.block) != rebuilt.end()) continue;
      const BlockInfo& input = index_.block(u.block);
      const bool resident = input.first <= at && at <= input.last && !freed_at(u.block, at) && !freed_at(u.block, at - 1);
      if (resident) {
        inputs.push_back(u.block);
        continue;
      }
      if (chain.size() + 1 >= options_.max_chain || !build_chain(u.block, at, chain, inputs, rebuilt)) return false;
    }
    if (chain.size() >= options_.max_chain) return false;
    chain.push_back(op);
    for (const OpUse& u : index_.uses(op))
      if (u.write) rebuilt.push_back(u.block);
  }
  return true;
}

Option SweepPlanner::evaluate_regeneration(const Candidate& c, std::size_t) const {
  Option option;
  if (c.before >= n_) return option;
  const std::uint32_t first = c.after + 1, last = c.before - 1;
  if (pinned_within(c.block, first, last)) return option;
  std::vector<std::uint64_t> chain;
  std::vector<std::uint32_t> inputs, rebuilt;
  if (!build_chain(c.block, c.before, chain, inputs, rebuilt)) return option;
  std::sort(chain.begin(), chain.end());  // the trace's own order satisfies every dependency
  std::uint64_t temporary = 0;
  for (std::uint32_t b : rebuilt) {
    if (b == c.block) continue;
    const BlockInfo& other = index_.block(b);
    if (!(other.first <= c.before && c.before <= other.last) || freed_at(b, c.before)) temporary += other.size;
  }
  double cost = 0;
  for (std::uint64_t op : chain) cost += double(index_.duration(op));
  std::sort(inputs.begin(), inputs.end());
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  option.cost = cost;
  option.interval.action = plan::Action::regenerate;
  option.interval.release_after = c.after;
  option.interval.needed_by = c.before;
  option.interval.replay = chain;
  for (std::uint32_t b : inputs) option.interval.inputs.push_back(index_.block(b).id);
  option.pinned_inputs = inputs;
  option.freed_first = first;
  option.freed_last = last;
  option.temporary_bytes = temporary;
  return option;
}

}  // namespace delta::planner::sweep
