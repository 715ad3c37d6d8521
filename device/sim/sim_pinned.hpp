// Pinned host memory of the sim: ordinary page-aligned host memory, remembered so that copies
// can tell pinned from pageable host pointers (they run at different speeds) and so that
// free_pinned rejects pointers it never handed out.
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace delta::sim {

class PinnedHostMemory {
 public:
  PinnedHostMemory() = default;
  ~PinnedHostMemory();
  PinnedHostMemory(const PinnedHostMemory&) = delete;
  PinnedHostMemory& operator=(const PinnedHostMemory&) = delete;

  void* allocate(std::size_t bytes);
  void free(void* ptr);
  // True when [ptr, ptr + bytes) lies inside one pinned allocation.
  bool covers(const void* ptr, std::size_t bytes) const;

 private:
  std::map<std::uintptr_t, std::size_t> blocks_;  // start -> size
};

}  // namespace delta::sim
