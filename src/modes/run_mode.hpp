// DELTA_MODE=run: the executor hooked into the process-wide allocator.
//   DELTA_PLAN=plan.json     the plan to run (deltactl plan)
//   DELTA_TRACE=trace.json   the trace it was made for: the executor matches the live program
//                            against that trace's step by structure (sizes, kernels, order)
//   DELTA_BUDGET=bytes       optional: what DELTA may hold on the device (default: the plan's)
// The entry points (C ABI and LD_PRELOAD shims) send every allocation and free through
// serve_allocation / serve_free; launches reach the executor through the device's launch
// route. Run mode needs a launch guard: the sim device has it (its launch hook); on a GPU it is
// the interposed driver (src/driver/driver_interpose.hpp), live only when libdelta.so was preloaded at
// process start; otherwise run mode refuses to start there and says so.
#pragma once

#include <delta/allocator.hpp>

#include <cstddef>
#include <string>

namespace delta {

// Throws std::exception naming the setting when one is malformed, a file is bad, the plan is
// for another trace, or the device has no launch guard; nothing is started then.
void start_run_mode_from_env(CachingAllocator& allocator);
bool running() noexcept;

void* serve_allocation(CachingAllocator& allocator, std::size_t size, StreamHandle stream);
void serve_free(CachingAllocator& allocator, void* ptr);
void run_step();                 // delta_step(): a step boundary
std::string run_stats_json();    // the executor's figures, or "" when not running

}  // namespace delta
