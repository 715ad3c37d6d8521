#include "replay/delta_target.hpp"

namespace delta::replay {

DeltaTarget::DeltaTarget(const DeltaTargetOptions& options) {
  SimOptions sim;
  sim.profile = options.gpu;
  sim.capacity_bytes = options.capacity_bytes;
  sim.back_memory = false;  // a replay only needs the accounting, not the bytes
  device_ = make_sim_device(sim);
  allocator_ = std::make_unique<CachingAllocator>(device_, options.allocator);
}

DeltaTarget::~DeltaTarget() {
  // The allocator goes first: it may still use the streams when it shuts down.
  allocator_.reset();
  for (auto& [trace_stream, handle] : streams_) device_->destroy_stream(handle);
}

StreamHandle DeltaTarget::device_stream(std::uint64_t stream) {
  if (stream == 0) return 0;
  auto it = streams_.find(stream);
  if (it == streams_.end()) it = streams_.emplace(stream, device_->create_stream()).first;
  return it->second;
}

std::optional<std::uintptr_t> DeltaTarget::allocate(std::size_t size, std::uint64_t stream) {
  try {
    return reinterpret_cast<std::uintptr_t>(allocator_->allocate(size, device_stream(stream)));
  } catch (const OutOfMemoryError&) {
    return std::nullopt;
  }
}

void DeltaTarget::free(std::uintptr_t address) { allocator_->deallocate(reinterpret_cast<void*>(address)); }

TargetStats DeltaTarget::stats() const {
  AllocatorStats s = allocator_->stats();
  TargetStats t;
  t.allocated_bytes = s.allocated_bytes;
  t.allocated_peak = s.allocated_peak;
  t.reserved_bytes = s.reserved_bytes;
  t.reserved_peak = s.reserved_peak;
  t.cache_hits = s.cache_hits;
  t.cache_misses = s.cache_misses;
  t.ooms = s.ooms;
  return t;
}

void DeltaTarget::check_invariants() const { allocator_->check_invariants(); }

}  // namespace delta::replay
