// How launches reach the executor on a GPU: the driver's launch, copy and memset entry points,
// interposed by libdelta when it is preloaded (src/driver/driver_interpose.cpp), call this route
// before they forward. Each call becomes a Launch: its name (cuFuncGetName), its stream, a
// range for every parameter word that points into a block the executor keeps state for, and
// a capture that copies the parameter bytes and replays them, patched, through the real entry
// point. The executor's guard runs before the real call: every block the call touches is
// resident when it is issued. The caller's arguments are forwarded unchanged.
//
// Everything here runs in the application's thread, inside a driver call DELTA interposes: a
// context where any driver call is legal (unlike a CUPTI callback).
#pragma once

#include "executor/routes/cuda_params.hpp"
#include "executor/entry_points.hpp"
#include "executor/executor.hpp"

#include <cuda.h>

#include <atomic>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace delta::executor {

// Entry points the route asks about a function, from the real driver; nullptr when the
// driver lacks one (then that piece is unknown: no name, no layout, no module).
struct FunctionQueries {
  CUresult (*func_get_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;    // CUDA >= 12.4
  CUresult (*kernel_get_param_info)(CUkernel, size_t, size_t*, size_t*) = nullptr;    // CUDA >= 12.4
  CUresult (*func_get_name)(const char**, CUfunction) = nullptr;                      // CUDA >= 12.3
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;                      // CUDA >= 12.3
  CUresult (*func_get_module)(CUmodule*, CUfunction) = nullptr;                       // CUDA >= 11.0 (12 in headers)
  CUresult (*kernel_get_library)(CUlibrary*, CUkernel) = nullptr;                      // CUDA >= 12.5
};

// What the driver tells of a function, empty or nullopt where it lacks the query. The runtime
// passes a CUkernel where a CUfunction goes (the driver takes either); only the cuKernel*
// queries know such a handle, so they are asked when the cuFunc* ones find nothing.
std::string function_name(const FunctionQueries& queries, CUfunction f);
std::optional<ParamLayout> function_param_layout(const FunctionQueries& queries, CUfunction f);

using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);
using LaunchKernelExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using LaunchCooperativeFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                         CUstream, void**);

struct RouteStats {
  std::uint64_t launches = 0;        // kernel launches shown to the executor
  std::uint64_t transfers = 0;       // copies and memsets shown to it
  std::uint64_t unreadable = 0;      // launches whose parameters could not be read (no layout)
  std::uint64_t pointer_words = 0;   // parameter words found pointing into the executor's blocks
  std::uint64_t refused = 0;         // calls not forwarded: the guard failed (an error code returned)
  std::uint64_t pins = 0;            // IPC exports and allocation-handle retains pinned
  std::uint64_t functions = 0;       // distinct functions described (layout, name, module)
};
std::string to_json(const RouteStats& stats);

class CudaLaunchRoute {
 public:
  // `entry`: whatever sits at the program's entry points (a plan's executor, auto mode).
  CudaLaunchRoute(EntryPoints& entry, FunctionQueries queries);
  CudaLaunchRoute(const CudaLaunchRoute&) = delete;
  CudaLaunchRoute& operator=(const CudaLaunchRoute&) = delete;

  // per_thread: the _ptsz / _ptds flavour, where stream 0 is the per-thread default stream.
  CUresult launch_kernel(LaunchKernelFn real, bool per_thread, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                         unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                         void** extra);
  CUresult launch_kernel_ex(LaunchKernelExFn real, bool per_thread, const CUlaunchConfig* config, CUfunction f,
                            void** params, void** extra);
  CUresult launch_cooperative(LaunchCooperativeFn real, bool per_thread, CUfunction f, unsigned gx, unsigned gy,
                              unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream stream,
                              void** params);

  // A copy or memset about to be issued: `dst` is written and `src` read over `bytes` (src 0
  // for a memset, host addresses simply match no block). forward() issues the real call.
  template <typename Forward>
  CUresult transfer(LaunchKind kind, const char* name, bool per_thread, CUstream stream, DevicePtr dst, DevicePtr src,
                    std::size_t bytes, Forward&& forward) {
    if (!guard_transfer(kind, name, per_thread, stream, dst, src, bytes)) return last_refusal_;
    return forward();
  }

  void before_unload(std::uintptr_t module) noexcept;   // cuModuleUnload, cuLibraryUnload
  void before_capture() noexcept;                       // cuStreamBeginCapture*
  void after_capture() noexcept;                        // cuStreamEndCapture
  void pin(DevicePtr ptr) noexcept;                     // cuIpcGetMemHandle, cuMemRetainAllocationHandle

  RouteStats stats() const;
  // Throws InvariantError naming the function and the rule: every cached layout lists its
  // parameters in order without overlap, and the capture count is not negative.
  void check_invariants() const;
  // The stream handle the executor sees: stream 0 of a per-thread flavour is kPerThreadStream.
  static StreamHandle stream_of(CUstream stream, bool per_thread);

 private:
  struct FunctionInfo {
    std::string name;
    std::optional<ParamLayout> layout;
    std::uintptr_t module = 0;
  };
  const FunctionInfo& describe(CUfunction f);
  // Shows the launch to the executor; false (with last_refusal_ set) when the guard failed and
  // the call must not be issued.
  bool guard(const Launch& launch) noexcept;
  bool guard_transfer(LaunchKind kind, const char* name, bool per_thread, CUstream stream, DevicePtr dst, DevicePtr src,
                      std::size_t bytes) noexcept;
  template <typename MakeRelaunch>
  bool guard_kernel(CUfunction f, CUstream stream, bool per_thread, void** params, void** extra,
                    MakeRelaunch&& make_relaunch) noexcept;

  EntryPoints& entry_;
  FunctionQueries queries_;
  BlockLookup lookup_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<CUfunction, std::unique_ptr<FunctionInfo>> functions_;
  static thread_local CUresult last_refusal_;
  // Graph captures in progress: every block a launch touches meanwhile is pinned for good, as
  // the graph may replay it at any time (conservative: launches on other streams too).
  std::atomic<int> capturing_{0};
  struct Counters {
    std::atomic<std::uint64_t> launches{0}, transfers{0}, unreadable{0}, pointer_words{0}, refused{0}, pins{0};
  } counters_;
};

}  // namespace delta::executor
