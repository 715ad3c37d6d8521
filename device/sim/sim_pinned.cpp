#include "sim_pinned.hpp"

#include "sim_errors.hpp"

#include <cstdlib>
#include <iterator>

namespace delta::sim {

namespace {
constexpr std::size_t kPageBytes = 4096;
}  // namespace

PinnedHostMemory::~PinnedHostMemory() {
  for (const auto& [start, size] : blocks_) std::free(reinterpret_cast<void*>(start));
}

void* PinnedHostMemory::allocate(std::size_t bytes) {
  if (bytes == 0) fail(DeviceErrc::invalid_value, "alloc_pinned(0 bytes): size must be non-zero");
  if (bytes > (std::size_t{1} << 48)) {
    fail(DeviceErrc::out_of_memory, "alloc_pinned({} bytes): more than the host can hold", bytes);
  }
  const std::size_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  void* ptr = std::aligned_alloc(kPageBytes, rounded);
  if (ptr == nullptr) fail(DeviceErrc::out_of_memory, "alloc_pinned({} bytes): host memory exhausted", bytes);
  blocks_.emplace(reinterpret_cast<std::uintptr_t>(ptr), bytes);
  return ptr;
}

void PinnedHostMemory::free(void* ptr) {
  if (ptr == nullptr) return;  // like cudaFreeHost(nullptr)
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end()) {
    fail(DeviceErrc::invalid_value, "free_pinned({}): not a pointer returned by alloc_pinned, or already freed",
         hex(reinterpret_cast<std::uintptr_t>(ptr)));
  }
  std::free(ptr);
  blocks_.erase(it);
}

bool PinnedHostMemory::covers(const void* ptr, std::size_t bytes) const {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return false;
  --it;
  const std::size_t offset = address - it->first;
  return offset < it->second && bytes <= it->second - offset;
}

}  // namespace delta::sim
