// `deltactl compare`: every planner and baseline on every trace at several budgets.
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {

void add_compare_command(CLI::App& app);

}  // namespace deltactl
