// DELTA's wrappers of the driver entry points it interposes, and their table (entries()).
// Each flavour of an entry point (legacy and per-thread default stream) has a wrapper of its
// own, keeping the real function the driver gave for that flavour: the caller's choice is
// preserved, and stream 0 means what the flavour says (CudaLaunchRoute::stream_of).
//
// With no route installed, a wrapper loads the route pointer, finds it null, and forwards.
#include "src/driver_interpose.hpp"

#include <cuda.h>

namespace delta::interpose {
namespace {

using executor::LaunchKind;

template <typename Fn>
Fn real_fn(std::atomic<void*>& slot) {
  return reinterpret_cast<Fn>(slot.load(std::memory_order_acquire));
}

// Function types, spelled by the legacy-stream declarations of cuda.h (the per-thread flavours
// have the same prototypes).
using MemcpyFn = decltype(&::cuMemcpy);
using MemcpyAsyncFn = decltype(&::cuMemcpyAsync);
using HtoDFn = decltype(&::cuMemcpyHtoD_v2);
using HtoDAsyncFn = decltype(&::cuMemcpyHtoDAsync_v2);
using DtoHFn = decltype(&::cuMemcpyDtoH_v2);
using DtoHAsyncFn = decltype(&::cuMemcpyDtoHAsync_v2);
using DtoDFn = decltype(&::cuMemcpyDtoD_v2);
using DtoDAsyncFn = decltype(&::cuMemcpyDtoDAsync_v2);
using MemsetD8Fn = decltype(&::cuMemsetD8_v2);
using MemsetD16Fn = decltype(&::cuMemsetD16_v2);
using MemsetD32Fn = decltype(&::cuMemsetD32_v2);
using MemsetD8AsyncFn = decltype(&::cuMemsetD8Async);
using MemsetD16AsyncFn = decltype(&::cuMemsetD16Async);
using MemsetD32AsyncFn = decltype(&::cuMemsetD32Async);
using BeginCaptureFn = decltype(&::cuStreamBeginCapture_v2);
using BeginCaptureToGraphFn = decltype(&::cuStreamBeginCaptureToGraph);
using EndCaptureFn = decltype(&::cuStreamEndCapture);
using ModuleUnloadFn = decltype(&::cuModuleUnload);
using LibraryUnloadFn = decltype(&::cuLibraryUnload);
using IpcGetMemHandleFn = decltype(&::cuIpcGetMemHandle);
using RetainAllocationHandleFn = decltype(&::cuMemRetainAllocationHandle);
using HandleForAddressRangeFn = decltype(&::cuMemGetHandleForAddressRange);

DevicePtr dev(CUdeviceptr p) { return static_cast<DevicePtr>(p); }
DevicePtr host(const void* p) { return reinterpret_cast<DevicePtr>(p); }  // matches no block unless managed memory

template <bool PerThread>
struct Wrappers {
  static inline std::atomic<void*> launch{nullptr}, launch_ex{nullptr}, cooperative{nullptr};
  static inline std::atomic<void*> memcpy_sync{nullptr}, memcpy_async{nullptr}, htod{nullptr}, htod_async{nullptr},
      dtoh{nullptr}, dtoh_async{nullptr}, dtod{nullptr}, dtod_async{nullptr};
  static inline std::atomic<void*> d8{nullptr}, d16{nullptr}, d32{nullptr}, d8_async{nullptr}, d16_async{nullptr},
      d32_async{nullptr};
  static inline std::atomic<void*> begin_capture{nullptr}, begin_capture_to_graph{nullptr}, end_capture{nullptr};

  static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
    const auto real = real_fn<executor::LaunchKernelFn>(launch);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->launch_kernel(real, PerThread, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  }
  static CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    const auto real = real_fn<executor::LaunchKernelExFn>(launch_ex);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->launch_kernel_ex(real, PerThread, config, f, params, extra);
    return real(config, f, params, extra);
  }
  static CUresult launch_cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned shared, CUstream stream, void** params) {
    const auto real = real_fn<executor::LaunchCooperativeFn>(cooperative);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->launch_cooperative(real, PerThread, f, gx, gy, gz, bx, by, bz, shared, stream, params);
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  }

