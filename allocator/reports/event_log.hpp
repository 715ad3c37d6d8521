// The bounded history of allocator events that dumps write. Recording must stay cheap on the
// fast path: a store into a preallocated ring and a cycle-counter read, converted to
// nanoseconds only when the log is read.
#pragma once

#include <delta/allocator.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace delta::detail {

class TickClock {
 public:
  TickClock() : start_ticks_(ticks()), start_time_(std::chrono::steady_clock::now()) {}
  static std::uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return std::chrono::steady_clock::now().time_since_epoch().count();
#endif
  }
  // Ticks since construction to nanoseconds, calibrated over the whole elapsed interval.
  double ns_per_tick() const {
    std::uint64_t now_ticks = ticks();
    auto elapsed = std::chrono::steady_clock::now() - start_time_;
    double ns = std::chrono::duration<double, std::nano>(elapsed).count();
    std::uint64_t dt = now_ticks - start_ticks_;
    return dt > 0 && ns > 0 ? ns / double(dt) : 1.0;
  }
  std::uint64_t start_ticks() const { return start_ticks_; }

 private:
  std::uint64_t start_ticks_;
  std::chrono::steady_clock::time_point start_time_;
};

class EventLog {
 public:
  explicit EventLog(std::size_t capacity) : ring_(capacity) {}

  void record(AllocatorEvent::Kind kind, DevicePtr ptr, std::size_t size, StreamHandle stream) {
    if (ring_.empty()) return;
    ring_[next_ % ring_.size()] = AllocatorEvent{kind, TickClock::ticks(), ptr, size, stream};
    ++next_;
  }
  // Oldest first, with times converted to nanoseconds since the allocator started.
  std::vector<AllocatorEvent> snapshot() const {
    std::vector<AllocatorEvent> out;
    std::size_t count = next_ < ring_.size() ? next_ : ring_.size();
    out.reserve(count);
    double scale = clock_.ns_per_tick();
    for (std::size_t i = next_ - count; i < next_; ++i) {
      AllocatorEvent e = ring_[i % ring_.size()];
      e.time_ns = static_cast<std::uint64_t>(double(e.time_ns - clock_.start_ticks()) * scale);
      out.push_back(e);
    }
    return out;
  }
  std::uint64_t total_recorded() const { return next_; }

 private:
  TickClock clock_;
  std::vector<AllocatorEvent> ring_;
  std::uint64_t next_ = 0;
};

}  // namespace delta::detail
