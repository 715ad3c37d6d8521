// The link's windows' stretches (link_window_stretches.hpp): where they start and end.
#include "bound/link_window_stretches.hpp"

#include <algorithm>
#include <set>

namespace delta::planner::relaxation {
namespace {

constexpr double kMs = 1e6;
// Starts tried at most: each costs a scan of the uses after it.
constexpr std::size_t kMaxStarts = 1500;

// Whether the block holds its bytes before `op`: live at the step's start, used before it, or
// allocated by then for a first use later (a foreach op allocates its whole output list at its
// first launch; the simulator places each block at its allocation). Before its first write
// such a block holds no data: only a copy back, never a rebuild, brings it.
bool older_than(const BlockInfo& info, std::uint32_t op, Needs needs = Needs::placed_and_kept) {
  if (info.from_start) return true;
  if (info.uses.empty()) return false;
  if (needs == Needs::reads) return info.uses.front() < op;
  return info.first < op || (info.first == op && info.uses.front() > op);  // first: at most its first use
}

// Whether the stretch starting at `first` needs `use`'s block on the device as data made before
// it (any use does: the simulator refuses a use while away); else, at op `first` itself, the
// block is made or overwritten there and takes room.
bool reads_older(const TraceIndex& index, const OpUse& use, std::uint32_t first, Needs needs = Needs::placed_and_kept) {
  return (use.read || (use.write && needs == Needs::placed_and_kept)) && older_than(index.block(use.block), first, needs);
}

// Made by the step's own ops before `first`: maybe cheaper to rebuild than to copy.
bool made_before(const BlockInfo& info, std::uint32_t first) {
  return !info.from_start && info.category != trace::Category::parameter && info.category != trace::Category::input &&
         !info.uses.empty() && info.uses.front() < first;
}

// Blocks the step leaves live for the next one: every plan has them on the device when the
// step ends, so a stretch that runs to the end reads them there.
std::vector<std::uint32_t> kept_to_end(const TraceIndex& index) {
  std::vector<std::uint32_t> kept;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b)
    if (index.block(b).to_end && index.size(b) > 0) kept.push_back(b);
  return kept;
}

// Live bytes every plan holds at each op, as the linear program counts them (first use, or op
// 0 for a block live at the start, to last use, or the end): no stretch starting where they
// fit in the budget can read more than the budget leaves.
std::vector<double> held_bytes(const TraceIndex& index, Needs needs) {
  const std::size_t n = index.op_count();
  std::vector<double> held(n + 1, 0.0);
  for (const BlockInfo& info : index.blocks()) {
    if (info.size == 0 || (info.uses.empty() && !info.from_start)) continue;
    const std::uint32_t from = info.from_start                 ? 0
                               : needs == Needs::reads          ? info.uses.front()
                                                                : std::min(info.first, info.uses.front());
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
  if (s.last + 1 == index.op_count())
    for (std::uint32_t b : kept_to_end(index))
      if (counted.insert(b).second && older_than(index.block(b), s.first)) {
        s.reads.push_back(b);
        s.read_bytes += double(index.size(b));
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
std::vector<Stretch> choose_stretches(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, double made_weight,
                                      Needs needs) {
  const std::size_t n = index.op_count();
  const std::vector<double> held = held_bytes(index, needs);
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
  const std::vector<std::uint32_t> kept = needs == Needs::placed_and_kept ? kept_to_end(index) : std::vector<std::uint32_t>{};
  auto weighted = [&](std::uint32_t b, std::uint32_t first) {
    const double size = double(index.size(b));
    return made_before(index.block(b), first) ? made_weight * size : size;
  };
  for (std::int64_t a = std::int64_t(n) - 1; a >= 0; --a) {
    best[a] = best[a + 1];
    if (!is_start[a]) continue;
    const std::uint32_t first = static_cast<std::uint32_t>(a);
    double reads = 0, room = double(budget);
    for (std::uint32_t u = first; u < n; ++u) {
      for (const OpUse& use : index.uses(u)) {
        if (seen[use.block] == first) continue;
        seen[use.block] = first;
        if (reads_older(index, use, first, needs)) reads += weighted(use.block, first);
        else if (u == first) room -= double(index.size(use.block));  // made (or overwritten unread) by op a: held there
      }
      if (u + 1 == n)
        for (std::uint32_t b : kept)
          if (seen[b] != first && older_than(index.block(b), first)) {
            seen[b] = first;
            reads += weighted(b, first);
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

std::vector<std::uint32_t> nearby_starts(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, const Stretch& s,
                                         std::int64_t after, std::uint32_t reach, std::size_t count) {
  auto excess_ms = [&](const Stretch& t) { return (t.read_bytes - t.room_bytes) * h2d_ms_per_byte - t.compute_ms; };
  const double own = excess_ms(s);
  std::vector<std::pair<double, std::uint32_t>> rises;
  const std::int64_t lowest = std::max<std::int64_t>(after + 1, std::int64_t(s.first) - std::int64_t(reach));
  const std::int64_t highest = std::min<std::int64_t>(s.last, std::int64_t(s.first) + std::int64_t(reach));
  for (std::int64_t a = lowest; a <= highest; ++a) {
    if (a == s.first) continue;
    const double rise = excess_ms(stretch_over(index, budget, std::uint32_t(a), s.last)) - own;
    if (rise > 0) rises.emplace_back(rise, std::uint32_t(a));
  }
  std::sort(rises.begin(), rises.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::uint32_t> starts;
  for (std::size_t k = 0; k < rises.size() && k < count; ++k) starts.push_back(rises[k].second);
  return starts;
}

std::vector<std::uint32_t> split_points(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, const Stretch& s,
                                        std::size_t count) {
  // From the last op back, the excess of [c, last] with copies alone. Two kinds of c: where
  // [c, last] needs more of the link than its compute gives and [c + 1, last] does not (a
  // crunch of its own at the stretch's end), ranked by that excess; and where it needs more than
  // any later start does (an op whose inputs die as it ends holds them beside everything the
  // later ops read: an embedding's gradient sum before the optimizer), ranked by how much more.
  std::vector<std::pair<double, std::uint32_t>> crunches, records;
  bool after = false;    // whether [c + 1, last] needs more than its compute
  double highest = 0.0;  // the most any later start needs
  for (std::uint32_t c = s.last; c > s.first; --c) {
    const Stretch rest = stretch_over(index, budget, c, s.last);
    const double ms = (rest.read_bytes - rest.room_bytes) * h2d_ms_per_byte - rest.compute_ms;
    if (ms > 0 && !after) crunches.emplace_back(ms, c);
    if (ms > highest) records.emplace_back(ms - highest, c);
    after = ms > 0;
    highest = std::max(highest, ms);
  }
  std::vector<std::uint32_t> points;
  for (auto* kind : {&crunches, &records}) {
    std::sort(kind->begin(), kind->end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t k = 0; k < kind->size() && k < count; ++k)
      if (std::find(points.begin(), points.end(), (*kind)[k].second) == points.end()) points.push_back((*kind)[k].second);
  }
  return points;
}

// Weighted interval scheduling over the stretches solved so far.
std::vector<Stretch> combine(const StretchShares& shares) {
  std::vector<const std::pair<double, Stretch>*> items;
  for (const auto& [span, share] : shares)
    if (share.first > 0) items.push_back(&share);
  std::sort(items.begin(), items.end(), [](const auto* a, const auto* b) { return a->second.last < b->second.last; });
  // most[k]: the best of the first k items; before[k]: how many items end before item k starts.
  std::vector<double> most(items.size() + 1, 0.0);
  std::vector<std::size_t> before(items.size(), 0);
  for (std::size_t k = 0; k < items.size(); ++k) {
    std::size_t j = k;
    while (j > 0 && items[j - 1]->second.last >= items[k]->second.first) --j;
    before[k] = j;
    most[k + 1] = std::max(most[k], most[j] + items[k]->first);
  }
  std::vector<Stretch> chosen;
  for (std::size_t k = items.size(); k > 0;) {
    if (most[k] == most[k - 1]) {
      --k;
      continue;
    }
    chosen.push_back(items[k - 1]->second);
    k = before[k - 1];
  }
  std::reverse(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace delta::planner::relaxation
