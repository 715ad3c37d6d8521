#include "sim/copy_lanes.hpp"

#include <algorithm>
#include <iterator>

namespace delta::planner {
namespace {

// The first booking that starts after t (upper bound by start).
auto starting_after(const std::vector<CopyLane::Busy>& busy, std::int64_t t) {
  return std::upper_bound(busy.begin(), busy.end(), t, [](std::int64_t x, const CopyLane::Busy& b) { return x < b.start; });
}

// The first booking that starts at or after t (lower bound by start).
template <typename Bookings>
auto starting_from(Bookings& busy, std::int64_t t) {
  return std::lower_bound(busy.begin(), busy.end(), t, [](const CopyLane::Busy& b, std::int64_t x) { return b.start < x; });
}

}  // namespace

std::int64_t CopyLane::find_forward(std::int64_t earliest, std::int64_t length) const {
  std::int64_t t = earliest;
  auto it = starting_after(busy_, t);
  if (it != busy_.begin()) {
    auto before = std::prev(it);
    if (before->end > t) t = before->end;
  }
  // A lane booked solid this far ahead makes the transfer hopeless anyway: stop looking
  // (keeps every query bounded).
  int scanned = 0;
  for (; it != busy_.end() && it->start < t + length; ++it) {
    if (it->end > t) t = it->end;
    if (++scanned > kMaxScan) return kFar;
  }
  return t;
}

std::int64_t CopyLane::find_backward(std::int64_t latest_end, std::int64_t length, std::int64_t earliest) const {
  std::int64_t end = latest_end;
  auto it = starting_from(busy_, end);  // cannot overlap
  for (int scanned = 0; scanned <= kMaxScan; ++scanned) {
    if (end - length < earliest) return -1;
    if (it == busy_.begin()) return end - length;
    auto before = std::prev(it);
    if (before->end <= end - length) return end - length;
    end = std::min(end, before->start);
    it = before;
  }
  return -1;
}

void CopyLane::reserve(std::int64_t start, std::int64_t length) {
  if (length <= 0) return;
  auto it = starting_from(busy_, start);
  if (it != busy_.end() && it->start == start)
    it->end = std::max(it->end, start + length);
  else
    busy_.insert(it, Busy{start, start + length});
}

}  // namespace delta::planner
