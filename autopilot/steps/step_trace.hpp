// The step a plan is made for, out of what the recorder saw in auto mode: its last recorded
// iteration (trace::slice_iteration), kernel launches only. The executor's clock counts the
// program's launches; the recorder also saw memsets and the online policy's own copies, which
// are not launches and which the plan must not count as ops.
#pragma once

#include <delta/trace.hpp>

namespace delta::autopilot {

// Throws trace::TraceError when the recording has no complete iteration or no launch in it.
trace::Trace planning_step(const trace::Trace& recorded);

}  // namespace delta::autopilot
