// The simulated GPU (see sim_device_core.hpp): memory, streams, events, pinned memory and the
// sim's own bookkeeping.
#include "device/sim/sim_device_core.hpp"

#include "device/sim/sim_device_impl.hpp"
#include "device/sim/sim_errors.hpp"

#include <utility>

namespace delta::sim {

SimDeviceImpl::SimDeviceImpl(const GpuProfile& profile, std::size_t capacity_bytes, const SimOptions& options,
                             int ordinal)
    : profile_(profile),
      ordinal_(ordinal),
      on_unmapped_(options.on_unmapped),
      // back_memory = false is the older spelling of SimContent::none and wins over `content`.
      memory_(capacity_bytes, options.back_memory ? options.content : SimContent::none),
      pinned_(memory_.content()) {}

MemInfo SimDeviceImpl::mem_info() {
  std::lock_guard lock(mutex_);
  const std::size_t total = memory_.capacity();
  return {total - memory_.counters().physical_bytes_in_use, total};
}

// ---- virtual memory ----

DevicePtr SimDeviceImpl::reserve(std::size_t size) {
  std::lock_guard lock(mutex_);
  return memory_.reserve(size);
}

void SimDeviceImpl::release_reservation(DevicePtr va, std::size_t size) {
  std::lock_guard lock(mutex_);
  memory_.check_release_reservation(va, size);
  // Its mappings are gone, but a launch that ran on unmapped addresses (SimUnmapped::count)
  // may still be in flight there.
  hazards_.check_host("release_reservation", va, size, true, clock_.now());
  memory_.release_reservation(va, size);
}

PhysHandle SimDeviceImpl::create_physical(std::size_t size) {
  std::lock_guard lock(mutex_);
  maybe_fail(SimFault::create_physical, "create_physical");
  return memory_.create_physical(size);
}

void SimDeviceImpl::release_physical(PhysHandle handle) {
  std::lock_guard lock(mutex_);
  memory_.release_physical(handle);
}

void SimDeviceImpl::map(DevicePtr va, std::size_t size, PhysHandle handle) {
  std::lock_guard lock(mutex_);
  memory_.map(va, size, handle);
}

void SimDeviceImpl::unmap(DevicePtr va, std::size_t size) {
  std::lock_guard lock(mutex_);
  memory_.check_unmap(va, size);
  // cuMemUnmap does not wait for the work using the range: that work would fault.
  hazards_.check_host("unmap", va, size, true, clock_.now());
  memory_.unmap(va, size);
}

// ---- streams and events ----

StreamHandle SimDeviceImpl::create_stream() {
  std::lock_guard lock(mutex_);
  return clock_.create_stream();
}

void SimDeviceImpl::destroy_stream(StreamHandle stream) {
  std::lock_guard lock(mutex_);
  clock_.destroy_stream(stream);
}

void SimDeviceImpl::synchronize_stream(StreamHandle stream) {
  std::lock_guard lock(mutex_);
  clock_.synchronize_stream(stream);
}

void SimDeviceImpl::synchronize() {
  std::lock_guard lock(mutex_);
  clock_.synchronize_all();
}

EventHandle SimDeviceImpl::create_event() {
  std::lock_guard lock(mutex_);
  return clock_.create_event();
}

void SimDeviceImpl::destroy_event(EventHandle event) {
  std::lock_guard lock(mutex_);
  clock_.destroy_event(event);
}

void SimDeviceImpl::record_event(EventHandle event, StreamHandle stream) {
  std::lock_guard lock(mutex_);
  clock_.record_event(event, stream);
}

bool SimDeviceImpl::query_event(EventHandle event) {
  std::lock_guard lock(mutex_);
  return clock_.query_event(event);
}

void SimDeviceImpl::synchronize_event(EventHandle event) {
  std::lock_guard lock(mutex_);
  clock_.synchronize_event(event);
}

void SimDeviceImpl::stream_wait_event(StreamHandle stream, EventHandle event) {
  std::lock_guard lock(mutex_);
  clock_.stream_wait_event(stream, event);
}

// ---- pinned host memory ----

void* SimDeviceImpl::alloc_pinned(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  maybe_fail(SimFault::alloc_pinned, "alloc_pinned");
  return pinned_.allocate(bytes);
}

void SimDeviceImpl::free_pinned(void* ptr) {
  std::lock_guard lock(mutex_);
  // Like cudaFreeHost, which waits for the device: no copy can still be using the buffer, and
  // the address may come back from the host's allocator for something else at once.
  if (ptr != nullptr && pinned_.covers(ptr, 1)) clock_.synchronize_all();
  pinned_.free(ptr);
}

// ---- the virtual clock ----

std::uint64_t SimDeviceImpl::now_ns() const {
  std::lock_guard lock(mutex_);
  return clock_.now();
}

void SimDeviceImpl::advance_ns(std::uint64_t ns) {
  std::lock_guard lock(mutex_);
  clock_.advance(ns);
}

std::uint64_t SimDeviceImpl::stream_ready_ns(StreamHandle stream) const {
  std::lock_guard lock(mutex_);
  return clock_.ready("stream_ready_ns", stream);
}

// ---- the sim's own bookkeeping ----

bool SimDeviceImpl::is_mapped(DevicePtr ptr, std::size_t bytes) const {
  std::lock_guard lock(mutex_);
  return memory_.is_mapped(ptr, bytes);
}

SimCounters SimDeviceImpl::counters() const {
  std::lock_guard lock(mutex_);
  const MemoryCounters& memory = memory_.counters();
  SimCounters out;
  out.maps = memory.maps;
  out.unmaps = memory.unmaps;
  out.physical_creates = memory.physical_creates;
  out.physical_releases = memory.physical_releases;
  out.physical_bytes_in_use = memory.physical_bytes_in_use;
  out.physical_bytes_peak = memory.physical_bytes_peak;
  out.bytes_h2d = bytes_h2d_;
  out.bytes_d2h = bytes_d2h_;
  out.bytes_d2d = bytes_d2d_;
  out.kernels = kernels_;
  out.unmapped_accesses = unmapped_accesses_;
  out.content_runs = memory_.content_runs() + pinned_.content_runs();
  out.hazard_ranges = hazards_.ranges();
  return out;
}

void SimDeviceImpl::check_invariants() const {
  std::lock_guard lock(mutex_);
  memory_.check_invariants();
  pinned_.check_invariants();
  hazards_.check_invariants();
}

void SimDeviceImpl::set_activity_observer(std::function<void(const Activity&)> observer) {
  std::lock_guard lock(mutex_);
  observer_ = observer ? std::make_shared<const Observer>(std::move(observer)) : nullptr;
}

std::shared_ptr<SimDevice> create_sim_device(const SimOptions& options, int ordinal) {
  const GpuProfile& profile = gpu_profile(options.profile);
  const std::size_t capacity = options.capacity_bytes != 0 ? options.capacity_bytes : profile.memory_bytes;
  return std::make_shared<SimDeviceImpl>(profile, capacity, options, ordinal);
}

}  // namespace delta::sim
