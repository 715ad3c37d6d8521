// Whether run and auto mode can guard launches on a GPU (src/driver/launch_guard.hpp): the decision
// both make before starting there, checked on a machine without one. Not preloaded, auto mode
// names the launcher's command line and run mode the preload; preloaded over a driver that
// cannot name kernels or lay out their parameters, both name the driver version needed.
#include "src/driver/launch_guard.hpp"

#include <catch2/catch.hpp>

using namespace delta;

namespace {

CUresult any_name(const char**, CUfunction) { return CUDA_SUCCESS; }
CUresult any_layout(CUfunction, size_t, size_t*, size_t*) { return CUDA_SUCCESS; }
CUresult any_kernel_name(const char**, CUkernel) { return CUDA_SUCCESS; }
CUresult any_kernel_layout(CUkernel, size_t, size_t*, size_t*) { return CUDA_SUCCESS; }

executor::FunctionQueries full() {
  executor::FunctionQueries q;
  q.func_get_name = &any_name;
  q.func_get_param_info = &any_layout;
  return q;
}

}  // namespace

TEST_CASE("without the preloaded interposer, auto mode names the launcher and run mode the preload", "[launch_guard]") {
  const std::string automatic = launch_guard_refusal(GuardedMode::automatic, false, full());
  CHECK_THAT(automatic, Catch::StartsWith("DELTA_MODE=auto on a GPU"));
  CHECK_THAT(automatic, Catch::Contains("deltactl launch --budget B -- python train.py"));
  CHECK_THAT(automatic, Catch::Contains("LD_PRELOAD=libdelta.so"));
  const std::string run = launch_guard_refusal(GuardedMode::run, false, full());
  CHECK_THAT(run, Catch::StartsWith("DELTA_MODE=run on a GPU"));
  CHECK_THAT(run, Catch::Contains("LD_PRELOAD=libdelta.so"));
  CHECK_THAT(run, !Catch::Contains("deltactl launch"));  // run mode needs a plan: the launcher runs auto mode
}

TEST_CASE("preloaded, both modes start when the driver names kernels and lays out parameters, in either flavour",
          "[launch_guard]") {
  CHECK(launch_guard_refusal(GuardedMode::automatic, true, full()).empty());
  CHECK(launch_guard_refusal(GuardedMode::run, true, full()).empty());
  executor::FunctionQueries kernels;  // only the cuKernel* queries (a runtime handing out CUkernels)
  kernels.kernel_get_name = &any_kernel_name;
  kernels.kernel_get_param_info = &any_kernel_layout;
  CHECK(launch_guard_refusal(GuardedMode::automatic, true, kernels).empty());
}

TEST_CASE("preloaded over a driver without the queries, both modes refuse naming the driver needed", "[launch_guard]") {
  for (const bool names : {false, true}) {
    executor::FunctionQueries q;
    if (names) q.func_get_name = &any_name;
    else q.func_get_param_info = &any_layout;
    for (const GuardedMode mode : {GuardedMode::automatic, GuardedMode::run}) {
      const std::string why = launch_guard_refusal(mode, true, q);
      CHECK_THAT(why, Catch::Contains(names ? "cuFuncGetParamInfo" : "cuFuncGetName"));
      CHECK_THAT(why, Catch::Contains("CUDA 12.4 or later"));
    }
  }
}
