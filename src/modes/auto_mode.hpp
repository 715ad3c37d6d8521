// DELTA_MODE=auto: a budget and nothing else (autopilot/autopilot.hpp).
//   DELTA_BUDGET=40GiB | 0.5    what DELTA may hold on the device: bytes, or a fraction of its memory
//   DELTA_HOST_BUDGET=bytes     pinned host memory it may take (default: most of MemAvailable on a GPU)
//   DELTA_RECORD_ITERATIONS=N   iterations recorded before planning (default 2)
//   DELTA_PLAN_SECONDS=2        a limit on each plan's planning time (default none: the best plan)
//   DELTA_PLAN_CACHE=dir        where plans are kept between runs (default ~/.cache/delta/plans; "off": none)
//   DELTA_GPU_PROFILE=h200      on a GPU, the profile the planner models (default: the device's, by its name)
// Like run mode it needs a launch guard: the sim device has one (its launch hook); on a GPU it
// is the interposed driver (executor/routes/cuda_route.hpp), live only when libdelta.so was
// preloaded at process start (`deltactl launch` does it), and CUPTI records the steps planned
// (src/driver/launch_guard.hpp says why it refuses otherwise). The entry points (serve_allocation,
// serve_free, run_step in run_mode.hpp) hand every call to it while it runs.
#pragma once

#include <delta/allocator.hpp>

#include <cstddef>
#include <string>

namespace delta {

// Throws std::exception naming the setting when one is malformed, when the device has no
// launch guard, or when CUPTI cannot record; nothing is started then.
void start_auto_mode_from_env(CachingAllocator& allocator);
bool auto_running() noexcept;

void* auto_allocation(std::size_t size, StreamHandle stream);
void auto_free(void* ptr);
void auto_step();
std::string auto_stats_json();

}  // namespace delta
