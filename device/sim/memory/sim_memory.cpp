#include "device/sim/memory/sim_memory.hpp"

#include "device/sim/sim_errors.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <vector>

namespace delta::sim {

namespace {

// A gap of unreserved space after every reservation, so that running off the end of one
// reservation faults instead of landing in the next one.
constexpr std::size_t kGuardBytes = kGranularity;

bool is_granular(std::size_t size) { return size != 0 && size % kGranularity == 0; }

}  // namespace

SimMemory::SimMemory(std::size_t capacity_bytes, SimContent content) : capacity_(capacity_bytes), content_(content) {}

SimMemory::~SimMemory() {
  for (auto& [handle, physical] : physical_) {
    if (physical.data != nullptr) ::munmap(physical.data, physical.size);
  }
}

// ---- address space ----

DevicePtr SimMemory::take_address_range(std::size_t span) {
  if (span <= kVaLimit - bump_) {
    const DevicePtr start = bump_;
    bump_ += span;
    return start;
  }
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    if (it->second < span) continue;
    const DevicePtr start = it->first;
    const std::size_t left = it->second - span;
    free_ranges_.erase(it);
    if (left != 0) free_ranges_.emplace(start + span, left);
    return start;
  }
  return 0;
}

void SimMemory::return_address_range(DevicePtr start, std::size_t span) {
  // Coalesce with the free neighbours, and give the range back to the bump region when it
  // ends there, so that the space never fragments into unusable slivers.
  auto next = free_ranges_.lower_bound(start);
  if (next != free_ranges_.end() && next->first == start + span) {
    span += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      span += prev->second;
      free_ranges_.erase(prev);
    }
  }
  if (start + span == bump_) {
    bump_ = start;
  } else {
    free_ranges_.emplace(start, span);
  }
}

DevicePtr SimMemory::reserve(std::size_t size) {
  if (!is_granular(size)) {
    fail(DeviceErrc::invalid_value, "reserve({} bytes): size must be a non-zero multiple of the {}-byte granularity",
         size, kGranularity);
  }
  const DevicePtr start = size <= kVaLimit - kVaBase - kGuardBytes ? take_address_range(size + kGuardBytes) : 0;
  if (start == 0) {
    fail(DeviceErrc::out_of_memory, "reserve({} bytes): virtual address space exhausted ({} bytes in all)", size,
         kVaLimit - kVaBase);
  }
  reservations_.emplace(start, Reservation{size, 0});
  return start;
}

void SimMemory::check_release_reservation(DevicePtr va, std::size_t size) const {
  const auto it = reservations_.find(va);
  if (it == reservations_.end()) {
    fail(DeviceErrc::invalid_handle, "release_reservation({}, {} bytes): no reservation starts at {}", hex(va), size,
         hex(va));
  }
  if (it->second.size != size) {
    fail(DeviceErrc::invalid_value, "release_reservation({}, {} bytes): the reservation at {} is {} bytes", hex(va),
         size, hex(va), it->second.size);
  }
  if (it->second.live_mappings != 0) {
    fail(DeviceErrc::invalid_value, "release_reservation({}, {} bytes): {} mapping(s) inside are still live; unmap them first",
         hex(va), size, it->second.live_mappings);
  }
}

void SimMemory::release_reservation(DevicePtr va, std::size_t size) {
  check_release_reservation(va, size);
  reservations_.erase(va);
  return_address_range(va, size + kGuardBytes);
}

std::map<DevicePtr, SimMemory::Reservation>::iterator SimMemory::reservation_containing(DevicePtr ptr) {
  auto it = reservations_.upper_bound(ptr);
  if (it == reservations_.begin()) return reservations_.end();
  --it;
  return ptr - it->first < it->second.size ? it : reservations_.end();
}

// ---- physical memory ----

PhysHandle SimMemory::create_physical(std::size_t size) {
  if (!is_granular(size)) {
    fail(DeviceErrc::invalid_value, "create_physical({} bytes): size must be a non-zero multiple of the {}-byte granularity",
         size, kGranularity);
  }
  const std::size_t in_use = counters_.physical_bytes_in_use;
  if (size > capacity_ - in_use) {
    fail(DeviceErrc::out_of_memory,
         "create_physical({} bytes): out of device memory ({} of {} bytes in use, {} free)", size, in_use, capacity_,
         capacity_ - in_use);
  }
  std::uint8_t* data = nullptr;
  std::unique_ptr<SymbolicContent> symbolic;
  if (content_ == SimContent::digest) symbolic = std::make_unique<SymbolicContent>(size);
  if (content_ == SimContent::bytes) {
    // One anonymous mapping per handle, without swap reservation: pages cost RAM only once
    // written, so a simulated 141 GB device fits on a laptop as long as it is mostly untouched.
    void* host = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (host == MAP_FAILED) {
      fail(DeviceErrc::out_of_memory, "create_physical({} bytes): the host could not provide backing memory: {}", size,
           std::strerror(errno));
    }
    data = static_cast<std::uint8_t*>(host);
  }
  const PhysHandle handle = next_handle_++;
  physical_.emplace(handle, Physical{size, data, std::move(symbolic), false, 0});
  counters_.physical_creates++;
  counters_.physical_bytes_in_use = in_use + size;
  counters_.physical_bytes_peak = std::max(counters_.physical_bytes_peak, counters_.physical_bytes_in_use);
  return handle;
}

