/* Loads the driver the way the CUDA runtime does: dlopen("libcuda.so.1"), dlsym of
 * cuGetProcAddress_v2, then every entry point through it (and a few by dlsym directly); calls
 * each with distinctive arguments and writes, per entry point, whether it got DELTA's wrapper
 * (the function lies in libdelta.so) and whether the stub driver received the call under the
 * expected name with the arguments unchanged. run_driver_test.py runs it with and without
 * LD_PRELOAD=libdelta.so and judges. No CUDA header: the stub's ABI is spelled here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int (*GetProc)(const char*, void**, int, uint64_t, int*);
typedef int (*Launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
typedef int (*LaunchEx)(const void*, void*, void**, void**);
typedef int (*One)(void*);
typedef int (*Two)(void*, void*);
typedef int (*Copy)(uint64_t, const void*, size_t, void*);
typedef int (*Set)(uint64_t, unsigned char, size_t, void*);
typedef int (*Ipc)(void*, uint64_t);

static FILE* out;
static void* stub;
static const char** last_name;
static uint64_t* last_args;
static int first = 1;

static int wrapped(void* fn) {
  Dl_info info;
  return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libdelta") != NULL;
}

/* One result: got DELTA's wrapper? reached the stub as `expect` with `n` arguments `args`? */
static void report(const char* what, void* fn, const char* expect, int n, const uint64_t* args) {
  int same = strcmp(*last_name, expect) == 0;
  for (int i = 0; i < n; ++i) same = same && last_args[i] == args[i];
  fprintf(out, "%s\n  \"%s\": {\"found\": %s, \"wrapped\": %s, \"forwarded\": %s, \"reached\": \"%s\"}", first ? "" : ",",
          what, fn ? "true" : "false", wrapped(fn) ? "true" : "false", same ? "true" : "false", *last_name);
  first = 0;
}

static void* proc(GetProc get, const char* name, int version, uint64_t flags) {
  void* fn = NULL;
  int status = -1;
  if (get(name, &fn, version, flags, &status) != 0 || status != 0) return NULL;
  return fn;
}

#define PTDS (1u << 1)
#define LEGACY (1u << 0)

