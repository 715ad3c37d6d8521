// Pinned host memory of the sim, remembered so that copies can tell pinned from pageable host
// pointers (they run at different speeds, and only pinned ranges are tracked for hazards) and
// so that free_pinned rejects pointers it never handed out.
//
// Under SimContent::bytes and none it is ordinary page-aligned host memory. Under
// SimContent::digest it holds symbolic content (sim_content.hpp) like device memory does, and
// its addresses are reserved without any access, so host code that dereferences a pinned
// buffer faults at once instead of reading bytes the sim never stored: only device copies move
// its content.
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include "device/sim/memory/sim_content.hpp"

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

namespace delta::sim {

class PinnedHostMemory {
 public:
  explicit PinnedHostMemory(SimContent content) : content_(content) {}
  ~PinnedHostMemory();
  PinnedHostMemory(const PinnedHostMemory&) = delete;
  PinnedHostMemory& operator=(const PinnedHostMemory&) = delete;

  void* allocate(std::size_t bytes);
  void free(void* ptr);
  // True when [ptr, ptr + bytes) lies inside one pinned allocation.
  bool covers(const void* ptr, std::size_t bytes) const;
  // Under SimContent::digest: the content of the pinned allocation that [ptr, ptr + bytes) lies
  // in, with the range's offset in it; nullptr for a range that touches no pinned allocation
  // (pageable memory, which holds real bytes) and always in the other modes. A range that
  // touches a pinned allocation without lying inside it throws DeviceError(invalid_value)
  // naming `operation`: the host cannot read or write the pinned part.
  SymbolicContent* symbolic(const char* operation, const void* ptr, std::size_t bytes, std::uint64_t* offset);

  std::size_t content_runs() const;
  void check_invariants() const;

 private:
  struct Block {
    std::size_t size = 0;     // as requested
    std::size_t mapped = 0;   // rounded up to whole pages
    std::unique_ptr<SymbolicContent> symbolic;  // SimContent::digest
  };
  // The block whose pages overlap [address, address + bytes), if any (blocks never overlap).
  std::map<std::uintptr_t, Block>::iterator overlapping(std::uintptr_t address, std::size_t bytes);

  SimContent content_;
  std::map<std::uintptr_t, Block> blocks_;  // start -> block
};

}  // namespace delta::sim
