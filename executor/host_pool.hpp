// Pinned host memory for the blocks a plan copies out: one slot per block, carved from a few
// large chunks allocated and registered once when run mode starts (page-locking runs at 1–2
// GB/s and cudaHostAlloc costs milliseconds a call: never on the action path).
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <vector>

namespace delta::executor {

class HostPool {
 public:
  HostPool() = default;
  // slot_bytes[b]: bytes block b needs on the host (0: none). Throws std::runtime_error when
  // `limit_bytes` (nonzero) cannot hold them, saying how much is needed.
  HostPool(Device& device, const std::vector<std::uint64_t>& slot_bytes, std::uint64_t limit_bytes);
  ~HostPool();
  HostPool(HostPool&& other) noexcept;
  HostPool& operator=(HostPool&& other) noexcept;

  // What a pool for these slots takes, alignment included.
  static std::uint64_t bytes_needed(const std::vector<std::uint64_t>& slot_bytes);

  void* slot(std::uint32_t block) const { return slots_[block]; }
  std::uint64_t bytes() const { return bytes_; }

  // Chunks are at most this large: pinning very large ranges at once fails on some systems.
  static constexpr std::uint64_t kChunkBytes = std::uint64_t{1} << 30;

 private:
  void release() noexcept;
  Device* device_ = nullptr;
  std::vector<void*> chunks_;
  std::vector<void*> slots_;
  std::uint64_t bytes_ = 0;
};

// Most of the host memory available now (MemAvailable): what run mode pins at most on a GPU
// unless told otherwise, leaving the job and the system their share. 0 when it cannot be read.
std::uint64_t default_host_limit();

}  // namespace delta::executor
