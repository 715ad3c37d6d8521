#include "common/plan_edits.hpp"

#include <algorithm>

namespace delta::planner {

plan::Plan empty_plan(const PlanRequest& request, const std::string& method) {
  plan::Plan plan;
  plan.method = method;
  plan.trace_hash = request.index->fingerprint();
  plan.trace_ops = request.index->trace().ops.size();
  plan.trace_blocks = request.index->trace().blocks.size();
  plan.gpu_profile = request.gpu.name;
  plan.budget_bytes = request.budget_bytes;
  plan.budget_ratio = request.budget_ratio;
  return plan;
}

std::vector<plan::BlockDecision>::iterator find_decision(plan::Plan& plan, std::uint64_t id) {
  return std::find_if(plan.decisions.begin(), plan.decisions.end(), [&](const plan::BlockDecision& d) { return d.block == id; });
}

plan::Interval* find_interval(plan::Plan& plan, std::uint64_t block, plan::Action action, std::uint64_t needed_by,
                              const plan::Interval** previous) {
  for (plan::BlockDecision& decision : plan.decisions) {
    if (decision.block != block) continue;
    for (std::size_t k = 0; k < decision.intervals.size(); ++k)
      if (decision.intervals[k].action == action && decision.intervals[k].needed_by == needed_by) {
        if (previous) *previous = k > 0 ? &decision.intervals[k - 1] : nullptr;
        return &decision.intervals[k];
      }
  }
  return nullptr;
}

std::uint64_t first_read_back(const plan::Plan& plan, std::uint64_t block, const plan::Interval& away) {
  std::uint64_t first = away.needed_by;
  for (const plan::BlockDecision& other : plan.decisions)
    for (const plan::Interval& x : other.intervals)
      if (rebuilds(x) && x.needed_by > away.release_after && x.needed_by < first &&
          std::binary_search(x.inputs.begin(), x.inputs.end(), block))
        first = x.needed_by;
  return first;
}

void add_interval(plan::Plan& plan, const TraceIndex& index, std::uint32_t block, plan::Interval interval) {
  const std::uint64_t id = index.block(block).id;
  auto it = find_decision(plan, id);
  if (it == plan.decisions.end()) it = plan.decisions.insert(plan.decisions.end(), plan::BlockDecision{id, {}});
  auto pos = std::upper_bound(it->intervals.begin(), it->intervals.end(), interval.release_after,
                              [](std::uint64_t v, const plan::Interval& x) { return v < x.release_after; });
  it->intervals.insert(pos, std::move(interval));
}

double replay_compute_ns(const TraceIndex& index, const plan::Interval& interval) {
  double compute = 0;
  for (std::uint64_t op : interval.replay) compute += double(index.duration(op));
  return compute;
}

plan::Interval regeneration_interval(const TraceIndex& index, std::uint32_t block, std::uint32_t release_after,
                                     std::uint32_t needed_by) {
  plan::Interval interval;
  interval.action = plan::Action::regenerate;
  interval.release_after = release_after;
  interval.needed_by = needed_by;
  for (std::uint32_t op : index.version_chain(block, needed_by)) {
    interval.replay.push_back(op);
    for (const OpUse& u : index.uses(op))
      if (u.read && u.block != block) interval.inputs.push_back(index.block(u.block).id);
  }
  std::sort(interval.inputs.begin(), interval.inputs.end());
  interval.inputs.erase(std::unique(interval.inputs.begin(), interval.inputs.end()), interval.inputs.end());
  return interval;
}

}  // namespace delta::planner
