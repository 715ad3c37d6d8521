// Parameter layouts of kernels (offset and size of each parameter), asked of the driver with
// cuFuncGetParamInfo / cuKernelGetParamInfo (CUDA >= 12.4) and cached per function: a training
// step launches the same few hundred kernels over and over.
//
// Runtime launches name a kernel by its host stub; the process's own libcudart (the one
// PyTorch loaded) turns a stub into a CUfunction with cudaGetFuncBySymbol. Both libraries are
// found among those already loaded, never loaded anew: a second libcudart in the process
// would hold its own, empty, registration tables.
//
// cudaGetFuncBySymbol is a runtime call made inside the application's own launch: when it
// fails it sets the runtime's per-thread last error, which the application would then read as
// its launch failing (PyTorch checks cudaGetLastError after every launch). So it is only asked
// when no error is pending, and the error it leaves is cleared again.
#pragma once

#include "profiler/directions/param_scan.hpp"

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace delta::profiler {

// Calls query(i, &offset, &size) for i = 0, 1, ... until it fails; the failure after the last
// parameter is how the driver says "no more". nullopt when even index 0 fails with something
// other than CUDA_ERROR_INVALID_VALUE (the call itself is unsupported).
std::optional<ParamLayout> read_param_layout(const std::function<CUresult(std::size_t, std::size_t*, std::size_t*)>& query);

class KernelParamInfo {
 public:
  // Resolves what it can; missing pieces leave the matching launches unattributed.
  KernelParamInfo();

  // nullptr when the layout cannot be known. The pointer stays valid for the object's life.
  const ParamLayout* for_function(CUfunction function);
  const ParamLayout* for_kernel(CUkernel kernel);
  const ParamLayout* for_host_stub(const void* stub);

  bool can_query_functions() const { return func_get_param_info_ != nullptr; }
  bool can_resolve_host_stubs() const { return !runtimes_.empty(); }
  // Host stubs the runtime could not turn into a function (their launches are attributed from
  // the driver's launch inside the runtime's, where there is one).
  std::uint64_t failed_stub_lookups() const { return failed_stub_lookups_.load(std::memory_order_relaxed); }
  // How the layouts of the distinct function handles were found (driver launches, and runtime
  // launches once their host stub is resolved to a function).
  std::string layout_sources() const;
  // The runtime's error code of the first failed lookup (0: none failed).
  int first_stub_error() const {
    std::lock_guard lock(mutex_);
    return first_stub_error_;
  }
  std::string gpu_name() const;                 // of device 0, "" when unknown
  std::uint64_t gpu_memory_bytes() const;       // of device 0, 0 when unknown
  std::string describe() const;                 // which pieces are available, for the log
  // Waits for the GPU (the calling thread's context), so that activity records of every
  // launch exist before they are flushed. False when it could not.
  bool synchronize() const;

 private:
  using FuncGetParamInfo = CUresult (*)(CUfunction, size_t, size_t*, size_t*);
  using KernelGetParamInfo = CUresult (*)(CUkernel, size_t, size_t*, size_t*);
  using GetFuncBySymbol = int (*)(CUfunction*, const void*);  // cudaError_t cudaGetFuncBySymbol(cudaFunction_t*, const void*)
  using GetKernel = int (*)(CUkernel*, const void*);          // cudaError_t cudaGetKernel(cudaKernel_t*, const void*)
  using RuntimeLastError = int (*)();  // cudaPeekAtLastError, cudaGetLastError
  using DeviceGetName = CUresult (*)(char*, int, CUdevice);
  using DeviceTotalMem = CUresult (*)(size_t*, CUdevice);
  using CtxSynchronize = CUresult (*)();

  const ParamLayout* cached(const void* key, const std::function<CUresult(std::size_t, std::size_t*, std::size_t*)>& query);

  FuncGetParamInfo func_get_param_info_ = nullptr;
  KernelGetParamInfo kernel_get_param_info_ = nullptr;
  struct Runtime {  // one loaded libcudart
    std::string path;
    GetFuncBySymbol get_func_by_symbol = nullptr;
    GetKernel get_kernel = nullptr;
    RuntimeLastError peek_at_last_error = nullptr;
    RuntimeLastError get_last_error = nullptr;
  };
  struct StubTarget {  // what a host stub names, in whichever form a runtime gave it
    CUfunction function = nullptr;
    CUkernel kernel = nullptr;
  };
  std::vector<Runtime> runtimes_;
  std::atomic<std::uint64_t> failed_stub_lookups_{0};
  int first_stub_error_ = 0;  // guarded by mutex_
  struct {
    std::uint64_t function = 0, kernel_in_place_of_function = 0, unknown = 0;
  } layout_counts_;  // guarded by mutex_
  DeviceGetName device_get_name_ = nullptr;
  DeviceTotalMem device_total_mem_ = nullptr;
  CtxSynchronize ctx_synchronize_ = nullptr;

  mutable std::mutex mutex_;
  // Keys are handles of different kinds (CUfunction, CUkernel, host stub): distinct objects,
  // so their addresses never collide. An absent layout is cached too.
  std::unordered_map<const void*, std::optional<ParamLayout>> layouts_;
  std::unordered_map<const void*, StubTarget> stubs_;
};

}  // namespace delta::profiler
