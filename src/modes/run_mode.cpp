#include "src/modes/run_mode.hpp"
#include "src/modes/auto_mode.hpp"
#include "autopilot/budget_setting.hpp"

#include "executor/routes/cuda_route.hpp"
#include "executor/executor.hpp"
#include "executor/routes/sim_route.hpp"
#include "src/driver/driver_interpose.hpp"
#include "src/driver/launch_guard.hpp"
#include "logging/log.hpp"
#include "profiler/record_settings.hpp"

#include <delta/plan.hpp>
#include <delta/sim_device.hpp>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace delta {
namespace {

struct RunSession {
  std::unique_ptr<executor::Executor> executor;
  std::unique_ptr<executor::SimLaunchRoute> route;
  std::unique_ptr<executor::CudaLaunchRoute> cuda_route;  // on a GPU: the interposed driver's
};

// Created once and never destroyed, like the allocator.
std::atomic<RunSession*> session{nullptr};

std::string required(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0')
    throw std::invalid_argument(std::string("DELTA_MODE=run needs ") + name +
                                (std::string(name) == "DELTA_PLAN" ? ": the plan file to run (deltactl plan)"
                                                                   : ": the trace the plan was made for"));
  return value;
}

// On a GPU the guard is the interposed driver (src/driver/launch_guard.hpp).
executor::FunctionQueries gpu_launch_route_queries() {
  const bool live = interpose::live();
  const executor::FunctionQueries queries = live ? interpose::function_queries() : executor::FunctionQueries{};
  if (const std::string why = launch_guard_refusal(GuardedMode::run, live, queries); !why.empty())
    throw std::runtime_error(why);
  return queries;
}

}  // namespace

void start_run_mode_from_env(CachingAllocator& allocator) {
  const profiler::RecordSettings settings = profiler::parse_record_settings(profiler::process_environment());
  if (settings.mode != profiler::DeltaMode::run || session.load(std::memory_order_acquire)) return;
  SimDevice* sim = as_sim(&allocator.device());
  executor::FunctionQueries queries;
  if (sim == nullptr) queries = gpu_launch_route_queries();  // throws when the GPU has no launch guard
  const std::string plan_path = required("DELTA_PLAN");
  const std::string trace_path = required("DELTA_TRACE");
  plan::Plan plan = plan::read_plan(plan_path);
  const trace::Trace trace = plan::plan_step(trace::read_trace(trace_path), plan);  // the plan's iteration
  executor::StepProgram program = executor::step_program(trace);
  executor::ActionSchedule schedule = executor::schedule_actions(std::move(plan), trace, program);
  executor::ExecutorOptions options;
  if (const char* budget = std::getenv("DELTA_BUDGET"); budget && *budget)
    options.budget_bytes = autopilot::parse_byte_count_setting("DELTA_BUDGET", budget);
  if (const char* host = std::getenv("DELTA_HOST_BUDGET"); host && *host)
    options.host_limit_bytes = autopilot::parse_byte_count_setting("DELTA_HOST_BUDGET", host);
  if (const char* discard = std::getenv("DELTA_DISCARD"); discard && *discard) {
    const std::string value = discard;
    if (value != "keep" && value != "drop")
      throw std::invalid_argument("DELTA_DISCARD='" + value + "' is not one of: keep, drop");
    options.copy_discards = value == "keep";
  }
  auto* created = new RunSession;
  created->executor = std::make_unique<executor::Executor>(allocator, std::move(program), std::move(schedule), options);
  if (sim != nullptr) {
    created->route = std::make_unique<executor::SimLaunchRoute>(*sim, *created->executor);
  } else {
    created->cuda_route = std::make_unique<executor::CudaLaunchRoute>(*created->executor, queries);
    interpose::install_route(created->cuda_route.get());
  }
  session.store(created, std::memory_order_release);
  log::info("DELTA: run mode: executing {} for {}", plan_path, trace_path);
}

bool running() noexcept { return session.load(std::memory_order_acquire) != nullptr; }

void* serve_allocation(CachingAllocator& allocator, std::size_t size, StreamHandle stream) {
  if (auto_running()) return auto_allocation(size, stream);
  if (RunSession* s = session.load(std::memory_order_acquire)) return s->executor->allocate(size, stream);
  return allocator.allocate(size, stream);
}

void serve_free(CachingAllocator& allocator, void* ptr) {
  if (auto_running()) return auto_free(ptr);
  if (RunSession* s = session.load(std::memory_order_acquire)) return s->executor->deallocate(ptr);
  allocator.deallocate(ptr);
}

void run_step() {
  auto_step();
  if (RunSession* s = session.load(std::memory_order_acquire)) s->executor->end_step();
}

std::string run_stats_json() {
  if (auto_running()) return auto_stats_json();
  RunSession* s = session.load(std::memory_order_acquire);
  if (s == nullptr) return "";
  std::string json = executor::to_json(s->executor->stats());
  if (s->cuda_route && json.size() > 1 && json.back() == '}') {
    json.pop_back();
    json += ",\"launch_route\":" + executor::to_json(s->cuda_route->stats()) + "}";
  }
  return json;
}

}  // namespace delta
