#include "delta/passes/evictions/swap_refinement.hpp"

#include "common/early_copies.hpp"

#include "sim/copy_lanes.hpp"

#include <algorithm>

namespace delta::planner {
namespace {

struct Tried {
  double compute;       // what the regeneration replays, ns
  std::uint64_t block;  // block id
  std::uint64_t needed_by;
};

}  // namespace

plan::Plan refine_with_swaps(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                             const SwapRefinementOptions& options) {
  const TraceIndex& index = *request.index;
  if (!judged.feasible) return plan;
  std::vector<Tried> tries;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action != plan::Action::regenerate) continue;
      tries.push_back({replay_compute_ns(index, interval), decision.block, interval.needed_by});
    }
  std::sort(tries.begin(), tries.end(), [](const Tried& a, const Tried& b) { return a.compute > b.compute; });
  if (tries.size() > options.max_tries) tries.resize(options.max_tries);
  // Transfers of accepted swaps, booked on the native timeline so that later ones queue
  // behind them rather than all claiming the same idle stretch of a lane.
  CopyLane d2h, h2d;
  for (const Tried& t : tries) {
    if (past_deadline(request)) break;
    const std::uint32_t b = index.block_index(t.block);
    const BlockInfo& info = index.block(b);
    const plan::Interval* previous = nullptr;
    plan::Interval* interval = find_interval(plan, t.block, plan::Action::regenerate, t.needed_by, &previous);
    if (!interval) continue;
    // Evict right after the last use before the drop (the earliest the data is final).
    auto use = std::upper_bound(info.uses.begin(), info.uses.end(), static_cast<std::uint32_t>(interval->release_after));
    std::uint64_t release = use == info.uses.begin() ? interval->release_after : *(use - 1);
    release = std::max<std::uint64_t>(release, info.first);
    if (previous) release = std::max<std::uint64_t>(release, previous->needed_by);
    if (release >= t.needed_by) continue;
    const std::int64_t out = transfer_ns(info.size, request.gpu.d2h_bytes_per_s, request.gpu.launch_latency_ns);
    const std::int64_t in = transfer_ns(info.size, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns);
    const std::uint32_t copy_from = earliest_copy_out(index, b, static_cast<std::uint32_t>(release),
                                                      previous ? static_cast<std::uint32_t>(previous->needed_by) : 0);
    const std::int64_t out_start = d2h.find_forward_or_queue(index.native_end(options.early_copies ? copy_from : release), out);
    const std::int64_t deadline = t.needed_by >= index.op_count() ? index.native_step_ns() : index.native_start(t.needed_by);
    std::int64_t in_start = h2d.find_backward(deadline, in, out_start + out);
    std::uint64_t prefetch = release + 1;
    if (in_start >= 0) prefetch = std::max<std::uint64_t>(release + 1, index.op_at_time(in_start));
    prefetch = std::min<std::uint64_t>(prefetch, t.needed_by);
    const plan::Interval saved = *interval;
    interval->action = plan::Action::swap;
    interval->release_after = release;
    interval->prefetch_at = prefetch;
    if (options.early_copies && copy_from < release) interval->copy_after = copy_from;
    interval->replay.clear();
    interval->inputs.clear();
    SimulationResult result = judge(request, plan);
    if (result.feasible && result.step_time_ns < judged.step_time_ns) {
      judged = result;
      d2h.reserve(out_start, out);
      h2d.reserve(in_start >= 0 ? in_start : index.native_start(std::min<std::uint64_t>(prefetch, index.op_count() - 1)), in);
      continue;
    }
    interval = find_interval(plan, t.block, plan::Action::swap, t.needed_by);
    if (interval) *interval = saved;
  }
  judged = judge(request, plan);
  return plan;
}

}  // namespace delta::planner