void SimMemory::release_physical(PhysHandle handle) {
  const auto it = physical_.find(handle);
  if (it == physical_.end() || it->second.released) {
    fail(DeviceErrc::invalid_handle, "release_physical({}): unknown or already released physical handle", hex(handle));
  }
  counters_.physical_releases++;
  it->second.released = true;
  // Like the driver, a handle released while mapped lives on until its last unmap.
  if (it->second.map_count == 0) free_physical(it);
}

void SimMemory::free_physical(std::unordered_map<PhysHandle, Physical>::iterator it) {
  if (it->second.data != nullptr) ::munmap(it->second.data, it->second.size);
  counters_.physical_bytes_in_use -= it->second.size;
  physical_.erase(it);
}

// ---- mappings ----

void SimMemory::map(DevicePtr va, std::size_t size, PhysHandle handle) {
  const auto physical = physical_.find(handle);
  if (physical == physical_.end() || physical->second.released) {
    fail(DeviceErrc::invalid_handle, "map({}, {} bytes, handle {}): unknown or released physical handle", hex(va), size,
         hex(handle));
  }
  if (size != physical->second.size) {
    fail(DeviceErrc::invalid_value, "map({}, {} bytes, handle {}): the handle is {} bytes; a map covers a whole handle",
         hex(va), size, hex(handle), physical->second.size);
  }
  if (va % kGranularity != 0) {
    fail(DeviceErrc::invalid_value, "map({}, {} bytes): address is not aligned to the {}-byte granularity", hex(va), size,
         kGranularity);
  }
  const auto reservation = reservation_containing(va);
  if (reservation == reservations_.end() || size > reservation->second.size - (va - reservation->first)) {
    fail(DeviceErrc::invalid_value, "map({}, {} bytes): the range is not inside one reservation", hex(va), size);
  }
  // Any mapping that starts before the end of the new range and ends after its start overlaps.
  auto next = mappings_.lower_bound(va);
  DevicePtr clash = 0;
  if (next != mappings_.end() && next->first - va < size) clash = next->first;
  if (next != mappings_.begin()) {
    const auto prev = std::prev(next);
    if (va - prev->first < prev->second.size) clash = prev->first;
  }
  if (clash != 0) {
    fail(DeviceErrc::already_mapped, "map({}, {} bytes): overlaps the mapping at {}", hex(va), size, hex(clash));
  }
  mappings_.emplace(va, Mapping{size, handle, physical->second.data, physical->second.symbolic.get()});
  physical->second.map_count++;
  reservation->second.live_mappings++;
  counters_.maps++;
}

void SimMemory::check_unmap(DevicePtr va, std::size_t size) const {
  const auto it = mappings_.find(va);
  if (it == mappings_.end()) {
    if (size != 0 && is_mapped(va, 1)) {
      fail(DeviceErrc::invalid_value, "unmap({}, {} bytes): {} is inside a mapping but does not start one", hex(va),
           size, hex(va));
    }
    fail(DeviceErrc::not_mapped, "unmap({}, {} bytes): nothing is mapped at {}", hex(va), size, hex(va));
  }
  if (it->second.size != size) {
    fail(DeviceErrc::invalid_value, "unmap({}, {} bytes): the mapping at {} is {} bytes; unmap must cover exactly one mapping",
         hex(va), size, hex(va), it->second.size);
  }
}

void SimMemory::unmap(DevicePtr va, std::size_t size) {
  check_unmap(va, size);
  const auto it = mappings_.find(va);
  const PhysHandle handle = it->second.handle;
  mappings_.erase(it);
  reservation_containing(va)->second.live_mappings--;
  counters_.unmaps++;
  const auto physical = physical_.find(handle);
  if (--physical->second.map_count == 0 && physical->second.released) free_physical(physical);
}

const SimMemory::Mapping* SimMemory::mapping_containing(DevicePtr ptr, DevicePtr* start) const {
  auto it = mappings_.upper_bound(ptr);
  if (it == mappings_.begin()) return nullptr;
  --it;
  if (ptr - it->first >= it->second.size) return nullptr;
  *start = it->first;
  return &it->second;
}

bool SimMemory::is_mapped(DevicePtr ptr, std::size_t bytes) const {
  // Walk the range mapping by mapping; adjacent mappings (an expandable segment) count as one.
  DevicePtr cursor = ptr;
  std::size_t left = bytes;
  while (left != 0) {
    DevicePtr start = 0;
    const Mapping* mapping = mapping_containing(cursor, &start);
    if (mapping == nullptr) return false;
    const std::size_t run = std::min<std::size_t>(left, start + mapping->size - cursor);
    cursor += run;
    left -= run;
  }
  return true;
}

void SimMemory::check_range(const char* operation, DevicePtr ptr, std::size_t bytes) {
  if (bytes != 0 && bytes - 1 > ~DevicePtr{0} - ptr) {
    fail(DeviceErrc::invalid_value, "{}: the range at {} of {} bytes wraps around the address space", operation,
         hex(ptr), bytes);
  }
}

void SimMemory::check_mapped(const char* operation, DevicePtr ptr, std::size_t bytes) const {
  check_range(operation, ptr, bytes);
  DevicePtr cursor = ptr;
  std::size_t left = bytes;
  while (left != 0) {
    DevicePtr start = 0;
    const Mapping* mapping = mapping_containing(cursor, &start);
    if (mapping == nullptr) {
      fail(DeviceErrc::not_mapped, "{}: address {} (offset {} of the {}-byte range at {}) is not mapped", operation,
           hex(cursor), cursor - ptr, bytes, hex(ptr));
    }
    const std::size_t run = std::min<std::size_t>(left, start + mapping->size - cursor);
    cursor += run;
    left -= run;
  }
}

}  // namespace delta::sim
