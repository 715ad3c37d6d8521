// The trace run as a program under auto mode or the online policy alone, on the sim device:
// the entry points run_program() is given in place of a plan. Auto mode's recording is the
// recorder fed by the sim's observer, which passes every activity on to the program's own.
#pragma once

#include "autopilot/autopilot.hpp"
#include "executor/online/online_policy.hpp"
#include "tools/execute/program_runner.hpp"

namespace delta::execute {

// Sets options.entry and options.report: the online policy alone, its stats to `*stats` at
// the end of the run.
void run_online(ProgramOptions& options, executor::OnlineOptions online, executor::OnlineStats* stats);
// Sets options.entry and options.report: auto mode, its report to `*report` at the end.
void run_auto(ProgramOptions& options, autopilot::AutoOptions automatic, autopilot::AutoReport* report);

}  // namespace delta::execute
