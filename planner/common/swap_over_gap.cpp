#include "common/swap_over_gap.hpp"

#include "common/early_copies.hpp"
#include "sim/simulator.hpp"

#include <algorithm>

namespace delta::planner {

std::uint64_t needed_back_by(const plan::Plan& plan, std::uint64_t id, std::uint64_t after, std::uint64_t before) {
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (rebuilds(interval) && interval.needed_by > after && interval.needed_by < before &&
          std::find(interval.inputs.begin(), interval.inputs.end(), id) != interval.inputs.end())
        before = interval.needed_by;
  return before;
}

plan::Interval swap_over_gap(const PlanRequest& request, const plan::Plan& plan, std::uint64_t id,
                             std::uint64_t release_after, std::uint64_t needed_by) {
  const TraceIndex& index = *request.index;
  const std::uint32_t b = index.block_index(id);
  plan::Interval swap;
  swap.action = plan::Action::swap;
  swap.release_after = release_after;
  swap.needed_by = needed_back_by(plan, id, release_after, needed_by);
  std::uint32_t resident_from = 0;
  for (const plan::BlockDecision& decision : plan.decisions)
    if (decision.block == id)
      for (const plan::Interval& interval : decision.intervals)
        if (interval.needed_by <= swap.release_after)
          resident_from = std::max(resident_from, static_cast<std::uint32_t>(interval.needed_by));
  const std::uint32_t from = earliest_copy_out(index, b, static_cast<std::uint32_t>(swap.release_after), resident_from);
  if (from < swap.release_after) swap.copy_after = from;
  const std::int64_t in = transfer_ns(index.block(b).size, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns);
  const std::size_t need = std::min<std::size_t>(swap.needed_by, index.op_count() - 1);
  const std::int64_t issue_by = index.native_start(need) - in - in / 5;
  swap.prefetch_at = std::clamp<std::uint64_t>(issue_by > 0 ? index.op_at_time(issue_by) : 0, swap.release_after + 1,
                                               swap.needed_by);
  return swap;
}

}  // namespace delta::planner
