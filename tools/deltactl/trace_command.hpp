// `deltactl trace info|convert`: look at and convert access traces (docs/trace-format.md).
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {

void add_trace_command(CLI::App& app);

}  // namespace deltactl
