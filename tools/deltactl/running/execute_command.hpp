// `deltactl execute`: a trace run as a program on the sim device in cache mode and under a
// plan, through the allocator, the launch hook and the executor; the two runs compared.
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {
void add_execute_command(CLI::App& app);
}
