// Where an executed step went, by the trace's phases, beside the same step in cache mode: the
// run's counterpart of the plan's time by phase (planning/time_by_phase.hpp), so that a run
// slower or faster than its plan shows in which phase it parted from it.
#pragma once

#include "tools/execute/program_runner.hpp"

#include <delta/trace.hpp>

#include <cstdint>
#include <vector>

namespace deltactl {

struct ExecutedPhase {
  delta::trace::Phase phase = delta::trace::Phase::unknown;
  std::uint64_t step_ns = 0;   // under the plan: each op from the one before's end to its own
  std::uint64_t cache_ns = 0;  // the same ops in cache mode
};

struct ExecutedPhases {
  std::vector<ExecutedPhase> phases;  // in the order each first appears; empty without phases
  std::uint64_t end_wait_ns = 0, cache_end_wait_ns = 0;  // after the last op, until the step ends
};

// From the two runs' timelines of their last iteration (ProgramOptions::record_timeline).
// Empty where the trace has no phases or a run recorded no timeline (it stopped early).
ExecutedPhases executed_phases(const delta::trace::Trace& trace, const delta::execute::ProgramRun& cache,
                               const delta::execute::ProgramRun& run);

}  // namespace deltactl
