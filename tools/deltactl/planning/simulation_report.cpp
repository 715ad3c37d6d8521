#include "planning/simulation_report.hpp"

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

}  // namespace deltactl
