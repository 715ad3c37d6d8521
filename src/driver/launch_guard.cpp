#include "src/driver/launch_guard.hpp"

namespace delta {

std::string launch_guard_refusal(GuardedMode mode, bool interposer_live, const executor::FunctionQueries& queries) {
  const bool automatic = mode == GuardedMode::automatic;
  const std::string setting = automatic ? "DELTA_MODE=auto" : "DELTA_MODE=run";
  if (!interposer_live) {
    if (automatic)
      return setting +
             " on a GPU needs DELTA's launch guard, which sees kernel launches only when libdelta.so is preloaded "
             "from process start: start the job with `deltactl launch --budget B -- python train.py` (it preloads "
             "libdelta.so and sets DELTA_MODE=auto and DELTA_BUDGET), or set LD_PRELOAD=libdelta.so yourself (with "
             "DELTA_PRELOAD unset or 1); loaded any other way (the pluggable allocator, dlopen) it runs cache or "
             "record mode only";
    return setting +
           " on a GPU needs DELTA's launch guard, which sees kernel launches only when libdelta.so is "
           "preloaded from process start: run the job as LD_PRELOAD=libdelta.so (with DELTA_PRELOAD unset or 1); "
           "loaded any other way (the pluggable allocator, dlopen) it runs cache or record mode only";
  }
  const bool names = queries.func_get_name != nullptr || queries.kernel_get_name != nullptr;
  const bool layouts = queries.func_get_param_info != nullptr || queries.kernel_get_param_info != nullptr;
  if (!names || !layouts)
    return setting +
           " on a GPU needs the driver to name kernels (cuFuncGetName) and lay out their parameters "
           "(cuFuncGetParamInfo): an NVIDIA driver for CUDA 12.4 or later";
  return {};
}

}  // namespace delta
