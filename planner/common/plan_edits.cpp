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
