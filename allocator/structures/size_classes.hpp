// Size rounding and pool choice, with PyTorch's constants so that DELTA sees the same block
// sizes a native run would.
#pragma once

#include <bit>
#include <cstddef>
#include <vector>

namespace delta {

inline constexpr std::size_t kMinBlockSize = 512;            // every size rounds to this
inline constexpr std::size_t kSmallSize = 1 << 20;           // requests up to here: small pool
inline constexpr std::size_t kLargeBuffer = 20 << 20;        // slack allowed for oversize blocks
inline constexpr std::size_t kRoundUpStart = 1 << 20;        // first roundup interval: 1 MiB
inline constexpr std::size_t kRoundUpIntervals = 16;

// small and large as in PyTorch. pages: blocks that asked for pages of their own
// (Placement::own_pages); every block of such an arena, free ones included, starts on a page
// boundary and spans whole pages, so no two blocks ever share a page there. packed: blocks
// that asked for pages no ordinary block shares, packed side by side (Placement::packed): a
// page there may hold the ends of two such blocks, and is mapped while either is present.
enum class PoolKind : unsigned char { small, large, pages, packed };
inline constexpr int kPoolKinds = 4;

inline PoolKind pool_for(std::size_t rounded) { return rounded <= kSmallSize ? PoolKind::small : PoolKind::large; }

// Rounds up to the next of `divisions` equal steps of [2^k, 2^(k+1)).
inline std::size_t roundup_power2_next_division(std::size_t size, std::size_t divisions) {
  if (std::has_single_bit(size)) return size;
  std::size_t floor = std::bit_floor(size);
  std::size_t step = floor >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor << 1;
  std::size_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

inline std::size_t round_size(std::size_t size, const std::vector<std::size_t>& divisions_by_interval) {
  if (size < kMinBlockSize) return kMinBlockSize;
  std::size_t log_size = std::bit_width(size) - 1;
  std::size_t start = std::bit_width(kRoundUpStart) - 1;
  std::size_t index = log_size > start ? log_size - start : 0;
  if (index >= divisions_by_interval.size()) index = divisions_by_interval.size() - 1;
  std::size_t divisions = divisions_by_interval.empty() ? 0 : divisions_by_interval[index];
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

}  // namespace delta
