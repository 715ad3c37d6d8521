// The public face of the allocator: construction, the lock, and delegation to Impl.
#include "allocator/allocator_impl.hpp"

#include "allocator/reports/format.hpp"
#include "logging/log.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace delta {

const char* to_string(AllocatorEvent::Kind kind) {
  switch (kind) {
    case AllocatorEvent::Kind::alloc: return "alloc";
    case AllocatorEvent::Kind::free: return "free";
    case AllocatorEvent::Kind::free_deferred: return "free_deferred";
    case AllocatorEvent::Kind::free_completed: return "free_completed";
    case AllocatorEvent::Kind::map: return "map";
    case AllocatorEvent::Kind::unmap: return "unmap";
    case AllocatorEvent::Kind::oom: return "oom";
    case AllocatorEvent::Kind::empty_cache: return "empty_cache";
  }
  return "unknown";
}

CachingAllocator::Impl::Impl(std::shared_ptr<Device> dev, AllocatorConfig cfg)
    : device(std::move(dev)), config(std::move(cfg)), log(config.event_log_capacity) {
  if (!device) throw std::invalid_argument("CachingAllocator needs a device");
  page_size = device->granularity();
  if (page_size == 0 || (page_size & (page_size - 1)) != 0 || page_size % kMinBlockSize != 0)
    throw std::invalid_argument("device granularity " + std::to_string(page_size) + " is not a power of two multiple of 512");
  device_total = device->mem_info().total_bytes;
  if (config.roundup_power2_divisions.empty()) config.roundup_power2_divisions.assign(kRoundUpIntervals, 0);
  limit = compute_limit(config.memory_fraction);
  stats.limit_bytes = limit;
}

// Whole pages under the fraction of the device and the hard limit. A limit under one page
// would refuse every allocation, so it is refused itself, naming what set it.
std::size_t CachingAllocator::Impl::compute_limit(double memory_fraction) const {
  double by_fraction = std::floor(double(device_total) * memory_fraction);
  std::size_t value = static_cast<std::size_t>(by_fraction);
  if (config.hard_limit_bytes) value = std::min(value, config.hard_limit_bytes);
  if (value < page_size)
    throw std::invalid_argument(
        "DELTA: the memory limit comes to " + std::to_string(value) + " bytes, under one page of " + std::to_string(page_size) +
        " (memory fraction " + std::to_string(memory_fraction) + " of " + std::to_string(device_total) + " bytes" +
        (config.hard_limit_bytes ? ", DELTA_MEMORY_LIMIT " + std::to_string(config.hard_limit_bytes) + " bytes" : std::string()) +
        "): every allocation would be refused");
  return value / page_size * page_size;
}

// Returns every page and reservation to the device. Errors are logged, not thrown: this runs
// during shutdown, when the device may already be going away. One device-wide wait, not one per
// stream: the streams the allocator served may have been destroyed by their owners by now (as
// PyTorch's allocator does when it empties its cache, the wait covers other work too).
CachingAllocator::Impl::~Impl() {
  try {
    device->synchronize();
  } catch (const std::exception& e) {
    // Work may still be running on this memory: unmapping it could fault that work, while a
    // failing context's memory goes back with the context anyway.
    log::warn("DELTA: the device did not finish its work at shutdown ({}); its memory is left to the driver",
              e.what());
    return;
  }
  try {
    for (auto& [stream, pools] : streams) {
      for (auto& arenas : pools->arenas) {
        for (auto& arena : arenas) {
          for (std::size_t i = 0; i < arena->touched_pages; ++i) {
            detail::Page& page = arena->pages[i];
            if (page.fence) device->destroy_event(page.fence);
            if (!page.handle) continue;
            device->unmap(arena->page_address(i), page_size);
            device->release_physical(page.handle);
          }
          device->release_reservation(arena->base, arena->va_size);
        }
      }
    }
    for (PhysHandle h : spare_handles) device->release_physical(h);
    for (const PendingEvent& p : pending) device->destroy_event(p.event);
    for (EventHandle e : event_pool) device->destroy_event(e);
    idle_fences.destroy(*device);
  } catch (const std::exception& e) {
    log::warn("DELTA: releasing device memory at shutdown failed: {}", e.what());
  }
}

CachingAllocator::CachingAllocator(std::shared_ptr<Device> device, AllocatorConfig config)
    : impl_(std::make_unique<Impl>(std::move(device), std::move(config))) {}

CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::allocate(std::size_t size, StreamHandle stream) {
  std::lock_guard lock(impl_->mutex);
  return impl_->allocate(size, stream);
}

void* CachingAllocator::allocate(std::size_t size, StreamHandle stream, Placement placement) {
  std::lock_guard lock(impl_->mutex);
  return placement.own_pages ? impl_->allocate_own_pages(size, stream, placement.when_short, placement.packed, placement.group)
                             : impl_->allocate(size, stream, placement.when_short);
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard lock(impl_->mutex);
  impl_->deallocate(reinterpret_cast<DevicePtr>(ptr));
}

namespace {
// Checked in every build: a thread id compare, a fraction of what re-entering the lock costs,
// and a caller that does not hold the lock would race every other thread on the allocator.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_not_held(const char* where) {
  throw std::logic_error(std::string("DELTA: CachingAllocator::") + where + " with LockHeld from a thread that does not hold lock()");
}
}  // namespace

void* CachingAllocator::allocate(std::size_t size, StreamHandle stream, Placement placement, LockHeld) {
  if (!impl_->mutex.held_by_this_thread()) [[unlikely]]
    refuse_not_held("allocate");
  return placement.own_pages ? impl_->allocate_own_pages(size, stream, placement.when_short, placement.packed, placement.group)
                             : impl_->allocate(size, stream, placement.when_short);
}

