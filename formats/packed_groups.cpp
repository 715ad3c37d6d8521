// Which placement group each block a plan moves is packed in (docs/allocator.md, "Placement
// groups"). The ledger that fits a plan and the executor that runs it both place blocks by
// this one rule, so that every block lands where the plan was fitted.
#include <delta/plan.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace delta::plan {
namespace {

using Range = std::pair<std::uint64_t, std::uint64_t>;  // [first op, end op) away

// The ops over which the block is away: between a swap's or a regeneration's release and the
// op that needs it back; after a discard, to the step's end.
std::vector<Range> away_ranges(const BlockDecision& decision, std::uint64_t op_count) {
  std::vector<Range> ranges;
  for (const Interval& interval : decision.intervals) {
    const std::uint64_t from = interval.release_after + 1;
    std::uint64_t to = 0;
    if (interval.action == Action::swap || interval.action == Action::regenerate) to = interval.needed_by;
    else if (interval.action == Action::discard) to = op_count;
    if (to > from) ranges.emplace_back(from, to);
  }
  return ranges;
}

bool moved(const BlockDecision& decision) {
  return std::any_of(decision.intervals.begin(), decision.intervals.end(), [](const Interval& interval) {
    return interval.action == Action::swap || interval.action == Action::regenerate || interval.action == Action::discard;
  });
}

std::uint64_t length(const std::vector<Range>& ranges) {
  std::uint64_t total = 0;
  for (const auto& [from, to] : ranges) total += to - from;
  return total;
}

// Ops over which one of the two blocks is away and the other is not: where a page they shared
// would stay mapped for one while the other's bytes on it are gone. Both lists are sorted and
// not overlapping (a plan's intervals are).
std::uint64_t mismatch(const std::vector<Range>& a, const std::vector<Range>& b) {
  std::uint64_t common = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const std::uint64_t from = std::max(a[i].first, b[j].first), to = std::min(a[i].second, b[j].second);
    if (to > from) common += to - from;
    (a[i].second < b[j].second ? i : j)++;
  }
  return length(a) + length(b) - 2 * common;
}

}  // namespace

std::unordered_map<std::uint64_t, std::uint8_t> packed_groups(const Plan& plan) {
  std::vector<const BlockDecision*> decisions;
  for (const BlockDecision& decision : plan.decisions)
    if (moved(decision)) decisions.push_back(&decision);
  // In block order, the order the program allocates them in, so that a group's last block is
  // the one a new block would sit beside.
  std::sort(decisions.begin(), decisions.end(), [](const BlockDecision* a, const BlockDecision* b) { return a->block < b->block; });
  // A block joins the group whose last block is away when it is, give or take a hundredth of the
  // step's ops (a slice of the optimizer's lists beside the next); else it opens a group of its
  // own while there are groups left, else it joins the closest.
  const std::uint64_t alike = std::max<std::uint64_t>(1, plan.trace_ops / 100);
  std::vector<std::vector<Range>> last;  // per group: its last block's ranges away
  std::unordered_map<std::uint64_t, std::uint8_t> groups;
  for (const BlockDecision* decision : decisions) {
    std::vector<Range> ranges = away_ranges(*decision, plan.trace_ops);
    std::size_t best = 0;
    std::uint64_t best_mismatch = UINT64_MAX;
    for (std::size_t g = 0; g < last.size(); ++g)
      if (const std::uint64_t m = mismatch(ranges, last[g]); m < best_mismatch) best = g, best_mismatch = m;
    if (best_mismatch > alike && last.size() < kPackedGroups) {
      best = last.size();
      last.emplace_back();
    }
    last[best] = std::move(ranges);
    groups[decision->block] = static_cast<std::uint8_t>(best);
  }
  return groups;
}

}  // namespace delta::plan
