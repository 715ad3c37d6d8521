// The table of the driver entry points DELTA interposes (entries()): the two-flavour wrappers
// of driver_wrappers.hpp, and the entry points with one flavour (module unloads, exports that
// pin memory), defined here.
#include "src/driver/driver_wrappers.hpp"

namespace delta::interpose {
namespace {

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

