// What the GPU launch route asks of the online policy: the block a pointer falls in, pins that
// keep a block on the device for good, and graph captures, during which nothing moves.
#include "executor/online/online_state.hpp"

namespace delta::executor {

// The ranges are kept disjoint (pin() merges), so the last one starting inside or before the
// block is the only one that can overlap it.
bool OnlinePolicy::State::in_pinned_range(DevicePtr ptr, std::uint64_t bytes) const {
  auto it = pinned_ranges.upper_bound(ptr + std::max<std::uint64_t>(bytes, 1) - 1);
  return it != pinned_ranges.begin() && std::prev(it)->second > ptr;
}

std::optional<std::pair<DevicePtr, std::size_t>> OnlinePolicy::block_containing(DevicePtr ptr) const {
  const State& s = *state_;
  std::lock_guard lock(s.mutex);
  auto it = s.blocks.upper_bound(ptr);
  if (it == s.blocks.begin()) return std::nullopt;
  --it;
  const OnlineBlock& block = it->second;
  if (ptr >= block.ptr + std::max<std::uint64_t>(block.mapped, 1)) return std::nullopt;
  return std::make_pair(block.ptr, static_cast<std::size_t>(block.mapped));
}

// Every block overlapping the range comes back now, if it is away, and never leaves again;
// so do blocks allocated there later (a graph replays at the addresses it captured).
void OnlinePolicy::pin(DevicePtr ptr, std::size_t bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const DevicePtr end = ptr + std::max<std::size_t>(bytes, 1);
  DevicePtr from = ptr, to = end;
  for (auto at = s.pinned_ranges.upper_bound(end); at != s.pinned_ranges.begin();) {
    auto prev = std::prev(at);
    if (prev->second < from) break;  // disjoint from here down
    from = std::min(from, prev->first);
    to = std::max(to, prev->second);
    at = s.pinned_ranges.erase(prev);
  }
  s.pinned_ranges[from] = to;
  auto it = s.blocks.upper_bound(ptr);
  if (it != s.blocks.begin()) --it;
  for (; it != s.blocks.end() && it->first < end; ++it) {
    OnlineBlock& block = it->second;
    if (block.ptr + std::max<std::uint64_t>(block.mapped, 1) <= ptr) continue;
    block.pinned_for_good = true;
    s.make_resident(block, block.stream, false);
  }
}

void OnlinePolicy::before_module_unload(std::uintptr_t) {}

// Everything comes back and every copy completes before the capture begins (device calls are
// legal here); from then on best_candidate finds nothing and nothing is prefetched, so the
// policy makes no copy, event query or VMM call until the last capture ends.
void OnlinePolicy::before_graph_capture() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.capturing++ == 0) s.all_back();
}

void OnlinePolicy::after_graph_capture() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.capturing > 0) --s.capturing;
}

}  // namespace delta::executor
