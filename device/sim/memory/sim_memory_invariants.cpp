// The invariant checker of the sim's device memory: the mapping table, the handles, the
// reservations and the counters agree with each other, and symbolic content is well formed.
#include "device/sim/memory/sim_memory.hpp"

#include "device/sim/sim_errors.hpp"

#include <iterator>
#include <stdexcept>
#include <string>

namespace delta::sim {

void SimMemory::check_invariants() const {
  auto broken = [](const std::string& rule) { throw std::logic_error("sim: device memory: " + rule); };
  std::unordered_map<PhysHandle, std::size_t> maps_of;
  std::map<DevicePtr, std::size_t> mappings_in;
  DevicePtr previous_end = 0;
  for (const auto& [va, mapping] : mappings_) {
    if (va < previous_end) broken(fmt::format("the mapping at {} overlaps the one before it", hex(va)));
    previous_end = va + mapping.size;
    const auto physical = physical_.find(mapping.handle);
    if (physical == physical_.end()) broken(fmt::format("the mapping at {} names a freed handle", hex(va)));
    if (physical->second.size != mapping.size || physical->second.data != mapping.data ||
        physical->second.symbolic.get() != mapping.symbolic) {
      broken(fmt::format("the mapping at {} disagrees with its handle {}", hex(va), hex(mapping.handle)));
    }
    maps_of[mapping.handle]++;
    const auto reservation = reservations_.upper_bound(va);
    if (reservation == reservations_.begin() ||
        va + mapping.size > std::prev(reservation)->first + std::prev(reservation)->second.size) {
      broken(fmt::format("the mapping at {} is not inside one reservation", hex(va)));
    }
    mappings_in[std::prev(reservation)->first]++;
  }
  std::size_t in_use = 0;
  for (const auto& [handle, physical] : physical_) {
    in_use += physical.size;
    if (physical.map_count != maps_of[handle]) {
      broken(fmt::format("handle {} counts {} mappings, the table holds {}", hex(handle), physical.map_count,
                         maps_of[handle]));
    }
    if (physical.released && physical.map_count == 0) {
      broken(fmt::format("handle {} is released and unmapped yet kept", hex(handle)));
    }
    const bool symbolic = content_ == SimContent::digest, bytes = content_ == SimContent::bytes;
    if (symbolic != (physical.symbolic != nullptr) || bytes != (physical.data != nullptr)) {
      broken(fmt::format("handle {} is not stored the way the content mode says", hex(handle)));
    }
    if (physical.symbolic) physical.symbolic->check_invariants(fmt::format("handle {}", hex(handle)).c_str());
  }
  if (in_use != counters_.physical_bytes_in_use) {
    broken(fmt::format("handles hold {} bytes, the counter says {}", in_use, counters_.physical_bytes_in_use));
  }
  for (const auto& [va, reservation] : reservations_) {
    if (reservation.live_mappings != mappings_in[va]) {
      broken(fmt::format("the reservation at {} counts {} mappings, {} lie inside", hex(va), reservation.live_mappings,
                         mappings_in[va]));
    }
  }
}

}  // namespace delta::sim
