// Runs independent planning work on several cores. The portfolio's candidates (offline
// replays under different settings, refinements of different finalists) share only the
// read-only trace index, so they can run side by side; results are gathered by index, so the
// chosen plan does not depend on the number of threads.
#pragma once

#include <cstddef>
#include <functional>

namespace delta::planner {

// Threads planning may use: `requested` when positive, else DELTA_PLANNER_THREADS when set,
// else one per core. Throws std::invalid_argument for a malformed DELTA_PLANNER_THREADS.
std::size_t planner_threads(std::size_t requested = 0);

// Calls `task(i)` for every i in [0, count) on up to `threads` threads (the caller's among
// them) and returns when all are done. When tasks throw, the exception of the lowest-numbered
// one that ran is rethrown here after the others finish; tasks not yet started are skipped
// once one has thrown.
void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& task);

}  // namespace delta::planner