  // A copy or memset: shown to the route as dst written, src read, then forwarded.
  template <typename Fn, typename... Args>
  static CUresult transfer(std::atomic<void*>& slot, LaunchKind kind, const char* name, CUstream stream, DevicePtr dst,
                           DevicePtr src, std::size_t bytes, Args... args) {
    const auto real = real_fn<Fn>(slot);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->transfer(kind, name, PerThread, stream, dst, src, bytes, [&] { return real(args...); });
    return real(args...);
  }
  static CUresult memcpy_(CUdeviceptr d, CUdeviceptr s, size_t n) {
    return transfer<MemcpyFn>(memcpy_sync, LaunchKind::copy, "cuMemcpy", nullptr, dev(d), dev(s), n, d, s, n);
  }
  static CUresult memcpy_async_(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    return transfer<MemcpyAsyncFn>(memcpy_async, LaunchKind::copy, "cuMemcpyAsync", st, dev(d), dev(s), n, d, s, n, st);
  }
  static CUresult htod_(CUdeviceptr d, const void* s, size_t n) {
    return transfer<HtoDFn>(htod, LaunchKind::copy, "cuMemcpyHtoD", nullptr, dev(d), host(s), n, d, s, n);
  }
  static CUresult htod_async_(CUdeviceptr d, const void* s, size_t n, CUstream st) {
    return transfer<HtoDAsyncFn>(htod_async, LaunchKind::copy, "cuMemcpyHtoDAsync", st, dev(d), host(s), n, d, s, n, st);
  }
  static CUresult dtoh_(void* d, CUdeviceptr s, size_t n) {
    return transfer<DtoHFn>(dtoh, LaunchKind::copy, "cuMemcpyDtoH", nullptr, host(d), dev(s), n, d, s, n);
  }
  static CUresult dtoh_async_(void* d, CUdeviceptr s, size_t n, CUstream st) {
    return transfer<DtoHAsyncFn>(dtoh_async, LaunchKind::copy, "cuMemcpyDtoHAsync", st, host(d), dev(s), n, d, s, n, st);
  }
  static CUresult dtod_(CUdeviceptr d, CUdeviceptr s, size_t n) {
    return transfer<DtoDFn>(dtod, LaunchKind::copy, "cuMemcpyDtoD", nullptr, dev(d), dev(s), n, d, s, n);
  }
  static CUresult dtod_async_(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    return transfer<DtoDAsyncFn>(dtod_async, LaunchKind::copy, "cuMemcpyDtoDAsync", st, dev(d), dev(s), n, d, s, n, st);
  }
  static CUresult d8_(CUdeviceptr d, unsigned char v, size_t n) {
    return transfer<MemsetD8Fn>(d8, LaunchKind::memset, "cuMemsetD8", nullptr, dev(d), 0, n, d, v, n);
  }
  static CUresult d16_(CUdeviceptr d, unsigned short v, size_t n) {
    return transfer<MemsetD16Fn>(d16, LaunchKind::memset, "cuMemsetD16", nullptr, dev(d), 0, 2 * n, d, v, n);
  }
  static CUresult d32_(CUdeviceptr d, unsigned int v, size_t n) {
    return transfer<MemsetD32Fn>(d32, LaunchKind::memset, "cuMemsetD32", nullptr, dev(d), 0, 4 * n, d, v, n);
  }
  static CUresult d8_async_(CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
    return transfer<MemsetD8AsyncFn>(d8_async, LaunchKind::memset, "cuMemsetD8Async", st, dev(d), 0, n, d, v, n, st);
  }
  static CUresult d16_async_(CUdeviceptr d, unsigned short v, size_t n, CUstream st) {
    return transfer<MemsetD16AsyncFn>(d16_async, LaunchKind::memset, "cuMemsetD16Async", st, dev(d), 0, 2 * n, d, v, n, st);
  }
  static CUresult d32_async_(CUdeviceptr d, unsigned int v, size_t n, CUstream st) {
    return transfer<MemsetD32AsyncFn>(d32_async, LaunchKind::memset, "cuMemsetD32Async", st, dev(d), 0, 4 * n, d, v, n, st);
  }

