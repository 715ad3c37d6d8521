// What the planning commands (plan, compare, bound) share about their trace arguments.
#pragma once

#include <delta/trace.hpp>

#include <string>
#include <vector>

namespace deltactl {

// The trace's name in tables and JSON: the file name without .gz, .json or .log.
std::string trace_name(const std::string& path);

// The GPU profile to plan for: the one asked for, else the trace's own, else its device's (by
// name), else h200 with a word on stderr.
std::string gpu_profile_for(const delta::trace::Trace& trace, const std::string& requested);

// Throws std::invalid_argument for a budget ratio outside (0, 1].
void check_budget_ratios(const std::vector<double>& ratios);

}  // namespace deltactl
