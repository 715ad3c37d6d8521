// Device memory of the sim: virtual address reservations, physical handles and the mapping
// table between them, with the checks the CUDA VMM API makes (and a few it does not make but
// should, such as refusing to touch a byte that is not mapped). What a handle holds depends on
// the content mode: host pages (bytes), symbolic runs (digest, see sim_content.hpp) or nothing.
// sim_memory.cpp keeps the tables, sim_memory_content.cpp moves the content.
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include "device/sim/memory/sim_content.hpp"

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
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
  SimMemory(std::size_t capacity_bytes, SimContent content);
  ~SimMemory();
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;

  std::size_t capacity() const { return capacity_; }
  SimContent content() const { return content_; }
  bool backed() const { return content_ != SimContent::none; }
  const MemoryCounters& counters() const { return counters_; }

  DevicePtr reserve(std::size_t size);
  void release_reservation(DevicePtr va, std::size_t size);
  PhysHandle create_physical(std::size_t size);
  void release_physical(PhysHandle handle);
  void map(DevicePtr va, std::size_t size, PhysHandle handle);
  void unmap(DevicePtr va, std::size_t size);
  // The checks unmap and release_reservation make before they change anything, for callers
  // with checks of their own to make in between.
  void check_unmap(DevicePtr va, std::size_t size) const;
  void check_release_reservation(DevicePtr va, std::size_t size) const;

  bool is_mapped(DevicePtr ptr, std::size_t bytes) const;
  // Throws DeviceError(invalid_value) naming `operation` when [ptr, ptr + bytes) wraps around
  // the address space.
  static void check_range(const char* operation, DevicePtr ptr, std::size_t bytes);
  // Throws DeviceError(not_mapped) naming `operation`, the first unmapped address and its
  // offset in the range.
  void check_mapped(const char* operation, DevicePtr ptr, std::size_t bytes) const;

  // Content movement. Each checks the whole device range first, so a failed call changes
  // nothing. Without backing (SimContent::none) they check and then move nothing.
  void copy_in(const char* operation, DevicePtr dst, const void* src, std::size_t bytes);
  void copy_out(const char* operation, void* dst, DevicePtr src, std::size_t bytes) const;
  void copy_within(const char* operation, DevicePtr dst, DevicePtr src, std::size_t bytes);
  void fill(const char* operation, DevicePtr dst, std::uint8_t value, std::size_t bytes);
  // SimContent::digest only: the runs of a range, and a range set from runs (to and from
  // symbolic pinned memory).
  Runs extract(const char* operation, DevicePtr src, std::size_t bytes) const;
  void store(const char* operation, DevicePtr dst, const Runs& runs);

  // For kernels (SimContent::bytes and digest). With `tolerate_unmapped` false, both check
  // that every byte is mapped; with it true, unmapped bytes hash as poison (kSimPoisonSeed
  // content at their address) and writes to them are dropped.
  std::uint64_t hash(const char* operation, DevicePtr ptr, std::size_t bytes, bool tolerate_unmapped) const;
  // Sets [dst, dst + bytes) to generated content: byte i is generated_byte(seed, i).
  void generate(const char* operation, DevicePtr dst, std::size_t bytes, std::uint64_t seed, bool tolerate_unmapped);

  std::size_t content_runs() const;
  // The symbolic content of every handle (SimContent::digest), and the mapping table against
  // the handles; throws std::logic_error naming the first broken rule.
  void check_invariants() const;

 private:
  struct Physical {
    std::size_t size = 0;
    std::uint8_t* data = nullptr;                // SimContent::bytes
    std::unique_ptr<SymbolicContent> symbolic;   // SimContent::digest
    bool released = false;                       // freed by the caller; lives on while mapped
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
    SymbolicContent* symbolic = nullptr;
  };

  // Calls visit(mapping or nullptr, offset in the mapping, length, offset in the range) for
  // the consecutive parts of [ptr, ptr + bytes), a part being inside one mapping or unmapped.
  template <typename Visit>
  void walk(DevicePtr ptr, std::size_t bytes, Visit&& visit) const;
  const Mapping* mapping_containing(DevicePtr ptr, DevicePtr* start) const;
  std::map<DevicePtr, Reservation>::iterator reservation_containing(DevicePtr ptr);
  DevicePtr take_address_range(std::size_t span);
  void return_address_range(DevicePtr start, std::size_t span);
  void free_physical(std::unordered_map<PhysHandle, Physical>::iterator it);

  std::size_t capacity_;
  SimContent content_;
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