  // Graph capture: the executor goes quiet before the capture begins (device calls are still
  // legal then), and learns when it ends.
  static CUresult begin_capture_(CUstream stream, CUstreamCaptureMode mode) {
    const auto real = real_fn<BeginCaptureFn>(begin_capture);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    auto* r = route();
    if (r) r->before_capture();
    const CUresult result = real(stream, mode);
    if (r && result != CUDA_SUCCESS) r->after_capture();
    return result;
  }
  static CUresult begin_capture_to_graph_(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                          const CUgraphEdgeData* data, size_t count, CUstreamCaptureMode mode) {
    const auto real = real_fn<BeginCaptureToGraphFn>(begin_capture_to_graph);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    auto* r = route();
    if (r) r->before_capture();
    const CUresult result = real(stream, graph, deps, data, count, mode);
    if (r && result != CUDA_SUCCESS) r->after_capture();
    return result;
  }
  static CUresult end_capture_(CUstream stream, CUgraph* graph) {
    const auto real = real_fn<EndCaptureFn>(end_capture);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    const CUresult result = real(stream, graph);
    if (auto* r = route()) r->after_capture();
    return result;
  }
};

std::atomic<void*> module_unload{nullptr}, library_unload{nullptr}, ipc_get_mem_handle{nullptr},
    retain_allocation_handle{nullptr}, handle_for_address_range{nullptr};

CUresult module_unload_(CUmodule module) {
  const auto real = real_fn<ModuleUnloadFn>(module_unload);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (auto* r = route()) r->before_unload(reinterpret_cast<std::uintptr_t>(module));
  return real(module);
}

CUresult library_unload_(CUlibrary library) {
  const auto real = real_fn<LibraryUnloadFn>(library_unload);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (auto* r = route()) r->before_unload(reinterpret_cast<std::uintptr_t>(library));
  return real(library);
}

// Another process will map these pages: they may never move again.
CUresult ipc_get_mem_handle_(CUipcMemHandle* handle, CUdeviceptr ptr) {
  const auto real = real_fn<IpcGetMemHandleFn>(ipc_get_mem_handle);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (auto* r = route()) r->pin(dev(ptr));
  return real(handle, ptr);
}

// Someone takes hold of the physical pages under an address (NCCL registering a buffer, a
// sharing layer exporting it): they may never be swapped for others.
CUresult retain_allocation_handle_(CUmemGenericAllocationHandle* handle, void* address) {
  const auto real = real_fn<RetainAllocationHandleFn>(retain_allocation_handle);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (auto* r = route()) r->pin(host(address));
  return real(handle, address);
}

// A dma-buf of the range for a network card (NCCL registering a buffer for GPUDirect RDMA):
// the card reads those pages directly; they may never move.
CUresult handle_for_address_range_(void* handle, CUdeviceptr ptr, size_t size, CUmemRangeHandleType type,
                                   unsigned long long flags) {
  const auto real = real_fn<HandleForAddressRangeFn>(handle_for_address_range);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (auto* r = route()) r->pin(dev(ptr));
  return real(handle, ptr, size, type, flags);
}

}  // namespace

using L = Wrappers<false>;  // the legacy-stream flavours
using P = Wrappers<true>;   // the per-thread-default-stream flavours

