// `deltactl replay`: replay an alloc stream under DELTA and/or the native policy model.
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {

void add_replay_command(CLI::App& app);

}  // namespace deltactl
