// DELTA's wrappers of the driver entry points that come in two flavours (legacy and
// per-thread default stream): one wrapper per flavour, each keeping the real function the
// driver gave for that flavour, so that the caller's choice is preserved and stream 0 means
// what the flavour says (CudaLaunchRoute::stream_of). With no route installed, a wrapper loads
// the route pointer, finds it null, and forwards its arguments unchanged; in record mode with
// learning iterations, the launches of those iterations go through the record hook
// (driver_record.hpp).
//
// Used by the table of driver_wrappers.cpp (what dlsym and cuGetProcAddress hand out) and by
// driver_exports.cpp (the launch entry points under their own names).
#pragma once

#include "src/driver/driver_interpose.hpp"
#include "src/driver/driver_record.hpp"

#include <cuda.h>

namespace delta::interpose {

using executor::LaunchKind;

template <typename Fn>
inline Fn real_fn(std::atomic<void*>& slot) {
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

inline DevicePtr dev(CUdeviceptr p) { return static_cast<DevicePtr>(p); }
inline DevicePtr host(const void* p) { return reinterpret_cast<DevicePtr>(p); }  // matches no block unless managed memory

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
    if (auto* h = record_hook(); h && h->active())
      return h->launch_kernel(real, PerThread, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  }
  static CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    const auto real = real_fn<executor::LaunchKernelExFn>(launch_ex);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->launch_kernel_ex(real, PerThread, config, f, params, extra);
    if (auto* h = record_hook(); h && h->active()) return h->launch_kernel_ex(real, PerThread, config, f, params, extra);
    return real(config, f, params, extra);
  }
  static CUresult launch_cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned shared, CUstream stream, void** params) {
    const auto real = real_fn<executor::LaunchCooperativeFn>(cooperative);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->launch_cooperative(real, PerThread, f, gx, gy, gz, bx, by, bz, shared, stream, params);
    if (auto* h = record_hook(); h && h->active())
      return h->launch_cooperative(real, PerThread, f, gx, gy, gz, bx, by, bz, shared, stream, params);
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  }

  // A copy or memset: shown to the route as dst written, src read, then forwarded.
  template <typename Fn, typename... Args>
  static CUresult transfer(std::atomic<void*>& slot, LaunchKind kind, const char* name, CUstream stream, DevicePtr dst,
                           DevicePtr src, std::size_t bytes, Args... args) {
    const auto real = real_fn<Fn>(slot);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto* r = route()) return r->transfer(kind, name, PerThread, stream, dst, src, bytes, [&] { return real(args...); });
    if (auto* h = record_hook(); h && h->active()) h->transfer(dst, src);
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
    auto* h = record_hook();
    if (r) r->before_capture();
    if (h) h->before_capture();
    const CUresult result = real(stream, mode);
    if (r && result != CUDA_SUCCESS) r->after_capture();
    if (h && result != CUDA_SUCCESS) h->after_capture();
    return result;
  }
  static CUresult begin_capture_to_graph_(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                          const CUgraphEdgeData* data, size_t count, CUstreamCaptureMode mode) {
    const auto real = real_fn<BeginCaptureToGraphFn>(begin_capture_to_graph);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    auto* r = route();
    auto* h = record_hook();
    if (r) r->before_capture();
    if (h) h->before_capture();
    const CUresult result = real(stream, graph, deps, data, count, mode);
    if (r && result != CUDA_SUCCESS) r->after_capture();
    if (h && result != CUDA_SUCCESS) h->after_capture();
    return result;
  }
  static CUresult end_capture_(CUstream stream, CUgraph* graph) {
    const auto real = real_fn<EndCaptureFn>(end_capture);
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    const CUresult result = real(stream, graph);
    if (auto* r = route()) r->after_capture();
    if (auto* h = record_hook()) h->after_capture();
    return result;
  }
};

using L = Wrappers<false>;  // the legacy-stream flavours
using P = Wrappers<true>;   // the per-thread-default-stream flavours

}  // namespace delta::interpose
