// The link's windows (link_windows.cpp): which stretches to solve. Any disjoint stretches give
// a bound; the best of several choices is kept. Which stretches bind depends on what rebuilds
// cost, known only once solved: stretches are chosen by their swap-only excess (a dynamic
// program over disjoint stretches) with the data the step made counted whole, at a part and not
// at all, counting what the ops read alone or also what was placed before them and what the
// end keeps; each also from its first in-place update of a block live before the step; the
// stretches of different choices combined by their solved shares; the best choice's stretches
// from nearby starts; and, last, each split in two where its end is a crunch of its own (the
// two parts, following each other, share the state the first has away).
#include "bound/relaxation.hpp"

#include "bound/link_window_stretches.hpp"

#include <set>

namespace delta::planner::relaxation {
namespace {

// Nearby starts: how far from a stretch's own, how many tried per stretch and round, rounds.
constexpr std::uint32_t kStartReach = 16;
constexpr std::size_t kStartsTried = 2;
constexpr int kStartRounds = 3;
// Splits: how many tried per stretch and round, rounds.
constexpr std::size_t kSplitsTried = 2;
constexpr int kSplitRounds = 2;

}  // namespace

LinkWindowBound link_window_bound(const TraceIndex& index, std::uint64_t budget, double h2d_bytes_per_s, double d2h_bytes_per_s,
                                  int solver_seconds) {
  LinkWindowBound best;
  if (h2d_bytes_per_s <= 0 || d2h_bytes_per_s <= 0) return best;
  const double h2d_ms_per_byte = 1e3 / h2d_bytes_per_s;
  const LinkRates rates{h2d_ms_per_byte, 1e3 / d2h_bytes_per_s};
  std::set<std::vector<std::pair<std::uint32_t, std::uint32_t>>> tried;
  // Each stretch solved so far, with the most time it added in a solved choice.
  StretchShares shares;
  auto solve = [&](const std::vector<Stretch>& stretches) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;
    for (const Stretch& s : stretches) spans.emplace_back(s.first, s.last);
    if (!tried.insert(spans).second) return false;
    LinkWindowBound solved = solve_stretches(index, stretches, rates, solver_seconds);
    if (solved.unreachable) {
      best = std::move(solved);
      return true;
    }
    if (!solved.message.empty()) {
      if (best.windows.empty()) best.message = solved.message;
      return false;
    }
    for (std::size_t w = 0; w < stretches.size(); ++w) {
      auto [it, fresh] = shares.try_emplace(spans[w], solved.windows[w].added_ms, stretches[w]);
      if (!fresh) it->second.first = std::max(it->second.first, solved.windows[w].added_ms);
    }
    if (best.windows.empty() || solved.added_ms > best.added_ms) best = std::move(solved);
    return false;
  };
  // Which stretches bind depends on what rebuilds cost, known only once solved: the choice is
  // made with the data the step made counted whole, at a part, and not at all, counting what
  // the ops read alone or also what was placed before them and what the end keeps, and the
  // best solved choice kept (any choice is a bound).
  for (Needs needs : {Needs::reads, Needs::placed_and_kept})
    for (double made_weight : {1.0, 0.5, 0.25, 0.0}) {
      const std::vector<Stretch> chosen = choose_stretches(index, budget, h2d_ms_per_byte, made_weight, needs);
      if (chosen.empty()) continue;
      for (const std::vector<Stretch>& stretches : {chosen, from_first_updates(index, budget, chosen)})
        if (solve(stretches)) return best;
    }
  // Stretches of different choices combine: the disjoint ones whose solved shares add up to the
  // most (each share as its own choice solved it), solved together.
  if (solve(combine(shares))) return best;
  // The best choice's stretches as they stand.
  auto current_stretches = [&] {
    std::vector<Stretch> current;
    for (const LinkWindow& window : best.windows) current.push_back(stretch_over(index, budget, window.first, window.last));
    return current;
  };
  // Each stretch of the best choice from a nearby start where that needs more of the link, kept
  // where the choice's solved total rises; again from the new best, a few rounds. True where
  // the budget was found unreachable.
  auto from_nearby_starts = [&] {
    for (int round = 0; round < kStartRounds; ++round) {
      const double before = best.added_ms;
      const std::vector<Stretch> current = current_stretches();
      for (std::size_t w = 0; w < current.size(); ++w) {
        const std::int64_t after = w == 0 ? -1 : std::int64_t(current[w - 1].last);
        for (std::uint32_t start : nearby_starts(index, budget, h2d_ms_per_byte, current[w], after, kStartReach, kStartsTried)) {
          std::vector<Stretch> moved = current;
          moved[w] = stretch_over(index, budget, start, current[w].last);
          if (solve(moved)) return true;
        }
      }
      if (best.added_ms <= before) break;
    }
    return false;
  };
  // Each stretch of the best choice split in two where its end alone needs the link most (the
  // two parts follow each other, so the state the first has away is followed into the second).
  auto split_in_two = [&] {
    for (int round = 0; round < kSplitRounds; ++round) {
      const double before = best.added_ms;
      const std::vector<Stretch> current = current_stretches();
      for (std::size_t w = 0; w < current.size(); ++w)
        for (std::uint32_t c : split_points(index, budget, h2d_ms_per_byte, current[w], kSplitsTried)) {
          std::vector<Stretch> split = current;
          split[w] = stretch_over(index, budget, current[w].first, c - 1);
          split.insert(split.begin() + std::ptrdiff_t(w) + 1, stretch_over(index, budget, c, current[w].last));
          if (solve(split)) return true;
        }
      if (best.added_ms <= before) break;
    }
    return false;
  };
  if (from_nearby_starts()) return best;
  const double unsplit = best.added_ms;
  if (split_in_two()) return best;
  // The parts of a split from nearby starts in turn (a first part's own start may need more).
  if (best.added_ms > unsplit && from_nearby_starts()) return best;
  return best;
}

}  // namespace delta::planner::relaxation
