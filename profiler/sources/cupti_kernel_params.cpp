#include "profiler/sources/cupti_kernel_params.hpp"

#include <dlfcn.h>
#include <link.h>

#include <string_view>
#include <utility>
#include <vector>

namespace delta::profiler {
namespace {

constexpr std::size_t kMaxParams = 4096;  // far above any kernel; bounds a misbehaving driver

// Handles and paths of the libraries already loaded (RTLD_NOLOAD) whose file name starts with
// `prefix`, in load order.
std::vector<std::pair<void*, std::string>> loaded_handles(std::string_view prefix) {
  struct Search {
    std::string_view prefix;
    std::vector<std::string> paths;
  } search{prefix, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr) return 0;
        std::string_view name = info->dlpi_name;
        const auto slash = name.rfind('/');
        if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
        if (name.substr(0, s->prefix.size()) == s->prefix) s->paths.emplace_back(info->dlpi_name);
        return 0;
      },
      &search);
  std::vector<std::pair<void*, std::string>> out;
  for (const std::string& path : search.paths) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) out.emplace_back(handle, path);
  }
  return out;
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
  const auto drivers = loaded_handles("libcuda.so");
  void* driver = drivers.empty() ? nullptr : drivers.front().first;
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
  // Every loaded runtime: a wheel may carry its own under a hashed name ("libcudart.<hash>.so.13"),
  // beside the system's or another package's, and only the one that registered a kernel knows
  // its stub.
  for (const auto& [runtime, path] : loaded_handles("libcudart")) {
    Runtime r;
    r.path = path;
    r.get_func_by_symbol = reinterpret_cast<GetFuncBySymbol>(dlsym(runtime, "cudaGetFuncBySymbol"));
    r.get_kernel = reinterpret_cast<GetKernel>(dlsym(runtime, "cudaGetKernel"));
    r.peek_at_last_error = reinterpret_cast<RuntimeLastError>(dlsym(runtime, "cudaPeekAtLastError"));
    r.get_last_error = reinterpret_cast<RuntimeLastError>(dlsym(runtime, "cudaGetLastError"));
    if (r.get_func_by_symbol && r.peek_at_last_error && r.get_last_error) runtimes_.push_back(std::move(r));
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
  // The runtime launches through cuLaunchKernel with a CUkernel in place of the CUfunction
  // (the driver accepts either, seen with CUDA 13 and PyTorch); cuFuncGetParamInfo knows no
  // parameters of such a handle, cuKernelGetParamInfo does.
  std::lock_guard lock(mutex_);
  auto it = layouts_.find(function);
  if (it != layouts_.end()) return it->second ? &*it->second : nullptr;
  std::optional<ParamLayout> layout = read_param_layout([&](std::size_t i, std::size_t* offset, std::size_t* size) {
    return func_get_param_info_(function, i, offset, size);
  });
  bool via_kernel = false;
  if ((!layout || layout->empty()) && kernel_get_param_info_ != nullptr) {
    // Asking cuKernelGetParamInfo about a handle that may be a genuine CUfunction is not
    // documented; an error there only means "no layout this way".
    const auto kernel = reinterpret_cast<CUkernel>(function);
    std::optional<ParamLayout> as_kernel = read_param_layout([&](std::size_t i, std::size_t* offset, std::size_t* size) {
      return kernel_get_param_info_(kernel, i, offset, size);
    });
    if (as_kernel && !as_kernel->empty()) {
      layout = std::move(as_kernel);
      via_kernel = true;
    }
  }
  // Every distinct handle counts once: a kernel without parameters is a function with an
  // empty layout.
  if (!layout) ++layout_counts_.unknown;
  else if (via_kernel) ++layout_counts_.kernel_in_place_of_function;
  else ++layout_counts_.function;
  it = layouts_.emplace(function, std::move(layout)).first;
  return it->second ? &*it->second : nullptr;
}

const ParamLayout* KernelParamInfo::for_kernel(CUkernel kernel) {
  if (kernel == nullptr || kernel_get_param_info_ == nullptr) return nullptr;
  return cached(kernel, [&](std::size_t i, std::size_t* offset, std::size_t* size) {
    return kernel_get_param_info_(kernel, i, offset, size);
  });
}

const ParamLayout* KernelParamInfo::for_host_stub(const void* stub) {
  if (stub == nullptr || !can_resolve_host_stubs()) return nullptr;
  StubTarget target;
  {
    std::lock_guard lock(mutex_);
    auto it = stubs_.find(stub);
    if (it != stubs_.end()) {
      target = it->second;
    } else {
      bool skipped = false;
      int first_error = 0;
      for (const Runtime& runtime : runtimes_) {
        // An error the application has not read yet stays its own: ask that runtime later.
        if (runtime.peek_at_last_error() != 0) {  // 0 = cudaSuccess
          skipped = true;
          continue;
        }
        CUfunction function = nullptr;
        if (const int error = runtime.get_func_by_symbol(&function, stub); error == 0 && function) {
          target.function = function;
          break;
        } else {
          (void)runtime.get_last_error();  // ours, not the application's: clear it
          if (first_error == 0) first_error = error;
        }
        CUkernel kernel = nullptr;
        if (runtime.get_kernel != nullptr) {
          if (runtime.get_kernel(&kernel, stub) == 0 && kernel) {
            target.kernel = kernel;
            break;
          }
          (void)runtime.get_last_error();
        }
      }
      // Not found, and a runtime that was not asked may know it: no verdict to keep yet.
      if (!target.function && !target.kernel && skipped) return nullptr;
      if (!target.function && !target.kernel && first_stub_error_ == 0) first_stub_error_ = first_error;
      if (!target.function && !target.kernel) failed_stub_lookups_.fetch_add(1, std::memory_order_relaxed);
      stubs_.emplace(stub, target);
    }
  }
  if (target.function) return for_function(target.function);
  return for_kernel(target.kernel);
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

std::string KernelParamInfo::layout_sources() const {
  std::lock_guard lock(mutex_);
  return "function " + std::to_string(layout_counts_.function) + ", kernel in place of function " +
         std::to_string(layout_counts_.kernel_in_place_of_function) + ", unknown " +
         std::to_string(layout_counts_.unknown);
}

std::string KernelParamInfo::describe() const {
  std::string out = "cuFuncGetParamInfo ";
  out += func_get_param_info_ ? "yes" : "no";
  out += ", cuKernelGetParamInfo ";
  out += kernel_get_param_info_ ? "yes" : "no";
  out += ", runtimes for host stubs: ";
  if (runtimes_.empty()) out += "none (runtime launches by host stub stay unattributed)";
  for (std::size_t i = 0; i < runtimes_.size(); ++i) out += (i ? ", " : "") + runtimes_[i].path;
  return out;
}

}  // namespace delta::profiler
