#include "executor/host_pool.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace delta::executor {

HostPool::HostPool(Device& device, const std::vector<std::uint64_t>& slot_bytes, std::uint64_t limit_bytes)
    : device_(&device), slots_(slot_bytes.size(), nullptr) {
  // Slots keep 256-byte alignment (copy engines run fastest on aligned host buffers).
  auto aligned = [](std::uint64_t bytes) { return (bytes + 255) & ~std::uint64_t{255}; };
  for (std::uint64_t bytes : slot_bytes) bytes_ += aligned(bytes);
  if (limit_bytes != 0 && bytes_ > limit_bytes)
    throw std::runtime_error("the plan needs " + std::to_string(bytes_) + " bytes of pinned host memory for its copies, "
                             "more than the " + std::to_string(limit_bytes) + " bytes host memory allows");
  try {
    // First fit of slots into chunks, a chunk at a time; a slot larger than a chunk gets a
    // chunk of its own size.
    std::uint8_t* chunk = nullptr;
    std::uint64_t left = 0;
    for (std::size_t b = 0; b < slot_bytes.size(); ++b) {
      const std::uint64_t need = aligned(slot_bytes[b]);
      if (need == 0) continue;
      if (need > left) {
        const std::uint64_t size = std::max(need, std::min(kChunkBytes, bytes_));
        chunk = static_cast<std::uint8_t*>(device.alloc_pinned(size));
        chunks_.push_back(chunk);
        left = size;
      }
      slots_[b] = chunk;
      chunk += need;
      left -= need;
    }
  } catch (...) {
    release();
    throw;
  }
}

HostPool::~HostPool() { release(); }

HostPool::HostPool(HostPool&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      chunks_(std::move(other.chunks_)),
      slots_(std::move(other.slots_)),
      bytes_(std::exchange(other.bytes_, 0)) {
  other.chunks_.clear();
}

HostPool& HostPool::operator=(HostPool&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, nullptr);
    chunks_ = std::move(other.chunks_);
    other.chunks_.clear();
    slots_ = std::move(other.slots_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void HostPool::release() noexcept {
  for (void* chunk : chunks_) {
    try {
      device_->free_pinned(chunk);
    } catch (...) {
    }
  }
  chunks_.clear();
}

}  // namespace delta::executor
