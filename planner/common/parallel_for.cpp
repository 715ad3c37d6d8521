#include "common/parallel_for.hpp"

#include "sim/stage_clock.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace delta::planner {

std::size_t planner_threads(std::size_t requested) {
  if (requested > 0) return requested;
  if (const char* text = std::getenv("DELTA_PLANNER_THREADS"); text && *text) {
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value <= 0 || value > 1024)
      throw std::invalid_argument(std::string("DELTA_PLANNER_THREADS must be a whole number from 1 to 1024, got '") + text + "'");
    return static_cast<std::size_t>(value);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& task) {
  const std::size_t workers = std::min(std::max<std::size_t>(threads, 1), count);
  if (workers <= 1) {
    for (std::size_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::size_t first_error_index = count;
  std::mutex error_mutex;
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < count && !failed.load(); i = next.fetch_add(1)) {
      try {
        task(i);
      } catch (...) {
        // Keep the error of the lowest task, so that which one is reported does not depend on
        // the number of threads when several fail.
        std::lock_guard lock(error_mutex);
        if (i < first_error_index) {
          first_error = std::current_exception();
          first_error_index = i;
        }
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  const std::string stage = StageScope::current_path();  // the workers' time counts in the caller's stage
  try {
    pool.reserve(workers - 1);
    for (std::size_t w = 1; w < workers; ++w)
      pool.emplace_back([&] {
        StageScope::Inherit in_stage(stage);
        work();
      });
  } catch (...) {
    // The system refused another thread (or the memory for one): the ones started, and this
    // one, do the work.
  }
  work();
  for (std::thread& thread : pool) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace delta::planner
