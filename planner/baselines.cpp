// Plan-producing baselines from the literature, each reduced to its decision rule and judged
// by the same simulator as DELTA.
#include "delta_planner.hpp"
#include "methods.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace delta::planner {
namespace {

// The op at which the backward pass starts: the first op marked backward, else the op where
// live memory peaks (activations accumulate until then).
std::size_t backward_start(const TraceIndex& index) {
  for (std::size_t i = 0; i < index.op_count(); ++i)
    if (index.trace().ops[i].phase == trace::Phase::backward) return i;
  const auto& live = index.native_live_bytes();
  return static_cast<std::size_t>(std::max_element(live.begin(), live.end()) - live.begin());
}

// A forward activation: produced before the backward pass and used again in it.
struct Saved {
  std::uint32_t block;
  std::uint32_t last_forward_use;
  std::uint32_t first_backward_use;
};

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


}  // namespace

plan::Plan plan_vdnn(const PlanRequest& request) {
  // vDNN (Rhu et al., MICRO 2016), "all" policy: offload every activation saved for backward
  // after its last forward use; prefetch it one layer (op) ahead of its first backward use.
  const TraceIndex& index = *request.index;
  plan::Plan plan = empty_plan(request, "vdnn");
  for (const Saved& s : saved_for_backward(index)) {
    plan::Interval interval;
    interval.action = plan::Action::swap;
    interval.release_after = s.last_forward_use;
    interval.prefetch_at = std::max(s.last_forward_use + 1, s.first_backward_use - 1);
    interval.needed_by = s.first_backward_use;
    add_interval(plan, index, s.block, interval);
  }
  return plan;
}

plan::Plan plan_capuchin(const PlanRequest& request) {
  // Capuchin (Peng et al., ASPLOS 2020): swap first when the transfer can be hidden, recompute
  // where it cannot; then tune prefetches with feedback from measured (here: simulated) runs,
  // issuing late ones earlier while the budget still holds.
  DeltaOptions options;
  options.policy = Policy::capuchin;
  options.method = "capuchin";
  plan::Plan plan = plan_with_sweep(request, options);
  SimulationResult best = judge(request, plan);
  const TraceIndex& index = *request.index;
  for (int round = 1; round <= 3 && best.feasible && best.stall_ns > 0; ++round) {
    plan::Plan tuned = plan;
    for (plan::BlockDecision& decision : tuned.decisions)
      for (plan::Interval& interval : decision.intervals) {
        if (interval.action != plan::Action::swap) continue;
        const std::uint64_t size = index.block(index.block_index(decision.block)).size;
        const double needed = (transfer_ns(size, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns)) * (1.0 + 0.5 * round);
        while (interval.prefetch_at > interval.release_after + 1 &&
               double(index.compute_between(interval.prefetch_at, interval.needed_by)) < needed)
          --interval.prefetch_at;
      }
    SimulationResult result = judge(request, tuned);
    if (result.feasible && result.step_time_ns < best.step_time_ns) {
      plan = std::move(tuned);
      best = result;
    } else {
      break;
    }
  }
  judge(request, plan);
  return plan;
}

plan::Plan plan_delta_public(const PlanRequest& request) {
  DeltaOptions options;
  options.policy = Policy::delta_public;
  options.hide_prefetch = false;
  options.method = "delta-public";
  return plan_with_sweep(request, options);
}

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
