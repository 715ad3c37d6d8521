// The link's windows' stretches (link_window_stretches.hpp): where they start and end.
#include "bound/link_window_stretches.hpp"

#include <algorithm>
#include <set>

namespace delta::planner::relaxation {
namespace {

constexpr double kMs = 1e6;
// Starts tried at most: each costs a scan of the uses after it.
constexpr std::size_t kMaxStarts = 1500;

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

}  // namespace

// The stretch [first, last]: what it reads of older data, and the room the budget leaves.
Stretch stretch_over(const TraceIndex& index, std::uint64_t budget, std::uint32_t first, std::uint32_t last) {
  Stretch s;
  s.first = first;
  s.last = last;
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
  return s;
}

// The same stretches, each started where it first updates a block live before the step (an
// optimizer's first in-place update of the parameters or their state), where that is later:
// the ops before it are few, and from there on no rebuild can revive what a forward op made
// from the data it updates. Also a bound.
std::vector<Stretch> from_first_updates(const TraceIndex& index, std::uint64_t budget, const std::vector<Stretch>& stretches) {
  auto updates_state = [&](std::uint32_t u) {
    return std::any_of(index.uses(u).begin(), index.uses(u).end(),
                       [&](const OpUse& use) { return use.write && use.read && index.block(use.block).from_start; });
  };
  std::vector<Stretch> shifted;
  for (const Stretch& s : stretches) {
    std::uint32_t first = s.first;
    while (first < s.last && !updates_state(first)) ++first;
    shifted.push_back(first < s.last ? stretch_over(index, budget, first, s.last) : s);
  }
  return shifted;
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
    Stretch s = stretch_over(index, budget, static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(end_at[a]));
    chosen.push_back(std::move(s));
    a = end_at[a] + 1;
  }
  return chosen;
}

}  // namespace delta::planner::relaxation
