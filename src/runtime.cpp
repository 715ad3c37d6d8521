// The one allocator of the process, built lazily from the environment. It is never
// destroyed: at exit the driver may already be gone, and the OS reclaims everything anyway.
#include "src/runtime.hpp"

#include "allocator/config.hpp"
#include "logging/log.hpp"
#include "src/modes/record_mode.hpp"
#include "src/modes/run_mode.hpp"
#include "src/modes/auto_mode.hpp"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

namespace delta {
namespace {

std::atomic<CachingAllocator*> instance{nullptr};
std::mutex creation_mutex;
thread_local std::string last_error;

}  // namespace

CachingAllocator& runtime_allocator() {
  if (CachingAllocator* a = instance.load(std::memory_order_acquire)) return *a;
  std::lock_guard lock(creation_mutex);
  if (CachingAllocator* a = instance.load(std::memory_order_acquire)) return *a;
  log::configure_from_environment();
  AllocatorConfig config = config_from_env();
  std::shared_ptr<Device> device = make_device_from_env(0);
  auto allocator = std::make_unique<CachingAllocator>(std::move(device), std::move(config));
  // DELTA_MODE=record: a bad setting fails the creation, so the caller sees which one.
  start_record_mode_from_env(*allocator);
  // DELTA_MODE=run: likewise; the executor takes the allocator's limit down to the budget.
  start_run_mode_from_env(*allocator);
  // DELTA_MODE=auto: likewise (a budget only; refused on a GPU where libdelta was not preloaded).
  start_auto_mode_from_env(*allocator);
  log::info("DELTA: caching allocator ready on the {} device, limit {} bytes", allocator->device().kind(),
            allocator->limit_bytes());
  instance.store(allocator.get(), std::memory_order_release);
  return *allocator.release();
}

CachingAllocator* runtime_allocator_if_created() noexcept { return instance.load(std::memory_order_acquire); }

void set_last_error(const char* what) noexcept {
  try {
    log::configure_from_environment();
    if (last_error != what) log::error("{}", what);
    last_error = what;
  } catch (...) {
  }
}

const char* last_error_text() noexcept { return last_error.c_str(); }
void clear_last_error() noexcept { last_error.clear(); }

}  // namespace delta
