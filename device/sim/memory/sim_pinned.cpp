#include "device/sim/memory/sim_pinned.hpp"

#include "device/sim/sim_errors.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace delta::sim {

namespace {
constexpr std::size_t kPageBytes = 4096;
}  // namespace

PinnedHostMemory::~PinnedHostMemory() {
  for (auto& [start, block] : blocks_) {
    if (block.symbolic) {
      ::munmap(reinterpret_cast<void*>(start), block.mapped);
    } else {
      std::free(reinterpret_cast<void*>(start));
    }
  }
}

void* PinnedHostMemory::allocate(std::size_t bytes) {
  if (bytes == 0) fail(DeviceErrc::invalid_value, "alloc_pinned(0 bytes): size must be non-zero");
  if (bytes > (std::size_t{1} << 48)) {
    fail(DeviceErrc::out_of_memory, "alloc_pinned({} bytes): more than the host can hold", bytes);
  }
  const std::size_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  void* ptr = nullptr;
  std::unique_ptr<SymbolicContent> symbolic;
  if (content_ == SimContent::digest) {
    // Address space only: no access and no swap reservation, so 100 GiB of pinned buffers cost
    // nothing and a host dereference faults.
    ptr = ::mmap(nullptr, rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ptr == MAP_FAILED) {
      fail(DeviceErrc::out_of_memory, "alloc_pinned({} bytes): the host could not reserve the address range: {}", bytes,
           std::strerror(errno));
    }
    symbolic = std::make_unique<SymbolicContent>(bytes);
  } else {
    ptr = std::aligned_alloc(kPageBytes, rounded);
    if (ptr == nullptr) fail(DeviceErrc::out_of_memory, "alloc_pinned({} bytes): host memory exhausted", bytes);
  }
  blocks_.emplace(reinterpret_cast<std::uintptr_t>(ptr), Block{bytes, rounded, std::move(symbolic)});
  return ptr;
}

void PinnedHostMemory::free(void* ptr) {
  if (ptr == nullptr) return;  // like cudaFreeHost(nullptr)
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end()) {
    fail(DeviceErrc::invalid_value, "free_pinned({}): not a pointer returned by alloc_pinned, or already freed",
         hex(reinterpret_cast<std::uintptr_t>(ptr)));
  }
  if (it->second.symbolic) {
    ::munmap(ptr, it->second.mapped);
  } else {
    std::free(ptr);
  }
  blocks_.erase(it);
}

std::map<std::uintptr_t, PinnedHostMemory::Block>::iterator PinnedHostMemory::overlapping(std::uintptr_t address,
                                                                                          std::size_t bytes) {
  // Only the last block starting before the range's end can reach into it: the blocks before
  // that one end before it starts.
  auto it = blocks_.lower_bound(address + bytes);
  if (it == blocks_.begin()) return blocks_.end();
  --it;
  return it->first + it->second.mapped > address ? it : blocks_.end();
}

bool PinnedHostMemory::covers(const void* ptr, std::size_t bytes) const {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return false;
  --it;
  const std::size_t offset = address - it->first;
  return offset < it->second.size && bytes <= it->second.size - offset;
}

SymbolicContent* PinnedHostMemory::symbolic(const char* operation, const void* ptr, std::size_t bytes,
                                            std::uint64_t* offset) {
  if (content_ != SimContent::digest || bytes == 0) return nullptr;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const auto it = overlapping(address, bytes);
  if (it == blocks_.end()) return nullptr;
  if (!covers(ptr, bytes)) {
    fail(DeviceErrc::invalid_value,
         "{}: the host range at {} of {} bytes reaches into the pinned allocation at {} of {} bytes without lying inside "
         "it; under SimContent::digest pinned memory holds no bytes the host can touch",
         operation, hex(address), bytes, hex(it->first), it->second.size);
  }
  *offset = address - it->first;
  return it->second.symbolic.get();
}

std::size_t PinnedHostMemory::content_runs() const {
  std::size_t runs = 0;
  for (const auto& [start, block] : blocks_) {
    if (block.symbolic) runs += block.symbolic->run_count();
  }
  return runs;
}

void PinnedHostMemory::check_invariants() const {
  std::uintptr_t previous_end = 0;
  for (const auto& [start, block] : blocks_) {
    auto broken = [&](const char* rule) {
      throw std::logic_error("sim: pinned memory: the block at " + hex(start) + " " + rule);
    };
    if (start < previous_end) broken("overlaps the one before");
    if (block.size == 0 || block.mapped < block.size || block.mapped % kPageBytes != 0) broken("has inconsistent sizes");
    if ((content_ == SimContent::digest) != (block.symbolic != nullptr)) {
      broken("is not stored the way the content mode says");
    }
    if (block.symbolic) block.symbolic->check_invariants(("pinned block " + hex(start)).c_str());
    previous_end = start + block.mapped;
  }
}

}  // namespace delta::sim
