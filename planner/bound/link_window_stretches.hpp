// The stretches of the link's windows (link_windows.cpp): spans of ops that read more data
// made before them than the budget leaves room for when they start, and how a choice of them is
// solved.
#pragma once

#include "bound/relaxation.hpp"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace delta::planner::relaxation {

// What W = [first, last] reads of older data, and what the budget leaves for it at its start.
struct Stretch {
  std::uint32_t first = 0, last = 0;
  std::vector<std::uint32_t> reads;  // blocks, by index
  double read_bytes = 0, room_bytes = 0, compute_ms = 0;
};

// The stretch [first, last]: what it needs of older data (every block its ops use that holds
// bytes before `first`, and what the step's end keeps where it runs to the end), and the room
// the budget leaves.
Stretch stretch_over(const TraceIndex& index, std::uint64_t budget, std::uint32_t first, std::uint32_t last);

// What a stretch needs on the device, as the choice counts it: the data its ops read, or also
// the blocks they write that were placed before it (a foreach op places its whole output list
// at its first launch) and, for a stretch that runs to the step's end, what the end keeps. A
// stretch, once chosen, is solved with all of it (stretch_over); the two choices differ.
enum class Needs { reads, placed_and_kept };

// The disjoint stretches whose excess with copies alone adds up to the most, the data the step
// made counted at `made_weight` of its bytes (it may be rebuilt instead).
std::vector<Stretch> choose_stretches(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, double made_weight,
                                      Needs needs);

// The same stretches, each started at its first in-place update of a block live before the
// step, where that comes later (any stretch gives a bound).
std::vector<Stretch> from_first_updates(const TraceIndex& index, std::uint64_t budget, const std::vector<Stretch>& stretches);

// Other starts for `s`, within `reach` ops of its own and after op `after` (the stretch before
// ends there), the most its swap-only excess rises first, only those where it rises: the choice
// counts the step's data at a weight and samples its starts, and one op earlier can need much
// more of the link (an op whose inputs die when it ends has them on the device when it starts:
// the embedding's gradient sum before an optimizer, 642 MB on GPT2-XL float32).
std::vector<std::uint32_t> nearby_starts(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, const Stretch& s,
                                         std::int64_t after, std::uint32_t reach, std::size_t count);

// Where to split `s` in two, at most 2 x `count` ops c (first < c <= last): where [c, last]
// alone needs more of the link than its compute gives and [c + 1, last] does not, and where it
// needs more than from any later start. The two parts follow each other, and what the first
// has away of the data the second reads comes back over the first's lane or is still away when
// the second starts (link_windows.cpp), so a split charges a crunch late in a long stretch (the
// state an optimizer reads, at the gradients' last sum) on its own.
std::vector<std::uint32_t> split_points(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, const Stretch& s,
                                        std::size_t count);

// Each lane's time per byte, ms.
struct LinkRates {
  double h2d_ms_per_byte = 0, d2h_ms_per_byte = 0;
};

// The stretches' least added time, as one linear program (link_windows.cpp); `unreachable`
// where no plan meets the budget there, `message` where the solver gave no optimum.
LinkWindowBound solve_stretches(const TraceIndex& index, const std::vector<Stretch>& stretches, const LinkRates& rates,
                                int solver_seconds);

// Each stretch solved so far, by its ends, with the most time it added in a solved choice.
using StretchShares = std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<double, Stretch>>;

// The disjoint stretches whose shares add up to the most: stretches of different choices
// combine (any choice is a bound).
std::vector<Stretch> combine(const StretchShares& shares);

}  // namespace delta::planner::relaxation
