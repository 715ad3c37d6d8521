// `deltactl simulate`: check a plan file against a trace and replay it in the simulator.
#pragma once

#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>

namespace deltactl {

void add_simulate_command(CLI::App& app);

// The plan's run in the simulator, op by op and copy by copy, as `deltactl simulate
// --timeline` writes it (format "delta-plan-timeline"); `deltactl execute --timeline` sets the
// executed run beside it.
nlohmann::json timeline_json(const std::string& trace_path, const delta::planner::TraceIndex& index,
                             const delta::plan::Plan& plan, const delta::planner::SimulationResult& sim,
                             bool through_allocator);

}  // namespace deltactl
