// What `deltactl plan` and `deltactl simulate` print about one simulated plan.
#pragma once

#include "sim/simulator.hpp"

#include <cstdint>
#include <ostream>

namespace deltactl {

// Peak, step time against native, swaps, regenerations, discards, stalls, extra compute and
// bytes moved; with the caching allocator, its reserved peak against the budget.
void print_simulation(std::ostream& out, const delta::planner::SimulationResult& sim, std::uint64_t budget_bytes,
                      bool through_allocator);

}  // namespace deltactl
