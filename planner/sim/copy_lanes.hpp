// A copy engine's busy time as the planner books transfers on it. Evictions are placed
// forward from the block's last use, prefetches backward from its next use; both compete for
// the lane of their direction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace delta::planner {

class CopyLane {
 public:
  struct Busy {
    std::int64_t start, end;
  };
  static constexpr std::int64_t kFar = std::int64_t(1) << 60;  // "not within reach"
  static constexpr int kMaxScan = 64;
  // Earliest start >= earliest at which `length` fits, or kFar when the lane is booked
  // through the next kMaxScan transfers.
  std::int64_t find_forward(std::int64_t earliest, std::int64_t length) const;
  // Latest start s with s + length <= latest_end and s >= earliest, or -1 when none.
  std::int64_t find_backward(std::int64_t latest_end, std::int64_t length, std::int64_t earliest) const;
  void reserve(std::int64_t start, std::int64_t length);
  // Like find_forward, but when the lane is booked solid, the time it drains (a FIFO queue).
  std::int64_t find_forward_or_queue(std::int64_t earliest, std::int64_t length) const {
    const std::int64_t t = find_forward(earliest, length);
    if (t != kFar) return t;
    return busy_.empty() ? earliest : std::max(earliest, busy_.back().end);
  }

 private:
  // Bookings by start, each start once. A sorted vector rather than a map: lanes are copied at
  // every step of a repair's search, and scanned in order far more often than booked.
  std::vector<Busy> busy_;
};

}  // namespace delta::planner
