/* A stand-in for libcuda.so.1 with the entry points DELTA interposes: each records that it
 * was called, under which exported name, with which arguments, so that driver_probe can check
 * that a call passed through DELTA's wrapper reaches the driver unchanged. Its
 * cuGetProcAddress(_v2) hands out the per-thread flavour when asked with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, as the real driver does. Built as
 * libcuda.so.1 in a folder of its own (LD_LIBRARY_PATH); no CUDA header is needed. */
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef int CUresult;
enum { OK = 0, NOT_FOUND = 500 };
enum { PER_THREAD = 1 << 1 };

EXPORT const char* stub_last_name = "";
EXPORT uint64_t stub_last_args[12];
EXPORT int stub_calls = 0;

/* Accessors for a program linked against the stub: its own references to the variables above
 * would be copies (copy relocations) that the stub, bound to itself, never writes. */
EXPORT const char* stub_name(void) { return stub_last_name; }
EXPORT const uint64_t* stub_args(void) { return stub_last_args; }

static void record(const char* name, int n, const uint64_t* args) {
  stub_last_name = name;
  memset(stub_last_args, 0, sizeof stub_last_args);
  memcpy(stub_last_args, args, (size_t)n * sizeof *args);
  stub_calls++;
}

#define U(x) ((uint64_t)(uintptr_t)(x))

#define LAUNCH(name)                                                                                    \
  EXPORT CUresult name(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,       \
                       unsigned bz, unsigned shared, void* stream, void** params, void** extra) {       \
    uint64_t a[] = {U(f), gx, gy, gz, bx, by, bz, shared, U(stream), U(params), U(extra)};             \
    record(#name, 11, a);                                                                               \
    return OK;                                                                                          \
  }
LAUNCH(cuLaunchKernel)
LAUNCH(cuLaunchKernel_ptsz)

#define LAUNCH_EX(name)                                                          \
  EXPORT CUresult name(const void* config, void* f, void** params, void** extra) { \
    uint64_t a[] = {U(config), U(f), U(params), U(extra)};                       \
    record(#name, 4, a);                                                         \
    return OK;                                                                   \
  }
LAUNCH_EX(cuLaunchKernelEx)
LAUNCH_EX(cuLaunchKernelEx_ptsz)

#define ONE(name)                      \
  EXPORT CUresult name(void* x) {      \
    uint64_t a[] = {U(x)};             \
    record(#name, 1, a);               \
    return OK;                         \
  }
ONE(cuModuleUnload)
ONE(cuLibraryUnload)
ONE(cuStreamBeginCapture) /* the CUDA 10.0 ABI: no mode */

#define TWO(name)                          \
  EXPORT CUresult name(void* x, void* y) { \
    uint64_t a[] = {U(x), U(y)};           \
    record(#name, 2, a);                   \
    return OK;                             \
  }
TWO(cuStreamBeginCapture_v2)
TWO(cuStreamBeginCapture_v2_ptsz)
TWO(cuStreamEndCapture)
TWO(cuStreamEndCapture_ptsz)
TWO(cuMemAlloc_v2) /* not interposed */

EXPORT CUresult cuIpcGetMemHandle(void* handle, uint64_t ptr) {
  uint64_t a[] = {U(handle), ptr};
  record("cuIpcGetMemHandle", 2, a);
  return OK;
}

#define COPY(name)                                                                   \
  EXPORT CUresult name(uint64_t dst, const void* src, size_t bytes, void* stream) { \
    uint64_t a[] = {dst, U(src), bytes, U(stream)};                                  \
    record(#name, 4, a);                                                             \
    return OK;                                                                       \
  }
COPY(cuMemcpyHtoDAsync_v2)
COPY(cuMemcpyHtoDAsync_v2_ptsz)

#define SET(name)                                                                      \
  EXPORT CUresult name(uint64_t dst, unsigned char value, size_t n, void* stream) {  \
    uint64_t a[] = {dst, value, n, U(stream)};                                       \
    record(#name, 4, a);                                                             \
    return OK;                                                                       \
  }
SET(cuMemsetD8Async)
SET(cuMemsetD8Async_ptsz)

struct Entry {
  const char* name;
  int per_thread;
  int min_version; /* a request below it gets the older ABI */
  void* fn;
};

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status);
EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags);

static const struct Entry entries[] = {
    {"cuLaunchKernel", 0, 0, (void*)cuLaunchKernel},
    {"cuLaunchKernel", 1, 0, (void*)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 0, 0, (void*)cuLaunchKernelEx},
    {"cuLaunchKernelEx", 1, 0, (void*)cuLaunchKernelEx_ptsz},
    {"cuModuleUnload", 0, 0, (void*)cuModuleUnload},
    {"cuModuleUnload", 1, 0, (void*)cuModuleUnload},
    {"cuLibraryUnload", 0, 0, (void*)cuLibraryUnload},
    {"cuStreamBeginCapture", 0, 10010, (void*)cuStreamBeginCapture_v2},
    {"cuStreamBeginCapture", 1, 10010, (void*)cuStreamBeginCapture_v2_ptsz},
    {"cuStreamBeginCapture", 0, 0, (void*)cuStreamBeginCapture},
    {"cuStreamBeginCapture", 1, 0, (void*)cuStreamBeginCapture},
    {"cuStreamEndCapture", 0, 0, (void*)cuStreamEndCapture},
    {"cuStreamEndCapture", 1, 0, (void*)cuStreamEndCapture_ptsz},
    {"cuMemcpyHtoDAsync", 0, 0, (void*)cuMemcpyHtoDAsync_v2},
    {"cuMemcpyHtoDAsync", 1, 0, (void*)cuMemcpyHtoDAsync_v2_ptsz},
    {"cuMemsetD8Async", 0, 0, (void*)cuMemsetD8Async},
    {"cuMemsetD8Async", 1, 0, (void*)cuMemsetD8Async_ptsz},
    {"cuIpcGetMemHandle", 0, 0, (void*)cuIpcGetMemHandle},
    {"cuMemAlloc", 0, 0, (void*)cuMemAlloc_v2},
    {"cuGetProcAddress", 0, 12000, (void*)cuGetProcAddress_v2},
    {"cuGetProcAddress", 1, 12000, (void*)cuGetProcAddress_v2},
    {"cuGetProcAddress", 0, 0, (void*)cuGetProcAddress},
    {"cuGetProcAddress", 1, 0, (void*)cuGetProcAddress},
};

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
  const int per_thread = (flags & PER_THREAD) != 0;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
    const struct Entry* e = &entries[i];
    if (strcmp(e->name, symbol) == 0 && e->per_thread == per_thread && version >= e->min_version) {
      *pfn = e->fn;
      if (status) *status = 0;
      return OK;
    }
  }
  *pfn = 0;
  if (status) *status = 1;
  return NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
