#include "cuda_driver.hpp"
#include "logging/log.hpp"

#include <delta/device.hpp>

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <string>

namespace delta::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

// cuGetProcAddress_v2 (CUDA >= 12.0) reports why a symbol is missing; the original
// cuGetProcAddress (11.3 - 11.8) does not. Both are looked up with dlsym, since they are what
// everything else is resolved with.
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

// The driver once it is fully loaded, so describe_result can name codes without re-entering the
// loader (which runs inside a function-local static initializer).
std::atomic<const DriverApi*> g_loaded{nullptr};

// A few codes worth naming even when the driver cannot name them for us (it failed to load, or
// is the toolkit's stub library whose every call returns CUDA_ERROR_STUB_LIBRARY).
const char* fallback_name(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    default: return nullptr;
  }
}

std::string describe_with(const DriverApi* api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api != nullptr && api->cuGetErrorName != nullptr &&
      api->cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (api != nullptr && api->cuGetErrorString != nullptr &&
      api->cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  if (name == nullptr) name = fallback_name(result);
  std::string out = name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text != nullptr) out += std::string(" (") + text + ")";
  else if (name != nullptr) out += " (code " + std::to_string(static_cast<int>(result)) + ")";
  return out;
}

struct LoadOutcome {
  std::unique_ptr<DriverApi> api;  // null on failure
  DeviceErrc error = DeviceErrc::no_driver;
  std::string message;
  std::string path;
};

class Loader {
 public:
  LoadOutcome run() {
    LoadOutcome outcome;
    try {
      open_library(outcome);
      outcome.api = std::make_unique<DriverApi>(api_);
      outcome.api->driver_version = api_.driver_version;
      g_loaded.store(outcome.api.get(), std::memory_order_release);
      log::debug("delta: loaded {} from {} (driver API {}, built for {})", kDriverLibrary,
                 outcome.path, api_.driver_version, kDriverApiVersion);
    } catch (const DeviceError& error) {
      outcome.api.reset();
      outcome.error = error.code();
      outcome.message = error.what();
      // The handle stays open on purpose: a library that failed half-way may have registered
      // state, and closing it buys nothing but risk.
    }
    return outcome;
  }

 private:
  void open_library(LoadOutcome& outcome) {
    dlerror();
    handle_ = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = dlerror();
      throw DeviceError(DeviceErrc::no_driver,
                        std::string("the CUDA driver library ") + kDriverLibrary +
                            " could not be loaded: " + (why ? why : "unknown dlopen error") +
                            ". Is the NVIDIA driver installed? (DELTA_DEVICE=sim runs without one)");
    }
    find_get_proc_address();
    outcome.path = path_ = library_path();

    // Error naming first, so every later failure is described by the driver itself.
    resolve("cuGetErrorName", api_.cuGetErrorName);
    resolve("cuGetErrorString", api_.cuGetErrorString);
    resolve("cuDriverGetVersion", api_.cuDriverGetVersion);
    resolve("cuInit", api_.cuInit);
    resolve("cuDeviceGet", api_.cuDeviceGet);
    resolve("cuDeviceGetCount", api_.cuDeviceGetCount);
    resolve("cuDeviceGetName", api_.cuDeviceGetName);
    resolve("cuDevicePrimaryCtxRetain", api_.cuDevicePrimaryCtxRetain);
    resolve("cuDevicePrimaryCtxRelease", api_.cuDevicePrimaryCtxRelease);
    resolve("cuCtxGetCurrent", api_.cuCtxGetCurrent);
    resolve("cuCtxSetCurrent", api_.cuCtxSetCurrent);
    resolve("cuMemGetInfo", api_.cuMemGetInfo);
    resolve("cuMemGetAllocationGranularity", api_.cuMemGetAllocationGranularity);
    resolve("cuMemAddressReserve", api_.cuMemAddressReserve);
    resolve("cuMemAddressFree", api_.cuMemAddressFree);
    resolve("cuMemCreate", api_.cuMemCreate);
    resolve("cuMemRelease", api_.cuMemRelease);
    resolve("cuMemMap", api_.cuMemMap);
    resolve("cuMemUnmap", api_.cuMemUnmap);
    resolve("cuMemSetAccess", api_.cuMemSetAccess);
    resolve("cuStreamCreate", api_.cuStreamCreate);
    resolve("cuStreamDestroy", api_.cuStreamDestroy);
    resolve("cuStreamSynchronize", api_.cuStreamSynchronize);
    resolve("cuCtxSynchronize", api_.cuCtxSynchronize, 12000);
    resolve("cuStreamWaitEvent", api_.cuStreamWaitEvent);
    resolve("cuEventCreate", api_.cuEventCreate);
    resolve("cuEventDestroy", api_.cuEventDestroy);
    resolve("cuEventRecord", api_.cuEventRecord);
    resolve("cuEventQuery", api_.cuEventQuery);
    resolve("cuEventSynchronize", api_.cuEventSynchronize);
    resolve("cuMemcpyHtoDAsync", api_.cuMemcpyHtoDAsync);
    resolve("cuMemcpyDtoHAsync", api_.cuMemcpyDtoHAsync);
    resolve("cuMemcpyDtoDAsync", api_.cuMemcpyDtoDAsync);
    resolve("cuMemsetD8Async", api_.cuMemsetD8Async);
    resolve("cuMemHostAlloc", api_.cuMemHostAlloc);
    resolve("cuMemFreeHost", api_.cuMemFreeHost);

