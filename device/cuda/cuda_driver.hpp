// The CUDA driver entry points the cuda device uses, loaded at run time.
//
// libdelta.so must load in any process (beside any PyTorch CUDA runtime, on machines without a
// GPU), so it never links libcuda: libcuda.so.1 is opened with dlopen on first use, and every
// entry point is resolved through cuGetProcAddress for the ABI version of the headers we were
// compiled against. <cuda.h> is included for its types and prototypes only.
#pragma once

#include <cuda.h>

#include <string>

namespace delta::cuda {

// The ABI version every entry point is requested for: the one whose prototypes we compiled
// against, so `decltype(&::cuFoo)` below is exactly the signature the driver hands back.
inline constexpr int kDriverApiVersion = CUDA_VERSION;

// The macros in <cuda.h> map each name to its current versioned symbol (cuMemGetInfo ->
// cuMemGetInfo_v2 ...), so decltype picks up the prototype of the version we ask for.
#define DELTA_CUDA_ENTRY(name) decltype(&::name) name = nullptr

struct DriverApi {
  DELTA_CUDA_ENTRY(cuInit);
  DELTA_CUDA_ENTRY(cuDriverGetVersion);
  DELTA_CUDA_ENTRY(cuGetErrorName);
  DELTA_CUDA_ENTRY(cuGetErrorString);
  DELTA_CUDA_ENTRY(cuDeviceGet);
  DELTA_CUDA_ENTRY(cuDeviceGetCount);
  DELTA_CUDA_ENTRY(cuDeviceGetName);
  DELTA_CUDA_ENTRY(cuDevicePrimaryCtxRetain);
  DELTA_CUDA_ENTRY(cuDevicePrimaryCtxRelease);
  DELTA_CUDA_ENTRY(cuCtxGetCurrent);
  DELTA_CUDA_ENTRY(cuCtxSetCurrent);
  DELTA_CUDA_ENTRY(cuMemGetInfo);
  DELTA_CUDA_ENTRY(cuMemGetAllocationGranularity);
  DELTA_CUDA_ENTRY(cuMemAddressReserve);
  DELTA_CUDA_ENTRY(cuMemAddressFree);
  DELTA_CUDA_ENTRY(cuMemCreate);
  DELTA_CUDA_ENTRY(cuMemRelease);
  DELTA_CUDA_ENTRY(cuMemMap);
  DELTA_CUDA_ENTRY(cuMemUnmap);
  DELTA_CUDA_ENTRY(cuMemSetAccess);
  DELTA_CUDA_ENTRY(cuStreamCreate);
  DELTA_CUDA_ENTRY(cuStreamDestroy);
  DELTA_CUDA_ENTRY(cuStreamSynchronize);
  // The flavour without arguments (asked for at CUDA 12's ABI), which every driver has and which
  // waits for the current context: CUDA 13's takes the context, and older drivers lack it.
  CUresult (*cuCtxSynchronize)() = nullptr;
  DELTA_CUDA_ENTRY(cuStreamWaitEvent);
  DELTA_CUDA_ENTRY(cuEventCreate);
  DELTA_CUDA_ENTRY(cuEventDestroy);
  DELTA_CUDA_ENTRY(cuEventRecord);
  DELTA_CUDA_ENTRY(cuEventQuery);
  DELTA_CUDA_ENTRY(cuEventSynchronize);
  DELTA_CUDA_ENTRY(cuMemcpyHtoDAsync);
  DELTA_CUDA_ENTRY(cuMemcpyDtoHAsync);
  DELTA_CUDA_ENTRY(cuMemcpyDtoDAsync);
  DELTA_CUDA_ENTRY(cuMemsetD8Async);
  DELTA_CUDA_ENTRY(cuMemHostAlloc);
  DELTA_CUDA_ENTRY(cuMemFreeHost);

  int driver_version = 0;  // as cuDriverGetVersion reports it, e.g. 13000
};

#undef DELTA_CUDA_ENTRY

// The driver, loaded and initialized (cuInit) once per process, thread-safe. The outcome is
// remembered: a failure is thrown again, with the same message, on every later call.
// Throws DeviceError: no_driver when libcuda.so.1 cannot be loaded or lacks an entry point (or
// cuInit fails for a driver reason), no_device when cuInit reports no device.
const DriverApi& driver();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the numeric code when the driver cannot name
// it (e.g. while the driver itself failed to load).
std::string describe_result(CUresult result);

// Names the path the dynamic loader took, for messages: "libcuda.so.1 (/usr/lib/...)".
std::string loaded_driver_path();

}  // namespace delta::cuda
