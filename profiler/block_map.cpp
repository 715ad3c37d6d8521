#include "profiler/block_map.hpp"

#include <fmt/format.h>

#include <limits>

namespace delta::profiler {

void BlockMap::insert(std::uint64_t address, std::uint64_t size, std::uint64_t id) {
  if (size == 0) throw std::invalid_argument(fmt::format("block {} at {:#x} has size 0", id, address));
  if (address > std::numeric_limits<std::uint64_t>::max() - size) {
    throw std::invalid_argument(fmt::format("block {} at {:#x} of {} bytes wraps around the address space", id, address, size));
  }
  const std::vector<LiveBlock> clash = overlapping(address, size);
  if (!clash.empty()) {
    const LiveBlock& other = clash.front();
    throw BlockOverlapError(fmt::format("block {} [{:#x}, {:#x}) overlaps live block {} [{:#x}, {:#x})", id, address,
                                        address + size, other.id, other.address, other.address + other.size));
  }
  blocks_.emplace(address, Entry{size, id});
  live_bytes_ += size;
}

std::optional<LiveBlock> BlockMap::erase(std::uint64_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end()) return std::nullopt;
  LiveBlock block{it->second.id, it->first, it->second.size};
  live_bytes_ -= it->second.size;
  blocks_.erase(it);
  return block;
}

std::optional<LiveBlock> BlockMap::find(std::uint64_t pointer) const {
  // Most parameter words a launch shows are not pointers (sizes, strides, scalars, floats in
  // pairs): outside the span of the live blocks they are turned away without a tree search.
  if (blocks_.empty() || pointer < blocks_.begin()->first) return std::nullopt;
  const auto& last = *blocks_.rbegin();
  if (pointer - last.first >= last.second.size && pointer > last.first) return std::nullopt;
  auto it = blocks_.upper_bound(pointer);  // first block starting after the pointer
  if (it == blocks_.begin()) return std::nullopt;
  --it;
  if (pointer - it->first >= it->second.size) return std::nullopt;
  return LiveBlock{it->second.id, it->first, it->second.size};
}

std::vector<LiveBlock> BlockMap::overlapping(std::uint64_t address, std::uint64_t bytes) const {
  std::vector<LiveBlock> out;
  if (bytes == 0) return out;
  const std::uint64_t end =
      address > std::numeric_limits<std::uint64_t>::max() - bytes ? std::numeric_limits<std::uint64_t>::max() : address + bytes;
  // The block before `address` may reach into the range; the others start inside it.
  auto it = blocks_.upper_bound(address);
  if (it != blocks_.begin()) {
    auto before = std::prev(it);
    if (address - before->first < before->second.size) out.push_back({before->second.id, before->first, before->second.size});
  }
  for (; it != blocks_.end() && it->first < end; ++it) out.push_back({it->second.id, it->first, it->second.size});
  return out;
}

std::vector<LiveBlock> BlockMap::all() const {
  std::vector<LiveBlock> out;
  out.reserve(blocks_.size());
  for (const auto& [address, entry] : blocks_) out.push_back({entry.id, address, entry.size});
  return out;
}

}  // namespace delta::profiler
