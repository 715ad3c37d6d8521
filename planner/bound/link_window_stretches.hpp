// The stretches of the link's windows (link_windows.cpp): spans of ops that read more data
// made before them than the budget leaves room for when they start.
#pragma once

#include "bound/relaxation.hpp"

#include <cstdint>
#include <vector>

namespace delta::planner::relaxation {

// What W = [first, last] reads of older data, and what the budget leaves for it at its start.
struct Stretch {
  std::uint32_t first = 0, last = 0;
  std::vector<std::uint32_t> reads;  // blocks, by index
  double read_bytes = 0, room_bytes = 0, compute_ms = 0;
};

// The stretch [first, last]: what it reads of older data, and the room the budget leaves.
Stretch stretch_over(const TraceIndex& index, std::uint64_t budget, std::uint32_t first, std::uint32_t last);

// The disjoint stretches whose excess with copies alone adds up to the most, the data the step
// made counted at `made_weight` of its bytes (it may be rebuilt instead).
std::vector<Stretch> choose_stretches(const TraceIndex& index, std::uint64_t budget, double h2d_ms_per_byte, double made_weight);

// The same stretches, each started at its first in-place update of a block live before the
// step, where that comes later (any stretch gives a bound).
std::vector<Stretch> from_first_updates(const TraceIndex& index, std::uint64_t budget, const std::vector<Stretch>& stretches);

}  // namespace delta::planner::relaxation
