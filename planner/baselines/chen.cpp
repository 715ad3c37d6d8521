#include "baselines/baselines.hpp"
#include "baselines/saved_activations.hpp"
#include "common/plan_edits.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace delta::planner {

plan::Plan plan_chen(const PlanRequest& request) {
  // Chen et al. 2016, sqrt(n) checkpointing: keep every k-th saved activation (k = sqrt of
  // their number); drop the others after the forward pass and recompute each segment when the
  // backward pass first needs any of it.
  const TraceIndex& index = *request.index;
  plan::Plan plan = empty_plan(request, "chen");
  std::vector<Saved> saved = saved_for_backward(index);
  if (saved.empty()) return plan;
  const std::size_t k = static_cast<std::size_t>(std::ceil(std::sqrt(double(saved.size()))));
  std::vector<bool> dropped(index.blocks().size(), false);
  for (std::size_t start = 0; start < saved.size(); start += k) {
    const std::size_t end = std::min(saved.size(), start + k);
    // saved[start] is the checkpoint; the rest are rebuilt at the segment's first need.
    std::uint32_t needed_by = std::numeric_limits<std::uint32_t>::max();
    for (std::size_t s = start + 1; s < end; ++s) needed_by = std::min(needed_by, saved[s].first_backward_use);
    for (std::size_t s = start + 1; s < end; ++s) {
      const Saved& item = saved[s];
      if (!index.regenerable(item.block, needed_by) || needed_by <= item.last_forward_use) continue;
      plan::Interval interval = regeneration_interval(index, item.block, item.last_forward_use, needed_by);
      // Inputs must be kept, parameters, or rebuilt earlier in this segment.
      bool inputs_ok = true;
      for (std::uint64_t id : interval.inputs)
        if (dropped[index.block_index(id)]) {
          bool same_segment = false;
          for (std::size_t t = start + 1; t < s; ++t) same_segment |= index.block(saved[t].block).id == id;
          inputs_ok &= same_segment;
        }
      if (!inputs_ok) continue;
      dropped[item.block] = true;
      add_interval(plan, index, item.block, std::move(interval));
    }
  }
  return plan;
}

}  // namespace delta::planner
