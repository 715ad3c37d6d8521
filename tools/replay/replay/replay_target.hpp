// What the replayer drives: an allocator policy seen through allocate / free / stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace delta::replay {

struct TargetStats {
  std::size_t allocated_bytes = 0, allocated_peak = 0;  // bytes of live blocks as the policy sizes them
  std::size_t reserved_bytes = 0, reserved_peak = 0;    // device memory held from the driver
  std::uint64_t cache_hits = 0, cache_misses = 0;       // hit: served without new device memory
  std::uint64_t ooms = 0;                               // allocations that failed after recovery
};

class ReplayTarget {
 public:
  virtual ~ReplayTarget() = default;
  virtual std::string name() const = 0;
  // The address of a new block, or nullopt when the policy runs out of memory.
  virtual std::optional<std::uintptr_t> allocate(std::size_t size, std::uint64_t stream) = 0;
  virtual void free(std::uintptr_t address) = 0;
  virtual TargetStats stats() const = 0;
  // Throws (std::logic_error or a subclass) naming the broken rule.
  virtual void check_invariants() const = 0;
};

}  // namespace delta::replay