    initialize();
  }

  void find_get_proc_address() {
    get_proc_v2_ = reinterpret_cast<GetProcAddressV2>(dlsym(handle_, "cuGetProcAddress_v2"));
    if (get_proc_v2_ != nullptr) return;
    get_proc_v1_ = reinterpret_cast<GetProcAddressV1>(dlsym(handle_, "cuGetProcAddress"));
    if (get_proc_v1_ != nullptr) return;
    throw DeviceError(DeviceErrc::no_driver,
                      std::string(kDriverLibrary) + " was loaded but exports neither "
                      "cuGetProcAddress_v2 nor cuGetProcAddress: the NVIDIA driver is older than "
                      "CUDA 11.3 and must be updated");
  }

  std::string library_path() const {
    Dl_info info{};
    void* symbol = get_proc_v2_ ? reinterpret_cast<void*>(get_proc_v2_)
                                : reinterpret_cast<void*>(get_proc_v1_);
    if (dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
    return kDriverLibrary;
  }

  // `version`: the API version whose flavour of the entry point is wanted (the toolkit's, unless
  // a later version changed its signature).
  template <typename Fn>
  void resolve(const char* name, Fn& slot, int version = kDriverApiVersion) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    // Legacy-stream flavours: stream 0 means the legacy default stream, as it does for the
    // runtime and PyTorch; the per-thread stream is reached through its explicit handle.
    const cuuint64_t flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    CUresult result = get_proc_v2_ ? get_proc_v2_(name, &fn, version, flags, &status)
                                   : get_proc_v1_(name, &fn, version, flags);
    if (result == CUDA_SUCCESS && fn != nullptr && status == CU_GET_PROC_ADDRESS_SUCCESS) {
      slot = reinterpret_cast<Fn>(fn);
      return;
    }
    if (result == CUDA_ERROR_STUB_LIBRARY) {
      throw DeviceError(DeviceErrc::no_driver,
                        std::string(kDriverLibrary) + " at " + path_ +
                            " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not "
                            "the NVIDIA driver: remove its directory from LD_LIBRARY_PATH");
    }
    std::string why;
    if (result != CUDA_SUCCESS) {
      why = "cuGetProcAddress failed with " + describe_with(&api_, result);
    } else if (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) {
      why = "the driver has it only for a newer API version than " + std::to_string(version);
    } else {
      why = "the driver does not provide it";
    }
    throw DeviceError(DeviceErrc::no_driver,
                      std::string(kDriverLibrary) + " lacks the entry point " + name +
                          " (requested for CUDA API " + std::to_string(version) +
                          "): " + why + version_hint());
  }

  std::string version_hint() {
    if (api_.cuDriverGetVersion == nullptr) return "";
    int version = 0;
    if (api_.cuDriverGetVersion(&version) != CUDA_SUCCESS) return "";
    return "; the installed driver supports CUDA " + std::to_string(version / 1000) + "." +
           std::to_string((version % 1000) / 10);
  }

  void initialize() {
    CUresult result = api_.cuInit(0);
    if (result == CUDA_SUCCESS) {
      if (api_.cuDriverGetVersion(&api_.driver_version) != CUDA_SUCCESS) api_.driver_version = 0;
      return;
    }
    // No device is a fact about the machine; anything else (stub library, driver/kernel module
    // mismatch, ...) means the driver itself is unusable.
    const bool no_device = result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_INVALID_DEVICE;
    throw DeviceError(no_device ? DeviceErrc::no_device : DeviceErrc::no_driver,
                      std::string("cuInit(0) failed: ") + describe_with(&api_, result) +
                          (no_device ? ": the CUDA driver sees no usable GPU"
                                     : ": the CUDA driver is present but unusable") +
                          version_hint());
  }

  void* handle_ = nullptr;
  std::string path_;
  GetProcAddressV2 get_proc_v2_ = nullptr;
  GetProcAddressV1 get_proc_v1_ = nullptr;
  DriverApi api_;
};

const LoadOutcome& outcome() {
  // A function-local static: initialized exactly once, thread-safe, and never destroyed
  // (the driver must stay usable from other static destructors at exit).
  static const LoadOutcome* const loaded = new LoadOutcome(Loader().run());
  return *loaded;
}

}  // namespace

const DriverApi& driver() {
  const LoadOutcome& loaded = outcome();
  if (!loaded.api) throw DeviceError(loaded.error, loaded.message);
  return *loaded.api;
}

std::string describe_result(CUresult result) {
  return describe_with(g_loaded.load(std::memory_order_acquire), result);
}

std::string loaded_driver_path() {
  const LoadOutcome& loaded = outcome();
  return loaded.path.empty() ? kDriverLibrary : loaded.path;
}

}  // namespace delta::cuda
