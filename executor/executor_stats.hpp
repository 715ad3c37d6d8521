// What the executor did: counts and bytes of every action, waits, and what went off plan.
#pragma once

#include <cstdint>
#include <string>

namespace delta::executor {

struct ExecutorStats {
  std::uint64_t steps = 0;               // step boundaries seen
  std::uint64_t launches = 0;            // launches observed (the program's, not replays)
  std::uint64_t swaps = 0, partial_swaps = 0, prefetches = 0, late_fetches = 0;
  std::uint64_t regenerations = 0, revivals = 0, discards = 0, retentions = 0;
  std::uint64_t replayed_launches = 0;
  std::uint64_t regenerations_swapped = 0;  // degraded: replay not possible, swapped instead
  std::uint64_t bytes_d2h = 0, bytes_h2d = 0;
  std::uint64_t stall_ns = 0;            // compute streams held back by the executor (sim clock)
  std::uint64_t pressure_waits = 0;      // host waits for evictions to finish, to map within budget
  std::uint64_t host_wait_ns = 0;        // the host's time in those waits (sim clock)
  std::uint64_t divergences = 0;         // steps that strayed from the plan's program
  std::uint64_t budget_exceeded = 0;     // allocations served above the budget (off plan)
  // On plan, the most a program's allocation served above the budget took the allocator past it
  // (a plan whose room the live layout did not have: auto mode plans again for that much less).
  std::uint64_t over_budget_on_plan_bytes = 0;
  std::uint64_t off_plan_evictions = 0;  // off plan: blocks sent to host by the online policy's rule
  std::uint64_t faults = 0;              // failed actions degraded to a safe one
  std::uint64_t copy_failures = 0;       // copies the device refused (the block stayed or came back late)
  std::uint64_t unload_rebuilds = 0;     // dropped blocks rebuilt early: their replay's module was unloading
  std::uint64_t graph_captures = 0;      // graph captures begun (the executor ran as cache mode through each)
  std::uint64_t pinned_ranges = 0;       // ranges that may never leave (captured, IPC-exported, registered)
  std::uint64_t pinned_skips = 0;        // planned evictions not done: the block is pinned
  std::string last_divergence;           // what differed, for the log and the stats
};

std::string to_json(const ExecutorStats& stats);

}  // namespace delta::executor
