// Main of the GPU tests: they need a real device. Without one they exit with 77, which ctest
// reports as skipped, unless DELTA_REQUIRE_GPU=1 (set by scripts/gpu-check), where a missing GPU
// is a failure: on the GPU machine a silent skip would hide a broken driver path.
#include "../catch_session.hpp"

#include <delta/device.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char* argv[]) {
  const char* require = std::getenv("DELTA_REQUIRE_GPU");
  const bool required = require != nullptr && std::string(require) == "1";
  try {
    delta::make_cuda_device(0);
  } catch (const delta::DeviceError& error) {
    std::fprintf(stderr, "no usable CUDA device: %s\n", error.what());
    if (required) {
      std::fprintf(stderr, "DELTA_REQUIRE_GPU=1: failing instead of skipping\n");
      return 1;
    }
    return 77;
  }
  return run_catch_session(argc, argv);
}
