// Where a simulated plan spends the step beyond native, by the trace's phases (forward,
// backward, optimizer): the question a slow plan raises first, and the one the op-by-op
// timeline answers only after a script sums it.
#pragma once

#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"

#include <delta/trace.hpp>

#include <cstdint>
#include <vector>

namespace deltactl {

struct PhaseTime {
  delta::trace::Phase phase = delta::trace::Phase::unknown;
  std::size_t first_op = 0, last_op = 0;  // the phase's first and last ops (other phases may run between)
  std::size_t ops = 0;
  std::int64_t native_ns = 0;  // the ops' own time, as the trace has it
  // The same ops in the plan's step, each from the op before's end to its own: its own time,
  // the waits and replays just before it (below), and where the plan is judged at the host's
  // pace, time the device waits for the host (the native step waits alike).
  std::int64_t step_ns = 0;
  std::int64_t stall_ns = 0, replay_ns = 0;
};

struct TimeByPhase {
  std::vector<PhaseTime> phases;  // in the order each first appears; empty where no op has a phase
  // After the last op, until the step ends (copies back the step's end needs): the phases'
  // step times and it add up to the plan's step.
  std::int64_t end_wait_ns = 0;
};

// Whether any op of the trace names its phase (a DTR log's loader marks forward and backward;
// a recording or capture also the optimizer).
bool has_phases(const delta::trace::Trace& trace);

// The entry for `phase` in `phases`, appended where missing: the phases in the order they
// first appear in the step.
template <typename Entry>
Entry& phase_entry(std::vector<Entry>& phases, delta::trace::Phase phase) {
  for (Entry& entry : phases)
    if (entry.phase == phase) return entry;
  phases.push_back(Entry{phase});
  return phases.back();
}

// From a feasible simulation with its timeline recorded; empty phases where the trace has no
// phases (DTR logs) or the timeline is missing or short of the trace's ops.
TimeByPhase time_by_phase(const delta::planner::TraceIndex& index, const delta::planner::SimulationResult& sim);

}  // namespace deltactl