/* DELTA's own word on its interposer (delta_stats_json's "driver_interposer"), or "absent". */
static void interposer_state(char* out_text, size_t size) {
  snprintf(out_text, size, "absent");
  int (*stats)(char*, size_t) = (int (*)(char*, size_t))dlsym(RTLD_DEFAULT, "delta_stats_json");
  if (!stats) return;
  char buffer[8192];
  if (stats(buffer, sizeof buffer) <= 0) {
    snprintf(out_text, size, "stats failed");
    return;
  }
  const char* key = strstr(buffer, "\"driver_interposer\":\"");
  if (!key) return;
  key += strlen("\"driver_interposer\":\"");
  size_t n = strcspn(key, "\"");
  snprintf(out_text, size, "%.*s", (int)(n < size ? n : size - 1), key);
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) return 2;
  /* With a second argument, libdelta is loaded here, late, as the pluggable allocator loads it. */
  if (argc == 3 && !dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "driver_probe: %s\n", dlerror());
    return 3;
  }
  out = fopen(argv[1], "w");
  if (!out) return 2;
  stub = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!stub) {
    fprintf(stderr, "driver_probe: %s\n", dlerror());
    return 3;
  }
  last_name = (const char**)dlsym(stub, "stub_last_name");
  last_args = (uint64_t*)dlsym(stub, "stub_last_args");
  if (!last_name || !last_args) return 4;
  GetProc get = (GetProc)dlsym(stub, "cuGetProcAddress_v2");
  if (!get) return 5;
  fprintf(out, "{\"get_proc_wrapped\": %s, \"results\": {", wrapped((void*)get) ? "true" : "false");

  const uint64_t L[] = {0x1111, 1, 2, 3, 4, 5, 6, 7, 0x88, 0x99, 0xaa};
  struct { const char* what; uint64_t flags; const char* expect; } launches[] = {
      {"cuLaunchKernel", LEGACY, "cuLaunchKernel"},
      {"cuLaunchKernel/default", 0, "cuLaunchKernel"},
      {"cuLaunchKernel/ptds", PTDS, "cuLaunchKernel_ptsz"},
  };
  for (int i = 0; i < 3; ++i) {
    Launch fn = (Launch)proc(get, "cuLaunchKernel", 13000, launches[i].flags);
    if (fn) fn((void*)0x1111, 1, 2, 3, 4, 5, 6, 7, (void*)0x88, (void**)0x99, (void**)0xaa);
    report(launches[i].what, (void*)fn, launches[i].expect, 11, L);
  }
  {
    Launch fn = (Launch)dlsym(stub, "cuLaunchKernel_ptsz");
    if (fn) fn((void*)0x1111, 1, 2, 3, 4, 5, 6, 7, (void*)0x88, (void**)0x99, (void**)0xaa);
    report("dlsym:cuLaunchKernel_ptsz", (void*)fn, "cuLaunchKernel_ptsz", 11, L);
  }
  {
    const uint64_t A[] = {0xc0f1, 0x1111, 0x99, 0xaa};
    LaunchEx fn = (LaunchEx)proc(get, "cuLaunchKernelEx", 13000, LEGACY);
    if (fn) fn((void*)0xc0f1, (void*)0x1111, (void**)0x99, (void**)0xaa);
    report("cuLaunchKernelEx", (void*)fn, "cuLaunchKernelEx", 4, A);
    fn = (LaunchEx)proc(get, "cuLaunchKernelEx", 13000, PTDS);
    if (fn) fn((void*)0xc0f1, (void*)0x1111, (void**)0x99, (void**)0xaa);
    report("cuLaunchKernelEx/ptds", (void*)fn, "cuLaunchKernelEx_ptsz", 4, A);
  }
  {
    const uint64_t A[] = {0x5151};
    One fn = (One)proc(get, "cuModuleUnload", 13000, LEGACY);
    if (fn) fn((void*)0x5151);
    report("cuModuleUnload", (void*)fn, "cuModuleUnload", 1, A);
    fn = (One)proc(get, "cuLibraryUnload", 13000, LEGACY);
    if (fn) fn((void*)0x5151);
    report("cuLibraryUnload", (void*)fn, "cuLibraryUnload", 1, A);
    fn = (One)proc(get, "cuStreamBeginCapture", 10000, LEGACY);  /* the old ABI: not DELTA's to wrap */
    if (fn) fn((void*)0x5151);
    report("cuStreamBeginCapture/10.0", (void*)fn, "cuStreamBeginCapture", 1, A);
  }
  {
    const uint64_t A[] = {0x5eed, 2};
    Two fn = (Two)proc(get, "cuStreamBeginCapture", 13000, LEGACY);
    if (fn) fn((void*)0x5eed, (void*)2);
    report("cuStreamBeginCapture", (void*)fn, "cuStreamBeginCapture_v2", 2, A);
    fn = (Two)proc(get, "cuStreamBeginCapture", 13000, PTDS);
    if (fn) fn((void*)0x5eed, (void*)2);
    report("cuStreamBeginCapture/ptds", (void*)fn, "cuStreamBeginCapture_v2_ptsz", 2, A);
    fn = (Two)proc(get, "cuStreamEndCapture", 13000, PTDS);
    if (fn) fn((void*)0x5eed, (void*)2);
    report("cuStreamEndCapture/ptds", (void*)fn, "cuStreamEndCapture_ptsz", 2, A);
    fn = (Two)proc(get, "cuMemAlloc", 13000, LEGACY);  /* not interposed */
    if (fn) fn((void*)0x5eed, (void*)2);
    report("cuMemAlloc", (void*)fn, "cuMemAlloc_v2", 2, A);
  }
  {
    const uint64_t A[] = {0x7f0000001000, 0x4321, 4096, 0x88};
    Copy fn = (Copy)proc(get, "cuMemcpyHtoDAsync", 13000, PTDS);
    if (fn) fn(0x7f0000001000, (const void*)0x4321, 4096, (void*)0x88);
    report("cuMemcpyHtoDAsync/ptds", (void*)fn, "cuMemcpyHtoDAsync_v2_ptsz", 4, A);
    const uint64_t S[] = {0x7f0000001000, 0xab, 4096, 0};
    Set set = (Set)proc(get, "cuMemsetD8Async", 13000, LEGACY);
    if (set) set(0x7f0000001000, 0xab, 4096, NULL);
    report("cuMemsetD8Async", (void*)set, "cuMemsetD8Async", 4, S);
    const uint64_t I[] = {0x1234, 0x7f0000001000};
    Ipc ipc = (Ipc)proc(get, "cuIpcGetMemHandle", 13000, LEGACY);
    if (ipc) ipc((void*)0x1234, 0x7f0000001000);
    report("cuIpcGetMemHandle", (void*)ipc, "cuIpcGetMemHandle", 2, I);
  }
  {
    /* cuGetProcAddress asked for itself hands out DELTA's too, which still works. */
    GetProc again = (GetProc)proc(get, "cuGetProcAddress", 13000, LEGACY);
    Launch fn = again ? (Launch)proc(again, "cuLaunchKernel", 13000, LEGACY) : NULL;
    if (fn) fn((void*)0x1111, 1, 2, 3, 4, 5, 6, 7, (void*)0x88, (void**)0x99, (void**)0xaa);
    report("cuGetProcAddress", (void*)again, "cuLaunchKernel", 11, L);
    report("cuGetProcAddress:cuLaunchKernel", (void*)fn, "cuLaunchKernel", 11, L);
  }
  fprintf(out, "\n},\n");
  /* RTLD_NEXT keeps its meaning (the objects after the caller's) through DELTA's dlsym. */
  void* next_getpid = dlsym(RTLD_NEXT, "getpid");
  void* next_delta = dlsym(RTLD_NEXT, "delta_owns");
  char state[128];
  interposer_state(state, sizeof state);
  fprintf(out, "\"interposer\": \"%s\", ", state);
  fprintf(out, "\"next_getpid_is_libc\": %s, \"next_delta_owns\": %s, \"default_delta_owns\": %s}\n",
          next_getpid == (void*)&getpid || next_getpid == dlsym(RTLD_DEFAULT, "getpid") ? "true" : "false",
          next_delta ? "true" : "false", dlsym(RTLD_DEFAULT, "delta_owns") ? "true" : "false");
  fclose(out);
  return 0;
}
