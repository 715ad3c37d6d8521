// LD_PRELOAD=libdelta.so: the CUDA runtime's allocation calls, interposed.
//
// When libdelta.so is preloaded, the dynamic linker binds every process-wide reference to
// cudaMalloc / cudaFree / cudaMallocAsync / cudaFreeAsync / cudaMemGetInfo to the definitions
// below (the runtime's versioned symbols accept an unversioned definition). With
// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, PyTorch sends every tensor allocation with
// its stream through these calls, so DELTA serves an unmodified job.
//
// Pointers DELTA did not hand out go to the real runtime, found once with dlsym(RTLD_NEXT).
// DELTA_PRELOAD=0 forwards every call (the escape hatch). Nothing may throw across this C
// boundary: failures become cudaError_t codes, and delta_last_error() tells the story.
//
// When libdelta.so is merely dlopen'ed (the pluggable-allocator route), these definitions are
// not in the global scope and never replace the runtime's.
#include "src/modes/record_mode.hpp"
#include "src/modes/run_mode.hpp"
#include "src/runtime.hpp"

#include <delta/allocator.hpp>
#include <delta/device.hpp>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#define DELTA_EXPORT extern "C" __attribute__((visibility("default")))

namespace delta {
namespace {

// --- DELTA_PRELOAD -----------------------------------------------------------------------

bool read_preload_switch() {
  const char* value = std::getenv("DELTA_PRELOAD");
  if (value == nullptr || *value == '\0') return true;
  const std::string text(value);
  if (text == "1" || text == "on" || text == "true" || text == "yes") return true;
  if (text == "0" || text == "off" || text == "false" || text == "no") return false;
  // Invalid: say so once and keep the default, so a typo never silently changes who allocates.
  std::fprintf(stderr,
               "DELTA: DELTA_PRELOAD='%s' is not one of 1/on/true/yes or 0/off/false/no; "
               "keeping the default (DELTA serves cudaMalloc)\n",
               value);
  return true;
}

}  // namespace

// Shared with the driver interposer (runtime.hpp).
bool preload_enabled() {
  static const bool enabled = read_preload_switch();
  return enabled;
}

bool defined_in_this_library(const void* symbol) {
  Dl_info theirs{}, ours{};
  if (dladdr(symbol, &theirs) == 0) return false;
  if (dladdr(reinterpret_cast<void*>(&read_preload_switch), &ours) == 0) return false;
  return theirs.dli_fbase == ours.dli_fbase;
}

namespace {

// --- the real runtime ----------------------------------------------------------------------

int find_loaded_cudart(dl_phdr_info* info, std::size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name != nullptr && std::strstr(name, "libcudart.so") != nullptr) {
    *static_cast<std::string*>(out) = name;
    return 1;
  }
  return 0;
}

// RTLD_NEXT searches the global scope only. When the runtime was loaded RTLD_LOCAL as a
// dependency of a dlopen'ed library (Python extension modules), its callers still reach our
// definitions first but RTLD_NEXT cannot see it: then look it up among the loaded objects.
void* lookup_real(const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol != nullptr && !defined_in_this_library(symbol)) return symbol;
  std::string path;
  dl_iterate_phdr(&find_loaded_cudart, &path);
  if (path.empty()) return nullptr;
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  symbol = dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference of an already loaded object: give it back
  return symbol != nullptr && !defined_in_this_library(symbol) ? symbol : nullptr;
}

