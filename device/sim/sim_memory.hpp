// Device memory of the sim: virtual address reservations, physical handles and the mapping
// table between them, with the checks the CUDA VMM API makes (and a few it does not make but
// should, such as refusing to touch a byte that is not mapped).
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>

namespace delta::sim {

// Fake device addresses live above 2^47, outside the user half of an x86-64 / arm64 address
// space with 4-level page tables (and above what Linux hands out with 5 levels unless a mapping
// asks for it), so a device pointer can never alias a host pointer, and dereferencing one by
// mistake faults at once instead of corrupting host memory.
inline constexpr DevicePtr kVaBase = 0x9000'0000'0000ULL;
inline constexpr DevicePtr kVaLimit = 0xD000'0000'0000ULL;  // 64 TiB of address space
inline constexpr std::size_t kGranularity = std::size_t{2} << 20;

struct MemoryCounters {
  std::uint64_t maps = 0, unmaps = 0, physical_creates = 0, physical_releases = 0;
  std::size_t physical_bytes_in_use = 0, physical_bytes_peak = 0;
};

class SimMemory {
 public:
  SimMemory(std::size_t capacity_bytes, bool back_memory);
  ~SimMemory();
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;

  std::size_t capacity() const { return capacity_; }
  bool backed() const { return back_memory_; }
  const MemoryCounters& counters() const { return counters_; }

  DevicePtr reserve(std::size_t size);
  void release_reservation(DevicePtr va, std::size_t size);
  PhysHandle create_physical(std::size_t size);
  void release_physical(PhysHandle handle);
  void map(DevicePtr va, std::size_t size, PhysHandle handle);
  void unmap(DevicePtr va, std::size_t size);

  bool is_mapped(DevicePtr ptr, std::size_t bytes) const;
  // Throws DeviceError(not_mapped) naming `operation`, the first unmapped address and its
  // offset in the range.
  void check_mapped(const char* operation, DevicePtr ptr, std::size_t bytes) const;

  // Byte movement. Each checks the whole device range first, so a failed call changes nothing.
  // Without backing they check and then move nothing.
  void copy_in(const char* operation, DevicePtr dst, const void* src, std::size_t bytes);
  void copy_out(const char* operation, void* dst, DevicePtr src, std::size_t bytes) const;
  void copy_within(const char* operation, DevicePtr dst, DevicePtr src, std::size_t bytes);
  void fill(const char* operation, DevicePtr dst, std::uint8_t value, std::size_t bytes);

 private:
  struct Physical {
    std::size_t size = 0;
    std::uint8_t* data = nullptr;  // nullptr when memory is not backed
    bool released = false;         // freed by the caller; the memory lives on while mapped
    std::size_t map_count = 0;
  };
  struct Reservation {
    std::size_t size = 0;
    std::size_t live_mappings = 0;
  };
  struct Mapping {
    std::size_t size = 0;
    PhysHandle handle = 0;
    std::uint8_t* data = nullptr;
  };

  // The host bytes behind device address `ptr`, valid for `length` bytes at most; for use
  // after check_mapped succeeded.
  std::uint8_t* host_address(DevicePtr ptr, std::size_t* length) const;
  const Mapping* mapping_containing(DevicePtr ptr, DevicePtr* start) const;
  std::map<DevicePtr, Reservation>::iterator reservation_containing(DevicePtr ptr);
  DevicePtr take_address_range(std::size_t span);
  void return_address_range(DevicePtr start, std::size_t span);
  void free_physical(std::unordered_map<PhysHandle, Physical>::iterator it);

  std::size_t capacity_;
  bool back_memory_;
  MemoryCounters counters_;
  PhysHandle next_handle_ = 0x0F00'0001;
  std::unordered_map<PhysHandle, Physical> physical_;
  std::map<DevicePtr, Reservation> reservations_;
  std::map<DevicePtr, Mapping> mappings_;
  // Address space: handed out by bumping `bump_` first, so a stale pointer into a released
  // reservation keeps faulting for as long as possible; released ranges are reused once the
  // bump region is used up.
  DevicePtr bump_ = kVaBase;
  std::map<DevicePtr, std::size_t> free_ranges_;
};

}  // namespace delta::sim
