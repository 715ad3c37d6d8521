#include "planning/time_by_phase.hpp"

#include <algorithm>

namespace deltactl {

TimeByPhase time_by_phase(const delta::planner::TraceIndex& index, const delta::planner::SimulationResult& sim) {
  using delta::trace::Phase;
  TimeByPhase out;
  const std::vector<delta::trace::Op>& ops = index.trace().ops;
  const std::size_t n = ops.size();
  if (!sim.feasible || n == 0 || sim.timeline.size() != n) return out;
  if (std::none_of(ops.begin(), ops.end(), [](const delta::trace::Op& op) { return op.phase != Phase::unknown; })) return out;
  std::int64_t before = 0;  // the previous op's end in the plan's step
  for (std::size_t i = 0; i < n; ++i) {
    const delta::planner::OpMoment& m = sim.timeline[i];
    auto it = std::find_if(out.phases.begin(), out.phases.end(), [&](const PhaseTime& p) { return p.phase == ops[i].phase; });
    if (it == out.phases.end()) {
      out.phases.push_back(PhaseTime{ops[i].phase, i, i});
      it = out.phases.end() - 1;
    }
    it->last_op = i;
    ++it->ops;
    it->native_ns += index.duration(i);
    it->step_ns += m.end_ns - before;
    it->stall_ns += m.stall_ns;
    it->replay_ns += m.replay_ns;
    before = m.end_ns;
  }
  out.end_wait_ns = std::max<std::int64_t>(0, sim.step_time_ns - before);
  return out;
}

}  // namespace deltactl
