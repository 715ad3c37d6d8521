#include "running/executed_phases.hpp"

#include "planning/time_by_phase.hpp"

#include <algorithm>

namespace deltactl {
namespace {

using delta::trace::Phase;

// Each recorded op's time from the previous one's end, summed by phase; what the step ran past
// its last op. A perturbed run's extra ops carry the op before them, so count with it.
template <typename Add>
std::uint64_t sum_by_phase(const delta::trace::Trace& trace, const delta::execute::ProgramRun& r, Add add) {
  std::uint64_t before = 0;
  for (const delta::execute::ExecutedTimeline::Op& o : r.timeline.ops) {
    if (o.op >= trace.ops.size()) continue;
    add(trace.ops[o.op].phase, o.end_ns > before ? o.end_ns - before : 0);
    before = std::max(before, o.end_ns);
  }
  return r.step_time_ns > before ? r.step_time_ns - before : 0;
}

}  // namespace

ExecutedPhases executed_phases(const delta::trace::Trace& trace, const delta::execute::ProgramRun& cache,
                               const delta::execute::ProgramRun& run) {
  ExecutedPhases out;
  if (cache.timeline.ops.empty() || run.timeline.ops.empty() || !run.error.empty() || !has_phases(trace)) return out;
  out.end_wait_ns = sum_by_phase(trace, run, [&](Phase phase, std::uint64_t ns) { phase_entry(out.phases, phase).step_ns += ns; });
  out.cache_end_wait_ns =
      sum_by_phase(trace, cache, [&](Phase phase, std::uint64_t ns) { phase_entry(out.phases, phase).cache_ns += ns; });
  return out;
}

}  // namespace deltactl
