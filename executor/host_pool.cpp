#include "executor/host_pool.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace delta::executor {

namespace {
// Slots keep 256-byte alignment (copy engines run fastest on aligned host buffers).
std::uint64_t aligned(std::uint64_t bytes) { return (bytes + 255) & ~std::uint64_t{255}; }
}  // namespace

std::uint64_t HostPool::bytes_needed(const std::vector<std::uint64_t>& slot_bytes) {
  std::uint64_t total = 0;
  for (std::uint64_t bytes : slot_bytes) total += aligned(bytes);
  return total;
}

std::uint64_t default_host_limit() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024 / 10 * 8;  // 80%
  }
  return 0;
}

HostPool::HostPool(Device& device, const std::vector<std::uint64_t>& slot_bytes, std::uint64_t limit_bytes)
    : device_(&device), slots_(slot_bytes.size(), nullptr) {
  bytes_ = bytes_needed(slot_bytes);
  if (limit_bytes != 0 && bytes_ > limit_bytes)
    throw std::runtime_error("DELTA executor: the plan needs " + std::to_string(bytes_) +
                             " bytes of pinned host memory for its copies, more than the " + std::to_string(limit_bytes) +
                             " bytes allowed (DELTA_HOST_BUDGET, or 80% of the host memory available); run mode "
                             "refuses to start: plan with a larger budget, or allow more host memory");
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
