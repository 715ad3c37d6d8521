#include "src/modes/auto_mode.hpp"

#include "autopilot/autopilot.hpp"
#include "autopilot/budget_setting.hpp"
#include "executor/routes/cuda_route.hpp"
#include "executor/routes/sim_route.hpp"
#include "logging/log.hpp"
#include "profiler/record_settings.hpp"
#include "profiler/sources/cupti_kernel_params.hpp"
#include "profiler/sources/cupti_source.hpp"
#include "profiler/sources/sim_source.hpp"
#include "src/driver/driver_interpose.hpp"
#include "src/driver/launch_guard.hpp"

#include <delta/sim_device.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace delta {
namespace {

struct AutoSession {
  std::unique_ptr<autopilot::AutoPilot> pilot;
  std::unique_ptr<executor::SimLaunchRoute> route;        // on the sim: its launch hook
  std::unique_ptr<executor::CudaLaunchRoute> cuda_route;  // on a GPU: the interposed driver's
};

// Created once and never destroyed, like the allocator.
std::atomic<AutoSession*> session{nullptr};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

profiler::RecorderOptions recorder_options(std::uint32_t iterations) {
  profiler::RecorderOptions options;
  options.iterations = iterations;
  options.first_detection_at = static_cast<std::size_t>(-1);  // steps are delta_step()'s, as auto mode counts them
  return options;
}

autopilot::AutoPilot::RecordingFactory sim_recording(SimDevice& sim) {
  return [&sim](std::uint32_t iterations) {
    autopilot::AutoPilot::Recording r;
    r.recorder = std::make_unique<profiler::Recorder>(recorder_options(iterations), profiler::sim_clock(sim));
    r.recorder->set_gpu({sim.profile().name, sim.profile().name, sim.mem_info().total_bytes});
    r.source = std::make_unique<profiler::SimActivitySource>(sim, *r.recorder);
    return r;
  };
}

// On a GPU, CUPTI's callbacks record the launches, as in record mode without the driver
// wrappers (the launch route holds them here). DELTA's own copies and replays reach CUPTI too;
// they are issued inside the pilot's entry points, under an OwnWorkScope, and CUPTI's source
// skips them (profiler/directions/own_work.hpp). A CUPTI already held by another profiler
// makes this throw: auto mode does not start then, and a later recording (a new shape) is
// given up with a warning (AutoPilot::start_recording's callers).
autopilot::AutoPilot::RecordingFactory cupti_recording() {
  return [](std::uint32_t iterations) {
    autopilot::AutoPilot::Recording r;
    r.recorder = std::make_unique<profiler::Recorder>(recorder_options(iterations), profiler::cupti_clock());
    r.source = std::make_unique<profiler::CuptiActivitySource>(*r.recorder);
    return r;
  };
}

// The GPU profile the planner models: DELTA_GPU_PROFILE, else the device's own by its name.
std::string gpu_profile_setting() {
  if (const std::string set = env("DELTA_GPU_PROFILE"); !set.empty()) {
    try {
      return gpu_profile(set).name;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("DELTA_GPU_PROFILE: ") + e.what());
    }
  }
  const std::string name = profiler::KernelParamInfo().gpu_name();
  const std::string profile = gpu_profile_for_device(name);
  if (profile.empty())
    throw std::invalid_argument("DELTA_MODE=auto plans with a GPU profile, and the device '" + name +
                                "' matches none DELTA knows (h200, a100, v100, titanv): set DELTA_GPU_PROFILE to the "
                                "nearest");
  return profile;
}

}  // namespace

void start_auto_mode_from_env(CachingAllocator& allocator) {
  const profiler::RecordSettings settings = profiler::parse_record_settings(profiler::process_environment());
  if (settings.mode != profiler::DeltaMode::automatic || session.load(std::memory_order_acquire)) return;
  SimDevice* sim = as_sim(&allocator.device());
  executor::FunctionQueries queries;
  if (sim == nullptr) {  // a GPU: the guard is the interposed driver, live only when preloaded
    const bool live = interpose::live();
    if (live) queries = interpose::function_queries();
    if (const std::string why = launch_guard_refusal(GuardedMode::automatic, live, queries); !why.empty())
      throw std::runtime_error(why);
  }
  const std::string budget = env("DELTA_BUDGET");
  if (budget.empty()) throw std::invalid_argument("DELTA_MODE=auto needs DELTA_BUDGET: bytes (40GiB) or a fraction of the device's memory (0.5)");
  autopilot::AutoOptions options;
  options.budget_bytes = autopilot::parse_budget_setting("DELTA_BUDGET", budget, allocator.device().mem_info().total_bytes);
  if (const std::string host = env("DELTA_HOST_BUDGET"); !host.empty())
    options.host_limit_bytes = autopilot::parse_byte_count_setting("DELTA_HOST_BUDGET", host);
  if (const std::string seconds = env("DELTA_PLAN_SECONDS"); !seconds.empty())
    options.plan_seconds = autopilot::parse_seconds_setting("DELTA_PLAN_SECONDS", seconds);
  options.record_iterations = settings.iterations;
  options.gpu = sim ? sim->profile().name : gpu_profile_setting();
  const std::string cache = env("DELTA_PLAN_CACHE");
  options.use_cache = cache != "off";
  options.cache_dir = cache == "off" ? "" : cache;
  auto* created = new AutoSession;
  try {
    created->pilot = std::make_unique<autopilot::AutoPilot>(allocator, options, sim ? sim_recording(*sim) : cupti_recording());
  } catch (...) {
    delete created;
    throw;
  }
  if (sim != nullptr) {
    created->route = std::make_unique<executor::SimLaunchRoute>(*sim, *created->pilot);
  } else {
    created->cuda_route = std::make_unique<executor::CudaLaunchRoute>(*created->pilot, queries);
    interpose::install_route(created->cuda_route.get());
  }
  session.store(created, std::memory_order_release);
  log::info("DELTA: auto mode on the {} device ({} profile): a budget of {} bytes, {} iterations recorded before planning",
            allocator.device().kind(), options.gpu, options.budget_bytes, options.record_iterations);
}

bool auto_running() noexcept { return session.load(std::memory_order_acquire) != nullptr; }

void* auto_allocation(std::size_t size, StreamHandle stream) {
  return session.load(std::memory_order_acquire)->pilot->allocate(size, stream);
}

void auto_free(void* ptr) { session.load(std::memory_order_acquire)->pilot->deallocate(ptr); }

void auto_step() {
  if (AutoSession* s = session.load(std::memory_order_acquire)) s->pilot->end_step();
}

std::string auto_stats_json() {
  AutoSession* s = session.load(std::memory_order_acquire);
  if (!s) return "";
  const autopilot::AutoReport r = s->pilot->report();
  nlohmann::json j = {{"mode", "auto"},
                      {"planned_after", r.planned_after},
                      {"plan_from", r.plan_from},
                      {"planning_wall_s", r.planning_wall_seconds},
                      {"refused", r.refused},
                      {"plans_made", r.plans_made},
                      {"replans", r.replans},
                      {"timing_replans", r.timing_replans},
                      {"plan_switches", r.plan_switches},
                      {"program_changes", r.program_changes},
                      {"shapes", r.shapes.size()},
                      {"online", nlohmann::json::parse(executor::to_json(r.online))}};
  if (r.executor) j["executor"] = nlohmann::json::parse(executor::to_json(*r.executor));
  if (s->cuda_route) j["launch_route"] = nlohmann::json::parse(executor::to_json(s->cuda_route->stats()));
  return j.dump();
}

}  // namespace delta