// Resolved once when found; a miss is retried, since the runtime may be loaded later.
template <typename Fn>
Fn real(const char* name, std::atomic<void*>& cache) {
  void* symbol = cache.load(std::memory_order_acquire);
  if (symbol == nullptr) {
    symbol = lookup_real(name);
    if (symbol != nullptr) cache.store(symbol, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(symbol);
}

#define DELTA_REAL(name)                                     \
  ([]() {                                                    \
    static std::atomic<void*> cache{nullptr};                \
    return real<decltype(&::name)>(#name, cache);            \
  }())

// --- errors --------------------------------------------------------------------------------

cudaError_t fail(cudaError_t code, std::string_view call, const char* what) noexcept {
  try {
    const std::string message = std::string(call) + ": " + what;
    set_last_error(message.c_str());
  } catch (...) {
    set_last_error(what);
  }
  return code;
}

template <typename Describe>
cudaError_t fail_described(cudaError_t code, Describe& describe, const char* what) noexcept {
  try {
    return fail(code, describe(), what);
  } catch (...) {
    set_last_error(what);
    return code;
  }
}

// A call that belongs to the real runtime, with no runtime loaded in the process to take it.
cudaError_t no_runtime(const char* call) noexcept {
  return fail(cudaErrorInitializationError, call,
              "not DELTA's to answer, and no CUDA runtime library is loaded to forward it to");
}

cudaError_t code_for(const DeviceError& error) {
  switch (error.code()) {
    case DeviceErrc::out_of_memory: return cudaErrorMemoryAllocation;
    case DeviceErrc::invalid_value:
    case DeviceErrc::invalid_handle:
    case DeviceErrc::not_mapped:
    case DeviceErrc::already_mapped: return cudaErrorInvalidValue;
    case DeviceErrc::no_driver:
    case DeviceErrc::no_device: return cudaErrorInitializationError;
    case DeviceErrc::driver_error: return cudaErrorUnknown;
    case DeviceErrc::hazard: return cudaErrorIllegalAddress;  // the sim's report of a race a GPU would fault on
  }
  return cudaErrorUnknown;
}

// Runs one allocator operation and turns every exception into the runtime's error code.
// `describe` names the call for the message; it only runs on failure, off the fast path.
template <typename Describe, typename Op>
cudaError_t guarded(Describe&& describe, Op&& op) noexcept {
  try {
    op();
    return cudaSuccess;
  } catch (const OutOfMemoryError& error) {
    return fail_described(cudaErrorMemoryAllocation, describe, error.what());
  } catch (const InvalidFreeError& error) {
    return fail_described(cudaErrorInvalidValue, describe, error.what());
  } catch (const DeviceError& error) {
    return fail_described(code_for(error), describe, error.what());
  } catch (const std::bad_alloc&) {
    return fail_described(cudaErrorMemoryAllocation, describe, "host memory exhausted");
  } catch (const std::exception& error) {
    return fail_described(cudaErrorUnknown, describe, error.what());
  } catch (...) {
    return fail_described(cudaErrorUnknown, describe, "unknown exception");
  }
}

std::string call_with_size(const char* call, std::size_t size) {
  return std::string(call) + "(size=" + std::to_string(size) + ")";
}

std::string call_with_ptr(const char* call, const void* ptr) {
  char text[96];
  std::snprintf(text, sizeof(text), "%s(ptr=%p)", call, ptr);
  return text;
}

// The process-wide allocator, created on first use. Its creation fails on malformed settings
// or when no device can be opened: that is an initialization error to the caller.
CachingAllocator* allocator_or_error(const char* call, cudaError_t& error) noexcept {
  try {
    return &runtime_allocator();
  } catch (const std::exception& failure) {
    error = fail(cudaErrorInitializationError, call, failure.what());
  } catch (...) {
    error = fail(cudaErrorInitializationError, call, "unknown exception while starting DELTA");
  }
  return nullptr;
}

// Whether DELTA handed out ptr. Never creates the allocator: a foreign free must not start it.
bool delta_owns_pointer(const void* ptr) noexcept {
  if (ptr == nullptr) return false;
  CachingAllocator* allocator = runtime_allocator_if_created();
  if (allocator == nullptr) return false;
  try {
    return allocator->owns(ptr);
  } catch (...) {
    return false;
  }
}

StreamHandle handle_of(cudaStream_t stream) { return reinterpret_cast<StreamHandle>(stream); }

// Stream 0 means the legacy default stream to the plain entry points and the per-thread
// default stream to the _ptsz ones (code built with --default-stream per-thread).
StreamHandle per_thread_handle_of(cudaStream_t stream) {
  return stream == nullptr ? kPerThreadStream : handle_of(stream);
}

cudaError_t malloc_on(void** ptr, std::size_t size, StreamHandle stream, const char* call) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue, call, "the result pointer is NULL");
  if (size == 0) {  // like CUDA: success with a null pointer
    *ptr = nullptr;
    return cudaSuccess;
  }
  cudaError_t error = cudaSuccess;
  CachingAllocator* allocator = allocator_or_error(call, error);
  if (allocator == nullptr) return error;
  void* result = nullptr;
  error = guarded([&] { return call_with_size(call, size); },
                  [&] {
                    result = serve_allocation(*allocator, size, stream);
                    record_allocated(result, size, stream);
                  });
  *ptr = error == cudaSuccess ? result : nullptr;
  return error;
}

cudaError_t free_on(void* ptr, StreamHandle stream, const char* call) {
  CachingAllocator* allocator = runtime_allocator_if_created();
  // Freed on another stream than it was allocated on: the block must not be reused on its
  // own stream before `stream` reaches this point. record_stream is a no-op on the same stream.
  return guarded([&] { return call_with_ptr(call, ptr); }, [&] {
    if (allocator == nullptr) throw InvalidFreeError("DELTA has not allocated anything yet");
    allocator->record_stream(ptr, stream);
    record_freed(ptr);
    serve_free(*allocator, ptr);
  });
}

}  // namespace
}  // namespace delta

