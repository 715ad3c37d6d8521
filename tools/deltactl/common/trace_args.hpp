// What the planning commands (plan, compare, bound) share about their trace arguments.
#pragma once

#include <delta/trace.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace deltactl {

// The trace's name in tables and JSON: the file name without .gz, .json or .log.
std::string trace_name(const std::string& path);

// The GPU profile to plan for: the one asked for, else the trace's own, else its device's (by
// name), else h200 with a word on stderr.
std::string gpu_profile_for(const delta::trace::Trace& trace, const std::string& requested);

// A memory budget as the user wrote it: "0.5" (a fraction of the native peak, in (0, 1]) or
// bytes ("6000000000", "6GiB", "141GB", "512MiB").
struct Budget {
  std::uint64_t bytes = 0;
  double ratio = 0;  // of the native peak; above 1 for bytes beyond it
  std::string label;  // in tables: a fraction to two places, a size as written
};

// Throws std::invalid_argument naming the text: not a number or size, zero or negative, or a
// bare number above 1 that is not a whole count of bytes or is under a MiB (a missing unit).
Budget parse_budget(const std::string& text, std::uint64_t native_peak);

// Checks every budget's syntax before any trace is read (the same errors as parse_budget).
void check_budgets(const std::vector<std::string>& budgets);

}  // namespace deltactl
