#include "baselines/baselines.hpp"
#include "baselines/saved_activations.hpp"
#include "common/plan_edits.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace delta::planner {

plan::Plan plan_knapsack(const PlanRequest& request) {
  // Recompute-only knapsack, as PyTorch's activation_memory_budget partitioner: choose the
  // saved activations to recompute that free at least (native peak - budget) bytes with the
  // least recompute time (0/1 knapsack by dynamic programming over discretized sizes).
  const TraceIndex& index = *request.index;
  plan::Plan plan = empty_plan(request, "knapsack");
  if (index.native_peak() <= request.budget_bytes) return plan;
  std::vector<Saved> items;
  for (const Saved& s : saved_for_backward(index))
    if (index.regenerable(s.block, s.first_backward_use)) items.push_back(s);
  if (items.empty()) return plan;
  std::uint64_t total = 0;
  for (const Saved& s : items) total += index.block(s.block).size;
  const std::uint64_t need = index.native_peak() - request.budget_bytes;
  constexpr std::size_t kUnits = 2000;
  const double unit = double(std::max(total, need)) / kUnits;
  const std::size_t need_units = std::min<std::size_t>(kUnits, static_cast<std::size_t>(std::ceil(double(need) / unit)));
  // best[w]: least compute to free at least w units; choice bits for reconstruction.
  std::vector<double> best(need_units + 1, std::numeric_limits<double>::infinity());
  best[0] = 0;
  std::vector<std::vector<bool>> took(items.size(), std::vector<bool>(need_units + 1, false));
  for (std::size_t k = 0; k < items.size(); ++k) {
    const std::size_t w = std::max<std::size_t>(1, static_cast<std::size_t>(double(index.block(items[k].block).size) / unit));
    double c = 0;
    for (std::uint32_t op : index.version_chain(items[k].block, items[k].first_backward_use)) c += double(index.duration(op));
    for (std::size_t cap = need_units + 1; cap-- > 0;) {
      const std::size_t from = cap > w ? cap - w : 0;
      if (best[from] + c < best[cap]) {
        best[cap] = best[from] + c;
        took[k][cap] = true;
      }
    }
  }
  std::vector<bool> chosen(items.size(), false);
  std::size_t cap = need_units;
  if (best[cap] == std::numeric_limits<double>::infinity()) {  // cannot free enough: take all
    std::fill(chosen.begin(), chosen.end(), true);
  } else {
    for (std::size_t k = items.size(); k-- > 0;)
      if (took[k][cap]) {
        chosen[k] = true;
        const std::size_t w = std::max<std::size_t>(1, static_cast<std::size_t>(double(index.block(items[k].block).size) / unit));
        cap = cap > w ? cap - w : 0;
      }
  }
  // A recomputed block's producer must find its inputs resident: drop choices that read
  // another chosen block.
  std::vector<bool> dropped(index.blocks().size(), false);
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (!chosen[k]) continue;
    plan::Interval interval = regeneration_interval(index, items[k].block, items[k].last_forward_use, items[k].first_backward_use);
    bool ok = true;
    for (std::uint64_t id : interval.inputs) ok &= !dropped[index.block_index(id)];
    if (!ok) continue;
    dropped[items[k].block] = true;
    add_interval(plan, index, items[k].block, std::move(interval));
  }
  return plan;
}

}  // namespace delta::planner
