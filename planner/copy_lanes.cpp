#include "copy_lanes.hpp"

#include <algorithm>
#include <iterator>

namespace delta::planner {

std::int64_t CopyLane::find_forward(std::int64_t earliest, std::int64_t length) const {
  std::int64_t t = earliest;
  auto it = busy_.upper_bound(t);
  if (it != busy_.begin()) {
    auto before = std::prev(it);
    if (before->second > t) t = before->second;
  }
  // A lane booked solid this far ahead makes the transfer hopeless anyway: stop looking
  // (keeps every query bounded).
  int scanned = 0;
  for (; it != busy_.end() && it->first < t + length; ++it) {
    if (it->second > t) t = it->second;
    if (++scanned > kMaxScan) return kFar;
  }
  return t;
}

std::int64_t CopyLane::find_backward(std::int64_t latest_end, std::int64_t length, std::int64_t earliest) const {
  std::int64_t end = latest_end;
  auto it = busy_.lower_bound(end);  // first interval starting at or after end: cannot overlap
  for (int scanned = 0; scanned <= kMaxScan; ++scanned) {
    if (end - length < earliest) return -1;
    if (it == busy_.begin()) return end - length;
    auto before = std::prev(it);
    if (before->second <= end - length) return end - length;
    end = std::min(end, before->first);
    it = before;
  }
  return -1;
}

void CopyLane::reserve(std::int64_t start, std::int64_t length) {
  if (length <= 0) return;
  busy_[start] = std::max(busy_[start], start + length);
}

}  // namespace delta::planner
