#include "planning/simulation_report.hpp"

#include <iomanip>
#include <sstream>

namespace deltactl {

void print_simulation(std::ostream& out, const delta::planner::SimulationResult& sim, std::uint64_t budget_bytes,
                      bool through_allocator) {
  out << "  predicted peak " << sim.peak_bytes << " bytes, step " << sim.step_time_ns / 1e6 << " ms (native "
      << sim.native_step_time_ns / 1e6 << " ms, overhead " << sim.overhead() << ")\n"
      << "  swaps " << sim.swaps << (sim.partial_swaps ? " (" + std::to_string(sim.partial_swaps) + " of part of a block)" : std::string())
      << ", regenerations " << sim.regenerations
      << (sim.revivals ? ", revivals " + std::to_string(sim.revivals) : std::string()) << ", discards " << sim.discards << ", stalls "
      << sim.stall_ns / 1e6 << " ms, extra compute " << sim.extra_compute_ns / 1e6 << " ms, moved " << sim.bytes_d2h
      << " B to host and " << sim.bytes_h2d << " B back\n";
  if (through_allocator && budget_bytes > 0)
    out << "  through the caching allocator capped at the budget: reserved peak " << sim.allocator_reserved_peak
        << " bytes (" << double(sim.allocator_reserved_peak) / double(budget_bytes) << " of the budget)\n";
}

void print_time_by_phase(std::ostream& out, const TimeByPhase& phases) {
  if (phases.phases.empty()) return;
  std::ostringstream line;
  line << std::fixed << std::setprecision(2) << "  by phase, ms in the plan's step against the ops' own:";
  const char* separator = " ";
  for (const PhaseTime& p : phases.phases) {
    line << separator << delta::trace::to_string(p.phase) << " " << p.step_ns / 1e6 << " against " << p.native_ns / 1e6;
    if (p.replay_ns > 0 || p.stall_ns > 0) {
      line << " (";
      if (p.replay_ns > 0) line << "replays " << p.replay_ns / 1e6 << (p.stall_ns > 0 ? ", " : "");
      if (p.stall_ns > 0) line << "waits " << p.stall_ns / 1e6;
      line << ")";
    }
    separator = "; ";
  }
  if (phases.end_wait_ns > 0) line << "; after the last op " << phases.end_wait_ns / 1e6;
  out << line.str() << "\n";
}

}  // namespace deltactl
