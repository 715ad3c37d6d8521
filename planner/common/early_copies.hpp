// Swaps copy a block to host as soon as its data is final, not when it is released: a block
// read by a few more ops after its last write (a convolution's output read by its batch norm,
// a residual sum read again at the end of its block) starts its copy there and is freed after
// its last read, so the copy lane's idle time before the peak carries more.
#pragma once

#include "common/plan_edits.hpp"

namespace delta::planner {

// The earliest op after which the copy of `block`, released after op `release_after`, may
// start: its last write up to then, and no earlier than `resident_from`, the op where it is
// back on the device after an earlier interval (0: none).
std::uint32_t earliest_copy_out(const TraceIndex& index, std::uint32_t block, std::uint32_t release_after,
                                std::uint32_t resident_from = 0);

// Starts every swap's copy at its earliest op (copy_after, left unset where that is the
// release itself).
void start_copies_early(plan::Plan& plan, const TraceIndex& index);

// The same, kept only when the simulator finds the step no slower: copies issued earlier
// reorder the copy lane, which can delay one needed sooner. `judged` is the plan's verdict,
// updated when the early copies are kept.
void start_copies_early_if_faster(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged);

}  // namespace delta::planner
