#include "autopilot/steps/step_trace.hpp"

#include <algorithm>

namespace delta::autopilot {

trace::Trace planning_step(const trace::Trace& recorded) {
  if (recorded.iterations.empty()) throw trace::TraceError("auto mode: the recording marks no complete iteration");
  trace::Trace step = slice_iteration(recorded, recorded.iterations.back().index);
  std::erase_if(step.ops, [](const trace::Op& op) { return op.kind != trace::OpKind::kernel; });
  if (step.ops.empty()) throw trace::TraceError("auto mode: the recorded iteration launches no kernel");
  step.iterations.clear();  // one step, whole
  for (trace::Op& op : step.ops) op.iteration = 0;
  trace::validate(step);
  return step;
}

}  // namespace delta::autopilot