using namespace delta;

DELTA_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (!preload_enabled()) {
    auto next = DELTA_REAL(cudaMalloc);
    return next ? next(devPtr, size) : no_runtime("cudaMalloc");
  }
  return malloc_on(devPtr, size, 0, "cudaMalloc");
}

DELTA_EXPORT cudaError_t cudaFree(void* devPtr) {
  if (preload_enabled() && delta_owns_pointer(devPtr)) {
    CachingAllocator* allocator = runtime_allocator_if_created();
    // cudaFree waits for the whole device, so callers may free memory that other streams still
    // use. Keep that promise on a real GPU before the block becomes reusable.
    cudaError_t synced = cudaSuccess;
    if (allocator->device().kind() == "cuda") {
      if (auto sync = DELTA_REAL(cudaDeviceSynchronize)) synced = sync();
    }
    const cudaError_t freed = guarded([&] { return call_with_ptr("cudaFree", devPtr); },
                                      [&] {
                                        record_freed(devPtr);
                                        serve_free(*allocator, devPtr);
                                      });
    return freed != cudaSuccess ? freed : synced;
  }
  // Foreign pointers, and cudaFree(NULL), the classic way to start the runtime's context.
  auto next = DELTA_REAL(cudaFree);
  if (next) return next(devPtr);
  return devPtr == nullptr ? cudaSuccess : no_runtime("cudaFree");
}

DELTA_EXPORT cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  if (!preload_enabled()) {
    auto next = DELTA_REAL(cudaMallocAsync);
    return next ? next(devPtr, size, hStream) : no_runtime("cudaMallocAsync");
  }
  return malloc_on(devPtr, size, handle_of(hStream), "cudaMallocAsync");
}

DELTA_EXPORT cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  if (preload_enabled() && delta_owns_pointer(devPtr)) {
    return free_on(devPtr, handle_of(hStream), "cudaFreeAsync");
  }
  auto next = DELTA_REAL(cudaFreeAsync);
  return next ? next(devPtr, hStream) : no_runtime("cudaFreeAsync");
}

// The per-thread-default-stream flavours that --default-stream per-thread code calls.
DELTA_EXPORT cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream);
DELTA_EXPORT cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream);

DELTA_EXPORT cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
  if (!preload_enabled()) {
    auto next = DELTA_REAL(cudaMallocAsync_ptsz);
    return next ? next(devPtr, size, hStream) : no_runtime("cudaMallocAsync_ptsz");
  }
  return malloc_on(devPtr, size, per_thread_handle_of(hStream), "cudaMallocAsync_ptsz");
}

DELTA_EXPORT cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
  if (preload_enabled() && delta_owns_pointer(devPtr)) {
    return free_on(devPtr, per_thread_handle_of(hStream), "cudaFreeAsync_ptsz");
  }
  auto next = DELTA_REAL(cudaFreeAsync_ptsz);
  return next ? next(devPtr, hStream) : no_runtime("cudaFreeAsync_ptsz");
}

// DELTA's view: the total is its limit, the free part what it can still hand out under it.
DELTA_EXPORT cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (!preload_enabled()) {
    auto next = DELTA_REAL(cudaMemGetInfo);
    return next ? next(free, total) : no_runtime("cudaMemGetInfo");
  }
  if (free == nullptr || total == nullptr) {
    return fail(cudaErrorInvalidValue, "cudaMemGetInfo", "free or total is NULL");
  }
  cudaError_t error = cudaSuccess;
  CachingAllocator* allocator = allocator_or_error("cudaMemGetInfo", error);
  if (allocator == nullptr) return error;
  std::size_t limit = 0, allocated = 0;
  error = guarded([] { return std::string("cudaMemGetInfo"); }, [&] {
    limit = allocator->limit_bytes();
    allocated = allocator->stats().allocated_bytes;
  });
  if (error != cudaSuccess) return error;
  *total = limit;
  *free = allocated < limit ? limit - allocated : 0;
  return cudaSuccess;
}
