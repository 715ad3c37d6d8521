// What a plan asks of the step, checked against the step before anything runs. The plan's format
// (check_plan_matches) says its indices are in range and it was made for this trace; these say
// each decision is one the executor can carry out without losing data: a rebuild replays an op
// that writes the block and has run, a block is released only while the program holds it, a
// copy to host is not stale, a revival comes after the program's free. The planner's simulator
// refuses the same plans (planner/sim/replay_checks.cpp); a plan written by hand or for another
// build reaches the executor without it, in `deltactl execute` and in run mode alike.
#pragma once

#include "executor/step/step_program.hpp"

#include <delta/plan.hpp>
#include <delta/trace.hpp>

namespace delta::executor {

// After check_plan_matches (every index in range, each interval's own ops in order). Throws
// plan::PlanError naming the block, the op and the rule.
void check_plan_against_step(const plan::Plan& plan, const trace::Trace& trace, const StepProgram& program);

}  // namespace delta::executor
