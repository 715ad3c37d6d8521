#include "src/driver/driver_record.hpp"

#include "logging/log.hpp"
#include "profiler/sources/cupti_kernel_params.hpp"

#include <atomic>
#include <mutex>

namespace delta::interpose {
namespace {

// One warning per process: a failure repeats on every launch of the iteration.
std::atomic<bool> warned{false};

void warn_once(const char* what) {
  if (!warned.exchange(true)) log::warn("DELTA recorder: a launch could not be recorded or learned (its uses stay touches): {}", what);
}

}  // namespace

RecordLaunchHook::RecordLaunchHook(profiler::WrapperLaunches* launches, profiler::LaunchLearning* learning,
                                   executor::FunctionQueries queries)
    : launches_(launches), learning_(learning), queries_(queries) {}

std::uint64_t RecordLaunchHook::stream_of(CUstream stream, bool per_thread) {
  if (stream == nullptr && per_thread) return reinterpret_cast<std::uint64_t>(CU_STREAM_PER_THREAD);
  return reinterpret_cast<std::uint64_t>(stream);
}

// Once per function: the learning iterations launch the same few hundred kernels over and over.
const RecordLaunchHook::FunctionInfo& RecordLaunchHook::describe(CUfunction f) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = functions_.find(f); it != functions_.end()) return *it->second;
  }
  auto info = std::make_unique<FunctionInfo>();
  info->name = executor::function_name(queries_, f);
  info->layout = executor::function_param_layout(queries_, f);
  std::unique_lock lock(mutex_);
  auto [it, inserted] = functions_.emplace(f, std::move(info));
  return *it->second;
}

template <typename Forward, typename Relaunch>
CUresult RecordLaunchHook::record(CUfunction f, CUstream stream, bool per_thread, void** params, void** extra,
                                  Forward&& forward, Relaunch&& relaunch) {
  profiler::LaunchLearning::Pending pending;
  std::optional<std::size_t> op;
  try {
    const FunctionInfo& info = describe(f);
    const profiler::KernelCall call{info.name, stream_of(stream, per_thread),
                                    {info.layout ? &*info.layout : nullptr, params, extra}};
    if (launches_) op = launches_->record(call);
    if (learning_ && learning_->active()) pending = learning_->before(call);
  } catch (const std::exception& e) {
    warn_once(e.what());
    pending = {};
  }
  CUresult result;
  {
    // CUPTI's callback inside the real call binds its correlation id to `op`.
    const profiler::WrapperLaunches::Forwarding forwarding(op);
    result = forward();
  }
  if (!learning_) return result;
  try {
    learning_->after(pending, result == CUDA_SUCCESS,
                     [&](void** kp, void** ex) { return relaunch(kp, ex) == CUDA_SUCCESS; });
  } catch (const std::exception& e) {
    warn_once(e.what());
  }
  return result;
}

CUresult RecordLaunchHook::launch_kernel(executor::LaunchKernelFn real, bool per_thread, CUfunction f, unsigned gx,
                                         unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                         unsigned shared, CUstream stream, void** params, void** extra) {
  return record(
      f, stream, per_thread, params, extra,
      [&] { return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); },
      [&](void** kp, void** ex) { return real(f, gx, gy, gz, bx, by, bz, shared, stream, kp, ex); });
}

CUresult RecordLaunchHook::launch_cooperative(executor::LaunchCooperativeFn real, bool per_thread, CUfunction f,
                                              unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                              unsigned bz, unsigned shared, CUstream stream, void** params) {
  return record(
      f, stream, per_thread, params, nullptr,
      [&] { return real(f, gx, gy, gz, bx, by, bz, shared, stream, params); },
      [&](void** kp, void**) { return real(f, gx, gy, gz, bx, by, bz, shared, stream, kp); });
}

CUresult RecordLaunchHook::launch_kernel_ex(executor::LaunchKernelExFn real, bool per_thread,
                                            const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  if (config == nullptr) return real(config, f, params, extra);  // the driver's own error, unchanged
  // The replay runs with the caller's configuration, still valid: it happens inside this call.
  return record(
      f, config->hStream, per_thread, params, extra, [&] { return real(config, f, params, extra); },
      [&](void** kp, void** ex) { return real(config, f, kp, ex); });
}

void RecordLaunchHook::transfer(std::uint64_t dst, std::uint64_t src) noexcept {
  try {
    if (learning_) learning_->note_transfer(dst, src);
  } catch (const std::exception& e) {
    warn_once(e.what());
  }
}

void RecordLaunchHook::before_capture() noexcept {
  if (learning_) learning_->capture_began();
}
void RecordLaunchHook::after_capture() noexcept {
  if (learning_) learning_->capture_ended();
}

}  // namespace delta::interpose
