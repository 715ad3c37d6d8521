// Shared set-up for allocator tests: a small simulated GPU and an allocator over it.
#pragma once

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <memory>

namespace delta::testing {

inline constexpr std::size_t MiB = std::size_t(1) << 20;
inline constexpr std::size_t GiB = std::size_t(1) << 30;

struct SimAllocator {
  std::shared_ptr<Device> device;
  SimDevice* sim;
  std::unique_ptr<CachingAllocator> allocator;

  explicit SimAllocator(std::size_t capacity = 1 * GiB, AllocatorConfig config = {}, bool back = true) {
    SimOptions options;
    options.capacity_bytes = capacity;
    options.back_memory = back;
    device = make_sim_device(options);
    sim = as_sim(device.get());
    allocator = std::make_unique<CachingAllocator>(device, std::move(config));
  }
  CachingAllocator& operator*() { return *allocator; }
  CachingAllocator* operator->() { return allocator.get(); }
};

inline DevicePtr dptr(void* p) { return reinterpret_cast<DevicePtr>(p); }

}  // namespace delta::testing