void CachingAllocator::deallocate(void* ptr, LockHeld) {
  if (!ptr) return;
  if (!impl_->mutex.held_by_this_thread()) [[unlikely]]
    refuse_not_held("deallocate");
  impl_->deallocate(reinterpret_cast<DevicePtr>(ptr));
}

void CachingAllocator::record_stream(void* ptr, StreamHandle stream) {
  std::lock_guard lock(impl_->mutex);
  detail::Block** found = impl_->live.find(reinterpret_cast<DevicePtr>(ptr));
  if (!found)
    throw InvalidFreeError("DELTA: record_stream on " + format_hex(reinterpret_cast<DevicePtr>(ptr)) +
                           ", which is not a live DELTA allocation");
  detail::Block* b = *found;
  if (stream == b->arena->stream) return;
  if (std::find(b->uses.begin(), b->uses.end(), stream) != b->uses.end()) return;
  // The free records an event on the stream: a handle the device does not know is refused now,
  // naming it, rather than at the free (which then waits for the whole device instead).
  EventHandle probe = impl_->take_event();
  try {
    impl_->device->record_event(probe, stream);
  } catch (const DeviceError& e) {
    impl_->event_pool.push_back(probe);
    if (e.code() != DeviceErrc::invalid_handle) throw;  // a failing device, not a wrong stream
    throw std::invalid_argument("DELTA: record_stream on " + format_hex(reinterpret_cast<DevicePtr>(ptr)) + ": stream " +
                                format_hex(stream) + " is not a stream of this device (" +
                                e.what() + "); nothing was changed");
  }
  impl_->event_pool.push_back(probe);
  b->uses.push_back(stream);
}

ReentrantLock& CachingAllocator::lock() const { return impl_->mutex; }

bool CachingAllocator::owns(const void* ptr) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->live.find(reinterpret_cast<DevicePtr>(ptr)) != nullptr;
}

std::optional<std::size_t> CachingAllocator::block_size(const void* ptr) const {
  std::lock_guard lock(impl_->mutex);
  detail::Block** found = impl_->live.find(reinterpret_cast<DevicePtr>(ptr));
  if (!found) return std::nullopt;
  return (*found)->size;
}

std::size_t CachingAllocator::unmap_pages(void* ptr, std::size_t offset, std::size_t bytes) {
  std::lock_guard lock(impl_->mutex);
  return impl_->unmap_pages(reinterpret_cast<DevicePtr>(ptr), offset, bytes);
}

void CachingAllocator::map_pages(void* ptr, std::size_t offset, std::size_t bytes, WhenShort when_short) {
  std::lock_guard lock(impl_->mutex);
  impl_->map_pages(reinterpret_cast<DevicePtr>(ptr), offset, bytes, when_short);
}

bool CachingAllocator::pages_mapped(const void* ptr, std::size_t offset, std::size_t bytes) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->pages_mapped(reinterpret_cast<DevicePtr>(ptr), offset, bytes);
}

void CachingAllocator::reserve_spare_pages(std::size_t bytes) {
  std::lock_guard lock(impl_->mutex);
  impl_->reserve_spare_pages(bytes);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(impl_->mutex);
  impl_->release_all_idle_pages();
}

void CachingAllocator::set_memory_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw std::invalid_argument("memory fraction must be in (0, 1], got " + std::to_string(fraction));
  std::lock_guard lock(impl_->mutex);
  impl_->limit = impl_->compute_limit(fraction);  // throws, changing nothing, where under a page
  impl_->config.memory_fraction = fraction;
  impl_->stats.limit_bytes = impl_->limit;
  // Cached pages above the new limit go back now; live blocks are never taken away. A lower
  // limit also wins over the spare pool's target: spares go too while reserved is above it.
  if (impl_->stats.reserved_bytes > impl_->limit) {
    impl_->release_all_idle_pages();
    std::size_t& reserved = impl_->stats.reserved_bytes;
    std::size_t spares = impl_->spare_handles.size();
    if (reserved > impl_->limit) {
      std::size_t over = (reserved - impl_->limit + impl_->page_size - 1) / impl_->page_size;
      impl_->trim_spares(spares > over ? spares - over : 0);
    }
  }
}

std::size_t CachingAllocator::unused_page_bytes() const {
  std::lock_guard lock(impl_->mutex);
  return (impl_->idle_count + impl_->spare_handles.size()) * impl_->page_size;
}

std::size_t CachingAllocator::limit_bytes() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->limit;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(impl_->mutex);
  AllocatorStats s = impl_->stats;
  s.cached_bytes = detail::cached_bytes_of(s);
  s.live_blocks = impl_->live.size();
  s.pending_frees = impl_->pending.size();
  std::size_t free_blocks = 0;
  for (auto& [stream, pools] : impl_->streams)
    for (const auto& index : pools->free) free_blocks += index.size();
  s.free_blocks = free_blocks;
  s.spare_bytes = impl_->spare_handles.size() * impl_->page_size;
  return s;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(impl_->mutex);
  auto& s = impl_->stats;
  s.allocated_peak = s.allocated_bytes;
  s.requested_peak = s.requested_bytes;
  s.reserved_peak = s.reserved_bytes;
  s.active_peak = s.active_bytes;
}

void CachingAllocator::check_invariants() const {
  std::lock_guard lock(impl_->mutex);
  impl_->check();
}

std::vector<AllocatorEvent> CachingAllocator::events() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->log.snapshot();
}

std::string CachingAllocator::dump_json() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->to_json();
}

void CachingAllocator::dump(const std::string& path) const {
  std::string json = dump_json();
  write_file_atomically(path, json);
}

Device& CachingAllocator::device() const { return *impl_->device; }
const AllocatorConfig& CachingAllocator::config() const { return impl_->config; }

}  // namespace delta
