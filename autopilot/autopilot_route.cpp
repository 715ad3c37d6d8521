// What the GPU launch route asks of auto mode: it answers from the blocks the program holds
// and passes the rest to whoever is in charge, remembering pins across hand-overs.
#include "autopilot/autopilot.hpp"

#include "logging/log.hpp"
#include "profiler/directions/own_work.hpp"

namespace delta::autopilot {

std::optional<std::pair<DevicePtr, std::size_t>> AutoPilot::block_containing(DevicePtr ptr) const {
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(ptr);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (ptr >= it->first + std::max<std::uint64_t>(it->second.size, 1)) return std::nullopt;
  return std::make_pair(it->first, static_cast<std::size_t>(it->second.size));
}

void AutoPilot::pin(DevicePtr ptr, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  DevicePtr from = ptr, to = ptr + std::max<std::size_t>(bytes, 1);
  auto inside = pins_.upper_bound(ptr);
  if (inside != pins_.begin() && std::prev(inside)->second >= to) return;  // pinned already, whoever is in charge
  for (auto at = pins_.upper_bound(to); at != pins_.begin();) {
    auto prev = std::prev(at);
    if (prev->second < from) break;
    from = std::min(from, prev->first);
    to = std::max(to, prev->second);
    at = pins_.erase(prev);
  }
  pins_[from] = to;
  current().pin(ptr, bytes);
}

void AutoPilot::pin_again() {
  for (const auto& [from, to] : pins_) current().pin(from, static_cast<std::size_t>(to - from));
}

void AutoPilot::before_module_unload(std::uintptr_t module) {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  current().before_module_unload(module);
}

void AutoPilot::before_graph_capture() {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  if (capturing_++ == 0 && executor_) {
    const std::string from = running_;
    to_online();
    log::info("DELTA auto: a stream begins capturing a CUDA graph in step {}; the online policy takes over from the plan "
              "for shape {} until the capture ends",
              steps_ + 1, from);
  }
  online_->before_graph_capture();
}

void AutoPilot::after_graph_capture() {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  if (capturing_ == 0) return;
  --capturing_;
  online_->after_graph_capture();
}

}  // namespace delta::autopilot
