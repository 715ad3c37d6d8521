#include "executor/online/host_slots.hpp"

#include <delta/allocator.hpp>

#include <string>

namespace delta::executor {

HostSlots::HostSlots(Device& device, std::uint64_t limit_bytes) : device_(device), limit_(limit_bytes) {}

HostSlots::~HostSlots() { release_idle(); }

std::uint64_t HostSlots::rounded(std::uint64_t bytes) {
  constexpr std::uint64_t step = std::uint64_t{64} << 10;
  return (bytes + step - 1) / step * step;
}

void* HostSlots::take(std::uint64_t bytes) {
  const std::uint64_t size = rounded(bytes);
  if (auto it = idle_.find(size); it != idle_.end()) {
    void* slot = it->second;
    idle_.erase(it);
    in_use_ += size;
    return slot;
  }
  if (limit_ != 0 && pinned_ + size > limit_) {
    release_idle();
    if (pinned_ + size > limit_) return nullptr;
  }
  void* slot = nullptr;
  try {
    slot = device_.alloc_pinned(size);
  } catch (const DeviceError&) {
    return nullptr;
  }
  pinned_ += size;
  in_use_ += size;
  return slot;
}

void HostSlots::give_back(void* slot, std::uint64_t bytes) {
  const std::uint64_t size = rounded(bytes);
  in_use_ -= size;
  idle_.emplace(size, slot);
}

void HostSlots::release_idle() {
  for (auto& [size, slot] : idle_) {
    try {
      device_.free_pinned(slot);
    } catch (...) {
    }
    pinned_ -= size;
  }
  idle_.clear();
}

void HostSlots::check() const {
  std::uint64_t idle = 0;
  for (const auto& [size, slot] : idle_) {
    if (slot == nullptr || size != rounded(size)) throw InvariantError("host slots: an idle slot of " + std::to_string(size) + " bytes is not a whole slot");
    idle += size;
  }
  if (idle + in_use_ != pinned_)
    throw InvariantError("host slots: " + std::to_string(idle) + " idle and " + std::to_string(in_use_) +
                         " bytes in use, but " + std::to_string(pinned_) + " pinned");
  if (limit_ != 0 && pinned_ > limit_)
    throw InvariantError("host slots: " + std::to_string(pinned_) + " bytes pinned, past the limit of " + std::to_string(limit_));
}

}  // namespace delta::executor
