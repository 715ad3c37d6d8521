#include "profiler/cupti_kernel_params.hpp"

#include <dlfcn.h>
#include <link.h>

#include <string_view>

namespace delta::profiler {
namespace {

constexpr std::size_t kMaxParams = 4096;  // far above any kernel; bounds a misbehaving driver

// A handle to a library that is already loaded (RTLD_NOLOAD), found by file-name prefix.
void* loaded_handle(std::string_view prefix) {
  struct Search {
    std::string_view prefix;
    std::string path;
  } search{prefix, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr) return 0;
        std::string_view name = info->dlpi_name;
        const auto slash = name.rfind('/');
        if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
        if (name.substr(0, s->prefix.size()) != s->prefix) return 0;
        s->path = info->dlpi_name;
        return 1;
      },
      &search);
  if (search.path.empty()) return nullptr;
  return dlopen(search.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
}

}  // namespace

std::optional<ParamLayout> read_param_layout(const std::function<CUresult(std::size_t, std::size_t*, std::size_t*)>& query) {
  ParamLayout layout;
  for (std::size_t i = 0; i < kMaxParams; ++i) {
    std::size_t offset = 0, size = 0;
    const CUresult result = query(i, &offset, &size);
    if (result != CUDA_SUCCESS) {
      if (i == 0 && result != CUDA_ERROR_INVALID_VALUE) return std::nullopt;
      return layout;
    }
    layout.push_back({offset, size});
  }
  return layout;
}

KernelParamInfo::KernelParamInfo() {
  // The driver is in the process already (the CUDA context exists when recording starts).
  void* driver = loaded_handle("libcuda.so");
  if (driver == nullptr) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver != nullptr) {
    using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    auto get_proc = reinterpret_cast<GetProc>(dlsym(driver, "cuGetProcAddress_v2"));
    // Each entry point is asked for at the ABI version whose prototype the typedef above
    // spells (cuCtxSynchronize gained a context argument in its CUDA 13 version).
    auto resolve = [&](const char* name, int version = CUDA_VERSION) -> void* {
      void* fn = nullptr;
      CUdriverProcAddressQueryResult status{};
      if (get_proc && get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
          status == CU_GET_PROC_ADDRESS_SUCCESS) {
        return fn;
      }
      return nullptr;
    };
    func_get_param_info_ = reinterpret_cast<FuncGetParamInfo>(resolve("cuFuncGetParamInfo"));
    kernel_get_param_info_ = reinterpret_cast<KernelGetParamInfo>(resolve("cuKernelGetParamInfo"));
    device_get_name_ = reinterpret_cast<DeviceGetName>(resolve("cuDeviceGetName"));
    device_total_mem_ = reinterpret_cast<DeviceTotalMem>(resolve("cuDeviceTotalMem"));
    ctx_synchronize_ = reinterpret_cast<CtxSynchronize>(resolve("cuCtxSynchronize", 12000));
  }
  if (void* runtime = loaded_handle("libcudart.so")) {
    get_func_by_symbol_ = reinterpret_cast<GetFuncBySymbol>(dlsym(runtime, "cudaGetFuncBySymbol"));
  }
}

const ParamLayout* KernelParamInfo::cached(const void* key,
                                           const std::function<CUresult(std::size_t, std::size_t*, std::size_t*)>& query) {
  std::lock_guard lock(mutex_);
  auto it = layouts_.find(key);
  if (it == layouts_.end()) it = layouts_.emplace(key, read_param_layout(query)).first;
  return it->second ? &*it->second : nullptr;
}

const ParamLayout* KernelParamInfo::for_function(CUfunction function) {
  if (function == nullptr || func_get_param_info_ == nullptr) return nullptr;
  return cached(function, [&](std::size_t i, std::size_t* offset, std::size_t* size) {
    return func_get_param_info_(function, i, offset, size);
  });
}

const ParamLayout* KernelParamInfo::for_kernel(CUkernel kernel) {
  if (kernel == nullptr || kernel_get_param_info_ == nullptr) return nullptr;
  return cached(kernel, [&](std::size_t i, std::size_t* offset, std::size_t* size) {
    return kernel_get_param_info_(kernel, i, offset, size);
  });
}

const ParamLayout* KernelParamInfo::for_host_stub(const void* stub) {
  if (stub == nullptr || get_func_by_symbol_ == nullptr) return nullptr;
  CUfunction function = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = stubs_.find(stub);
    if (it != stubs_.end()) {
      function = it->second;
    } else {
      if (get_func_by_symbol_(&function, stub) != 0) function = nullptr;  // 0 = cudaSuccess
      stubs_.emplace(stub, function);
    }
  }
  return for_function(function);
}

std::string KernelParamInfo::gpu_name() const {
  char name[256] = {};
  if (device_get_name_ && device_get_name_(name, sizeof name - 1, 0) == CUDA_SUCCESS) return name;
  return {};
}

std::uint64_t KernelParamInfo::gpu_memory_bytes() const {
  size_t bytes = 0;
  if (device_total_mem_ && device_total_mem_(&bytes, 0) == CUDA_SUCCESS) return bytes;
  return 0;
}

bool KernelParamInfo::synchronize() const { return ctx_synchronize_ && ctx_synchronize_() == CUDA_SUCCESS; }

std::string KernelParamInfo::describe() const {
  std::string out = "cuFuncGetParamInfo ";
  out += func_get_param_info_ ? "yes" : "no";
  out += ", cuKernelGetParamInfo ";
  out += kernel_get_param_info_ ? "yes" : "no";
  out += ", cudaGetFuncBySymbol ";
  out += get_func_by_symbol_ ? "yes" : "no (runtime launches by host stub stay unattributed)";
  return out;
}

}  // namespace delta::profiler
