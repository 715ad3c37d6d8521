// The one allocator of the process, built lazily from the environment. It is never
// destroyed: at exit the driver may already be gone, and the OS reclaims everything anyway.
#include "src/runtime.hpp"

#include "allocator/config.hpp"
#include "src/record_mode.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

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

// DELTA runs inside other people's programs: its messages go to stderr, never into the
// job's stdout, through a logger of its own (spdlog is compiled into this library, so its
// registry is private to it).
void configure_logging_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      auto logger = spdlog::stderr_logger_mt("delta");
      spdlog::set_default_logger(logger);
    } catch (const std::exception&) {
      // A logger of that name exists already: keep it.
    }
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [delta] [%l] %v");
    const char* level = std::getenv("DELTA_LOG_LEVEL");
    if (!level) {
      spdlog::set_level(spdlog::level::warn);
      return;
    }
    auto parsed = spdlog::level::from_str(level);
    if (parsed == spdlog::level::off && std::string(level) != "off") {
      spdlog::set_level(spdlog::level::warn);
      spdlog::warn("DELTA_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, critical, off; using warn", level);
      return;
    }
    spdlog::set_level(parsed);
  });
}

}  // namespace

CachingAllocator& runtime_allocator() {
  if (CachingAllocator* a = instance.load(std::memory_order_acquire)) return *a;
  std::lock_guard lock(creation_mutex);
  if (CachingAllocator* a = instance.load(std::memory_order_acquire)) return *a;
  configure_logging_once();
  AllocatorConfig config = config_from_env();
  std::shared_ptr<Device> device = make_device_from_env(0);
  auto allocator = std::make_unique<CachingAllocator>(std::move(device), std::move(config));
  // DELTA_MODE=record: a bad setting fails the creation, so the caller sees which one.
  start_record_mode_from_env(*allocator);
  spdlog::info("DELTA: caching allocator ready on the {} device, limit {} bytes", allocator->device().kind(),
               allocator->limit_bytes());
  instance.store(allocator.get(), std::memory_order_release);
  return *allocator.release();
}

CachingAllocator* runtime_allocator_if_created() noexcept { return instance.load(std::memory_order_acquire); }

void set_last_error(const char* what) noexcept {
  try {
    configure_logging_once();
    if (last_error != what) spdlog::error("{}", what);
    last_error = what;
  } catch (...) {
  }
}

const char* last_error_text() noexcept { return last_error.c_str(); }
void clear_last_error() noexcept { last_error.clear(); }

}  // namespace delta
