// Record mode's use of DELTA's driver launch wrappers. While the recording lasts, every kernel
// launch that reaches a wrapper goes through here: the launch's function is described once
// (its symbol, as the recorder names the op, and its parameter layout), the op is recorded
// (profiler/sources/wrapper_launches.hpp; CUPTI then only binds its correlation id inside the real
// call), and during the learning iterations LaunchLearning fingerprints and stages copies
// before the real call, and after it fingerprints again and replays the launch on the copies
// through the real entry point (profiler/directions/launch_learning.hpp). Copies and memsets mark their
// blocks used; graph captures pause learning. Once the trace is written a wrapper pays one
// atomic load and one check (active()) more than in cache mode.
//
// Installed by record mode on a GPU when the wrappers are live (LD_PRELOAD from process
// start); otherwise CUPTI's callbacks record the launches, and learning iterations are refused
// (profiler/record_session.cpp).
// Everything here runs inside a driver call the application made, where driver calls are
// legal, and never lets an exception reach the application: a launch that cannot be learned
// is forwarded unchanged and stays a touch.
#pragma once

#include "executor/routes/cuda_route.hpp"
#include "profiler/directions/launch_learning.hpp"
#include "profiler/sources/wrapper_launches.hpp"

#include <cuda.h>

#include <atomic>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace delta::interpose {

class RecordLaunchHook {
 public:
  // Either may be null (not both): recording launches, learning directions.
  RecordLaunchHook(profiler::WrapperLaunches* launches, profiler::LaunchLearning* learning,
                   executor::FunctionQueries queries);

  bool active() const {
    return (launches_ && launches_->recording()) || (learning_ && learning_->active());
  }

  CUresult launch_kernel(executor::LaunchKernelFn real, bool per_thread, CUfunction f, unsigned gx, unsigned gy,
                         unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream stream,
                         void** params, void** extra);
  CUresult launch_kernel_ex(executor::LaunchKernelExFn real, bool per_thread, const CUlaunchConfig* config, CUfunction f,
                            void** params, void** extra);
  CUresult launch_cooperative(executor::LaunchCooperativeFn real, bool per_thread, CUfunction f, unsigned gx,
                              unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                              CUstream stream, void** params);
  void transfer(std::uint64_t dst, std::uint64_t src) noexcept;
  void before_capture() noexcept;
  void after_capture() noexcept;

  // The stream the launch runs on, as a handle usable from any thread (stream 0 of a
  // per-thread flavour is CU_STREAM_PER_THREAD).
  static std::uint64_t stream_of(CUstream stream, bool per_thread);

 private:
  struct FunctionInfo {
    std::string name;
    std::optional<profiler::ParamLayout> layout;
  };
  const FunctionInfo& describe(CUfunction f);
  // The op recorded, before(), forward(), after() with relaunch(kernel_params, extra) -> CUresult.
  template <typename Forward, typename Relaunch>
  CUresult record(CUfunction f, CUstream stream, bool per_thread, void** params, void** extra, Forward&& forward,
                 Relaunch&& relaunch);

  profiler::WrapperLaunches* launches_;
  profiler::LaunchLearning* learning_;
  executor::FunctionQueries queries_;
  std::shared_mutex mutex_;
  std::unordered_map<CUfunction, std::unique_ptr<FunctionInfo>> functions_;
};

// The wrappers' record hook: null forwards untouched. Installed once, never removed.
inline std::atomic<RecordLaunchHook*> installed_record_hook{nullptr};
inline RecordLaunchHook* record_hook() noexcept { return installed_record_hook.load(std::memory_order_acquire); }

}  // namespace delta::interpose
