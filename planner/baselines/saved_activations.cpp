#include "baselines/saved_activations.hpp"

#include <algorithm>

namespace delta::planner {

std::size_t backward_start(const TraceIndex& index) {
  for (std::size_t i = 0; i < index.op_count(); ++i)
    if (index.trace().ops[i].phase == trace::Phase::backward) return i;
  const auto& live = index.native_live_bytes();
  return static_cast<std::size_t>(std::max_element(live.begin(), live.end()) - live.begin());
}

std::vector<Saved> saved_for_backward(const TraceIndex& index) {
  const std::size_t backward = backward_start(index);
  std::vector<Saved> saved;
  for (std::uint32_t b = 0; b < index.blocks().size(); ++b) {
    const BlockInfo& info = index.block(b);
    if (info.from_start || info.producer < 0 || static_cast<std::size_t>(info.producer) >= backward) continue;
    auto it = std::lower_bound(info.uses.begin(), info.uses.end(), static_cast<std::uint32_t>(backward));
    if (it == info.uses.end() || it == info.uses.begin()) continue;
    const std::uint32_t first_backward = *it, last_forward = *(it - 1);
    if (first_backward > last_forward + 1) saved.push_back({b, last_forward, first_backward});
  }
  std::sort(saved.begin(), saved.end(), [&](const Saved& a, const Saved& b) {
    return index.block(a.block).producer < index.block(b.block).producer;
  });
  return saved;
}

}  // namespace delta::planner
