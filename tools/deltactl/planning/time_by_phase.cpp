#include "planning/time_by_phase.hpp"

#include <algorithm>

namespace deltactl {

bool has_phases(const delta::trace::Trace& trace) {
  return std::any_of(trace.ops.begin(), trace.ops.end(), [](const delta::trace::Op& op) { return op.phase != delta::trace::Phase::unknown; });
}

TimeByPhase time_by_phase(const delta::planner::TraceIndex& index, const delta::planner::SimulationResult& sim) {
  TimeByPhase out;
  const std::vector<delta::trace::Op>& ops = index.trace().ops;
  const std::size_t n = ops.size();
  if (!sim.feasible || n == 0 || sim.timeline.size() != n || !has_phases(index.trace())) return out;
  std::int64_t before = 0;  // the previous op's end in the plan's step
  for (std::size_t i = 0; i < n; ++i) {
    const delta::planner::OpMoment& m = sim.timeline[i];
    PhaseTime& p = phase_entry(out.phases, ops[i].phase);
    if (p.ops++ == 0) p.first_op = i;
    p.last_op = i;
    p.native_ns += index.duration(i);
    p.step_ns += m.end_ns - before;
    p.stall_ns += m.stall_ns;
    p.replay_ns += m.replay_ns;
    before = m.end_ns;
  }
  out.end_wait_ns = std::max<std::int64_t>(0, sim.step_time_ns - before);
  return out;
}

}  // namespace deltactl