namespace {

template <typename Fn>
void* as_ptr(Fn fn) {
  return reinterpret_cast<void*>(fn);
}


// cudaVersion thresholds: the ABI with 64-bit sizes and pointers (_v2) from 3.2, the capture
// mode argument from 10.1, cuLaunchKernelEx from 11.8, cuLibraryUnload from 12.0,
// cuStreamBeginCaptureToGraph from 12.3.
const Interposed kEntries[] = {
    {"cuLaunchKernel", false, 4000, "cuLaunchKernel", as_ptr(&L::launch_kernel), &L::launch},
    {"cuLaunchKernel", true, 4000, "cuLaunchKernel_ptsz", as_ptr(&P::launch_kernel), &P::launch},
    {"cuLaunchKernelEx", false, 11080, "cuLaunchKernelEx", as_ptr(&L::launch_kernel_ex), &L::launch_ex},
    {"cuLaunchKernelEx", true, 11080, "cuLaunchKernelEx_ptsz", as_ptr(&P::launch_kernel_ex), &P::launch_ex},
    {"cuLaunchCooperativeKernel", false, 9000, "cuLaunchCooperativeKernel", as_ptr(&L::launch_cooperative), &L::cooperative},
    {"cuLaunchCooperativeKernel", true, 9000, "cuLaunchCooperativeKernel_ptsz", as_ptr(&P::launch_cooperative), &P::cooperative},
    {"cuMemcpy", false, 4000, "cuMemcpy", as_ptr(&L::memcpy_), &L::memcpy_sync},
    {"cuMemcpy", true, 4000, "cuMemcpy_ptds", as_ptr(&P::memcpy_), &P::memcpy_sync},
    {"cuMemcpyAsync", false, 4000, "cuMemcpyAsync", as_ptr(&L::memcpy_async_), &L::memcpy_async},
    {"cuMemcpyAsync", true, 4000, "cuMemcpyAsync_ptsz", as_ptr(&P::memcpy_async_), &P::memcpy_async},
    {"cuMemcpyHtoD", false, 3020, "cuMemcpyHtoD_v2", as_ptr(&L::htod_), &L::htod},
    {"cuMemcpyHtoD", true, 3020, "cuMemcpyHtoD_v2_ptds", as_ptr(&P::htod_), &P::htod},
    {"cuMemcpyHtoDAsync", false, 3020, "cuMemcpyHtoDAsync_v2", as_ptr(&L::htod_async_), &L::htod_async},
    {"cuMemcpyHtoDAsync", true, 3020, "cuMemcpyHtoDAsync_v2_ptsz", as_ptr(&P::htod_async_), &P::htod_async},
    {"cuMemcpyDtoH", false, 3020, "cuMemcpyDtoH_v2", as_ptr(&L::dtoh_), &L::dtoh},
    {"cuMemcpyDtoH", true, 3020, "cuMemcpyDtoH_v2_ptds", as_ptr(&P::dtoh_), &P::dtoh},
    {"cuMemcpyDtoHAsync", false, 3020, "cuMemcpyDtoHAsync_v2", as_ptr(&L::dtoh_async_), &L::dtoh_async},
    {"cuMemcpyDtoHAsync", true, 3020, "cuMemcpyDtoHAsync_v2_ptsz", as_ptr(&P::dtoh_async_), &P::dtoh_async},
    {"cuMemcpyDtoD", false, 3020, "cuMemcpyDtoD_v2", as_ptr(&L::dtod_), &L::dtod},
    {"cuMemcpyDtoD", true, 3020, "cuMemcpyDtoD_v2_ptds", as_ptr(&P::dtod_), &P::dtod},
    {"cuMemcpyDtoDAsync", false, 3020, "cuMemcpyDtoDAsync_v2", as_ptr(&L::dtod_async_), &L::dtod_async},
    {"cuMemcpyDtoDAsync", true, 3020, "cuMemcpyDtoDAsync_v2_ptsz", as_ptr(&P::dtod_async_), &P::dtod_async},
    {"cuMemsetD8", false, 3020, "cuMemsetD8_v2", as_ptr(&L::d8_), &L::d8},
    {"cuMemsetD8", true, 3020, "cuMemsetD8_v2_ptds", as_ptr(&P::d8_), &P::d8},
    {"cuMemsetD16", false, 3020, "cuMemsetD16_v2", as_ptr(&L::d16_), &L::d16},
    {"cuMemsetD16", true, 3020, "cuMemsetD16_v2_ptds", as_ptr(&P::d16_), &P::d16},
    {"cuMemsetD32", false, 3020, "cuMemsetD32_v2", as_ptr(&L::d32_), &L::d32},
    {"cuMemsetD32", true, 3020, "cuMemsetD32_v2_ptds", as_ptr(&P::d32_), &P::d32},
    {"cuMemsetD8Async", false, 3020, "cuMemsetD8Async", as_ptr(&L::d8_async_), &L::d8_async},
    {"cuMemsetD8Async", true, 3020, "cuMemsetD8Async_ptsz", as_ptr(&P::d8_async_), &P::d8_async},
    {"cuMemsetD16Async", false, 3020, "cuMemsetD16Async", as_ptr(&L::d16_async_), &L::d16_async},
    {"cuMemsetD16Async", true, 3020, "cuMemsetD16Async_ptsz", as_ptr(&P::d16_async_), &P::d16_async},
    {"cuMemsetD32Async", false, 3020, "cuMemsetD32Async", as_ptr(&L::d32_async_), &L::d32_async},
    {"cuMemsetD32Async", true, 3020, "cuMemsetD32Async_ptsz", as_ptr(&P::d32_async_), &P::d32_async},
    {"cuStreamBeginCapture", false, 10010, "cuStreamBeginCapture_v2", as_ptr(&L::begin_capture_), &L::begin_capture},
    {"cuStreamBeginCapture", true, 10010, "cuStreamBeginCapture_v2_ptsz", as_ptr(&P::begin_capture_), &P::begin_capture},
    {"cuStreamBeginCaptureToGraph", false, 12030, "cuStreamBeginCaptureToGraph", as_ptr(&L::begin_capture_to_graph_),
     &L::begin_capture_to_graph},
    {"cuStreamBeginCaptureToGraph", true, 12030, "cuStreamBeginCaptureToGraph_ptsz", as_ptr(&P::begin_capture_to_graph_),
     &P::begin_capture_to_graph},
    {"cuStreamEndCapture", false, 10000, "cuStreamEndCapture", as_ptr(&L::end_capture_), &L::end_capture},
    {"cuStreamEndCapture", true, 10000, "cuStreamEndCapture_ptsz", as_ptr(&P::end_capture_), &P::end_capture},
    {"cuModuleUnload", false, 2000, "cuModuleUnload", as_ptr(&module_unload_), &module_unload},
    {"cuModuleUnload", true, 2000, "cuModuleUnload", as_ptr(&module_unload_), &module_unload},
    {"cuLibraryUnload", false, 12000, "cuLibraryUnload", as_ptr(&library_unload_), &library_unload},
    {"cuLibraryUnload", true, 12000, "cuLibraryUnload", as_ptr(&library_unload_), &library_unload},
    {"cuIpcGetMemHandle", false, 4010, "cuIpcGetMemHandle", as_ptr(&ipc_get_mem_handle_), &ipc_get_mem_handle},
    {"cuIpcGetMemHandle", true, 4010, "cuIpcGetMemHandle", as_ptr(&ipc_get_mem_handle_), &ipc_get_mem_handle},
    {"cuMemRetainAllocationHandle", false, 11000, "cuMemRetainAllocationHandle", as_ptr(&retain_allocation_handle_),
     &retain_allocation_handle},
    {"cuMemRetainAllocationHandle", true, 11000, "cuMemRetainAllocationHandle", as_ptr(&retain_allocation_handle_),
     &retain_allocation_handle},
    {"cuMemGetHandleForAddressRange", false, 11070, "cuMemGetHandleForAddressRange", as_ptr(&handle_for_address_range_),
     &handle_for_address_range},
    {"cuMemGetHandleForAddressRange", true, 11070, "cuMemGetHandleForAddressRange", as_ptr(&handle_for_address_range_),
     &handle_for_address_range},
};

}  // namespace

