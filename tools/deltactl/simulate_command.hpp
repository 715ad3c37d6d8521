// `deltactl simulate`: check a plan file against a trace and replay it in the simulator.
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {

void add_simulate_command(CLI::App& app);

}  // namespace deltactl
