// dlsym and cuGetProcAddress(_v2), interposed: see driver_interpose.hpp.
#include "src/driver/driver_interpose.hpp"

#include "src/runtime.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <cstring>

// cuda.h maps the names to their latest ABI; here the exported names are spelled out.
#undef cuGetProcAddress

#define DELTA_EXPORT extern "C" __attribute__((visibility("default")))

DELTA_EXPORT void* dlsym(void* handle, const char* symbol) noexcept;
DELTA_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* symbolStatus);
DELTA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);

namespace delta::interpose {
namespace {

using DlsymFn = void* (*)(void*, const char*);
using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

// dlvsym is not interposed: glibc's dlsym is asked for by its symbol versions (2.34 moved it
// into libc; the others are the base versions of x86-64, aarch64 and i386).
DlsymFn find_real_dlsym() {
  static constexpr const char* kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (void* scope : {RTLD_NEXT, RTLD_DEFAULT})
    for (const char* version : kVersions)
      if (void* fn = dlvsym(scope, "dlsym", version); fn != nullptr && !defined_in_this_library(fn))
        return reinterpret_cast<DlsymFn>(fn);
  return nullptr;
}

DlsymFn real_dlsym() {
  static const DlsymFn fn = find_real_dlsym();
  return fn;
}

std::atomic<void*> real_get_proc_v2{nullptr};
std::atomic<void*> real_get_proc_v1{nullptr};

// The real dlsym's RTLD_NEXT is relative to its caller, which would be libdelta: the search
// is redone from the caller's object, over the objects loaded after it, in order.
void* next_after(const void* caller, const char* symbol) {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || map == nullptr) return nullptr;
  for (link_map* object = map->l_next; object != nullptr; object = object->l_next) {
    if (object->l_name == nullptr || *object->l_name == '\0') continue;
    void* handle = dlopen(object->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* found = real_dlsym()(handle, symbol);
    link_map* owner = nullptr;
    Dl_info where{};
    const bool own = found != nullptr &&
                     dladdr1(found, &where, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) != 0 && owner == object;
    dlclose(handle);  // RTLD_NOLOAD took a reference of a loaded object: give it back
    if (own) return found;
  }
  return nullptr;
}

void* keep_real(const Interposed& entry, void* real) {
  if (real == entry.wrapper || defined_in_this_library(real)) return real;
  entry.real->store(real, std::memory_order_release);
  return entry.wrapper;
}

// What a caller of cuGetProcAddress receives for `symbol`.
void* answer_proc(const char* symbol, void* found, int version, cuuint64_t flags) {
  if (found == nullptr || symbol == nullptr || !preload_enabled() || defined_in_this_library(found)) return found;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    const bool v2 = version >= 12000;  // the _v2 ABI (with the status argument) from CUDA 12.0
    (v2 ? real_get_proc_v2 : real_get_proc_v1).store(found, std::memory_order_release);
    return v2 ? reinterpret_cast<void*>(&::cuGetProcAddress_v2) : reinterpret_cast<void*>(&::cuGetProcAddress);
  }
  // CU_GET_PROC_ADDRESS_DEFAULT counts as legacy: should the driver have handed out its
  // per-thread flavour, stream 0 is the per-thread stream while the route calls it the legacy
  // one, whose waits every blocking stream (the per-thread one too) orders behind: still safe.
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  for (const Interposed& entry : entries())
    if (entry.per_thread == per_thread && version >= entry.min_version && std::strcmp(entry.proc_name, symbol) == 0)
      return keep_real(entry, found);
  return found;
}

// What a caller of dlsym receives for `symbol` (an exported name: the ABI is in the name).
void* answer_symbol(const char* symbol, void* found) {
  if (std::strcmp(symbol, "cuGetProcAddress_v2") == 0) {
    real_get_proc_v2.store(found, std::memory_order_release);
    return reinterpret_cast<void*>(&::cuGetProcAddress_v2);
  }
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    real_get_proc_v1.store(found, std::memory_order_release);
    return reinterpret_cast<void*>(&::cuGetProcAddress);
  }
  for (const Interposed& entry : entries())
    if (std::strcmp(entry.symbol, symbol) == 0) return keep_real(entry, found);
  return found;
}

template <typename Fn>
Fn real_get_proc(std::atomic<void*>& cache, const char* symbol) {
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = real_driver_symbol(symbol);
    if (fn != nullptr) cache.store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

bool live() {
  if (!preload_enabled() || real_dlsym() == nullptr) return false;
  void* global = real_dlsym()(RTLD_DEFAULT, "dlsym");
  return global != nullptr && defined_in_this_library(global);
}

void install_route(executor::CudaLaunchRoute* route) { installed_route.store(route, std::memory_order_release); }

void* real_driver_symbol(const char* symbol) {
  if (real_dlsym() == nullptr) return nullptr;
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver == nullptr) return nullptr;
  void* found = real_dlsym()(driver, symbol);
  dlclose(driver);
  return found != nullptr && !defined_in_this_library(found) ? found : nullptr;
}

executor::FunctionQueries function_queries() {
  executor::FunctionQueries q;
  auto get_proc = real_get_proc<GetProcV2>(real_get_proc_v2, "cuGetProcAddress_v2");
  if (get_proc == nullptr) return q;
  auto resolve = [&](const char* name, auto& out) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (get_proc(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
        status == CU_GET_PROC_ADDRESS_SUCCESS)
      out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(fn);
  };
  resolve("cuFuncGetParamInfo", q.func_get_param_info);
  resolve("cuKernelGetParamInfo", q.kernel_get_param_info);
  resolve("cuFuncGetName", q.func_get_name);
  resolve("cuKernelGetName", q.kernel_get_name);
  resolve("cuFuncGetModule", q.func_get_module);
  resolve("cuKernelGetLibrary", q.kernel_get_library);
  return q;
}

}  // namespace delta::interpose

using namespace delta;
using namespace delta::interpose;

DELTA_EXPORT void* dlsym(void* handle, const char* symbol) noexcept {
  const DlsymFn real = real_dlsym();
  if (real == nullptr) return nullptr;
  const void* caller = __builtin_return_address(0);
  const bool ours = defined_in_this_library(caller);
  void* found = handle == RTLD_NEXT && !ours ? next_after(caller, symbol) : real(handle, symbol);
  // libdelta's own lookups (its device layer, the real runtime) get the real functions.
  if (found == nullptr || ours || !preload_enabled() || defined_in_this_library(found)) return found;
  return answer_symbol(symbol, found);
}

DELTA_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* symbolStatus) {
  const auto real = real_get_proc<GetProcV2>(real_get_proc_v2, "cuGetProcAddress_v2");
  if (real == nullptr) {
    if (pfn != nullptr) *pfn = nullptr;
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  const CUresult result = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (result == CUDA_SUCCESS && pfn != nullptr && (symbolStatus == nullptr || *symbolStatus == CU_GET_PROC_ADDRESS_SUCCESS))
    *pfn = answer_proc(symbol, *pfn, cudaVersion, flags);
  return result;
}

DELTA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  const auto real = real_get_proc<GetProcV1>(real_get_proc_v1, "cuGetProcAddress");
  if (real == nullptr) {
    if (pfn != nullptr) *pfn = nullptr;
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  const CUresult result = real(symbol, pfn, cudaVersion, flags);
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = answer_proc(symbol, *pfn, cudaVersion, flags);
  return result;
}
