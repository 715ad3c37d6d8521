// `deltactl launch --budget B [options] -- COMMAND ARGS...`: runs COMMAND under auto mode, the
// way a user would by hand: LD_PRELOAD=libdelta.so (kept in front of any preload already set),
// DELTA_MODE=auto, DELTA_BUDGET=B, PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (so that
// PyTorch sends every tensor's allocation through the calls libdelta interposes), and the
// optional settings. Under torchrun each rank is its own process and reads the same settings;
// files DELTA writes per rank get ".rank<R>" in their names (RANK, LOCAL_RANK).
#pragma once

#include <CLI/CLI.hpp>

namespace deltactl {
void add_launch_command(CLI::App& app);
}
