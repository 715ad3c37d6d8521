// `deltactl plan`: compute a swap/regenerate plan for a trace under a memory budget.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace deltactl {

void add_plan_command(CLI::App& app);

// --search-rounds, --search-patience and --[no-]search-from-bound: the local search on DELTA's plan (plan, compare).
void add_search_options(CLI::App& command, std::optional<std::size_t>& rounds, std::optional<std::size_t>& patience,
                        std::optional<bool>& from_bound);

}  // namespace deltactl
