// The live blocks of a recording, by address: which block a device pointer points into.
//
// Kernels receive pointers into blocks, not only to their first byte (a view of a tensor, a
// row of a matrix, the end of a buffer), so lookups answer for interior pointers too. Live
// blocks never overlap: the allocator hands out disjoint ranges, and a range that overlaps a
// live block means a free was missed; insert() reports it instead of guessing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

namespace delta::profiler {

struct LiveBlock {
  std::uint64_t id = 0;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
};

class BlockOverlapError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class BlockMap {
 public:
  // Throws std::invalid_argument for size 0 or a range past the end of the address space,
  // BlockOverlapError (naming both blocks) when [address, address + size) meets a live block.
  void insert(std::uint64_t address, std::uint64_t size, std::uint64_t id);
  // The block that starts at `address`, removed; nullopt when none starts there.
  std::optional<LiveBlock> erase(std::uint64_t address);
  // The block containing `pointer` (its first byte up to its last), or nullopt.
  std::optional<LiveBlock> find(std::uint64_t pointer) const;
  // Every live block that shares at least one byte with [address, address + bytes), by address.
  std::vector<LiveBlock> overlapping(std::uint64_t address, std::uint64_t bytes) const;

  std::size_t size() const { return blocks_.size(); }
  std::uint64_t live_bytes() const { return live_bytes_; }
  std::vector<LiveBlock> all() const;

 private:
  struct Entry {
    std::uint64_t size;
    std::uint64_t id;
  };
  std::map<std::uint64_t, Entry> blocks_;  // start address -> block
  std::uint64_t live_bytes_ = 0;
};

}  // namespace delta::profiler
