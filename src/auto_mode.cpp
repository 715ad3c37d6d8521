#include "src/auto_mode.hpp"

#include "autopilot/autopilot.hpp"
#include "autopilot/budget_setting.hpp"
#include "executor/routes/sim_route.hpp"
#include "logging/log.hpp"
#include "profiler/record_settings.hpp"
#include "profiler/sources/sim_source.hpp"

#include <delta/sim_device.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace delta {
namespace {

struct AutoSession {
  std::unique_ptr<autopilot::AutoPilot> pilot;
  std::unique_ptr<executor::SimLaunchRoute> route;
};

// Created once and never destroyed, like the allocator.
std::atomic<AutoSession*> session{nullptr};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

void start_auto_mode_from_env(CachingAllocator& allocator) {
  const profiler::RecordSettings settings = profiler::parse_record_settings(profiler::process_environment());
  if (settings.mode != profiler::DeltaMode::automatic || session.load(std::memory_order_acquire)) return;
  SimDevice* sim = as_sim(&allocator.device());
  if (sim == nullptr)
    throw std::runtime_error("DELTA_MODE=auto runs on the sim device only in this version (DELTA_DEVICE=sim, or "
                             "`deltactl execute --auto`): its online policy is not yet joined to the GPU's launch guard. "
                             "On a GPU, record a trace (DELTA_MODE=record), plan it (deltactl plan) and run the plan "
                             "with DELTA_MODE=run under LD_PRELOAD=libdelta.so");
  const std::string budget = env("DELTA_BUDGET");
  if (budget.empty()) throw std::invalid_argument("DELTA_MODE=auto needs DELTA_BUDGET: bytes (40GiB) or a fraction of the device's memory (0.5)");
  autopilot::AutoOptions options;
  options.budget_bytes = autopilot::parse_budget_setting("DELTA_BUDGET", budget, allocator.device().mem_info().total_bytes);
  if (const std::string host = env("DELTA_HOST_BUDGET"); !host.empty()) {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(host.c_str(), &end, 10);
    if (end == host.c_str() || *end != '\0' || bytes == 0)
      throw std::invalid_argument("DELTA_HOST_BUDGET='" + host + "' is not a number of bytes");
    options.host_limit_bytes = bytes;
  }
  options.record_iterations = settings.iterations;
  options.gpu = sim->profile().name;
  const std::string cache = env("DELTA_PLAN_CACHE");
  options.use_cache = cache != "off";
  options.cache_dir = cache == "off" ? "" : cache;
  auto record = [sim](std::uint32_t iterations) {
    profiler::RecorderOptions recorder_options;
    recorder_options.iterations = iterations;
    recorder_options.first_detection_at = static_cast<std::size_t>(-1);  // steps are delta_step()'s, as auto mode counts them
    autopilot::AutoPilot::Recording r;
    r.recorder = std::make_unique<profiler::Recorder>(recorder_options, profiler::sim_clock(*sim));
    r.recorder->set_gpu({sim->profile().name, sim->profile().name, sim->mem_info().total_bytes});
    r.source = std::make_unique<profiler::SimActivitySource>(*sim, *r.recorder);
    return r;
  };
  auto* created = new AutoSession;
  created->pilot = std::make_unique<autopilot::AutoPilot>(allocator, options, record);
  created->route = std::make_unique<executor::SimLaunchRoute>(*sim, *created->pilot);
  session.store(created, std::memory_order_release);
  log::info("DELTA: auto mode: a budget of {} bytes, {} iterations recorded before planning", options.budget_bytes,
            options.record_iterations);
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
  return j.dump();
}

}  // namespace delta
