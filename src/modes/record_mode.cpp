#include "src/modes/record_mode.hpp"

#include "profiler/record_session.hpp"
#include "src/driver/driver_interpose.hpp"
#include "src/driver/driver_record.hpp"
#include "logging/log.hpp"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace delta {
namespace {

// Created once and never destroyed, like the allocator: the exit handler and late frees from
// other threads may still reach it while the process ends.
std::atomic<profiler::RecordSession*> session{nullptr};

void write_trace_at_exit() {
  if (profiler::RecordSession* s = session.load(std::memory_order_acquire)) s->finish_at_exit();
}

}  // namespace

void start_record_mode_from_env(CachingAllocator& allocator) {
  const profiler::RecordSettings settings = profiler::parse_record_settings(profiler::process_environment());
  if (settings.mode != profiler::DeltaMode::record) return;
  if (session.load(std::memory_order_acquire) != nullptr) return;
  auto* created = new profiler::RecordSession(settings, allocator.device(), interpose::live());
  const AllocatorConfig& config = allocator.config();
  created->set_allocator_settings({
      {"max_split_size", config.max_split_size == SIZE_MAX ? "unlimited" : std::to_string(config.max_split_size)},
      {"garbage_collection_threshold", std::to_string(config.garbage_collection_threshold)},
      {"memory_fraction", std::to_string(config.memory_fraction)},
      {"hard_limit_bytes", std::to_string(config.hard_limit_bytes)},
      {"limit_bytes", std::to_string(allocator.limit_bytes())},
  });
  session.store(created, std::memory_order_release);
  // On a GPU under LD_PRELOAD the driver launch wrappers record the launches and call the
  // learner (src/driver/driver_record.hpp). Never destroyed, like the session.
  if (created->wrapper_launches() || created->launch_learning()) {
    auto* hook = new interpose::RecordLaunchHook(created->wrapper_launches(), created->launch_learning(),
                                                 interpose::function_queries());
    interpose::installed_record_hook.store(hook, std::memory_order_release);
  }
  // Registered after the CUDA runtime initialised (the allocator is created on the first
  // allocation), so it runs before the runtime tears the context down.
  if (std::atexit(write_trace_at_exit) != 0) {
    log::warn("DELTA recorder: no exit handler could be registered; call delta_trace_dump() before exiting");
  }
}

bool recording() noexcept { return session.load(std::memory_order_acquire) != nullptr; }

void record_allocated(const void* ptr, std::size_t size, StreamHandle stream) noexcept {
  profiler::RecordSession* s = session.load(std::memory_order_acquire);
  if (s == nullptr || ptr == nullptr) return;
  try {
    s->on_alloc(reinterpret_cast<std::uint64_t>(ptr), size, stream);
  } catch (const std::exception& e) {
    log::warn("DELTA recorder: allocation not recorded: {}", e.what());
  }
}

void record_freed(const void* ptr) noexcept {
  profiler::RecordSession* s = session.load(std::memory_order_acquire);
  if (s == nullptr || ptr == nullptr) return;
  try {
    s->on_free(reinterpret_cast<std::uint64_t>(ptr));
  } catch (const std::exception& e) {
    log::warn("DELTA recorder: free not recorded: {}", e.what());
  }
}

void record_step() {
  if (profiler::RecordSession* s = session.load(std::memory_order_acquire)) s->step();
}

void record_dump(const char* path) {
  profiler::RecordSession* s = session.load(std::memory_order_acquire);
  if (s == nullptr) {
    throw std::logic_error("delta_trace_dump: nothing is being recorded (DELTA_MODE is not 'record', or no "
                           "allocation has started DELTA yet)");
  }
  s->dump(path ? path : "");
}

}  // namespace delta