std::span<const Interposed> entries() { return kEntries; }

}  // namespace delta::interpose

// The launch entry points exported under their own names too: a program or library linked
// against libcuda (calls through the PLT, no dlsym) reaches these first when libdelta is
// preloaded. Their real function is the driver's export of the same name, found on first use.
#define DELTA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace delta::interpose;

template <typename Fn>
void ensure_real(std::atomic<void*>& slot, const char* symbol) {
  if (slot.load(std::memory_order_acquire) == nullptr)
    if (void* fn = real_driver_symbol(symbol)) slot.store(fn, std::memory_order_release);
}

}  // namespace

#define DELTA_EXPORT_LAUNCH(symbol, W)                                                                         \
  DELTA_EXPORT CUresult symbol(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,   \
                               unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {  \
    ensure_real<delta::executor::LaunchKernelFn>(W::launch, #symbol);                                        \
    return W::launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);                       \
  }
#define DELTA_EXPORT_LAUNCH_EX(symbol, W)                                                                   \
  DELTA_EXPORT CUresult symbol(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) { \
    ensure_real<delta::executor::LaunchKernelExFn>(W::launch_ex, #symbol);                                \
    return W::launch_kernel_ex(config, f, params, extra);                                                 \
  }
#define DELTA_EXPORT_COOPERATIVE(symbol, W)                                                                      \
  DELTA_EXPORT CUresult symbol(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,     \
                               unsigned bz, unsigned shared, CUstream stream, void** params) {                  \
    ensure_real<delta::executor::LaunchCooperativeFn>(W::cooperative, #symbol);                                \
    return W::launch_cooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params);                           \
  }

DELTA_EXPORT_LAUNCH(cuLaunchKernel, delta::interpose::L)
DELTA_EXPORT_LAUNCH(cuLaunchKernel_ptsz, delta::interpose::P)
DELTA_EXPORT_LAUNCH_EX(cuLaunchKernelEx, delta::interpose::L)
DELTA_EXPORT_LAUNCH_EX(cuLaunchKernelEx_ptsz, delta::interpose::P)
DELTA_EXPORT_COOPERATIVE(cuLaunchCooperativeKernel, delta::interpose::L)
DELTA_EXPORT_COOPERATIVE(cuLaunchCooperativeKernel_ptsz, delta::interpose::P)
