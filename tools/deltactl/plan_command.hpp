// `deltactl plan`: compute a swap/regenerate plan for a trace under a memory budget.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace deltactl {

void add_plan_command(CLI::App& app);

// "0.5" (a fraction of the native peak, in (0, 1]) or bytes ("6000000000", "6GiB", "512MiB").
// Throws std::invalid_argument naming the text.
std::uint64_t parse_budget(const std::string& text, std::uint64_t native_peak, double* ratio_out);

// --search-rounds and --search-patience: the local search on DELTA's plan (plan, compare).
void add_search_options(CLI::App& command, std::optional<std::size_t>& rounds, std::optional<std::size_t>& patience,
                        bool& from_bound);

}  // namespace deltactl
