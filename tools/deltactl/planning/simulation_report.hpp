// What `deltactl plan` and `deltactl simulate` print about one simulated plan.
#pragma once

#include "planning/time_by_phase.hpp"
#include "sim/simulator.hpp"

#include <cstdint>
#include <ostream>

namespace deltactl {

// Peak, step time against native, swaps, regenerations, discards, stalls, extra compute and
// bytes moved; with the caching allocator, its reserved peak against the budget.
void print_simulation(std::ostream& out, const delta::planner::SimulationResult& sim, std::uint64_t budget_bytes,
                      bool through_allocator);

// One line: each phase's time in the plan's step against its ops' own, with the replays and
// waits in it; nothing where the trace has no phases.
void print_time_by_phase(std::ostream& out, const TimeByPhase& phases);

}  // namespace deltactl
