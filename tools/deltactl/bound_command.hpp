// `deltactl bound`: the lowest overhead any plan could reach on traces at several budgets.
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {

void add_bound_command(CLI::App& app);

}  // namespace deltactl
