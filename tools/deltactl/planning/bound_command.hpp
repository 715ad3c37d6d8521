// `deltactl bound`: the lowest overhead any plan could reach on traces at several budgets.
#pragma once

#include "common/trace_args.hpp"

#include "bound/lower_bound.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>

namespace deltactl {

void add_bound_command(CLI::App& app);

// One bound's JSON row, as `bound --json` and `compare --bound --json` print it: trace,
// budget_ratio, budget_bytes, reachable (null when the solver gave no answer),
// overhead_lower_bound, and why not where it has no bound.
nlohmann::json bound_row(const std::string& trace, const Budget& budget, const delta::planner::OverheadBound& bound);

}  // namespace deltactl
